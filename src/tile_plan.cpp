#include "ooc/tile_plan.hpp"

#include "ooc/mapped_array.hpp"

#include <algorithm>

namespace ooc {

TilePlan::TilePlan(std::int64_t elements, std::int64_t per)
    : elements_(elements), per_(per),
      count_(static_cast<std::size_t>(elements == 0 ? 0 : (elements + per - 1) / per)) {}

TilePlan TilePlan::contiguous(std::int64_t elements, int itemsize, std::uint64_t tile_bytes) {
  const std::uint64_t per = tile_bytes / static_cast<std::uint64_t>(itemsize);
  // At least one block; at most what the array needs (a huge tile_bytes must not overflow).
  const auto needed = static_cast<std::uint64_t>((elements + kBlockElements - 1) / kBlockElements);
  const auto blocks = std::clamp<std::uint64_t>(per / static_cast<std::uint64_t>(kBlockElements), 1,
                                                std::max<std::uint64_t>(1, needed));
  return TilePlan(elements, static_cast<std::int64_t>(blocks) * kBlockElements);
}

TilePlan TilePlan::for_array(const MappedArray& array, std::uint64_t tile_bytes) {
  return contiguous(array.size(), array.dtype().itemsize(), tile_bytes);
}

Tile TilePlan::operator[](std::size_t index) const {
  const auto i = static_cast<std::int64_t>(index);
  return Tile{index, i * per_, std::min(elements_, (i + 1) * per_)};
}

}  // namespace ooc
