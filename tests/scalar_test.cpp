// Tests for include/ooc/scalar.hpp and src/scalar.cpp: what a full reduction hands back,
// and how it is printed as JSON and as numpy prints it.
//
// Expected texts come from numpy 1.24.2 (Debian's python3-numpy), e.g.
//   /usr/bin/python3 -c 'import numpy as np, json
//   for t in (np.float64, np.float32, np.float16): print(str(t(v)), json.dumps(float(t(v))))'

#include "ooc/scalar.hpp"
#include "ooc/error.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace {

using ooc::format_float;
using ooc::half;
using ooc::Scalar;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

// ---- integers and bools --------------------------------------------------------------

TEST_CASE("an integer scalar prints as its exact decimal value in JSON and in text") {
  CHECK(Scalar::of<std::int32_t>(0).to_json() == "0");
  CHECK(Scalar::of<std::int32_t>(-17).to_json() == "-17");
  CHECK(Scalar::of<std::uint8_t>(255).to_string() == "255");
  CHECK(Scalar::of<std::int8_t>(-128).to_string() == "-128");
}

TEST_CASE("the most negative int64 prints exactly") {
  // numpy: str(np.int64(-2**63)) == '-9223372036854775808'
  const Scalar s = Scalar::of(std::numeric_limits<std::int64_t>::min());
  CHECK(s.to_json() == "-9223372036854775808");
  CHECK(s.to_string() == "-9223372036854775808");
}

TEST_CASE("the largest uint64 prints exactly, not through a double") {
  // numpy: str(np.uint64(2**64-1)) == '18446744073709551615'
  const Scalar s = Scalar::of(std::numeric_limits<std::uint64_t>::max());
  CHECK(s.to_json() == "18446744073709551615");
  CHECK(s.to_string() == "18446744073709551615");
}

TEST_CASE("a bool scalar is true/false in JSON and True/False in text") {
  // numpy: str(np.bool_(True)) == 'True'
  CHECK(Scalar::of(true).to_json() == "true");
  CHECK(Scalar::of(false).to_json() == "false");
  CHECK(Scalar::of(true).to_string() == "True");
  CHECK(Scalar::of(false).to_string() == "False");
}

TEST_CASE("a scalar's dtype is the native dtype of the C++ type it was made from") {
  CHECK(Scalar::of(true).dtype() == ooc::dtype_of<bool>);
  CHECK(Scalar::of(std::int16_t{3}).dtype() == ooc::dtype_of<std::int16_t>);
  CHECK(Scalar::of(std::uint64_t{3}).dtype() == ooc::dtype_of<std::uint64_t>);
  CHECK(Scalar::of(half(1.0f)).dtype() == ooc::dtype_of<half>);
  CHECK(Scalar::of(1.0f).dtype() == ooc::dtype_of<float>);
  CHECK(Scalar::of(1.0).dtype() == ooc::dtype_of<double>);
}

TEST_CASE("as_double and as<T> give the value back") {
  CHECK(Scalar::of(std::int64_t{-5}).as_double() == -5.0);
  CHECK(Scalar::of(std::uint64_t{1} << 53).as_double() == 9007199254740992.0);
  CHECK(Scalar::of(true).as_double() == 1.0);
  CHECK(Scalar::of(half(0.5f)).as_double() == 0.5);
  CHECK(Scalar::of(2.75).as<std::int32_t>() == 2);
  CHECK(Scalar::of(std::int64_t{-1}).as<std::int64_t>() == -1);
  CHECK(Scalar::of(std::numeric_limits<std::uint64_t>::max()).as<std::uint64_t>() ==
        std::numeric_limits<std::uint64_t>::max());
}

// ---- floats: numpy's text -------------------------------------------------------------

TEST_CASE("a float64 prints as the shortest text that reads back, with numpy's spelling") {
  // numpy: str(np.float64(v)) for each v
  CHECK(Scalar::of(0.1).to_string() == "0.1");
  CHECK(Scalar::of(1.0).to_string() == "1.0");
  CHECK(Scalar::of(2.5).to_string() == "2.5");
  CHECK(Scalar::of(-0.0).to_string() == "-0.0");
  CHECK(Scalar::of(100.0).to_string() == "100.0");
  CHECK(Scalar::of(1000.0).to_string() == "1000.0");
  CHECK(Scalar::of(65504.0).to_string() == "65504.0");
  CHECK(Scalar::of(1.0 / 3.0).to_string() == "0.3333333333333333");
  CHECK(Scalar::of(3.14159).to_string() == "3.14159");
}

TEST_CASE("a very large or very small float64 prints in scientific notation as numpy does") {
  CHECK(Scalar::of(1e20).to_string() == "1e+20");
  CHECK(Scalar::of(1e16).to_string() == "1e+16");
  CHECK(Scalar::of(1e-5).to_string() == "1e-05");
  CHECK(Scalar::of(1e-7).to_string() == "1e-07");
  CHECK(Scalar::of(5e-324).to_string() == "5e-324");
}

