#pragma once
/// Elementwise operations with a constant, named as on the command line ("add-one",
/// "add:2.5", "scale:0.5"), with numpy 1.24's result dtypes for `array OP python_scalar`.

#include "ooc/dtype.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ooc::kernels {

/// A constant as Python reads it: an int (any value int64 or uint64 can hold) or a float.
struct PyScalar {
  bool is_integer = true;
  bool negative = false;      // for integers: the value is `int_value`, else `uint_value`
  std::int64_t int_value = 0;
  std::uint64_t uint_value = 0;
  double float_value = 0;

  /// Parses "1", "-3", "2.5", "1e-3", "inf", "nan"; throws std::invalid_argument.
  static PyScalar parse(std::string_view text);
  double as_double() const;
  /// The constant in element type T, converted as numpy converts a Python scalar to a
  /// ufunc's loop type (integers cast, floats rounded once).
  template <class T> T as() const {
    if constexpr (std::is_integral_v<T>) {
      return negative ? static_cast<T>(int_value) : static_cast<T>(uint_value);
    } else {
      const double value = as_double();
      T out;
      convert(dtype_of<double>, &value, dtype_of<T>, &out, 1);
      return out;
    }
  }
};

/// numpy.result_type(array_of(dtype), scalar) under numpy 1.24's value-based casting.
DType result_type(DType array, const PyScalar& scalar);

/// One elementwise operation: add:C, scale:C, add-one.
class ElementwiseOp {
 public:
  enum class Code { add, multiply };

  /// Parses an operation name; throws ooc::UsageError naming it if unknown or malformed.
  static ElementwiseOp parse(std::string_view spec);

  const std::string& spec() const { return spec_; }
  /// The dtype numpy gives `a OP C` for an array of `input` (native byte order).
  DType result_dtype(DType input) const;
  /// out = in OP C, computed in result_dtype(in.dtype()) and stored in out's dtype,
  /// which must be reachable by numpy's same_kind casting (so in place works exactly
  /// when numpy's `a += C` does). `out` may be `in` when mapped read-write.
  void apply(const MappedArray& in, MappedArray& out, const PipelineOptions& options = {}) const;

 private:
  std::string spec_;
  Code code_ = Code::add;
  PyScalar constant_;
};

}  // namespace ooc::kernels
