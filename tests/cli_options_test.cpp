// Tests for src/cli/options.hpp and src/cli/options.cpp: the pieces of oocrun's command
// line that are worth testing on their own; and ooc::parse_size (ooc/pipeline.hpp), which
// reads --tile-bytes.

#include "cli/json.hpp"
#include "cli/options.hpp"
#include "ooc/error.hpp"
#include "ooc/pipeline.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace std::string_view_literals;

namespace {

using ooc::cli::json_string;
using ooc::parse_size;
using ooc::cli::rate_text;

constexpr std::uint64_t kKiB = 1ull << 10;
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kTiB = 1ull << 40;

}  // namespace

// ---- parse_size -------------------------------------------------------------------------

TEST_CASE("a plain number is a byte count") {
  CHECK(parse_size("4096") == 4096);
  CHECK(parse_size("1") == 1);
  CHECK(parse_size("0") == 0);
}

TEST_CASE("K, M, G and T are binary multiples") {
  CHECK(parse_size("64K") == 64 * kKiB);
  CHECK(parse_size("64M") == 64 * kMiB);
  CHECK(parse_size("1G") == kGiB);
  CHECK(parse_size("2T") == 2 * kTiB);
}

TEST_CASE("the unit letters may be lower case") {
  CHECK(parse_size("64k") == 64 * kKiB);
  CHECK(parse_size("64m") == 64 * kMiB);
  CHECK(parse_size("1g") == kGiB);
  CHECK(parse_size("2t") == 2 * kTiB);
}

TEST_CASE("a trailing B or iB after the unit changes nothing") {
  CHECK(parse_size("64MiB") == 64 * kMiB);
  CHECK(parse_size("64MB") == 64 * kMiB);
  CHECK(parse_size("4KiB") == 4 * kKiB);
  CHECK(parse_size("1GB") == kGiB);
  CHECK(parse_size("3TiB") == 3 * kTiB);
}

TEST_CASE("a bare B means bytes") {
  CHECK(parse_size("512B") == 512);
}

TEST_CASE("leading zeros are harmless") {
  CHECK(parse_size("0064M") == 64 * kMiB);
}

TEST_CASE("text that is not a size is refused with a hint") {
  for (std::string_view text : {""sv, "M"sv, "12Q"sv, "-1"sv, "+1"sv, " 64M"sv, "64 M"sv, "64M "sv,
                                "1.5G"sv, "0x10"sv, "64MiBB"sv, "64KM"sv, "64P"sv, "64kb"sv}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_size(text), doctest::Contains("is not a size (try 64M or 1G)"),
                         ooc::UsageError);
  }
}

TEST_CASE("the refused text is quoted in the message") {
  CHECK_THROWS_WITH_AS(parse_size("12Q"), "'12Q' is not a size (try 64M or 1G)", ooc::UsageError);
  CHECK_THROWS_WITH_AS(parse_size(""), "'' is not a size (try 64M or 1G)", ooc::UsageError);
}

TEST_CASE("the largest byte count that fits 64 bits is accepted") {
  CHECK(parse_size("18446744073709551615") == std::numeric_limits<std::uint64_t>::max());
  CHECK(parse_size("16777215T") == 16777215ull << 40);
  CHECK(parse_size("17179869183G") == 17179869183ull << 30);
}

TEST_CASE("a size that overflows 64 bits is refused as too large") {
  for (std::string_view text : {"99999999999T"sv, "16777216T"sv, "17179869184G"sv,
                                "18446744073709551616"sv, "99999999999999999999999"sv,
                                "99999999999999999999999M"sv}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_size(text), doctest::Contains("is too large"), ooc::UsageError);
  }
  CHECK_THROWS_WITH_AS(parse_size("99999999999T"), "size '99999999999T' is too large",
                       ooc::UsageError);
}

// ---- json_string --------------------------------------------------------------------------

TEST_CASE("a JSON string is the text in double quotes") {
  CHECK(json_string("") == "\"\"");
  CHECK(json_string("a") == "\"a\"");
  CHECK(json_string("pressure.npy") == "\"pressure.npy\"");
}

TEST_CASE("quotes and backslashes are escaped") {
  CHECK(json_string("say \"hi\"") == R"("say \"hi\"")");
  CHECK(json_string("C:\\data\\x.npy") == R"("C:\\data\\x.npy")");
  CHECK(json_string("\\\"") == R"("\\\"")");
}

