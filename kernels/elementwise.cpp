#include "ooc/kernels/elementwise.hpp"

#include "ooc/error.hpp"
#include "ooc/kernel.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace ooc::kernels {
namespace {

// numpy's min_scalar_type, and whether a non-negative integer would also fit the
// signed type of the same size ("small unsigned", which numpy then treats as signed
// when the array is signed or float).
struct MinScalar {
  DType dtype;
  bool small_unsigned = false;
};

MinScalar min_scalar_type(const PyScalar& s) {
  if (!s.is_integer) {
    const double v = s.float_value;
    if (!std::isfinite(v) || (v > -65000.0 && v < 65000.0)) return {DType(Kind::floating, 2)};
    if (v > -3.4e38 && v < 3.4e38) return {DType(Kind::floating, 4)};
    return {DType(Kind::floating, 8)};
  }
  if (s.negative) {
    const std::int64_t v = s.int_value;
    for (int size : {1, 2, 4}) {
      const std::int64_t low = -(std::int64_t{1} << (8 * size - 1));
      if (v >= low) return {DType(Kind::signed_int, size)};
    }
    return {DType(Kind::signed_int, 8)};
  }
  const std::uint64_t v = s.uint_value;
  for (int size : {1, 2, 4, 8}) {
    const std::uint64_t high = size == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * size)) - 1;
    if (v <= high) return {DType(Kind::unsigned_int, size), v <= (high >> 1)};
  }
  return {DType(Kind::unsigned_int, 8)};
}

int category(Kind kind) {
  switch (kind) {
    case Kind::boolean: return 0;
    case Kind::floating: return 2;
    default: return 1;
  }
}

}  // namespace

PyScalar PyScalar::parse(std::string_view text) {
  PyScalar s;
  const std::string str(text);
  if (str.empty()) throw std::invalid_argument("empty constant");
  std::size_t digits_from = (str[0] == '-' || str[0] == '+') ? 1 : 0;
  const bool integer = str.size() > digits_from &&
                       str.find_first_not_of("0123456789", digits_from) == std::string::npos;
  if (integer) {
    s.is_integer = true;
    s.negative = str[0] == '-';
    errno = 0;
    char* end = nullptr;
    if (s.negative) {
      s.int_value = std::strtoll(str.c_str(), &end, 10);
      if (errno == ERANGE) throw std::invalid_argument("constant " + str + " is below int64's range");
      if (s.int_value == 0) s.negative = false;  // "-0" is the integer 0
    } else {
      s.uint_value = std::strtoull(str.c_str() + digits_from, &end, 10);
      if (errno == ERANGE) throw std::invalid_argument("constant " + str + " is above uint64's range");
    }
    return s;
  }
  if (str.find_first_of("xXpP") != std::string::npos)
    throw std::invalid_argument("'" + str + "' is not a number");
  char* end = nullptr;
  s.is_integer = false;
  s.float_value = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size()) throw std::invalid_argument("'" + str + "' is not a number");
  return s;
}

double PyScalar::as_double() const {
  if (!is_integer) return float_value;
  return negative ? static_cast<double>(int_value) : static_cast<double>(uint_value);
}

DType result_type(DType array, const PyScalar& scalar) {
  const int array_category = category(array.kind());
  const int scalar_category = scalar.is_integer ? 1 : 2;
  if (scalar_category > array_category) {
    // A scalar of a higher category keeps its default dtype: float64, or int64 for an
    // int (uint64 when it is too large for int64, as numpy's conversion of a Python int).
    if (!scalar.is_integer) return promote_types(array, DType(Kind::floating, 8));
    const bool fits_int64 = scalar.negative || scalar.uint_value <= static_cast<std::uint64_t>(INT64_MAX);
    return promote_types(array, DType(fits_int64 ? Kind::signed_int : Kind::unsigned_int, 8));
  }
  MinScalar m = min_scalar_type(scalar);
  if (m.small_unsigned && (array.kind() == Kind::signed_int || array.kind() == Kind::floating))
    m.dtype = DType(Kind::signed_int, m.dtype.itemsize());
  return promote_types(array, m.dtype);
}

ElementwiseOp ElementwiseOp::parse(std::string_view spec) {
  ElementwiseOp op;
  op.spec_ = std::string(spec);
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const std::string_view argument = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  auto need_constant = [&] {
    if (colon == std::string_view::npos)
      throw UsageError("", "operation '" + op.spec_ + "' needs a constant, as in " + std::string(name) + ":2");
    try {
      op.constant_ = PyScalar::parse(argument);
    } catch (const std::invalid_argument& e) {
      throw UsageError("", "operation '" + op.spec_ + "': " + e.what());
    }
  };
  if (name == "add-one" && colon == std::string_view::npos) {
    op.code_ = Code::add;
    op.constant_ = PyScalar::parse("1");
  } else if (name == "add") {
    op.code_ = Code::add;
    need_constant();
  } else if (name == "scale") {
    op.code_ = Code::multiply;
    need_constant();
  } else {
    throw UsageError("", "unknown operation '" + op.spec_ + "' (known: add-one, add:C, scale:C)");
  }
  return op;
}

DType ElementwiseOp::result_dtype(DType input) const { return result_type(input, constant_); }

void ElementwiseOp::apply(const MappedArray& in, MappedArray& out, const PipelineOptions& options) const {
  const DType compute = result_dtype(in.dtype());
  if (!can_cast_same_kind(compute, out.dtype()))
    throw UsageError(out.path(), "cannot store the " + compute.name() + " result of " + spec_ + " in a " +
                                     out.dtype().name() + " array (numpy's same_kind rule)");
  visit_dtype(compute, [&]<class C>(std::type_identity<C>) {
    if constexpr (std::is_same_v<C, bool>) {
      throw UsageError(in.path(), spec_ + " has no boolean result");  // numpy promotes bool first
    } else {
      const C c = constant_.template as<C>();
      switch (code_) {
        case Code::add:
          transform_as<C>(in, out, [c](const auto& x) { return x + c; }, options);
          break;
        case Code::multiply:
          transform_as<C>(in, out, [c](const auto& x) { return x * c; }, options);
          break;
      }
    }
  });
}

}  // namespace ooc::kernels
