#pragma once
/// A single value of a numpy dtype: what a full reduction returns.

#include "ooc/dtype.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <string>

namespace ooc {

class Scalar {
 public:
  template <class T>
  static Scalar of(T value) {
    Scalar s(dtype_of<T>);
    if constexpr (std::is_same_v<T, bool>) s.u_ = value ? 1 : 0;
    else if constexpr (is_floating_v<T>) s.d_ = static_cast<double>(value);
    else if constexpr (std::is_signed_v<T>) s.i_ = value;
    else s.u_ = value;
    return s;
  }

  /// numpy dtype of the value (always native order).
  DType dtype() const { return dtype_; }

  /// The value converted to double (exact for floats and for integers below 2^53).
  double as_double() const;
  /// The value as T, converted as numpy's astype would for in-range values.
  template <class T> T as() const {
    switch (dtype_.kind()) {
      case Kind::floating: return static_cast<T>(d_);
      case Kind::signed_int: return static_cast<T>(i_);
      default: return static_cast<T>(u_);
    }
  }

  /// The value as the C++ number type T, checked: throws ooc::Error when T cannot hold
  /// it exactly (a fraction or an out-of-range value for an integer T, an integer beyond
  /// a float T's precision, a float64 that float32 would round). NaN and infinities go
  /// to any floating T. `double total = ooc::reduce(a, ooc::kernels::Sum{}).value<double>();`
  /// (as<T>() converts unchecked, as numpy's astype does.)
  template <class T>
    requires std::is_arithmetic_v<T>
  T value() const {
    if (!holds_exactly<T>()) throw_inexact(cpp_type_name<T>());
    return as<T>();
  }

  /// JSON text (RFC 8259, which has no NaN or Infinity): exact integers, true/false,
  /// shortest round-trip floats, and the strings "NaN", "Infinity", "-Infinity" for the
  /// non-finite floats (Python's float() reads them back).
  std::string to_json() const;
  /// Text as numpy prints the scalar (str()): "3", "2.5", "nan", "True".
  std::string to_string() const;

 private:
  explicit Scalar(DType dtype) : dtype_(dtype) {}

  template <class T>
  bool holds_exactly() const {
    // long double holds every int64 and uint64 exactly: comparisons there are exact.
    auto fits = [](long double v) {
      if constexpr (std::is_same_v<T, bool>) return v == 0 || v == 1;
      else if constexpr (std::is_integral_v<T>)
        return v == std::trunc(v) && v >= static_cast<long double>(std::numeric_limits<T>::lowest()) &&
               v <= static_cast<long double>(std::numeric_limits<T>::max());
      else return std::isnan(v) || static_cast<long double>(static_cast<T>(v)) == v;
    };
    switch (dtype_.kind()) {
      case Kind::floating: return fits(static_cast<long double>(d_));
      case Kind::signed_int: return fits(static_cast<long double>(i_));
      default: return fits(static_cast<long double>(u_));
    }
  }
  template <class T>
  static const char* cpp_type_name() {
    if constexpr (std::is_same_v<T, bool>) return "bool";
    else if constexpr (std::is_floating_point_v<T>) return sizeof(T) == 4 ? "float" : sizeof(T) == 8 ? "double" : "long double";
    else if constexpr (std::is_signed_v<T>) return sizeof(T) == 1 ? "int8" : sizeof(T) == 2 ? "int16" : sizeof(T) == 4 ? "int32" : "int64";
    else return sizeof(T) == 1 ? "uint8" : sizeof(T) == 2 ? "uint16" : sizeof(T) == 4 ? "uint32" : "uint64";
  }
  /// Throws ooc::Error: "the float64 value 3.5 does not fit a C++ int32 exactly".
  [[noreturn]] void throw_inexact(const char* type) const;
  DType dtype_;
  union {
    std::int64_t i_;
    std::uint64_t u_;
    double d_;
  };
};

/// Shortest text that reads back as the same value of a float of itemsize bytes
/// (2, 4 or 8), in Python's style ("1.0", "1e+20", "nan", "inf").
std::string format_float(double value, int itemsize);

}  // namespace ooc
