#include "os/mapping.hpp"

#include "ooc/error.hpp"

#include <boost/interprocess/file_mapping.hpp>

#include <fcntl.h>

#include <utility>

namespace bip = boost::interprocess;

namespace ooc::os {

Mapping Mapping::map(int fd, std::uint64_t offset, std::size_t size, bool writable, const std::string& path) {
  Mapping m;
  if (size == 0) return m;  // mmap cannot map zero bytes; an empty range needs none
  // The magic link gives Boost a new descriptor on the open file itself, where a second
  // open of `path` could find another file by now (renamed over it, or removed). Opening
  // it read-write would succeed on a descriptor opened read-only as long as the file's
  // permissions allow, so a writable mapping asks the descriptor's own mode first, as
  // mmap on `fd` would.
  if (writable && (::fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDWR)
    throw Error(path, "cannot map the data for writing: the file is open read-only");
  const bip::mode_t mode = writable ? bip::read_write : bip::read_only;
  try {
    const bip::file_mapping file(("/proc/self/fd/" + std::to_string(fd)).c_str(), mode);
    // Boost maps from the page holding byte `offset` and hands back its exact address;
    // the region outlives `file`, whose descriptor closes here.
    m.region_ = bip::mapped_region(file, mode, static_cast<bip::offset_t>(offset), size);
  } catch (const bip::interprocess_exception& e) {
    throw Error(path, std::string("cannot map the data: ") + e.what());
  }
  m.writable_ = writable;
  m.watch_ = ShrinkWatch(m.data(), size, writable);
  return m;
}

Mapping::Mapping(Mapping&& other) noexcept
    : region_(std::move(other.region_)), watch_(std::move(other.watch_)), writable_(other.writable_) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    reset();  // this mapping's watch ends before its region goes
    region_ = std::move(other.region_);
    watch_ = std::move(other.watch_);
    writable_ = other.writable_;
  }
  return *this;
}

void Mapping::reset() noexcept {
  watch_ = ShrinkWatch();  // the SIGBUS handler must not map zeros where nothing is mapped any more
  region_ = bip::mapped_region();
  writable_ = false;
}

void Mapping::flush(const std::string& path) {
  if (size() > 0 && !region_.flush(0, 0, /*async=*/false)) throw Error(path, "flushing the mapped data failed");
}

double Mapping::cached_fraction() const { return size() > 0 ? os::cached_fraction(data(), size()) : 1.0; }

}  // namespace ooc::os
