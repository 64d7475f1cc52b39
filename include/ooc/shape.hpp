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
/// negative or the product overflows int64.
std::optional<std::int64_t> element_count(const Shape& shape);

/// "(3, 4)" / "(3,)" / "()": numpy's repr of a shape tuple.
std::string shape_repr(const Shape& shape);

}  // namespace ooc
