#include "ooc/tile_plan.hpp"

#include "ooc/mapped_array.hpp"

#include <algorithm>
#include <stdexcept>

namespace ooc {

TilePlan::TilePlan(std::int64_t total, std::int64_t per)
    : total_(total), per_(per),
      count_(static_cast<std::size_t>(total == 0 ? 0 : (total + per - 1) / per)) {}

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

Tile TilePlan::operator[](std::size_t position) const {
  const std::size_t index = first_ + position;
  const auto i = static_cast<std::int64_t>(index);
  return Tile{index, i * per_, std::min(total_, (i + 1) * per_)};
}

std::int64_t TilePlan::begin() const {
  return std::min(total_, static_cast<std::int64_t>(first_) * per_);
}

std::int64_t TilePlan::end() const {
  return std::min(total_, static_cast<std::int64_t>(first_ + count_) * per_);
}

TilePlan TilePlan::slice(TileRange range) const {
  TilePlan part = *this;
  const std::size_t first = std::min(range.first, count_);
  part.first_ = first_ + first;
  part.count_ = std::min(range.last, count_) > first ? std::min(range.last, count_) - first : 0;
  return part;
}

TileRange TilePlan::share(int part, int parts) const {
  if (parts < 1 || part < 0 || part >= parts) throw std::invalid_argument("TilePlan::share: no such part");
  using Wide = unsigned __int128;  // tiles * parts can exceed 64 bits
  const auto at = [&](int k) {
    return static_cast<std::size_t>(Wide{count_} * static_cast<Wide>(k) / static_cast<Wide>(parts));
  };
  return TileRange{at(part), at(part + 1)};
}

}  // namespace ooc
