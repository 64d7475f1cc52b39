#pragma once
/// A single value of a numpy dtype: what a full reduction returns.

#include "ooc/dtype.hpp"

#include <cstdint>
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

  /// JSON text (RFC 8259, which has no NaN or Infinity): exact integers, true/false,
  /// shortest round-trip floats, and the strings "NaN", "Infinity", "-Infinity" for the
  /// non-finite floats (Python's float() reads them back).
  std::string to_json() const;
  /// Text as numpy prints the scalar (str()): "3", "2.5", "nan", "True".
  std::string to_string() const;

 private:
  explicit Scalar(DType dtype) : dtype_(dtype) {}
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
