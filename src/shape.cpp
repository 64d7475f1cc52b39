#include "ooc/shape.hpp"

namespace ooc {

std::optional<std::int64_t> element_count(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(count, dim, &count)) return std::nullopt;
  }
  return count;
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
