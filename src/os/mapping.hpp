#pragma once
// A byte range of an open file mapped into memory: the only place in ooc that maps files.

#include "os/layer.hpp"

#include "os/memory.hpp"
#include "os/shrink_watch.hpp"

#include <boost/interprocess/mapped_region.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ooc::os {

/// One owner for a mapped range of a file and the ShrinkWatch over it (in the spirit of
/// mio's basic_mmap): move-only, and it stops watching before it unmaps, whether it is
/// destroyed, reset or assigned over. It holds no descriptor: the mapping stays valid
/// after the file it came from is closed.
class Mapping {
 public:
  /// Maps nothing: data() is null and size() 0.
  Mapping() = default;
  /// Maps `size` bytes at `offset` of the file `fd` is open on (PROT_READ, or
  /// PROT_READ | PROT_WRITE and shared when `writable`; `fd` must then be open for
  /// writing) and watches them for the file shrinking. Zero bytes map nothing. Throws
  /// ooc::Error naming `path` when the mapping fails.
  static Mapping map(int fd, std::uint64_t offset, std::size_t size, bool writable, const std::string& path);

  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  /// The first mapped byte (the one at `offset`), or null when nothing is mapped.
  std::byte* data() const { return static_cast<std::byte*>(region_.get_address()); }
  std::size_t size() const { return region_.get_size(); }
  bool writable() const { return writable_; }
  /// True once an access found the file shorter than the mapping (see ShrinkWatch).
  bool shrank() const { return watch_.shrank(); }

  /// Writes the dirty pages to the file and waits (msync MS_SYNC); `path` names the file
  /// in the error.
  void flush(const std::string& path);
  /// How much of the mapping is in the page cache (0..1); 1 for an empty mapping.
  double cached_fraction() const;

  /// Stops watching, then unmaps.
  void reset() noexcept;

 private:
  boost::interprocess::mapped_region region_;
  ShrinkWatch watch_;
  bool writable_ = false;
};

}  // namespace ooc::os
