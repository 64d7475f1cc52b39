#pragma once
/// Selections: numpy-style subsets of an array, read with as few bytes as the layout
/// allows. `ooc::map_file("log.npy[::5, 3]")` (or `ooc::select(ooc::map_file("log.npy"),
/// ooc::Selection::parse("::5, 3"))`) gives a MappedArray of numpy's `a[::5, 3]`: its
/// shape, dtype and values, read tile by tile by the pipeline like a chunked dataset.
///
/// The forms, per axis, as numpy's basic and advanced indexing: slices `start:stop:step`
/// (negative values too; any part may be left out), a single index (the axis is dropped),
/// and one of these per selection: an integer list `[0, 4, 7]`, an index array `@rows.npy`
/// (a 1-D integer .npy or HDF5 dataset), or a boolean mask `@keep.npy` (a bool .npy or
/// HDF5 dataset: numpy's `a[mask]`). A mask of k dimensions covers k axes from where it
/// stands and must match their lengths; it selects the elements where it is true, in C
/// order, as numpy's `a[np.nonzero(mask)]`: `x[@m.npy]` the rows where m is true,
/// `x[@m.npy, 5]` one column of them, `x[:, @m.npy]` columns, a mask of x's whole shape
/// its elements as one axis. The mask is streamed beside the data, never loaded whole:
/// opening it counts its true elements per block in one pass (the result's length), and
/// each tile finds its elements' positions from the mapped mask. Missing trailing axes
/// are taken whole. `...`, `None` and boolean scalars are refused.

#include "ooc/mapped_array.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ooc {

/// `start:stop:step`, each part optional (Python's defaults).
struct Slice {
  std::optional<std::int64_t> start, stop, step;
};

namespace detail { class MaskIndex; struct MaskAccess; }

/// A boolean mask, numpy's `a[mask]`: a bool array in a file (`keep.npy`, `f.h5:/keep`, or
/// a selection of one), mapped, never loaded whole. Opening it counts its true elements
/// in one streamed pass, keeping one count per block of it; a selection then finds each
/// tile's elements from the mapped mask. Copies share the one mapping.
class BoolMask {
 public:
  /// Maps the bool array `path` names and counts its true elements. Throws UsageError
  /// for a dtype other than bool, ooc::Error for a file that cannot be read as an array.
  static BoolMask open(const std::string& path);
  /// As open(), over an array already mapped (its dtype must be bool).
  explicit BoolMask(MappedArray mask);

  const std::string& path() const;
  const Shape& shape() const;
  /// Its true elements: the length of the axis it selects.
  std::int64_t count() const;

 private:
  std::shared_ptr<const detail::MaskIndex> index_;
  friend struct detail::MaskAccess;
};

/// The parsed text of a selection, before it meets an array.
class Selection {
 public:
  /// One item: a slice, a single index, a list of indices, or a boolean mask (which
  /// covers as many axes as it has dimensions).
  using Item = std::variant<Slice, std::int64_t, std::vector<std::int64_t>, BoolMask>;

  /// Parses the text between the brackets ("::5, 3", "1000:2000, [0, 4, 7]", "@rows.npy",
  /// "@keep.npy, 5"). `@FILE` is opened here: an integer array is read as an index list,
  /// a bool array is a BoolMask (counted, not loaded). Throws UsageError naming `path`
  /// (the array's) for bad syntax, more than one list or mask, an unreadable index array
  /// or mask; IndexError (a UsageError) for one of another dtype (numpy's "arrays used as
  /// indices must be of integer (or boolean) type").
  static Selection parse(std::string_view text, const std::string& path = "");

  const std::vector<Item>& items() const { return items_; }
  /// The selection as written, normalised: "[::5, 3]".
  const std::string& text() const { return text_; }

 private:
  std::vector<Item> items_;
  std::string text_;
};

/// "x.npy[::5, 3]" -> {"x.npy", "::5, 3"}: a trailing bracketed selection, split off at
/// its matching '['. nullopt when `spec` does not end in one.
std::optional<std::pair<std::string, std::string>> split_selection(const std::string& spec);

/// The elements of `source` that `selection` picks, as numpy's `source[selection]`: its
/// shape (axes of single indices dropped, the list's axis placed where numpy places it),
/// in the memory order numpy's result has (C or F; see docs/decisions/2026-11-30-selection-numpy-order.md), read tile by tile from
/// `source`, which the result owns (MappedArray::select of an lvalue shares it instead).
/// Throws UsageError naming source's path for a zero step, and its IndexError where numpy
/// raises IndexError: an index out of bounds, too many indices, a mask whose shape does
/// not match the axes it covers ("boolean index did not match indexed array along
/// dimension 0; dimension is 100 but corresponding boolean dimension is 99"). Read-only: the result cannot be written in
/// place. Its tiles let go of the source pages they read as they go, so that resident
/// memory stays bounded by the tile size whatever the tiles span of the source.
MappedArray select(MappedArray source, const Selection& selection);

/// How the selection behind `array` reads its source, for `oocrun --verbose`: runs,
/// spans, bytes touched against the covering range, and the page advice chosen. Empty
/// for an array that is not a selection.
std::string selection_summary(const MappedArray& array);

/// The tile size, in `array`'s bytes, whose tiles span about `tile_bytes` of the
/// selection's source: `tile_bytes` divided by how far apart the selected elements lie
/// (never below one byte per element; one block is the least a plan takes anyway). A
/// tile of 16 MiB of `x[::5, [0, 9, 18, 27, 36]]` of an (N, 40) file spans 640 MiB of it,
/// so a 512 MiB file was one tile, one thread. `tile_bytes` for an array that is not a
/// selection, and for a selection of a mapped source less than half cached (cold, the
/// larger tiles read faster: their advice asks the disk for more at once). For an array
/// read through another reader, at most what that reader asks for (a compressed HDF5
/// dataset: a row of chunks, at least 2 MiB).
std::uint64_t tile_bytes_spanning(const MappedArray& array, std::uint64_t tile_bytes);

/// Gaps between selected runs up to this many bytes are read through (one span, one
/// sequential stream); larger gaps are skipped (docs/decisions/2026-11-30-selection-gap-16k.md).
inline constexpr std::int64_t kSelectionGapBytes = 16 * 1024;

}  // namespace ooc