TEST_CASE("newlines, carriage returns and tabs get their short escapes") {
  CHECK(json_string("a\nb") == R"("a\nb")");
  CHECK(json_string("a\rb") == R"("a\rb")");
  CHECK(json_string("a\tb") == R"("a\tb")");
}

TEST_CASE("other control characters are escaped as \\u00XX") {
  CHECK(json_string("\x01") == R"("\u0001")");
  CHECK(json_string("\x1f") == R"("\u001f")");
  CHECK(json_string("\b\f") == R"("\u0008\u000c")");
  CHECK(json_string("a\0b"sv) == R"("a\u0000b")");
}

TEST_CASE("printable ASCII, DEL and UTF-8 bytes pass through unchanged") {
  CHECK(json_string("~ /{}[]:,'") == "\"~ /{}[]:,'\"");
  CHECK(json_string("\x7f") == "\"\x7f\"");
  CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
}

TEST_CASE("bytes that are not UTF-8 become \\udcXX, so the JSON stays UTF-8 and loses no byte") {
  CHECK(json_string("caf\xe9.npy") == R"("caf\udce9.npy")");           // Latin-1
  CHECK(json_string("\xc3") == R"("\udcc3")");                         // cut short
  CHECK(json_string("\xc0\xaf") == R"("\udcc0\udcaf")");               // overlong '/'
  CHECK(json_string("\xed\xa0\x80") == R"("\udced\udca0\udc80")");    // a surrogate
  CHECK(json_string("\xf4\x90\x80\x80") == R"("\udcf4\udc90\udc80\udc80")");  // past U+10FFFF
  CHECK(json_string("\xf0\x9f\x98\x80") == "\"\xf0\x9f\x98\x80\"");  // U+1F600 passes
}

// ---- Json -----------------------------------------------------------------------------------

TEST_CASE("the writer puts commas between members and elements, as json.dumps does") {
  ooc::cli::Json j;
  j.begin_object().member("op", "sum").member("n", std::int64_t{-3}).member("ok", true);
  j.key("shape").begin_array().integer(2).integer(3).end_array();
  j.key("nested").begin_array().begin_array().end_array().begin_array().integer(1).end_array().end_array();
  j.key("none").null().member("u", std::uint64_t{18446744073709551615u});
  j.end_object();
  CHECK(j.text() == R"({"op": "sum", "n": -3, "ok": true, "shape": [2, 3], "nested": [[], [1]], "none": null, )"
                    R"("u": 18446744073709551615})");
}

TEST_CASE("non-finite floats are the strings NaN, Infinity, -Infinity; finite ones the shortest text") {
  const double inf = std::numeric_limits<double>::infinity();
  ooc::cli::Json j;
  j.begin_array().number(std::numeric_limits<double>::quiet_NaN()).number(inf).number(-inf).number(0.1);
  j.scalar(ooc::Scalar::of(0.1f)).scalar(ooc::Scalar::of(-std::numeric_limits<float>::infinity()));
  j.scalar(ooc::Scalar::of(std::int8_t{-1})).scalar(ooc::Scalar::of(true)).end_array();
  CHECK(j.text() == R"(["NaN", "Infinity", "-Infinity", 0.1, 0.1, "-Infinity", -1, true])");
  CHECK(ooc::cli::json_float(std::numeric_limits<double>::quiet_NaN(), 2) == R"("NaN")");
  CHECK(ooc::cli::json_float(0.1, 4) == "0.1");
  CHECK(ooc::cli::json_float(1e300, 4) == R"("Infinity")");  // rounded to the float's size first
}

TEST_CASE("a writer for plain text writes the non-finite floats bare, as numpy prints them") {
  const double inf = std::numeric_limits<double>::infinity();
  ooc::cli::Json j(ooc::cli::Json::NonFinite::bare);
  j.begin_array().number(std::numeric_limits<double>::quiet_NaN()).number(inf).number(-inf).number(0.5);
  j.scalar(ooc::Scalar::of(-std::numeric_limits<float>::infinity())).string("NaN").end_array();
  CHECK(j.text() == R"([NaN, Infinity, -Infinity, 0.5, -Infinity, "NaN"])");  // a string stays a string
}

