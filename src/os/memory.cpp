#include "os/memory.hpp"

#include "ooc/error.hpp"
#include "os/file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace ooc::os {

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

void advise(const void* address, std::size_t size, Advice advice) {
  if (size == 0) return;
  const std::uintptr_t page = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  const std::uintptr_t end = begin + size;
  std::uintptr_t first = begin / page * page;
  std::uintptr_t last = (end + page - 1) / page * page;
  int value = MADV_WILLNEED;
  switch (advice) {
    case Advice::will_need: value = MADV_WILLNEED; break;
    case Advice::populate_read: value = MADV_POPULATE_READ; break;
    case Advice::populate_write: value = MADV_POPULATE_WRITE; break;
    case Advice::sequential: value = MADV_SEQUENTIAL; break;
    case Advice::dont_need:
      value = MADV_DONTNEED;
      first = (begin + page - 1) / page * page;
      last = end / page * page;
      break;
  }
  if (last <= first) return;
  ::madvise(reinterpret_cast<void*>(first), last - first, value);
}

void sync_range(const void* address, std::size_t size, const std::string& path) {
  if (size == 0) return;
  const std::uintptr_t page = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  const std::uintptr_t first = begin / page * page;
  const std::uintptr_t last = (begin + size + page - 1) / page * page;
  if (::msync(reinterpret_cast<void*>(first), last - first, MS_SYNC) != 0)
    throw Error(path, "flushing the mapped data failed: " + errno_text(errno));
}

}  // namespace ooc::os