// std::to_chars picks fixed or scientific by length; numpy picks by the value's size.
TEST_CASE("a float64 between 1e-4 and 1e16 prints positionally and others in scientific, as numpy") {
  CHECK(Scalar::of(100000.0).to_string() == "100000.0");
  CHECK(Scalar::of(1e15).to_string() == "1000000000000000.0");
  CHECK(Scalar::of(0.0001).to_string() == "0.0001");
  CHECK(Scalar::of(1.2345678901234568e+17).to_string() == "1.2345678901234568e+17");
}

TEST_CASE("a float32 prints as the shortest text that reads back as the same float32") {
  // numpy: str(np.float32(v))
  CHECK(Scalar::of(0.1f).to_string() == "0.1");
  CHECK(Scalar::of(1.0f).to_string() == "1.0");
  CHECK(Scalar::of(-0.0f).to_string() == "-0.0");
  CHECK(Scalar::of(1.0f / 3.0f).to_string() == "0.33333334");
  CHECK(Scalar::of(3.14159f).to_string() == "3.14159");
  CHECK(Scalar::of(1e20f).to_string() == "1e+20");
  CHECK(Scalar::of(1.2345678901234568e+17f).to_string() == "1.2345679e+17");
  CHECK(Scalar::of(1e-5f).to_string() == "1e-05");
  CHECK(Scalar::of(0.0001f).to_string() == "1e-04");  // float32(1e-4) is just below 1e-4
}

TEST_CASE("a float32 between 1e-4 and 1e16 prints positionally, as numpy") {
  CHECK(Scalar::of(100000.0f).to_string() == "100000.0");
  CHECK(Scalar::of(1e15f).to_string() == "1000000000000000.0");
}

TEST_CASE("a float16 prints as the shortest text that reads back as the same float16") {
  // numpy: str(np.float16(v))
  CHECK(Scalar::of(half(0.1f)).to_string() == "0.1");
  CHECK(Scalar::of(half(1.0f)).to_string() == "1.0");
  CHECK(Scalar::of(half(2.5f)).to_string() == "2.5");
  CHECK(Scalar::of(half(-0.0f)).to_string() == "-0.0");
  CHECK(Scalar::of(half(1.0f / 3.0f)).to_string() == "0.3333");
  CHECK(Scalar::of(half(3.14159f)).to_string() == "3.14");
  CHECK(Scalar::of(half(0.0001f)).to_string() == "0.0001");
  CHECK(Scalar::of(half(1e-5f)).to_string() == "1e-05");
  CHECK(Scalar::of(half(1e-7f)).to_string() == "1e-07");
}

// printf's %g would switch to scientific here ("1e+02", "6.55e+04"); numpy does not.
TEST_CASE("a float16 of 100 or more prints positionally, as numpy") {
  CHECK(Scalar::of(half(100.0f)).to_string() == "100.0");
  CHECK(Scalar::of(half(1000.0f)).to_string() == "1000.0");
  CHECK(Scalar::of(half(2048.0f)).to_string() == "2048.0");
  CHECK(Scalar::of(half(65504.0f)).to_string() == "65500.0");
}

TEST_CASE("NaN and infinities print as numpy prints them") {
  for (int itemsize : {2, 4, 8}) {
    CAPTURE(itemsize);
    CHECK(format_float(kNaN, itemsize) == "nan");
    CHECK(format_float(-kNaN, itemsize) == "nan");
    CHECK(format_float(kInf, itemsize) == "inf");
    CHECK(format_float(-kInf, itemsize) == "-inf");
  }
  CHECK(Scalar::of(kNaN).to_string() == "nan");
  CHECK(Scalar::of(-kInf).to_string() == "-inf");
  CHECK(Scalar::of(std::numeric_limits<float>::infinity()).to_string() == "inf");
  CHECK(Scalar::of(half(std::nanf(""))).to_string() == "nan");
}

TEST_CASE("format_float rounds to the float of the given size before printing") {
  CHECK(format_float(0.1, 8) == "0.1");
  CHECK(format_float(0.1, 4) == "0.1");
  CHECK(format_float(static_cast<double>(0.1f), 8) == "0.10000000149011612");
  CHECK(format_float(static_cast<double>(0.1f), 4) == "0.1");
  CHECK(format_float(static_cast<double>(half(0.1f)), 8) == "0.0999755859375");
  CHECK(format_float(static_cast<double>(half(0.1f)), 2) == "0.1");
}

TEST_CASE("format_float marks an integral value as a float with '.0'") {
  CHECK(format_float(0.0, 8) == "0.0");
  CHECK(format_float(-3.0, 8) == "-3.0");
  CHECK(format_float(42.0, 4) == "42.0");
  CHECK(format_float(7.0, 2) == "7.0");
}

