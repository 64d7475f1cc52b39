#pragma once
// Advice to the kernel about mapped pages: the only place in ooc that calls madvise.

#include "os/layer.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace ooc::os {

std::size_t page_size();

enum class Advice {
  will_need,       // start reading these pages in (MADV_WILLNEED)
  populate_read,   // fault them in and fill the page table now (MADV_POPULATE_READ)
  populate_write,  // same, for pages about to be written (MADV_POPULATE_WRITE)
  dont_need,       // drop them from this process's resident set (MADV_DONTNEED)
  sequential,      // MADV_SEQUENTIAL for a whole mapping
  random,          // MADV_RANDOM: no readahead, only the pages touched are read
};

/// Advises the pages of [address, address + size). Ranges are widened to whole pages,
/// except for dont_need, which is narrowed so no page outside the range is dropped.
/// Advice is a hint: failures (old kernels, unsupported values) are ignored.
void advise(const void* address, std::size_t size, Advice advice);

/// The fraction (0..1) of the pages of [address, address + size) that are in the page
/// cache, from mincore() on up to `samples` pages spread over the range.
double cached_fraction(const void* address, std::size_t size, int samples = 256);

/// Memory this process may use: physical memory, or less under a cgroup memory limit
/// (v1 memory.limit_in_bytes or v2 memory.max).
std::uint64_t memory_limit();
/// Writes the dirty pages of a shared file mapping in [address, address + size) to disk
/// and waits (msync MS_SYNC, widened to whole pages). `path` names the file in errors.
void sync_range(const void* address, std::size_t size, const std::string& path);

}  // namespace ooc::os
