#include "os/memory.hpp"

#include "ooc/error.hpp"
#include "os/file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

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
    case Advice::random: value = MADV_RANDOM; break;
    case Advice::dont_need:
      value = MADV_DONTNEED;
      first = (begin + page - 1) / page * page;
      last = end / page * page;
      break;
  }
  if (last <= first) return;
  ::madvise(reinterpret_cast<void*>(first), last - first, value);
}

double cached_fraction(const void* address, std::size_t size, int samples) {
  if (size == 0 || samples <= 0) return 1.0;
  const std::uintptr_t page = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(address) / page * page;
  const std::uintptr_t pages = (reinterpret_cast<std::uintptr_t>(address) + size - begin + page - 1) / page;
  const std::uintptr_t step = std::max<std::uintptr_t>(1, pages / static_cast<std::uintptr_t>(samples));
  int seen = 0, cached = 0;
  for (std::uintptr_t p = 0; p < pages; p += step) {
    unsigned char in_core = 0;
    if (::mincore(reinterpret_cast<void*>(begin + p * page), page, &in_core) != 0) continue;
    ++seen;
    cached += in_core & 1;
  }
  return seen == 0 ? 1.0 : static_cast<double>(cached) / seen;
}

namespace {

std::uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return ~std::uint64_t{0};
  return std::strtoull(text.c_str(), nullptr, 10);
}

}  // namespace

std::uint64_t memory_limit() {
  std::uint64_t limit = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * page_size();
  std::ifstream groups("/proc/self/cgroup");
  std::string line;
  while (std::getline(groups, line)) {
    // "4:memory:/ooc-bench" (v1) or "0::/user.slice" (v2)
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers == "memory")
      limit = std::min(limit, read_number("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes"));
    else if (controllers.empty())
      limit = std::min(limit, read_number("/sys/fs/cgroup" + path + "/memory.max"));
  }
  return limit;
}

void sync_range(const void* address, std::size_t size, const std::string& path) {
  if (size == 0) return;
  const std::uintptr_t page = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  const std::uintptr_t first = begin / page * page;
  const std::uintptr_t last = (begin + size + page - 1) / page * page;
  if (::msync(reinterpret_cast<void*>(first), last - first, MS_SYNC) != 0)
    throw Error(path, "flushing the mapped data failed: " + errno_text(errno), kind_of_errno(errno));
}

}  // namespace ooc::os
