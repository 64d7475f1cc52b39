#include "ooc/scalar.hpp"

#include "ooc/error.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace ooc {
namespace {

// numpy's str of a float scalar: the shortest digits that read back to the same value
// of its dtype, laid out positionally when the value is 0 or 1e-4 <= |x| < 1e16
// ("100000.0", "0.0001") and in scientific notation otherwise ("1e+16", "1.5e-05").
// numpy tests the value, not the digits: float32(1e-4) is just below 1e-4 -> "1e-04".
std::string numpy_layout(const std::string& scientific, double value) {
  // scientific is to_chars output: "-d.ddde+XX" or "-de-XX"
  const std::size_t e = scientific.find('e');
  const bool negative = scientific[0] == '-';
  std::string digits;
  for (std::size_t i = negative ? 1 : 0; i < e; ++i)
    if (scientific[i] != '.') digits += scientific[i];
  const int exponent = std::atoi(scientific.c_str() + e + 1);
  const double magnitude = std::fabs(value);
  if (magnitude != 0 && (magnitude < 1e-4 || magnitude >= 1e16)) return scientific;
  std::string out = negative ? "-" : "";
  if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
    out += digits + std::string(static_cast<std::size_t>(exponent) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(exponent) + 1) + "." +
           digits.substr(static_cast<std::size_t>(exponent) + 1);
  }
  return out;
}

template <class F>
std::string shortest_scientific(F value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  return std::string(buf, end);
}

std::string shortest_half_scientific(double value) {
  // Fewest significant digits that still round to the same half.
  const half target(static_cast<float>(value));
  char buf[64];
  for (int precision = 0; precision < 5; ++precision) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(value),
                                   std::chars_format::scientific, precision);
    const std::string text(buf, end);
    if (half(std::strtof(text.c_str(), nullptr)) == target) return text;
  }
  return shortest_scientific(static_cast<float>(value));
}

}  // namespace

std::string format_float(double value, int itemsize) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (itemsize == 2) return numpy_layout(shortest_half_scientific(value), value);
  if (itemsize == 4) return numpy_layout(shortest_scientific(static_cast<float>(value)), value);
  return numpy_layout(shortest_scientific(value), value);
}

double Scalar::as_double() const {
  switch (dtype_.kind()) {
    case Kind::floating: return d_;
    case Kind::signed_int: return static_cast<double>(i_);
    default: return static_cast<double>(u_);
  }
}

std::string Scalar::to_json() const {
  switch (dtype_.kind()) {
    case Kind::boolean: return u_ ? "true" : "false";
    case Kind::signed_int: return std::to_string(i_);
    case Kind::unsigned_int: return std::to_string(u_);
    case Kind::floating: default:
      // JSON has no number for these: strings, which Python's float() reads back.
      if (std::isnan(d_)) return "\"NaN\"";
      if (std::isinf(d_)) return d_ > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      return format_float(d_, dtype_.itemsize());
  }
}

std::string Scalar::to_string() const {
  switch (dtype_.kind()) {
    case Kind::boolean: return u_ ? "True" : "False";
    case Kind::floating: return format_float(d_, dtype_.itemsize());
    default: return to_json();
  }
}

void Scalar::throw_inexact(const char* type) const {
  throw Error("the " + dtype_.name() + " value " + to_string() + " does not fit a C++ " + type +
                      " exactly (Scalar::as<T>() converts without this check)");
}

}  // namespace ooc
