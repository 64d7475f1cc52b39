#pragma once
/// TilePlan: how an array is cut into tiles, contiguous runs of elements in memory order.

#include <cstddef>
#include <cstdint>

namespace ooc {

class MappedArray;

/// numpy's ufunc buffer size: numpy reduces an array in blocks of this many elements,
/// adding each block's pairwise sum to a running total. Tiles are whole blocks on the
/// same grid, so ooc's sums take exactly numpy's steps and give numpy's bits.
inline constexpr std::int64_t kBlockElements = 8192;

/// Default tile size: large enough that per-tile overhead vanishes, small enough that
/// (tiles in flight + prefetch depth) tiles stay a modest resident set.
inline constexpr std::uint64_t kDefaultTileBytes = 16ull << 20;

/// Elements [begin, end) of an array, in memory order; tiles are numbered from 0.
struct Tile {
  std::size_t index = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};

/// Cuts `elements` elements into tiles of about `tile_bytes`, each a whole number of
/// kBlockElements blocks (at least one; the last tile takes what is left). The plan
/// depends only on the array and the tile size, never on the thread count, so neither
/// do results.
class TilePlan {
 public:
  /// Tiles over `elements` elements of `itemsize` bytes.
  static TilePlan contiguous(std::int64_t elements, int itemsize,
                             std::uint64_t tile_bytes = kDefaultTileBytes);
  /// The contiguous plan for all elements of an array.
  static TilePlan for_array(const MappedArray& array, std::uint64_t tile_bytes = kDefaultTileBytes);
  /// Tiles over `slabs` consecutive slabs of `slab_elements` elements each (an axis
  /// reduction's whole rows or outer slabs): as many whole slabs per tile as fit in
  /// `tile_bytes`; a slab that does not fit is cut into pieces of whole blocks counted
  /// from the slab's start (the last piece takes what is left). No tile ever holds part
  /// of two slabs.
  static TilePlan slabs(std::int64_t slabs, std::int64_t slab_elements, int itemsize,
                        std::uint64_t tile_bytes = kDefaultTileBytes);

  std::size_t size() const { return count_; }
  /// Elements per slab for a plan from slabs() (0 for a contiguous plan).
  std::int64_t slab_elements() const { return slab_; }
  bool empty() const { return count_ == 0; }
  std::int64_t elements() const { return elements_; }
  Tile operator[](std::size_t index) const;

 private:
  TilePlan(std::int64_t elements, std::int64_t per, std::int64_t slab = 0, std::int64_t pieces = 1);
  std::int64_t elements_;
  std::int64_t per_;     // elements in every tile (or piece of a slab) but the last
  std::int64_t slab_;    // slabs(): elements per slab
  std::int64_t pieces_;  // slabs() of slabs larger than a tile: pieces per slab; else 1
  std::size_t count_;
};

}  // namespace ooc
