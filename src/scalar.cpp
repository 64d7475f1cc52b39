#include "ooc/scalar.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace ooc {
namespace {

// Python's repr marks a float that looks integral with ".0"; to_chars does not.
std::string pythonize(std::string text) {
  if (text.find_first_of(".eninf") == std::string::npos) text += ".0";
  return text;
}

std::string shortest_half(double value) {
  // Fewest significant digits that still round to the same half.
  const half target(static_cast<float>(value));
  char buf[32];
  for (int precision = 1; precision <= 5; ++precision) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(value),
                                   std::chars_format::general, precision);
    const std::string text(buf, end);
    if (half(std::strtof(text.c_str(), nullptr)) == target) return text;
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(value));
  return std::string(buf, end);
}

}  // namespace

std::string format_float(double value, int itemsize) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  std::string text;
  if (itemsize == 2) {
    text = shortest_half(value);
  } else if (itemsize == 4) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(value));
    text.assign(buf, end);
  } else {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    text.assign(buf, end);
  }
  return pythonize(std::move(text));
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
      if (std::isnan(d_)) return "NaN";
      if (std::isinf(d_)) return d_ > 0 ? "Infinity" : "-Infinity";
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

}  // namespace ooc
