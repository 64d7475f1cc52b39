#pragma once
// What the chunked readers (HDF5's chunk reader, Zarr's) share once a chunk is decoded: the
// runs of its elements that a tile takes, and the fill value for chunks that are absent.

#include "format/layer.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ooc::chunk_walk {

/// Calls fn(position in the tile, position in the decoded chunk, count) for each run of
/// elements of the chunk at `origin` (of `extent`, clipped to the array) that lies in
/// [begin, end) of the array's C order. `strides` are the array's element strides,
/// `chunk_strides` the decoded chunk's; the axes after `merge_axis` are whole in every
/// chunk, so a run spans them.
template <class Index, class Fn>
void for_each_segment(const std::vector<Index>& origin, const std::vector<Index>& extent,
                      const std::vector<Index>& strides, const std::vector<Index>& chunk_strides,
                      std::size_t merge_axis, std::int64_t begin, std::int64_t end, Fn&& fn) {
  const std::size_t m = merge_axis;
  const auto length = static_cast<std::int64_t>(extent[m] * strides[m]);
  std::vector<Index> at(m, 0);  // position within the chunk along axes before m
  while (true) {
    auto position = static_cast<std::int64_t>(origin[m] * strides[m]);
    std::int64_t local = 0;
    for (std::size_t k = 0; k < m; ++k) {
      position += static_cast<std::int64_t>((origin[k] + at[k]) * strides[k]);
      local += static_cast<std::int64_t>(at[k] * chunk_strides[k]);
    }
    const std::int64_t lo = std::max(position, begin), hi = std::min(position + length, end);
    if (lo < hi) fn(lo - begin, local + (lo - position), hi - lo);
    if (position >= end) return;  // later runs lie further on
    std::size_t k = m;
    while (k-- > 0) {
      if (at[k] + 1 < extent[k]) {
        ++at[k];
        break;
      }
      at[k] = 0;
    }
    if (k == static_cast<std::size_t>(-1)) return;
  }
}

/// `count` items of `item` bytes at `at`, each the fill value (`zero`: zero bytes).
inline void fill(std::byte* at, std::size_t count, std::size_t item, bool zero, const std::vector<std::byte>& value) {
  if (zero) {
    std::memset(at, 0, count * item);
    return;
  }
  for (std::size_t i = 0; i < count; ++i) std::memcpy(at + i * item, value.data(), item);
}

}  // namespace ooc::chunk_walk
