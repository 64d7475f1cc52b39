#include "ooc/mapped_array.hpp"
#include "ooc/array_path.hpp"

#include "format/hdf5.hpp"
#include "format/hdf5/rollback.hpp"
#include "format/npy.hpp"
#include "format/zarr.hpp"
#include "ooc/zarr.hpp"
#include "core/mapped_array_access.hpp"
#include "os/file.hpp"
#include "os/mapping.hpp"
#include "ooc/selection.hpp"
#include "core/pending_output.hpp"
#include "core/selection_info.hpp"
#include "os/tile_reader.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <random>
#include <variant>
#include <vector>

namespace ooc {

std::int64_t ArrayInfo::size() const { return element_count(shape).value_or(0); }
std::uint64_t ArrayInfo::nbytes() const {
  return static_cast<std::uint64_t>(size()) * static_cast<std::uint64_t>(dtype.itemsize());
}

struct MappedArray::Impl {
  std::string path;  // the name users know
  ArrayInfo info;
  bool writable = false;
  // Members are destroyed bottom-up, the order teardown needs: the bytes let go of the
  // file first (a mapping stops watching, then unmaps; a writer closes its HDF5 file),
  // then the descriptor closes, and only then does an output never committed discard
  // itself (deleting a hidden dataset reopens the file through HDF5).
  detail::PendingOutput pending;  // empty unless an output awaits commit()
  os::UniqueFd fd;
  // When the bytes are another array's (a selection's source, the target of an HDF5
  // external link): its name, and its file when `fd` is not open on it.
  std::string source_path;
  os::UniqueFd source_fd;
  ElementRange window{0, 0};  // the elements mapped (all of them when not mapped)
  // Where the bytes are: a mapping of `window` (empty when it holds no bytes), a reader
  // for an array read tile by tile, or a writer for an output written tile by tile
  // (compressed HDF5).
  std::variant<os::Mapping, std::unique_ptr<detail::TileReader>, std::unique_ptr<detail::TileWriter>> bytes;
  // An uncompressed Zarr array opened to be rewritten in place: read by its reader (bytes),
  // written back chunk by chunk by this.
  std::unique_ptr<zarr::ChunkReplacer> replacer;

  const os::Mapping* mapping() const { return std::get_if<os::Mapping>(&bytes); }
  os::Mapping* mapping() { return std::get_if<os::Mapping>(&bytes); }
  detail::TileReader* reader() const {
    const auto* reader = std::get_if<std::unique_ptr<detail::TileReader>>(&bytes);
    return reader ? reader->get() : nullptr;
  }
  detail::TileWriter* writer() const {
    if (replacer) return replacer.get();
    const auto* writer = std::get_if<std::unique_ptr<detail::TileWriter>>(&bytes);
    return writer ? writer->get() : nullptr;
  }
  // The first byte of element window.begin; null when nothing is mapped.
  std::byte* data() const { return mapping() ? mapping()->data() : nullptr; }

  // A writable array about to be created under `path`; the shape must fit in int64 bytes.
  static std::unique_ptr<Impl> output(const std::string& path, const std::string& format, DType dtype,
                                      const Shape& shape, Order order) {
    if (!byte_count(shape, dtype.itemsize()))
      throw UsageError(path, "cannot create an array of shape " + shape_repr(shape));
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->writable = true;
    impl->info.format = format;
    impl->info.dtype = dtype;
    impl->info.shape = shape;
    impl->info.order = order;
    return impl;
  }

  // Creates the file as a temporary beside `final_path`: renamed over it on commit,
  // removed if the array is dropped first. `temp` receives its name.
  void create_beside(const std::string& final_path, std::filesystem::path& temp) {
    fd = os::create_temp_beside(final_path, temp);
    pending = detail::PendingOutput::new_file(temp, final_path);
  }

  // Opens the array `name` names and reads where its bytes are: everything map_file does
  // but mapping. A chunked or compressed HDF5 dataset gets its tile reader.
  void open(const std::string& name, Access access);
  // The same for a directory: a Zarr array, read tile by tile by its chunk reader.
  void open_zarr(const std::string& name, Access access);

