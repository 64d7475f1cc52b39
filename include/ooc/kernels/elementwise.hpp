#pragma once
/// Elementwise operations as numpy 1.24's ufuncs compute them: the operations named on the
/// command line ("add-one", "add:2.5", "sqrt", "clip:0:1", "cast:int16"), numpy's rules
/// for the dtype a ufunc computes in (its loop type, with value-based casting of Python
/// scalars), and the loops themselves, shared with expression evaluation.

#include "ooc/dtype.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ooc::kernels {

/// A constant as Python reads it: an int (any value int64 or uint64 can hold) or a float.
struct PyScalar {
  bool is_integer = true;
  bool negative = false;      // for integers: the value is `int_value`, else `uint_value`
  std::int64_t int_value = 0;
  std::uint64_t uint_value = 0;
  double float_value = 0;

  /// Parses "1", "-3", "2.5", "1e-3", "inf", "nan"; throws UsageError.
  static PyScalar parse(std::string_view text);
  static PyScalar of_int(std::int64_t value);
  static PyScalar of_uint(std::uint64_t value);
  static PyScalar of_double(double value);
  double as_double() const;
  /// An integer's exact value (int64 and uint64 ranges both fit).
  __int128 as_int128() const { return negative ? static_cast<__int128>(int_value) : static_cast<__int128>(uint_value); }
  /// The dtype numpy gives the Python value: int64 (uint64 above int64's range) or float64.
  DType default_dtype() const;
  /// The constant in element type T, converted as numpy converts a Python scalar to a
  /// ufunc's loop type (integers cast, floats rounded once).
  template <class T> T as() const {
    if constexpr (std::is_same_v<T, bool>) {
      return is_integer ? (negative ? int_value != 0 : uint_value != 0) : float_value != 0;
    } else if constexpr (std::is_integral_v<T>) {
      if (!is_integer) return static_cast<T>(float_value);
      return negative ? static_cast<T>(int_value) : static_cast<T>(uint_value);
    } else {
      const double value = as_double();
      T out;
      convert(dtype_of<double>, &value, dtype_of<T>, &out, 1);
      return out;
    }
  }
};

/// One operand of a ufunc as numpy's type resolution sees it: an array (only its dtype
/// counts) or a scalar (a Python number or a 0-d array, whose value counts).
struct Operand {
  DType dtype{Kind::floating, 8};
  bool scalar = false;
  PyScalar value{};

  static Operand array(DType dtype) { return Operand{dtype.native(), false, {}}; }
  /// A Python int or float literal.
  static Operand python(const PyScalar& value) { return Operand{value.default_dtype(), true, value}; }
  /// A numpy scalar (or 0-d array) of `dtype` holding `value`.
  static Operand numpy_scalar(DType dtype, const PyScalar& value) { return Operand{dtype.native(), true, value}; }
};

/// numpy.result_type(*operands) under numpy 1.24's value-based casting: scalars count by
/// value (min_scalar_type) unless they are of a higher category than every array.
DType result_type(std::span<const Operand> operands);
/// numpy.result_type(array_of(dtype), scalar).
DType result_type(DType array, const PyScalar& scalar);

/// The ufuncs ooc computes, with numpy's names for what they do.
enum class Ufunc {
  add, subtract, multiply, divide, power,                  // binary arithmetic
  maximum, minimum,                                        // np.maximum, np.minimum (NaN propagates)
  less, less_equal, greater, greater_equal, equal, not_equal,  // comparisons (bool result)
  negative, absolute, sqrt, exp, log, log1p, expm1, sin, cos, tanh,  // unary
  clip,                                                    // clip(x, lo, hi)
};

const char* ufunc_name(Ufunc f);
bool is_comparison(Ufunc f);
bool is_unary(Ufunc f);

/// The dtype numpy's ufunc `f` computes in for these operands (its loop type): for sqrt,
/// exp, ... the first of float16/float32/float64 the input casts to safely (so int8 ->
/// float16, int16 -> float32, int32 -> float64); true division of integers in float64;
/// power by numpy's search of its loops (uint8 ** 256 in int16, booleans in int8);
/// otherwise numpy.result_type. Throws UsageError where numpy
/// refuses (negative or subtract of booleans, integers to a negative constant power).
DType loop_dtype(Ufunc f, std::span<const Operand> operands);
/// The dtype of f's result when it computes in `loop`: bool for comparisons, else `loop`.
DType output_dtype(Ufunc f, DType loop);

/// One input of a loop: `count` values of the loop dtype, or one value repeated.
struct LoopInput {
  const void* data = nullptr;
  bool repeated = false;
};

/// out[i] = f(in[0][i], ...) for n elements, computed in `loop` (native dtype) as numpy's
/// loop computes it; `out` holds output_dtype(f, loop). Throws std::domain_error where
/// numpy's loop raises (an integer to a negative power).
void run_loop(Ufunc f, DType loop, std::span<const LoopInput> in, void* out, std::int64_t n);

/// One elementwise operation as `oocrun apply` names it: add:C sub:C mul:C div:C pow:C
/// (np.add, ... np.power with a Python scalar C), neg abs sqrt exp log log1p expm1 sin cos
/// tanh,
/// clip:LO:HI (np.clip), cast:DTYPE (astype), and add-one, scale:C.
class ElementwiseOp {
 public:
  /// Parses an operation name; throws ooc::UsageError naming it if unknown or malformed.
  static ElementwiseOp parse(std::string_view spec);

  const std::string& spec() const { return spec_; }
  /// The dtype numpy gives the operation on an array of `input` (native byte order, except
  /// that cast:DTYPE keeps DTYPE's, as astype does) with
  /// `ndim` dimensions (a 0-d array is a scalar to numpy, so its constant does not count
  /// by value); throws ooc::UsageError where numpy refuses the operation for that dtype.
  DType result_dtype(DType input, int ndim = 1) const;
  /// out = OP(in), computed in numpy's loop dtype and stored in out's dtype, which must
  /// be reachable by numpy's same_kind casting (so in place works exactly when numpy's
  /// `np.OP(a, out=a)` does); cast:DTYPE is stored whatever out's dtype, as numpy's
  /// `a[...] = a.astype(DTYPE)` casts. `out` may be `in` when mapped read-write.
  void apply(const MappedArray& in, MappedArray& out, const PipelineOptions& options = {}) const;

 private:
  std::string spec_;
  bool cast_ = false;      // cast:DTYPE, else the ufunc below
  DType cast_to_{Kind::floating, 8};
  Ufunc ufunc_ = Ufunc::add;
  std::vector<PyScalar> constants_;  // the Python scalars after the array: C, or LO and HI
  bool nan_bound_ = false;           // clip: a bound was NaN (and is now ±inf in constants_)
};

}  // namespace ooc::kernels
