#include "ooc/shape.hpp"

#include <algorithm>

namespace ooc {

std::optional<std::int64_t> byte_count(const Shape& shape, std::int64_t itemsize) {
  // As numpy's PyArray_NewFromDescr: a 0 dimension is skipped, not multiplied in, so it
  // cannot hide an overflow of the others.
  std::int64_t bytes = itemsize;
  bool empty = false;
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (dim == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(bytes, dim, &bytes)) return std::nullopt;
  }
  return empty ? 0 : bytes;
}

std::optional<std::int64_t> element_count(const Shape& shape) { return byte_count(shape, 1); }

Shape element_strides(const Shape& shape, Order order) {
  Shape strides(shape.size(), 1);
  const std::size_t n = shape.size();
  for (std::size_t k = 1; k < n; ++k) {
    if (order == Order::c) strides[n - 1 - k] = strides[n - k] * std::max<std::int64_t>(shape[n - k], 1);
    else strides[k] = strides[k - 1] * std::max<std::int64_t>(shape[k - 1], 1);
  }
  return strides;
}

std::string shape_repr(const Shape& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

}  // namespace ooc