  // Before this output, `dataset` of the existing HDF5 file `file`, is written (mapped or
  // compressed): refuses a name that leads through an external link into another file,
  // names a group, or names a dataset without `overwrite`; then opens the file's rollback
  // transaction and makes the output pending as a hidden dataset, renamed to `dataset`
  // on commit. The file's other objects are never touched.
  struct HiddenDataset {
    std::string name;
    std::shared_ptr<hdf5::Rollback> transaction;
  };
  HiddenDataset begin_hidden_dataset(const std::string& file, const std::string& dataset, bool overwrite);

  // The address of element `index` of the array, clamped to the mapped window.
  std::uintptr_t address_of(std::int64_t index) const {
    const std::int64_t at = std::clamp(index, window.begin, window.end) - window.begin;
    return reinterpret_cast<std::uintptr_t>(data()) +
           static_cast<std::uintptr_t>(at) * static_cast<std::uintptr_t>(info.dtype.itemsize());
  }

  void map(ElementRange wanted) {
    if (wanted.begin < 0 || wanted.end < wanted.begin)
      throw UsageError(path, "element window [" + std::to_string(wanted.begin) + ", " + std::to_string(wanted.end) +
                                 ") is not a range of elements");
    const std::int64_t size = info.size();
    window.begin = std::clamp<std::int64_t>(wanted.begin, 0, size);
    window.end = std::clamp<std::int64_t>(wanted.end, window.begin, size);
    const std::uint64_t item = static_cast<std::uint64_t>(info.dtype.itemsize());
    const std::uint64_t offset = info.data_offset + static_cast<std::uint64_t>(window.begin) * item;
    bytes = os::Mapping::map(fd.get(), offset, static_cast<std::size_t>(window.size()) * item, writable, path);
  }
};

MappedArray::MappedArray(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
MappedArray::MappedArray(MappedArray&&) noexcept = default;
MappedArray& MappedArray::operator=(MappedArray&&) noexcept = default;
MappedArray::~MappedArray() = default;

const ArrayInfo& MappedArray::info() const { return impl_->info; }
const std::string& MappedArray::path() const { return impl_->path; }
bool MappedArray::writable() const { return impl_->writable; }
bool MappedArray::mapped() const { return impl_->reader() == nullptr; }
bool MappedArray::pending() const { return static_cast<bool>(impl_->pending); }
bool MappedArray::shrank() const {
  return (impl_->mapping() && impl_->mapping()->shrank()) || (impl_->reader() && impl_->reader()->shrank());
}

void MappedArray::check_intact() const {
  if (shrank())
    throw Error(impl_->path, std::string("file shrank while being ") + (impl_->writable ? "written" : "read") +
                                 " (truncated by another process)");
}

ElementRange MappedArray::window() const { return impl_->window; }

std::span<const std::byte> MappedArray::bytes() const& {
  if (impl_->reader())
    throw UsageError(impl_->path, "is read tile by tile, not mapped: use transform, reduce or for_each_tile");
  return {impl_->data(), static_cast<std::size_t>(impl_->window.size()) * static_cast<std::size_t>(dtype().itemsize())};
}

std::span<std::byte> MappedArray::writable_bytes() & {
  if (!impl_->writable) throw UsageError(impl_->path, "array is mapped read-only");
  return {impl_->data(), static_cast<std::size_t>(impl_->window.size()) * static_cast<std::size_t>(dtype().itemsize())};
}

void MappedArray::check_view_type(DType wanted) const {
  if (dtype().native() != wanted)
    throw UsageError(path(), "array holds " + dtype().name() + ", not " + wanted.name());
  if (!dtype().is_native())
    throw UsageError(path(), "array is in non-native byte order (" + dtype().descr() +
                                 "); read it through the pipeline, which converts");
  if (reinterpret_cast<std::uintptr_t>(impl_->data()) % static_cast<std::uintptr_t>(wanted.itemsize()) != 0)
    throw UsageError(path(), "data at offset " + std::to_string(info().data_offset) + " is not aligned for " +
                                 wanted.name() + "; read it through the pipeline, which copies");
}

void MappedArray::commit() {
  Impl& m = *impl_;
  if (!m.writable) return;
  check_intact();  // zeros stand where the file's bytes were: nothing of it may be kept
  if (detail::TileWriter* writer = m.writer()) writer->finish();
  if (os::Mapping* mapping = m.mapping()) mapping->flush(m.path);
  os::sync_file(m.fd.get(), m.path);
  m.pending.publish();
}

namespace {

// Where an output named `path` goes: through symbolic links to the file they name (as
// np.save and h5py write through them; the link stays a link). Refused when that is a
// directory, or not a regular file: a device, FIFO or socket would be replaced by the
// rename that puts a finished output in place.
std::string output_target(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  for (int hops = 0; std::filesystem::is_symlink(p, ec); ++hops) {
    if (hops == 40) throw Error(path, "too many levels of symbolic links");
    const std::filesystem::path to = std::filesystem::read_symlink(p, ec);
    if (ec) throw Error(path, "cannot read the symbolic link: " + ec.message());
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  const std::filesystem::file_status st = std::filesystem::status(p, ec);
  if (std::filesystem::is_directory(st)) throw Error(path, "is a directory");
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw UsageError(path, "exists and is not a regular file (a device, FIFO or socket): an output is written as a "
                           "new file and renamed into place; name a file");
  return p.string();
}

std::string dataset_names(const std::string& file) {
  std::string names;
  for (const hdf5::DatasetInfo& d : hdf5::list(file)) names += (names.empty() ? "" : ", ") + d.name;
  return names.empty() ? "it holds none" : "datasets: " + names;
}

// Where the bytes of an HDF5 dataset are, checked to be inside the file; `streamed` is
// set for a dataset that is read tile by tile instead.
// `elsewhere` is set to "file:/dataset" when an external link leads to another file.
ArrayInfo hdf5_layout(const std::string& path, const hdf5::DatasetPath& where, int fd, bool writable, bool& streamed,
                      std::string& elsewhere) {
  const hdf5::DatasetInfo dataset = hdf5::describe(where.file, where.dataset);
  elsewhere = dataset.elsewhere;
  if (!dataset.readable) throw Error(path, "cannot be read: " + dataset.why_not_mappable);
  // Its bytes, journal and lock would all be another file's: read through the library only.
  if (writable && !dataset.elsewhere.empty())
    throw UsageError(path, "is an external link to " + dataset.elsewhere +
                               ", in another file: it cannot be modified in place (name that file's dataset)");
  streamed = !dataset.mappable;
  if (writable && streamed)  // only a mapped dataset is rewritten in place
    throw UsageError(path, "cannot be modified in place: " + dataset.why_not_mappable +
                               " (only contiguous, unfiltered, written datasets are)");
  ArrayInfo info;
  info.format = "hdf5";
  info.dtype = *dataset.dtype;
  info.shape = dataset.shape;
  info.order = Order::c;  // HDF5 stores every dataset in C order
  // numpy's rule, as for a .npy header (h5py could not make such an array either).
  if (!byte_count(info.shape, info.dtype.itemsize()))
    throw Error(path, "shape " + shape_repr(info.shape) + " overflows");
  info.data_offset = dataset.offset.value_or(0);
  const std::uint64_t file_size = os::file_size(fd, path);
  if (!streamed && info.data_offset + info.nbytes() > file_size)
    throw Error(path, "dataset's bytes run past the end of the file (" + std::to_string(file_size) + " bytes)");
  return info;
}

// Where the bytes of a .npy file's array are, from its header.
ArrayInfo npy_layout(const std::string& path, int fd) {
  const std::uint64_t file_size = os::file_size(fd, path);
  std::array<std::byte, npy::kPreambleBytes> preamble{};
  const std::size_t got = os::read_at(fd, preamble.data(), preamble.size(), 0, path);
  npy::Header header;
  try {
    if (got < 10) throw npy::FormatError("not a .npy file (only " + std::to_string(file_size) + " bytes)");
    const std::uint64_t length = npy::prefix_length(std::span(preamble).first(got));
    if (length > file_size)
      throw npy::FormatError("header length " + std::to_string(length) +
                             " runs past the end of the file (" + std::to_string(file_size) + " bytes)");
    if (length > npy::kMaxHeaderBytes + npy::kPreambleBytes)
      throw npy::FormatError("header of " + std::to_string(length) + " bytes is too large");
    std::vector<std::byte> prefix(length);
    os::read_at(fd, prefix.data(), prefix.size(), 0, path);
    header = npy::parse_header(prefix, file_size);
  } catch (const npy::FormatError& e) {
    throw Error(path, e.what(), ErrorKind::corrupt);
  }
  ArrayInfo info;
  info.format = "npy";
  info.format_version = std::to_string(header.major_version) + ".0";
  info.dtype = header.dtype;
  info.shape = header.shape;
  info.order = header.order;
  info.data_offset = header.data_offset;
  return info;
}

std::string random_suffix() {
  std::random_device seed;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(std::mt19937_64(seed())()));
  return text;
}

}  // namespace

MappedArray::Impl::HiddenDataset MappedArray::Impl::begin_hidden_dataset(const std::string& file,
                                                                         const std::string& dataset, bool overwrite) {
  if (!hdf5::is_hdf5_file(file)) throw Error(file, "exists and is not an HDF5 file");
  if (const std::string other = hdf5::elsewhere(file, dataset); !other.empty())
    throw UsageError(path, "leads through an external link to " + other +
                               ", in another file: ooc writes only into the file it names");
  const std::string kind = hdf5::existing_kind(file, dataset);
  if (!kind.empty() && kind != "dataset")  // overwrite would delete a whole group
    throw UsageError(path, "is a " + kind + ", not a dataset: name a new dataset (overwrite replaces only a dataset)",
                     "overwrite");
  if (!kind.empty() && !overwrite)
    throw UsageError(path, "dataset already exists (overwrite replaces it)", "overwrite");
  HiddenDataset hidden{"/.ooc-" + random_suffix(), hdf5::Rollback::begin(file)};
  pending = detail::PendingOutput::hidden_dataset(file, hidden.name, dataset, overwrite, hidden.transaction);
  return hidden;
}

static std::string zarr_array_names(const std::string& group) {
  std::string names;
  for (const zarr::Listed& a : zarr::list(group)) names += (names.empty() ? "" : ", ") + a.name;
  return names.empty() ? "it holds none" : "arrays: " + names;
}

void MappedArray::Impl::open_zarr(const std::string& name, Access access) {
  path = name;
  writable = access == Access::read_write;
  if (!zarr::is_array(name)) {
    if (zarr::is_group(name))
      throw UsageError(name, "is a Zarr group: name one of its arrays, as " + name + "/ARRAY (" + zarr_array_names(name) +
                                 ")");
    throw Error(name, "is a directory, not a Zarr array (it holds no .zarray)");
  }
  const zarr::Metadata metadata = zarr::read_metadata(name);
  if (writable && (metadata.compressor || !metadata.filters.empty()))
    throw UsageError(name, "a compressed Zarr array cannot be modified in place (its chunks would change size); "
                           "write a new array with an output name");
  // The .zarray's descriptor holds the locks (an exclusive one needs it writable) and
  // names the array to its in-place journal.
  fd = os::open_existing((std::filesystem::path(name) / ".zarray").string(), writable);
  info.format = "zarr";
  info.format_version = "2";
  info.dtype = metadata.dtype;
  info.shape = metadata.shape;
  info.order = metadata.shape.size() > 1 ? metadata.order : Order::c;
  info.data_offset = 0;
  bytes = zarr::open_reader(name, metadata, name);
  if (writable) replacer = zarr::open_replacer(name, metadata, name);
  window = ElementRange{0, info.size()};
}

void MappedArray::Impl::open(const std::string& name, Access access) {
  if (std::error_code ec; std::filesystem::is_directory(name, ec)) return open_zarr(name, access);
  const auto dataset = hdf5::split(name);
  const std::string file = dataset ? dataset->file : name;
  path = name;
  writable = access == Access::read_write;
  fd = os::open_existing(file, writable);
  if (dataset) {
    if (!hdf5::is_hdf5_file(file))
      throw Error(file, "not an HDF5 file; a dataset path (FILE:/name) applies to HDF5 files only");
    bool streamed = false;
    std::string elsewhere;
    info = hdf5_layout(name, *dataset, fd.get(), writable, streamed, elsewhere);
    if (const auto target = hdf5::split(elsewhere)) {
      source_path = elsewhere;
      source_fd = os::open_existing(target->file, false);
    }
    if (streamed) {
      bytes = hdf5::open_reader(file, dataset->dataset);
      window = ElementRange{0, info.size()};  // read tile by tile, wherever the tiles are
    }
  } else if (hdf5::is_hdf5_file(file)) {
    throw UsageError(name, "is an HDF5 file: name a dataset, as " + name + ":/name (" + dataset_names(name) + ")");
  } else {
    info = npy_layout(name, fd.get());
  }
}

namespace {

// A selection whose brackets do not pair up ('x.npy[:, [2, 5]') is a usage error naming
// the bracket, not a file of that name that does not exist. A text is taken for a
// selection from its first '[' that follows an existing file, a name ending in .npy or an
// HDF5 dataset (file.h5:/x), or, when none does, from its first '[' if it ends in ']'.
void refuse_unbalanced_brackets(const std::string& path) {
  std::size_t start = std::string::npos;
  std::error_code ec;
  for (std::size_t i = path.find('['); i != std::string::npos; i = path.find('[', i + 1)) {
    const std::string before = path.substr(0, i);
    if (i > 0 && (before.ends_with(".npy") || std::filesystem::exists(before, ec) || hdf5::split(before))) {
      start = i;
      break;
    }
  }
  if (start == std::string::npos && !path.empty() && path.back() == ']') start = path.find('[');
  if (start == std::string::npos) return;
  const std::string array = path.substr(0, start);
  const std::string text = path.substr(start);
  std::vector<std::size_t> open;  // columns (1-based, in text) of the '[' not yet closed
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '[') {
      open.push_back(i + 1);
    } else if (text[i] == ']') {
      if (open.empty())
        throw UsageError(array, "selection " + text + ": unbalanced brackets: the ']' at column " +
                                    std::to_string(i + 1) + " closes no '['");
      open.pop_back();
    }
  }
  if (!open.empty())
    throw UsageError(array, "selection " + text + ": unbalanced brackets: the '[' at column " +
                                std::to_string(open.front()) + " is never closed");
}

// "x.npy[::5, 3]": the array and the selection, unless a file of that very name exists.
std::optional<std::pair<std::string, std::string>> selection_of(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return std::nullopt;
  refuse_unbalanced_brackets(path);
  auto split = split_selection(path);
  if (!split) return std::nullopt;
  if (split->second.find_first_not_of(" \t\n\r\f\v") == std::string::npos)  // Python's x[] does not parse
    throw UsageError(split->first, "selection [" + split->second + "]: an empty selection is not one numpy "
                                   "reads (x[] is a syntax error); name the whole array as " + split->first);
  return split;
}

}  // namespace

