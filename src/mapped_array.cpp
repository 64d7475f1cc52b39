#include "ooc/mapped_array.hpp"

#include "format/npy.hpp"
#include "mapped_array_access.hpp"
#include "os/file.hpp"

#include <boost/interprocess/mapped_region.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <vector>

namespace bip = boost::interprocess;

namespace ooc {
namespace {

// Lets Boost map the descriptor we already opened and validated, rather than opening
// the path a second time (which could by then name a different file).
struct DescriptorMapping {
  int fd;
  bip::mode_t mode;
  bip::mapping_handle_t get_mapping_handle() const {
    return bip::ipcdetail::mapping_handle_from_file_handle(fd);
  }
  bip::mode_t get_mode() const { return mode; }
};

}  // namespace

std::int64_t ArrayInfo::size() const { return element_count(shape).value_or(0); }
std::uint64_t ArrayInfo::nbytes() const {
  return static_cast<std::uint64_t>(size()) * static_cast<std::uint64_t>(dtype.itemsize());
}

struct MappedArray::Impl {
  std::string path;  // the name users know
  ArrayInfo info;
  bool writable = false;
  os::UniqueFd fd;
  ElementRange window{0, 0};  // the elements mapped
  bip::mapped_region region;  // empty when the window holds no bytes
  std::byte* data = nullptr;  // first byte of element window.begin
  std::filesystem::path temp_path;  // non-empty while an output is pending

  ~Impl() {
    if (!temp_path.empty()) {
      region = bip::mapped_region();
      std::error_code ignored;
      std::filesystem::remove(temp_path, ignored);
    }
  }

  // Opens the file and reads and checks its header: everything map_file does but mapping.
  void open(const std::string& name, Access access) {
    path = name;
    writable = access == Access::read_write;
    fd = os::open_existing(name, writable);
    const std::uint64_t file_size = os::file_size(fd.get(), name);

    std::array<std::byte, npy::kPreambleBytes> preamble{};
    const std::size_t got = os::read_at(fd.get(), preamble.data(), preamble.size(), 0, name);
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
      os::read_at(fd.get(), prefix.data(), prefix.size(), 0, name);
      header = npy::parse_header(prefix, file_size);
    } catch (const npy::FormatError& e) {
      throw Error(name, e.what());
    }
    info.format = "npy";
    info.format_version = std::to_string(header.major_version) + ".0";
    info.dtype = header.dtype;
    info.shape = header.shape;
    info.order = header.order;
    info.data_offset = header.data_offset;
  }

  // The address of element `index` of the array, clamped to the mapped window.
  std::uintptr_t address_of(std::int64_t index) const {
    const std::int64_t at = std::clamp(index, window.begin, window.end) - window.begin;
    return reinterpret_cast<std::uintptr_t>(data) +
           static_cast<std::uintptr_t>(at) * static_cast<std::uintptr_t>(info.dtype.itemsize());
  }

  void map(ElementRange wanted) {
    const std::int64_t size = info.size();
    window.begin = std::clamp<std::int64_t>(wanted.begin, 0, size);
    window.end = std::clamp<std::int64_t>(wanted.end, window.begin, size);
    const std::uint64_t item = static_cast<std::uint64_t>(info.dtype.itemsize());
    const std::uint64_t bytes = static_cast<std::uint64_t>(window.size()) * item;
    if (bytes == 0) return;  // mmap cannot map zero bytes; an empty window needs none
    const bip::mode_t mode = writable ? bip::read_write : bip::read_only;
    // Boost maps from the page holding the first byte and hands back its exact address.
    const std::uint64_t offset = info.data_offset + static_cast<std::uint64_t>(window.begin) * item;
    try {
      region = bip::mapped_region(DescriptorMapping{fd.get(), mode}, mode, static_cast<bip::offset_t>(offset),
                                  static_cast<std::size_t>(bytes));
    } catch (const bip::interprocess_exception& e) {
      throw Error(path, std::string("cannot map the data: ") + e.what());
    }
    data = static_cast<std::byte*>(region.get_address());
  }
};

