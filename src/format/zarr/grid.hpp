#pragma once
// The chunk grid of a Zarr array, as its reader and its in-place writer see it: in the
// array's memory order (C order over the axes, reversed for a Fortran-order array, as
// each chunk's own order is), which chunks a run of elements touches, where a chunk's
// elements lie in the array, and its file's name.

#include "format/chunk_walk.hpp"
#include "format/zarr.hpp"
#include "format/zarr/zarray.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ooc::zarr {

class ChunkGrid {
 public:
  explicit ChunkGrid(const Metadata& m) : shape_(m.shape), order_(m.order), separator_(m.separator) {
    dims_ = m.shape;
    chunk_ = m.chunks;
    if (m.order == Order::fortran) {
      std::reverse(dims_.begin(), dims_.end());
      std::reverse(chunk_.begin(), chunk_.end());
    }
    if (dims_.empty()) {  // 0-d: one chunk of one element
      dims_ = {1};
      chunk_ = {1};
    }
    const std::size_t n = dims_.size();
    grid_.resize(n);
    strides_.assign(n, 1);
    chunk_strides_.assign(n, 1);
    for (std::size_t k = n; k-- > 0;) {
      grid_[k] = (dims_[k] + chunk_[k] - 1) / chunk_[k];
      if (k + 1 < n) {
        strides_[k] = strides_[k + 1] * dims_[k + 1];
        chunk_strides_[k] = chunk_strides_[k + 1] * chunk_[k + 1];
      }
      chunk_elements_ *= static_cast<std::size_t>(chunk_[k]);
    }
    merge_axis_ = n - 1;
    while (merge_axis_ > 0 && chunk_[merge_axis_] == dims_[merge_axis_]) --merge_axis_;
    count_ = 1;
    for (std::int64_t g : grid_) count_ *= static_cast<std::uint64_t>(std::max<std::int64_t>(0, g));
  }

  std::size_t axes() const { return dims_.size(); }
  /// Elements in a chunk (a whole one; an edge chunk's file holds as many).
  std::size_t chunk_elements() const { return chunk_elements_; }
  /// Chunks in the grid (files, written or not).
  std::uint64_t count() const { return count_; }
  /// Elements in a row of chunks along the first axis (its chunk's rows, every column).
  std::size_t row_elements() const {
    std::size_t row = static_cast<std::size_t>(chunk_[0]);
    for (std::size_t k = 1; k < dims_.size(); ++k) row *= static_cast<std::size_t>(grid_[k] * chunk_[k]);
    return row;
  }
  /// The axes after this one are whole in every chunk: a run of a chunk's elements spans them.
  std::size_t merge_axis() const { return merge_axis_; }
  std::int64_t chunk_rows() const { return chunk_[0]; }
  std::int64_t stride0() const { return strides_[0]; }

  /// The chunk's first element on every axis.
  void origin_of(std::uint64_t index, std::vector<std::int64_t>& origin) const {
    for (std::size_t k = dims_.size(); k-- > 0;) {
      origin[k] = static_cast<std::int64_t>(index % static_cast<std::uint64_t>(grid_[k])) * chunk_[k];
      index /= static_cast<std::uint64_t>(grid_[k]);
    }
  }
  /// The chunk's extent inside the array on every axis (less than a chunk at an edge).
  void extent_of(const std::vector<std::int64_t>& origin, std::vector<std::int64_t>& extent) const {
    for (std::size_t k = 0; k < dims_.size(); ++k) extent[k] = std::min(chunk_[k], dims_[k] - origin[k]);
  }
  /// True for a chunk cut by the array's edge: its file holds elements past it.
  bool partial(const std::vector<std::int64_t>& extent) const {
    for (std::size_t k = 0; k < extent.size(); ++k)
      if (extent[k] < chunk_[k]) return true;
    return false;
  }
  /// The chunk's first and last elements in the array's memory order.
  std::pair<std::int64_t, std::int64_t> span_of(const std::vector<std::int64_t>& origin) const {
    std::int64_t first = 0, last = 0;
    for (std::size_t k = 0; k < dims_.size(); ++k) {
      first += origin[k] * strides_[k];
      last += (std::min(origin[k] + chunk_[k], dims_[k]) - 1) * strides_[k];
    }
    return {first, last};
  }

