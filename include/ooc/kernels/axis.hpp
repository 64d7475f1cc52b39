#pragma once
/// Axis reductions: where a numpy axis lies in memory, and the shape that is left.
/// ReduceOp::run_axis (reductions.hpp) streams a reduction along one axis.

#include "ooc/shape.hpp"

#include <cstdint>

namespace ooc::kernels {

/// An axis seen in memory: the array is `outer` slabs, each `reduce` rows (one per index
/// along the axis) of `inner` consecutive elements. `inner` is 1 when the axis varies
/// fastest in memory (the last axis in C order, the first in Fortran order).
struct AxisLayout {
  std::int64_t outer = 1;
  std::int64_t reduce = 1;
  std::int64_t inner = 1;
};

/// numpy's normalize_axis_index: -1 is the last axis; out of range is an ooc::UsageError
/// with numpy's AxisError message.
int normalize_axis(int axis, int ndim);
/// The layout of `axis` (already normalised) of an array of this shape and order.
AxisLayout axis_layout(const Shape& shape, Order order, int axis);
/// The shape without `axis`.
Shape drop_axis(const Shape& shape, int axis);

}  // namespace ooc::kernels