ArrayPath ArrayPath::parse(std::string_view text) {
  ArrayPath path;
  std::string array(text);
  if (const auto selection = selection_of(array)) {
    array = selection->first;
    path.selection = selection->second;
  }
  if (const auto dataset = hdf5::split(array)) {
    path.file = dataset->file;
    path.dataset = dataset->dataset;
  } else {
    path.file = array;
  }
  return path;
}

MappedArray create_compressed(const std::string& path, DType dtype, const Shape& shape, const Compression& how,
                              bool overwrite) {
  if (is_zarr(path)) return create_zarr(path, dtype, shape, Order::c, how);
  if (!hdf5::split(path))
    throw UsageError(path, "a chunked or compressed output is an HDF5 dataset: name it FILE.h5:/dataset");
  return detail::MappedArrayAccess::create_compressed_hdf5(path, dtype, shape, overwrite, how);
}

MappedArray map_file(const std::string& path, Access access, ElementRange window) {
  if (const auto selection = selection_of(path)) {
    if (access == Access::read_write)
      throw UsageError(path, "a selection cannot be modified in place; write it to a new file with -o");
    // A selection is read tile by tile wherever the tiles are: the window does not apply.
    return select(map_file(selection->first), Selection::parse(selection->second, selection->first));
  }
  auto impl = std::make_unique<MappedArray::Impl>();
  impl->open(path, access);
  if (!impl->reader()) impl->map(window);
  return MappedArray(std::move(impl));
}

