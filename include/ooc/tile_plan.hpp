#pragma once
/// TilePlan: how an array is cut into tiles, contiguous runs of elements in memory order.

#include <cstddef>
#include <cstdint>
#include <limits>

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

/// Tiles [first, last) of a plan, by number; the default is every tile.
struct TileRange {
  std::size_t first = 0;
  std::size_t last = std::numeric_limits<std::size_t>::max();
};

/// Cuts `elements` elements into tiles of about `tile_bytes`, each a whole number of
/// kBlockElements blocks (at least one; the last tile takes what is left). The plan
/// depends only on the array and the tile size, never on the thread count, so neither
/// do results. A plan can also be a part of such a plan (slice()): a run of consecutive
/// tiles that keep their numbers and element ranges, as one MPI rank processes them.
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

  /// Number of tiles in this plan (or part).
  std::size_t size() const { return count_; }
  /// Elements per slab for a plan from slabs() (0 for a contiguous plan).
  std::int64_t slab_elements() const { return slab_; }
  bool empty() const { return count_ == 0; }
  /// Elements the tiles cover: [begin(), end()), elements() of them.
  std::int64_t begin() const;
  std::int64_t end() const;
  std::int64_t elements() const { return end() - begin(); }
  /// Elements in every tile but the last (a whole number of blocks).
  std::int64_t tile_elements() const { return per_; }
  /// The numbers of this plan's tiles in the whole plan.
  TileRange tiles() const { return TileRange{first_, first_ + count_}; }
  /// The position-th tile of this plan; its `index` is its number in the whole plan.
  Tile operator[](std::size_t position) const;

  /// Tiles `range` of this plan (clamped to it), numbered as in the whole plan.
  TilePlan slice(TileRange range) const;
  /// The share of part `part` (0-based) of `parts` equal parts: a contiguous range of
  /// tile positions, the parts' ranges one after another in part order, their sizes
  /// differing by at most one tile (some are empty when there are more parts than tiles).
  /// Throws UsageError unless 0 <= part < parts.
  TileRange share(int part, int parts) const;

 private:
  TilePlan(std::int64_t total, std::int64_t per, std::int64_t slab = 0, std::int64_t pieces = 1);
  /// The tile numbered `index` in the whole plan (clamped to the array's end).
  Tile at(std::size_t index) const;
  std::int64_t total_;        // elements of the whole array
  std::int64_t per_;          // elements in every tile (or piece of a slab) but the last
  std::int64_t slab_;         // slabs(): elements per slab; else 0
  std::int64_t pieces_;       // slabs() of slabs larger than a tile: pieces per slab; else 1
  std::size_t first_ = 0;     // number of this plan's first tile in the whole plan
  std::size_t count_;
};

}  // namespace ooc
