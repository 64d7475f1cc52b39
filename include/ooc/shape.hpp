#pragma once
/// Shapes and memory order.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ooc {

using Shape = std::vector<std::int64_t>;

/// C (row-major) or Fortran (column-major) memory order, as numpy's fortran_order.
enum class Order : std::uint8_t { c, fortran };

/// Number of elements of a shape (1 for a 0-d array), or nullopt if a dimension is
/// negative or the product of the nonzero dimensions overflows int64 (numpy refuses such
/// a shape even when another dimension is 0, so (0, 2**62, 4) has no count either).
std::optional<std::int64_t> element_count(const Shape& shape);

/// Bytes of an array of `shape` whose elements take `itemsize` bytes, or nullopt where
/// numpy refuses the shape ("array is too big"): a dimension is negative, or the product
/// of the nonzero dimensions and the itemsize exceeds int64 (NPY_MAX_INTP), whether or
/// not another dimension is 0. Every shape made of a subset of the dimensions of a shape
/// that passes (an axis reduction's result) then passes too, with the same itemsize.
std::optional<std::int64_t> byte_count(const Shape& shape, std::int64_t itemsize);

/// Elements between neighbours along each axis of an array of `shape` laid out in `order`:
/// numpy's strides divided by the itemsize (the last axis 1 in C order, the first in
/// Fortran order). An extent of 0 counts as 1, as in numpy's own strides.
Shape element_strides(const Shape& shape, Order order);

/// "(3, 4)" / "(3,)" / "()": numpy's repr of a shape tuple.
std::string shape_repr(const Shape& shape);

}  // namespace ooc