ArrayInfo read_info(const std::string& path) {
  if (const auto selection = selection_of(path))
    return detail::selection_info(read_info(selection->first), Selection::parse(selection->second, selection->first),
                                  selection->first);
  MappedArray::Impl impl;
  impl.open(path, Access::read_only);
  return impl.info;
}

MappedArray create_npy(const std::string& path, DType dtype, const Shape& shape, Order order,
                       ElementRange window) {
  auto impl = MappedArray::Impl::output(path, "npy", dtype, shape, order);
  const std::string target = output_target(path);
  const std::string header = npy::make_header(dtype, shape, order);
  impl->info.format_version = std::to_string(static_cast<int>(header[6])) + ".0";
  impl->info.data_offset = header.size();
  std::filesystem::path temp;
  impl->create_beside(target, temp);
  os::write_at(impl->fd.get(), header.data(), header.size(), 0, path);
  os::preallocate(impl->fd.get(), header.size() + impl->info.nbytes(), path);
  impl->map(window);
  return MappedArray(std::move(impl));
}

MappedArray create_hdf5(const std::string& path, DType dtype, const Shape& shape, bool overwrite) {
  const auto where = hdf5::split(path);
  if (!where) throw UsageError(path, "an HDF5 output is named FILE.h5:/dataset");
  auto impl = MappedArray::Impl::output(path, "hdf5", dtype, shape, Order::c);
  const std::string file = output_target(where->file);
  if (std::filesystem::exists(file)) {
    const auto hidden = impl->begin_hidden_dataset(file, where->dataset, overwrite);
    impl->info.data_offset = hdf5::create_dataset(file, hidden.name, dtype, shape);
    impl->fd = os::open_existing(file, true);
    // The library places a new dataset past the file's end; should it reuse free space
    // inside the file, the bytes it covers are saved before the mapping overwrites them.
    hidden.transaction->protect(impl->info.data_offset, impl->info.nbytes());
  } else {
    // A new file is built under a temporary name beside it and renamed when complete.
    std::filesystem::path temp;
    impl->create_beside(file, temp);
    impl->info.data_offset = hdf5::create_dataset(temp.string(), where->dataset, dtype, shape);
  }
  // HDF5 only reserved the range in its own books: reserve the disk blocks now.
  os::preallocate_range(impl->fd.get(), impl->info.data_offset, impl->info.nbytes(), path);
  impl->map({});
  return MappedArray(std::move(impl));
}