MappedArray::MappedArray(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MappedArray::MappedArray(MappedArray&&) noexcept = default;
MappedArray& MappedArray::operator=(MappedArray&&) noexcept = default;
MappedArray::~MappedArray() = default;

const ArrayInfo& MappedArray::info() const { return impl_->info; }
const std::string& MappedArray::path() const { return impl_->path; }
bool MappedArray::writable() const { return impl_->writable; }
bool MappedArray::pending() const { return !impl_->temp_path.empty(); }
ElementRange MappedArray::window() const { return impl_->window; }

std::span<const std::byte> MappedArray::bytes() const& {
  return {impl_->data, static_cast<std::size_t>(impl_->window.size()) * static_cast<std::size_t>(dtype().itemsize())};
}

std::span<std::byte> MappedArray::writable_bytes() & {
  if (!impl_->writable) throw UsageError(impl_->path, "array is mapped read-only");
  return {impl_->data, static_cast<std::size_t>(impl_->window.size()) * static_cast<std::size_t>(dtype().itemsize())};
}

void MappedArray::check_view_type(DType wanted) const {
  if (dtype().native() != wanted)
    throw UsageError(path(), "array holds " + dtype().name() + ", not " + wanted.name());
  if (!dtype().is_native())
    throw UsageError(path(), "array is in non-native byte order (" + dtype().descr() +
                                 "); read it through the pipeline, which converts");
}

void MappedArray::commit() {
  Impl& m = *impl_;
  if (!m.writable) return;
  if (m.region.get_size() > 0 && !m.region.flush(0, 0, /*async=*/false))
    throw Error(m.path, "flushing the mapped data failed");
  os::sync_file(m.fd.get(), m.path);
  if (!m.temp_path.empty()) {
    const std::filesystem::path final_path(m.path);
    os::rename_file(m.temp_path, final_path);
    m.temp_path.clear();
    os::sync_directory(final_path.parent_path());
  }
}

MappedArray map_file(const std::string& path, Access access, ElementRange window) {
  auto impl = std::make_unique<MappedArray::Impl>();
  impl->open(path, access);
  impl->map(window);
  return MappedArray(std::move(impl));
}

ArrayInfo read_info(const std::string& path) {
  MappedArray::Impl impl;
  impl.open(path, Access::read_only);
  return impl.info;
}

MappedArray create_npy(const std::string& path, DType dtype, const Shape& shape, Order order,
                       ElementRange window) {
  const auto count = element_count(shape);
  std::int64_t bytes = 0;
  if (!count || __builtin_mul_overflow(*count, std::int64_t{dtype.itemsize()}, &bytes))
    throw UsageError(path, "cannot create an array of shape " + shape_repr(shape));
  if (std::filesystem::is_directory(path)) throw Error(path, "is a directory");

  auto impl = std::make_unique<MappedArray::Impl>();
  impl->path = path;
  impl->writable = true;
  impl->info.format = "npy";
  impl->info.dtype = dtype;
  impl->info.shape = shape;
  impl->info.order = order;
  const std::string header = npy::make_header(dtype, shape, order);
  impl->info.format_version = std::to_string(static_cast<int>(header[6])) + ".0";
  impl->info.data_offset = header.size();

  impl->fd = os::create_temp_beside(path, impl->temp_path);  // removed by ~Impl on failure
  os::write_at(impl->fd.get(), header.data(), header.size(), 0, path);
  os::preallocate(impl->fd.get(), header.size() + static_cast<std::uint64_t>(bytes), path);
  impl->map(window);
  return MappedArray(std::move(impl));
}

namespace detail {

void MappedArrayAccess::advise(const MappedArray& array, std::int64_t begin, std::int64_t end,
                               os::Advice advice) {
  const MappedArray::Impl& m = *array.impl_;
  if (m.data == nullptr) return;
  const std::uintptr_t from = m.address_of(begin);
  const std::uintptr_t to = m.address_of(end);
  if (to <= from) return;
  os::advise(reinterpret_cast<const void*>(from), to - from, advice);
}

void MappedArrayAccess::drop_pages_before(const MappedArray& array, std::int64_t end,
                                          std::uintptr_t* mark) {
  const MappedArray::Impl& m = *array.impl_;
  if (m.data == nullptr) return;
  const std::uintptr_t page = os::page_size();
  const auto base = reinterpret_cast<std::uintptr_t>(m.data);
  const std::uintptr_t from = *mark != 0 ? *mark : base / page * page;
  const std::uintptr_t to = m.address_of(end) / page * page;
  if (to <= from) return;
  os::advise(reinterpret_cast<const void*>(from), to - from, os::Advice::dont_need);
  *mark = to;
}

void MappedArrayAccess::start_writeback(const MappedArray& array, std::int64_t begin, std::int64_t end) {
  const MappedArray::Impl& m = *array.impl_;
  begin = std::max(begin, m.window.begin);
  end = std::min(end, m.window.end);
  if (!m.writable || end <= begin) return;
  const std::uint64_t item = static_cast<std::uint64_t>(m.info.dtype.itemsize());
  os::start_writeback(m.fd.get(), m.info.data_offset + static_cast<std::uint64_t>(begin) * item,
                      static_cast<std::uint64_t>(end - begin) * item);
}

std::filesystem::path MappedArrayAccess::pending_path(const MappedArray& array) { return array.impl_->temp_path; }

MappedArray MappedArrayAccess::map_output_part(const std::filesystem::path& temp, const std::string& final_path,
                                               ElementRange window) {
  auto impl = std::make_unique<MappedArray::Impl>();
  try {
    impl->open(temp.string(), Access::read_write);
  } catch (const Error& e) {
    throw Error(final_path, "cannot open the output being written: " + e.problem());
  }
  impl->path = final_path;
  impl->map(window);
  return MappedArray(std::move(impl));
}

}  // namespace detail
}  // namespace ooc
