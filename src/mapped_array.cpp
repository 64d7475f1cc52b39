#include "ooc/mapped_array.hpp"

#include "format/npy.hpp"
#include "mapped_array_access.hpp"
#include "os/file.hpp"
#include "os/shrink_watch.hpp"

#include <boost/interprocess/mapped_region.hpp>

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
  bip::mapped_region region;  // empty when the array holds no bytes
  std::byte* data = nullptr;
  os::ShrinkWatch watch;  // declared after region: stops watching before the unmap
  std::filesystem::path temp_path;  // non-empty while an output is pending

  ~Impl() {
    if (!temp_path.empty()) {
      watch = os::ShrinkWatch();
      region = bip::mapped_region();
      std::error_code ignored;
      std::filesystem::remove(temp_path, ignored);
    }
  }

  void map() {
    const std::uint64_t bytes = info.nbytes();
    if (bytes == 0) return;  // mmap cannot map zero bytes; an empty array needs none
    const bip::mode_t mode = writable ? bip::read_write : bip::read_only;
    try {
      region = bip::mapped_region(DescriptorMapping{fd.get(), mode}, mode, static_cast<bip::offset_t>(info.data_offset),
                                  static_cast<std::size_t>(bytes));
    } catch (const bip::interprocess_exception& e) {
      throw Error(path, std::string("cannot map the data: ") + e.what());
    }
    data = static_cast<std::byte*>(region.get_address());
    watch = os::ShrinkWatch(data, static_cast<std::size_t>(bytes), writable);
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
bool MappedArray::shrank() const { return impl_->watch.shrank(); }

void MappedArray::check_intact() const {
  if (shrank())
    throw Error(impl_->path, std::string("file shrank while being ") + (impl_->writable ? "written" : "read") +
                                 " (truncated by another process)");
}

std::span<const std::byte> MappedArray::bytes() const& {
  return {impl_->data, static_cast<std::size_t>(nbytes())};
}

std::span<std::byte> MappedArray::writable_bytes() & {
  if (!impl_->writable) throw UsageError(impl_->path, "array is mapped read-only");
  return {impl_->data, static_cast<std::size_t>(nbytes())};
}

void MappedArray::check_view_type(DType wanted) const {
  if (dtype().native() != wanted)
    throw UsageError(path(), "array holds " + dtype().name() + ", not " + wanted.name());
  if (!dtype().is_native())
    throw UsageError(path(), "array is in non-native byte order (" + dtype().descr() +
                                 "); read it through the pipeline, which converts");
  if (reinterpret_cast<std::uintptr_t>(impl_->data) % static_cast<std::uintptr_t>(wanted.itemsize()) != 0)
    throw UsageError(path(), "data at offset " + std::to_string(info().data_offset) + " is not aligned for " +
                                 wanted.name() + "; read it through the pipeline, which copies");
}

void MappedArray::commit() {
  Impl& m = *impl_;
  if (!m.writable) return;
  check_intact();  // zeros stand where the file's bytes were: nothing of it may be kept
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

MappedArray map_file(const std::string& path, Access access) {
  auto impl = std::make_unique<MappedArray::Impl>();
  impl->path = path;
  impl->writable = access == Access::read_write;
  impl->fd = os::open_existing(path, impl->writable);
  const std::uint64_t file_size = os::file_size(impl->fd.get(), path);

  std::array<std::byte, npy::kPreambleBytes> preamble{};
  const std::size_t got = os::read_at(impl->fd.get(), preamble.data(), preamble.size(), 0, path);
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
    os::read_at(impl->fd.get(), prefix.data(), prefix.size(), 0, path);
    header = npy::parse_header(prefix, file_size);
  } catch (const npy::FormatError& e) {
    throw Error(path, e.what());
  }
  impl->info.format = "npy";
  impl->info.format_version = std::to_string(header.major_version) + ".0";
  impl->info.dtype = header.dtype;
  impl->info.shape = header.shape;
  impl->info.order = header.order;
  impl->info.data_offset = header.data_offset;
  impl->map();
  return MappedArray(std::move(impl));
}

MappedArray create_npy(const std::string& path, DType dtype, const Shape& shape, Order order) {
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
  impl->map();
  return MappedArray(std::move(impl));
}

namespace detail {

void MappedArrayAccess::advise(const MappedArray& array, std::int64_t begin, std::int64_t end,
                               os::Advice advice) {
  const MappedArray::Impl& m = *array.impl_;
  if (m.data == nullptr || end <= begin) return;
  const std::size_t item = static_cast<std::size_t>(m.info.dtype.itemsize());
  os::advise(m.data + static_cast<std::size_t>(begin) * item,
             static_cast<std::size_t>(end - begin) * item, advice);
}

void MappedArrayAccess::drop_pages_before(const MappedArray& array, std::int64_t end,
                                          std::uintptr_t* mark) {
  const MappedArray::Impl& m = *array.impl_;
  if (m.data == nullptr) return;
  const std::uintptr_t page = os::page_size();
  const auto base = reinterpret_cast<std::uintptr_t>(m.data);
  const std::uintptr_t from = *mark != 0 ? *mark : base / page * page;
  const std::uintptr_t to =
      (base + static_cast<std::uintptr_t>(end) * static_cast<std::uintptr_t>(m.info.dtype.itemsize())) / page * page;
  if (to <= from) return;
  os::advise(reinterpret_cast<const void*>(from), to - from, os::Advice::dont_need);
  *mark = to;
}

void MappedArrayAccess::sync(const MappedArray& array, std::int64_t begin, std::int64_t end) {
  const MappedArray::Impl& m = *array.impl_;
  if (!m.writable || m.data == nullptr || end <= begin) return;
  const std::size_t item = static_cast<std::size_t>(m.info.dtype.itemsize());
  os::sync_range(m.data + static_cast<std::size_t>(begin) * item, static_cast<std::size_t>(end - begin) * item,
                 m.path);
}

int MappedArrayAccess::descriptor(const MappedArray& array) { return array.impl_->fd.get(); }

void MappedArrayAccess::start_writeback(const MappedArray& array, std::int64_t begin, std::int64_t end) {
  const MappedArray::Impl& m = *array.impl_;
  if (!m.writable || end <= begin) return;
  const std::uint64_t item = static_cast<std::uint64_t>(m.info.dtype.itemsize());
  os::start_writeback(m.fd.get(), m.info.data_offset + static_cast<std::uint64_t>(begin) * item,
                      static_cast<std::uint64_t>(end - begin) * item);
}

}  // namespace detail
}  // namespace ooc