namespace {

ArrayEntry zarr_entry(const std::string& path, const zarr::Metadata& m) {
  ArrayEntry e;
  e.path = path;
  e.info.format = "zarr";
  e.info.format_version = "2";
  e.info.dtype = m.dtype;
  e.info.shape = m.shape;
  e.info.order = m.shape.size() > 1 ? m.order : Order::c;
  e.type = m.dtype.name();
  e.layout = "chunked";
  for (const zarr::Codec& f : m.filters) e.filters.push_back(f.id);
  if (m.compressor) e.filters.push_back(m.compressor->id == "blosc" ? "blosc:" + m.compressor->cname : m.compressor->id);
  e.chunks = m.chunks;
  e.stored_bytes = zarr::stored_bytes(path);
  e.mappable = false;
  e.why_not_mappable = "Zarr chunks (" + m.codecs_text() + "), read tile by tile";
  return e;
}

// A Zarr array, or every array of a Zarr group (from .zmetadata when it has one).
std::vector<ArrayEntry> describe_zarr(const std::string& path) {
  if (zarr::is_array(path)) return {zarr_entry(path, zarr::read_metadata(path))};
  if (!zarr::is_group(path))
    throw Error(path, "is a directory, not a Zarr array (it holds no .zarray)");
  std::string group = path;
  while (group.size() > 1 && group.back() == '/') group.pop_back();
  std::vector<ArrayEntry> entries;
  for (const zarr::Listed& a : zarr::list(group)) {
    const std::string name = a.name.empty() ? group : group + "/" + a.name;
    if (a.readable) {
      entries.push_back(zarr_entry(name, a.metadata));
      continue;
    }
    ArrayEntry e;
    e.path = name;
    e.info.format = "zarr";
    e.info.format_version = "2";
    e.info.shape = a.shape;
    e.supported = false;
    e.type = a.dtype_text;
    e.layout = "chunked";
    e.readable = e.mappable = false;
    e.why_not_mappable = a.why;
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace

std::vector<ArrayEntry> describe(const std::string& path) {
  auto from_hdf5 = [](const std::string& file, const hdf5::DatasetInfo& d) {
    ArrayEntry e;
    e.path = file + ":" + d.name;
    e.info.format = "hdf5";
    e.info.shape = d.shape;
    e.info.order = Order::c;
    e.info.data_offset = d.offset.value_or(0);
    e.supported = d.dtype.has_value();
    if (d.dtype) e.info.dtype = *d.dtype;
    e.type = d.type_text;
    e.layout = d.layout;
    e.filters = d.filters;
    e.chunks = d.chunks;
    e.stored_bytes = d.stored_bytes;
    e.readable = d.readable;
    e.mappable = d.mappable;
    e.why_not_mappable = d.why_not_mappable;
    return e;
  };
  if (const auto selection = selection_of(path)) {
    std::vector<ArrayEntry> source = describe(selection->first);
    ArrayEntry& e = source.front();
    e.path = path;
    e.info = read_info(path);
    e.mappable = false;
    e.why_not_mappable = "a selection, read tile by tile";
    return source;
  }
  if (const auto dataset = hdf5::split(path)) {
    os::open_existing(dataset->file, false);
    if (!hdf5::is_hdf5_file(dataset->file))
      throw Error(dataset->file, "not an HDF5 file; a dataset path (FILE:/name) applies to HDF5 files only");
    return {from_hdf5(dataset->file, hdf5::describe(dataset->file, dataset->dataset))};
  }
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) return describe_zarr(path);
  const os::UniqueFd fd = os::open_existing(path, false);
  if (hdf5::is_hdf5_file(path)) {
    std::vector<ArrayEntry> entries;
    for (const hdf5::DatasetInfo& d : hdf5::list(path)) entries.push_back(from_hdf5(path, d));
    return entries;
  }
  ArrayEntry e;
  e.path = path;
  e.info = npy_layout(path, fd.get());
  e.type = e.info.dtype.name();
  return {e};
}

bool is_zarr(const std::string& path) { return !hdf5::split(path) && zarr::names_zarr(path); }

MappedArray create_zarr(const std::string& path, DType dtype, const Shape& shape, Order order, const Compression& how) {
  Compression chosen = how;
  if (how.codec.empty()) {  // not said: zarr-python's default compressor
    chosen = zarr::default_compression();
    chosen.chunk_rows = how.chunk_rows;
  }
  return detail::MappedArrayAccess::create_zarr(path, dtype, shape, shape.size() > 1 ? order : Order::c, chosen);
}

MappedArray create_array(const std::string& path, DType dtype, const Shape& shape, Order order, bool overwrite) {
  if (is_zarr(path)) return create_zarr(path, dtype, shape, order);
  if (hdf5::split(path)) {
    if (order == Order::fortran && shape.size() > 1)
      throw UsageError(path, "HDF5 datasets are stored in C order; a Fortran-order array cannot be written to one");
    return create_hdf5(path, dtype, shape, overwrite);
  }
  return create_npy(path, dtype, shape, order);
}

namespace detail {

void MappedArrayAccess::advise(const MappedArray& array, std::int64_t begin, std::int64_t end,
                               os::Advice advice) {
  const MappedArray::Impl& m = *array.impl_;
  if (m.data() == nullptr) return;
  const std::uintptr_t from = m.address_of(begin);
  const std::uintptr_t to = m.address_of(end);
  if (to <= from) return;
  os::advise(reinterpret_cast<const void*>(from), to - from, advice);
}

void MappedArrayAccess::drop_pages_before(const MappedArray& array, std::int64_t end,
                                          std::uintptr_t* mark) {
  const MappedArray::Impl& m = *array.impl_;
  if (m.data() == nullptr) return;
  const std::uintptr_t page = os::page_size();
  const auto base = reinterpret_cast<std::uintptr_t>(m.data());
  const std::uintptr_t from = *mark != 0 ? *mark : base / page * page;
  const std::uintptr_t to = m.address_of(end) / page * page;
  if (to <= from) return;
  os::advise(reinterpret_cast<const void*>(from), to - from, os::Advice::dont_need);
  *mark = to;
}

MappedArray MappedArrayAccess::share(const MappedArray& array) { return MappedArray(array.impl_); }

TileReader* MappedArrayAccess::reader(const MappedArray& array) { return array.impl_->reader(); }
TileWriter* MappedArrayAccess::writer(const MappedArray& array) { return array.impl_->writer(); }
const os::Mapping* MappedArrayAccess::mapping(const MappedArray& array) { return array.impl_->mapping(); }

MappedArray MappedArrayAccess::create_compressed_hdf5(const std::string& path, DType dtype, const Shape& shape,
                                                     bool overwrite, const hdf5::Compression& how) {
  const auto where = hdf5::split(path);
  if (!where) throw UsageError(path, "chunks and compression make HDF5 datasets: name the output FILE.h5:/dataset",
                                 "chunks and compression");
  auto impl = MappedArray::Impl::output(path, "hdf5", dtype, shape, Order::c);
  const std::string file = output_target(where->file);
  if (std::filesystem::exists(file)) {
    const auto hidden = impl->begin_hidden_dataset(file, where->dataset, overwrite);
    impl->bytes = hdf5::create_compressed(file, hidden.name, dtype, shape, how, path);
    impl->fd = os::open_existing(file, true);
  } else {
    std::filesystem::path temp;
    impl->create_beside(file, temp);
    impl->bytes = hdf5::create_compressed(temp.string(), where->dataset, dtype, shape, how, path);
  }
  impl->window = ElementRange{0, impl->info.size()};
  return MappedArray(std::move(impl));
}

MappedArray MappedArrayAccess::create_zarr(const std::string& path, DType dtype, const Shape& shape, Order order,
                                          const Compression& how) {
  auto impl = MappedArray::Impl::output(path, "zarr", dtype, shape, order);
  impl->info.format_version = "2";
  const std::filesystem::path final_path = zarr::prepare_output(path);
  std::filesystem::path temp;
  // The directory's descriptor, its lock held while it is written: commit() fsyncs it,
  // making the chunks' entries durable.
  impl->fd = zarr::create_temp_directory(final_path, temp);
  impl->pending = PendingOutput::new_directory(temp, final_path, path);
  impl->bytes = zarr::create_writer(temp, path, dtype, shape, order, how);
  impl->window = ElementRange{0, impl->info.size()};
  return MappedArray(std::move(impl));
}

MappedArray MappedArrayAccess::read_by(std::string path, ArrayInfo info, std::string source, os::UniqueFd fd,
                                       std::unique_ptr<TileReader> reader) {
  auto impl = std::make_unique<MappedArray::Impl>();
  impl->path = std::move(path);
  impl->source_path = std::move(source);
  impl->info = std::move(info);
  impl->fd = std::move(fd);
  impl->bytes = std::move(reader);
  impl->window = ElementRange{0, impl->info.size()};
  return MappedArray(std::move(impl));
}

int MappedArrayAccess::fd(const MappedArray& array) { return array.impl_->fd.get(); }

MappedArrayAccess::Source MappedArrayAccess::source(const MappedArray& array) {
  const MappedArray::Impl& m = *array.impl_;
  return {m.source_path.empty() ? m.path : m.source_path, m.source_fd ? m.source_fd.get() : m.fd.get()};
}

void MappedArrayAccess::sync(const MappedArray& array, std::int64_t begin, std::int64_t end) {
  const MappedArray::Impl& m = *array.impl_;
  if (!m.writable || m.data() == nullptr || end <= begin) return;
  const std::size_t item = static_cast<std::size_t>(m.info.dtype.itemsize());
  os::sync_range(m.data() + static_cast<std::size_t>(begin) * item, static_cast<std::size_t>(end - begin) * item,
                 m.path);
}

void MappedArrayAccess::start_writeback(const MappedArray& array, std::int64_t begin, std::int64_t end) {
  const MappedArray::Impl& m = *array.impl_;
  if (!m.writable || m.data() == nullptr || end <= begin) return;
  const auto item = static_cast<std::uint64_t>(m.info.dtype.itemsize());
  // Whole pages only: the next tile's kernel may be writing the last, shared one.
  const std::uint64_t page = os::page_size();
  const std::uint64_t first = m.info.data_offset + static_cast<std::uint64_t>(begin) * item;
  const std::uint64_t last = (m.info.data_offset + static_cast<std::uint64_t>(end) * item) / page * page;
  if (last > first) os::start_writeback(m.fd.get(), first, last - first);
}

std::string output_target(const std::string& path) { return ooc::output_target(path); }

std::filesystem::path MappedArrayAccess::pending_path(const MappedArray& array) {
  return array.impl_->pending.temp_file();
}

MappedArray MappedArrayAccess::map_output_part(const std::filesystem::path& temp, const std::string& final_path,
                                               ElementRange window) {
  auto impl = std::make_unique<MappedArray::Impl>();
  try {
    impl->open(temp.string(), Access::read_write);
  } catch (const Error& e) {
    throw Error(final_path, "cannot open the output being written: " + e.problem(), e.kind());
  }
  impl->path = final_path;
  impl->map(window);
  return MappedArray(std::move(impl));
}

}  // namespace detail
}  // namespace ooc