  /// The chunk's file name: its grid position in the array's own axis order.
  std::string key_of(std::uint64_t index) const {
    if (shape_.empty()) return "0";
    std::vector<std::int64_t> at(dims_.size());
    for (std::size_t k = dims_.size(); k-- > 0;) {
      at[k] = static_cast<std::int64_t>(index % static_cast<std::uint64_t>(grid_[k]));
      index /= static_cast<std::uint64_t>(grid_[k]);
    }
    if (order_ == Order::fortran) std::reverse(at.begin(), at.end());
    return chunk_key(at, separator_);
  }

  /// The chunks (grid indices, ascending, each once) holding elements of [begin, end):
  /// the run cut into boxes, a partial first slab, whole slabs, a partial last slab,
  /// recursively.
  void chunks_of_run(std::int64_t begin, std::int64_t end, std::vector<std::uint64_t>& out) const {
    out.clear();
    std::vector<std::int64_t> lo(dims_.size()), hi(dims_.size());
    boxes(0, lo, hi, begin, end, out);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }

  /// fn(position in [begin, end), position in the chunk, count) for each run of the
  /// chunk's elements (at `origin`, `extent`) in [begin, end).
  template <class Fn>
  void for_each_segment(const std::vector<std::int64_t>& origin, const std::vector<std::int64_t>& extent,
                        std::int64_t begin, std::int64_t end, Fn&& fn) const {
    chunk_walk::for_each_segment(origin, extent, strides_, chunk_strides_, merge_axis_, begin, end, fn);
  }

 private:
  // lo/hi: the box's first and last index on the axes before `axis` (fixed by the caller).
  void boxes(std::size_t axis, std::vector<std::int64_t>& lo, std::vector<std::int64_t>& hi, std::int64_t begin,
             std::int64_t end, std::vector<std::uint64_t>& out) const {
    if (begin >= end) return;
    const std::int64_t inner = strides_[axis];
    auto whole = [&](std::int64_t from, std::int64_t to) {  // slabs [from, to) of `axis`, complete
      lo[axis] = from;
      hi[axis] = to - 1;
      for (std::size_t k = axis + 1; k < dims_.size(); ++k) {
        lo[k] = 0;
        hi[k] = dims_[k] - 1;
      }
      add_box(lo, hi, out);
    };
    auto partial = [&](std::int64_t slab, std::int64_t from, std::int64_t to) {
      lo[axis] = hi[axis] = slab;
      boxes(axis + 1, lo, hi, from, to, out);
    };
    if (inner == 1) return whole(begin, end);
    const std::int64_t first = begin / inner, last = end / inner;
    if (first == last) return partial(first, begin - first * inner, end - first * inner);
    std::int64_t whole_from = first;
    if (begin % inner != 0) {
      partial(first, begin % inner, inner);
      whole_from = first + 1;
    }
    if (last > whole_from) whole(whole_from, last);
    if (end % inner != 0) partial(last, 0, end % inner);
  }
  void add_box(const std::vector<std::int64_t>& lo, const std::vector<std::int64_t>& hi,
               std::vector<std::uint64_t>& out) const {
    const std::size_t n = dims_.size();
    std::vector<std::int64_t> from(n), to(n), at(n);
    for (std::size_t k = 0; k < n; ++k) {
      from[k] = lo[k] / chunk_[k];
      to[k] = hi[k] / chunk_[k];
    }
    at = from;
    while (true) {
      std::uint64_t index = 0;
      for (std::size_t k = 0; k < n; ++k) index = index * static_cast<std::uint64_t>(grid_[k]) + static_cast<std::uint64_t>(at[k]);
      out.push_back(index);
      std::size_t k = n;
      while (k-- > 0) {
        if (at[k] < to[k]) {
          ++at[k];
          break;
        }
        at[k] = from[k];
      }
      if (k == static_cast<std::size_t>(-1)) return;
    }
  }

  Shape shape_;
  Order order_;
  char separator_;
  std::vector<std::int64_t> dims_, chunk_, grid_, strides_, chunk_strides_;
  std::size_t chunk_elements_ = 1;
  std::size_t merge_axis_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace ooc::zarr