// ---- floats: JSON ---------------------------------------------------------------------

TEST_CASE("a float scalar's JSON reads back as the same value") {
  for (double v : {0.1, 1.0, -2.5, 1e20, 5e-324, 1e-5, 1.0 / 3.0, 1.7976931348623157e308,
                   100000.0, 0.0001, 1.2345678901234568e+17}) {
    CAPTURE(v);
    const std::string json = Scalar::of(v).to_json();
    CHECK(std::strtod(json.c_str(), nullptr) == v);
  }
  for (float v : {0.1f, 1.0f / 3.0f, 1e20f, 1e-45f, 3.4028235e38f}) {
    CAPTURE(v);
    const std::string json = Scalar::of(v).to_json();
    CHECK(std::strtof(json.c_str(), nullptr) == v);
  }
  for (float v : {0.1f, 1.0f / 3.0f, 65504.0f, 6e-8f, 100.0f}) {
    CAPTURE(v);
    const half h(v);
    const std::string json = Scalar::of(h).to_json();
    CHECK(half(std::strtof(json.c_str(), nullptr)) == h);
  }
}

TEST_CASE("a float scalar's JSON matches Python's json for everyday values") {
  // Python: json.dumps(v)
  CHECK(Scalar::of(0.1).to_json() == "0.1");
  CHECK(Scalar::of(1.0).to_json() == "1.0");
  CHECK(Scalar::of(-2.5).to_json() == "-2.5");
  CHECK(Scalar::of(1e20).to_json() == "1e+20");
  CHECK(Scalar::of(5e-324).to_json() == "5e-324");
  CHECK(Scalar::of(-0.0).to_json() == "-0.0");
}

TEST_CASE("a float32 scalar's JSON is its own shortest text, not its double's") {
  CHECK(Scalar::of(0.1f).to_json() == "0.1");
  CHECK(Scalar::of(half(0.1f)).to_json() == "0.1");
}

TEST_CASE("NaN and infinities are the JSON strings \"NaN\", \"Infinity\", \"-Infinity\"") {
  // RFC 8259 has no number for them (bare NaN, which Python's json writes, is refused by
  // jq and strict parsers); Python's float() reads each string back.
  CHECK(Scalar::of(kNaN).to_json() == "\"NaN\"");
  CHECK(Scalar::of(-kNaN).to_json() == "\"NaN\"");
  CHECK(Scalar::of(kInf).to_json() == "\"Infinity\"");
  CHECK(Scalar::of(-kInf).to_json() == "\"-Infinity\"");
  CHECK(Scalar::of(std::numeric_limits<float>::quiet_NaN()).to_json() == "\"NaN\"");
  CHECK(Scalar::of(-std::numeric_limits<float>::infinity()).to_json() == "\"-Infinity\"");
  CHECK(Scalar::of(half(std::numeric_limits<float>::infinity())).to_json() == "\"Infinity\"");
}

TEST_CASE("value<T>() gives the number when T holds it exactly, and throws otherwise") {
  CHECK(Scalar::of(3.0).value<int>() == 3);
  CHECK(Scalar::of(2.5).value<double>() == 2.5);
  CHECK(Scalar::of(0.5).value<float>() == 0.5f);
  CHECK(Scalar::of(std::int64_t{1} << 53).value<double>() == 9007199254740992.0);
  CHECK(std::isnan(Scalar::of(kNaN).value<double>()));
  CHECK(Scalar::of(-kInf).value<float>() == -std::numeric_limits<float>::infinity());
  CHECK(Scalar::of(std::uint64_t{255}).value<std::uint8_t>() == 255);
  CHECK(Scalar::of(true).value<int>() == 1);
  CHECK(Scalar::of(std::int8_t{1}).value<bool>());
  CHECK_THROWS_WITH_AS(Scalar::of(3.5).value<int>(), "the float64 value 3.5 does not fit a C++ int32 exactly "
                                                     "(Scalar::as<T>() converts without this check)", ooc::Error);
  CHECK_THROWS_AS(Scalar::of((std::int64_t{1} << 53) + 1).value<double>(), ooc::Error);
  CHECK_THROWS_AS(Scalar::of(0.1).value<float>(), ooc::Error);
  CHECK_THROWS_AS(Scalar::of(kNaN).value<std::int64_t>(), ooc::Error);
  CHECK_THROWS_AS(Scalar::of(9223372036854775808.0).value<std::int64_t>(), ooc::Error);
  CHECK_THROWS_AS(Scalar::of(std::numeric_limits<std::uint64_t>::max()).value<std::int64_t>(), ooc::Error);
  CHECK_THROWS_AS(Scalar::of(std::int16_t{-1}).value<std::uint32_t>(), ooc::Error);
  CHECK_THROWS_AS(Scalar::of(2.0).value<bool>(), ooc::Error);
}
