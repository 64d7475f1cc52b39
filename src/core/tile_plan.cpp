#include "ooc/tile_plan.hpp"

#include "ooc/mapped_array.hpp"

#include <algorithm>
#include "ooc/error.hpp"

#include <stdexcept>

namespace ooc {

TilePlan::TilePlan(std::int64_t total, std::int64_t per, std::int64_t slab, std::int64_t pieces)
    : total_(total), per_(per), slab_(slab), pieces_(pieces),
      count_(static_cast<std::size_t>(total == 0 ? 0
                                      : pieces > 1 ? total / slab * pieces
                                                   : (total + per - 1) / per)) {}

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

TilePlan TilePlan::slabs(std::int64_t slabs, std::int64_t slab_elements, int itemsize, std::uint64_t tile_bytes) {
  const std::int64_t elements = slabs * slab_elements;
  const std::uint64_t fit = std::max<std::uint64_t>(1, tile_bytes / static_cast<std::uint64_t>(itemsize));
  if (slab_elements == 0) return TilePlan(0, 1, 0);
  if (static_cast<std::uint64_t>(slab_elements) <= fit) {
    const auto per_tile = std::min<std::uint64_t>(fit / static_cast<std::uint64_t>(slab_elements),
                                                  static_cast<std::uint64_t>(slabs));
    return TilePlan(elements, static_cast<std::int64_t>(std::max<std::uint64_t>(1, per_tile)) * slab_elements,
                    slab_elements);
  }
  const auto blocks = std::max<std::uint64_t>(1, fit / static_cast<std::uint64_t>(kBlockElements));
  const auto piece = static_cast<std::int64_t>(blocks) * kBlockElements;
  // A tile is at least one block, so a slab smaller than a block is a tile of its own.
  if (piece >= slab_elements) return TilePlan(elements, slab_elements, slab_elements);
  return TilePlan(elements, piece, slab_elements, (slab_elements + piece - 1) / piece);
}

Tile TilePlan::at(std::size_t index) const {
  const auto i = static_cast<std::int64_t>(index);
  if (pieces_ > 1) {
    const std::int64_t slab_begin = std::min(total_, i / pieces_ * slab_);
    const std::int64_t begin = std::min(total_, slab_begin + i % pieces_ * per_);
    return Tile{index, begin, std::min(slab_begin + slab_, begin + per_)};
  }
  return Tile{index, std::min(total_, i * per_), std::min(total_, (i + 1) * per_)};
}

Tile TilePlan::operator[](std::size_t position) const { return at(first_ + position); }

std::int64_t TilePlan::begin() const { return at(first_).begin; }

std::int64_t TilePlan::end() const { return count_ == 0 ? begin() : at(first_ + count_ - 1).end; }

TilePlan TilePlan::slice(TileRange range) const {
  TilePlan part = *this;
  const std::size_t first = std::min(range.first, count_);
  part.first_ = first_ + first;
  part.count_ = std::min(range.last, count_) > first ? std::min(range.last, count_) - first : 0;
  return part;
}

TileRange TilePlan::share(int part, int parts) const {
  if (parts < 1 || part < 0 || part >= parts) throw UsageError("TilePlan::share: no such part");
  using Wide = unsigned __int128;  // tiles * parts can exceed 64 bits
  const auto boundary = [&](int k) {
    return static_cast<std::size_t>(Wide{count_} * static_cast<Wide>(k) / static_cast<Wide>(parts));
  };
  return TileRange{boundary(part), boundary(part + 1)};
}

}  // namespace ooc