TEST_CASE("array values nest as numpy's tolist() does, whatever order they are stored in") {
  const std::vector<std::int16_t> c_order{1, 2, 3, 4, 5, 6};        // [[1, 2, 3], [4, 5, 6]]
  const std::vector<std::int16_t> fortran_order{1, 4, 2, 5, 3, 6};  // the same array, column by column
  const auto bytes = [](const std::vector<std::int16_t>& v) { return reinterpret_cast<const std::byte*>(v.data()); };
  const ooc::DType i2 = ooc::dtype_of<std::int16_t>;
  CHECK(ooc::cli::Json().array_values(bytes(c_order), i2, {2, 3}, ooc::Order::c).text() == "[[1, 2, 3], [4, 5, 6]]");
  CHECK(ooc::cli::Json().array_values(bytes(fortran_order), i2, {2, 3}, ooc::Order::fortran).text() ==
        "[[1, 2, 3], [4, 5, 6]]");
  CHECK(ooc::cli::Json().array_values(bytes(c_order), i2, {}, ooc::Order::c).text() == "1");  // 0-d: the value
  CHECK(ooc::cli::Json().array_values(bytes(c_order), i2, {0, 3}, ooc::Order::c).text() == "[]");
  const std::vector<double> values{std::numeric_limits<double>::quiet_NaN(), 1.5};
  const auto* data = reinterpret_cast<const std::byte*>(values.data());
  CHECK(ooc::cli::Json().array_values(data, ooc::dtype_of<double>, {2}, ooc::Order::c).text() == R"(["NaN", 1.5])");
  CHECK(ooc::cli::Json(ooc::cli::Json::NonFinite::bare).array_values(data, ooc::dtype_of<double>, {2}, ooc::Order::c)
            .text() == "[NaN, 1.5]");
}

// ---- rate_text ------------------------------------------------------------------------------
//
// These check the three numbers and the words around them, not the exact digits, so they
// hold whether the numbers are written "%.3g" (as now) or "%.2f" (as documented).

namespace {

struct Rate {
  double gigabytes = -1, seconds = -1, rate = -1;
};

// Reads "<GB> GB in <s> s (<rate> GB/s)" back; fields stay -1 if the text does not match.
Rate read_rate(const std::string& text) {
  Rate r;
  char tail[8] = {};
  const int n = std::sscanf(text.c_str(), "%lf GB in %lf s (%lf GB/s%7s", &r.gigabytes, &r.seconds,
                            &r.rate, tail);
  if (n != 4 || std::string(tail) != ")") return Rate{};
  return r;
}

}  // namespace

TEST_CASE("the rate text reads 'N GB in S s (R GB/s)'") {
  const std::string text = rate_text(2'150'000'000, 1.0);
  CAPTURE(text);
  const Rate r = read_rate(text);
  CHECK(r.gigabytes == doctest::Approx(2.15));
  CHECK(r.seconds == doctest::Approx(1.0));
  CHECK(r.rate == doctest::Approx(2.15));
}

TEST_CASE("gigabytes are decimal, as disk and memory vendors count") {
  const Rate r = read_rate(rate_text(8'000'000'000, 2.0));
  CHECK(r.gigabytes == doctest::Approx(8.0));
  CHECK(r.rate == doctest::Approx(4.0));
  // 2**30 bytes is 1.07 decimal GB, not 1 GB.
  CHECK(read_rate(rate_text(1ull << 30, 1.0)).gigabytes == doctest::Approx(1.07).epsilon(0.005));
}

TEST_CASE("the rate is the bytes divided by the seconds") {
  const std::string text = rate_text(1'234'567'890, 0.5);
  CAPTURE(text);
  const Rate r = read_rate(text);
  CHECK(r.gigabytes == doctest::Approx(1.23).epsilon(0.005));
  CHECK(r.seconds == doctest::Approx(0.5));
  CHECK(r.rate == doctest::Approx(2.47).epsilon(0.005));
}

TEST_CASE("zero bytes and zero seconds give a zero rate, not a division by zero") {
  for (auto [bytes, seconds] : {std::pair{0ull, 1.0}, {1'000'000'000ull, 0.0}, {0ull, 0.0}}) {
    const std::string text = rate_text(bytes, seconds);
    CAPTURE(text);
    CHECK(text.find("inf") == std::string::npos);
    CHECK(text.find("nan") == std::string::npos);
    CHECK(read_rate(text).rate == 0.0);
  }
}

// A terabyte must not turn into "1e+03 GB" nor 1.1 s into "1.1 s".
TEST_CASE("the rate reads as options.hpp documents it, even for a terabyte") {
  CHECK(rate_text(2'150'000'000, 1.10) == "2.15 GB in 1.10 s (1.95 GB/s)");
  CHECK(rate_text(1'000'000'000'000, 100.0).find("e+") == std::string::npos);
}
