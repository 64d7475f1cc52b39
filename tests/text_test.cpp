// Tests for src/text/parse.*: the line splitter and the field parsers behind
// `oocrun import`, and ooc::import_text / ooc::export_text on small files.

#include "format/text_parse.hpp"
#include "ooc/array_map.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/text.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

using ooc::text::ChunkResult;
using ooc::text::Dialect;
using ooc::text::IntResult;
using ooc::text::Layout;

double parsed(std::string_view text) {
  double d = -12345;
  REQUIRE_MESSAGE(ooc::text::parse_double(text, d), text);
  return d;
}

bool accepted(std::string_view text) {
  double d = 0;
  return ooc::text::parse_double(text, d);
}

std::vector<double> doubles(const ChunkResult& r) {
  std::vector<double> out(r.values.size() / sizeof(double));
  std::memcpy(out.data(), r.values.data(), r.values.size());
  return out;
}

ChunkResult parse(std::string_view text, int fields, Dialect dialect = {}, std::vector<int> columns = {},
                  ooc::DType dtype = ooc::dtype_of<double>) {
  return ooc::text::parse_chunk(text, dialect, Layout{fields, columns}, dtype, std::nullopt);
}

}  // namespace

TEST_CASE("floats parse as Python's float() parses them, correctly rounded") {
  CHECK(parsed("1.5") == 1.5);
  CHECK(parsed(" +1.5 ") == 1.5);
  CHECK(parsed("-0") == 0.0);
  CHECK(std::signbit(parsed("-0")));
  CHECK(parsed("1e5") == 1e5);
  CHECK(parsed("1E+05") == 1e5);
  CHECK(parsed(".5") == 0.5);
  CHECK(parsed("5.") == 5.0);
  CHECK(parsed("0.1") == 0.1);
  CHECK(parsed("4.9e-324") == std::numeric_limits<double>::denorm_min());
  CHECK(parsed("2.4703282292062328e-324") == std::numeric_limits<double>::denorm_min());
  CHECK(parsed("2.4703282292062327e-324") == 0.0);  // below half the smallest subnormal
  CHECK(parsed("1.7976931348623157e308") == std::numeric_limits<double>::max());
  CHECK(std::isinf(parsed("1e400")));
  CHECK(parsed("-1e400") == -std::numeric_limits<double>::infinity());
  CHECK(parsed("9007199254740993") == 9007199254740992.0);  // ties to even
  CHECK(parsed("0.30000000000000004") == 0.30000000000000004);
  CHECK(std::isinf(parsed("inf")));
  CHECK(std::isinf(parsed("Infinity")));
  CHECK(parsed("-INF") == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(parsed("nan")));
  CHECK(std::isnan(parsed("NaN")));
  CHECK(!std::signbit(parsed("nan")));
  CHECK(std::signbit(parsed("-nan")));  // Python's float('-nan') has its sign bit set
  CHECK(parsed("\t7\r") == 7.0);
  for (const char* bad : {"", " ", "abc", "1.2.3", "1e", "1e+", "--1", "+-1", "-+1", "++1", "1_000", "0x10",
                          "nan(1)", "infin", "infinityy", "nana", ".", "e5", "1,5", "1 5", "\xEF\xBB\xBF" "1"})
    CHECK_MESSAGE(!accepted(bad), bad);
}

TEST_CASE("integers parse as integers, with overflow detected") {
  std::int64_t v = 0;
  CHECK(ooc::text::parse_integer<std::int64_t>(" -42 ", v) == IntResult::ok);
  CHECK(v == -42);
  CHECK(ooc::text::parse_integer<std::int64_t>("+7", v) == IntResult::ok);
  CHECK(v == 7);
  CHECK(ooc::text::parse_integer<std::int64_t>("9223372036854775807", v) == IntResult::ok);
  CHECK(v == std::numeric_limits<std::int64_t>::max());
  CHECK(ooc::text::parse_integer<std::int64_t>("-9223372036854775808", v) == IntResult::ok);
  CHECK(v == std::numeric_limits<std::int64_t>::min());
  CHECK(ooc::text::parse_integer<std::int64_t>("9223372036854775808", v) == IntResult::overflow);
  CHECK(ooc::text::parse_integer<std::int64_t>("99999999999999999999999", v) == IntResult::overflow);
  CHECK(ooc::text::parse_integer<std::int64_t>("1.0", v) == IntResult::invalid);
  CHECK(ooc::text::parse_integer<std::int64_t>("1e3", v) == IntResult::invalid);
  CHECK(ooc::text::parse_integer<std::int64_t>("", v) == IntResult::invalid);
  CHECK(ooc::text::parse_integer<std::int64_t>("-", v) == IntResult::invalid);
  std::int8_t small = 0;
  CHECK(ooc::text::parse_integer<std::int8_t>("127", small) == IntResult::ok);
  CHECK(ooc::text::parse_integer<std::int8_t>("-128", small) == IntResult::ok);
  CHECK(small == -128);
  CHECK(ooc::text::parse_integer<std::int8_t>("128", small) == IntResult::overflow);
  CHECK(ooc::text::parse_integer<std::int8_t>("-129", small) == IntResult::overflow);
  std::uint64_t u = 0;
  CHECK(ooc::text::parse_integer<std::uint64_t>("18446744073709551615", u) == IntResult::ok);
  CHECK(u == std::numeric_limits<std::uint64_t>::max());
  CHECK(ooc::text::parse_integer<std::uint64_t>("18446744073709551616", u) == IntResult::overflow);
  CHECK(ooc::text::parse_integer<std::uint64_t>("-1", u) == IntResult::overflow);
  CHECK(ooc::text::parse_integer<std::uint64_t>("-0", u) == IntResult::ok);
  std::uint8_t b = 0;
  CHECK(ooc::text::parse_integer<std::uint8_t>("256", b) == IntResult::overflow);
}

TEST_CASE("lines: CRLF, comments, blank lines, a last line without its newline") {
  const ChunkResult r = parse("1,2\r\n# comment\n\n3,4 # tail\n5,6", 2);
  REQUIRE(!r.error);
  CHECK(r.rows == 3);
  CHECK(r.lines == 5);
  CHECK(doubles(r) == std::vector<double>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("the whitespace delimiter takes runs of spaces and tabs, and skips blank lines") {
  const ChunkResult r = parse("  1 \t 2  3\n   \n4\t5 6\t\n", 3, Dialect{0, "#"});
  REQUIRE(!r.error);
  CHECK(r.rows == 2);
  CHECK(doubles(r) == std::vector<double>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("bad rows name the line and the column") {
  ChunkResult r = parse("1,2\n3,4,5\n", 2);
  REQUIRE(r.error);
  CHECK(r.error->line == 1);
  CHECK(r.error->column == 5);
  CHECK(r.error->problem.find("expected 2 fields") != std::string::npos);
  CHECK(r.rows == 1);
  CHECK(doubles(r) == std::vector<double>{1, 2});

  r = parse("1,2\n3\n", 2);
  REQUIRE(r.error);
  CHECK(r.error->line == 1);
  CHECK(r.error->problem == "expected 2 fields, found 1");

  r = parse("1,2\n\n3,1.2.3\n", 2);
  REQUIRE(r.error);
  CHECK(r.error->line == 2);
  CHECK(r.error->column == 3);
  CHECK(r.error->problem == "could not convert '1.2.3' to float64");

  r = parse("1,,3\n", 3);
  REQUIRE(r.error);
  CHECK(r.error->column == 3);
  CHECK(r.error->problem.find("empty field") != std::string::npos);

  r = parse("1,300\n", 2, {}, {}, ooc::DType(ooc::Kind::signed_int, 1));
  REQUIRE(r.error);
  CHECK(r.error->column == 3);
  CHECK(r.error->problem == "integer '300' is out of range for int8");
}

TEST_CASE("--missing: an empty field stands for the value given") {
  std::vector<std::byte> nan(8);
  const double q = std::numeric_limits<double>::quiet_NaN();
  std::memcpy(nan.data(), &q, 8);
  const ChunkResult r =
      ooc::text::parse_chunk("1,,3\n , 2, \n", Dialect{}, Layout{3, {}}, ooc::dtype_of<double>, nan);
  REQUIRE(!r.error);
  const std::vector<double> v = doubles(r);
  REQUIRE(v.size() == 6);
  CHECK(v[0] == 1);
  CHECK(std::isnan(v[1]));
  CHECK(std::isnan(v[3]));
  CHECK(v[4] == 2);
  CHECK(std::isnan(v[5]));
}

TEST_CASE("columns: a row needs only the fields asked for, negative from its end") {
  const ChunkResult r = parse("1,2,3\n4,5\n", 3, {}, {0, -1});
  REQUIRE(!r.error);
  CHECK(doubles(r) == std::vector<double>{1, 3, 4, 5});
  const ChunkResult bad = parse("1,2,3\n4\n", 3, {}, {0, 2});
  REQUIRE(bad.error);
  CHECK(bad.error->line == 1);
}

TEST_CASE("float32 is parsed as float64 and rounded, as numpy does") {
  const ChunkResult r = parse("0.1,16777217\n", 2, {}, {}, ooc::dtype_of<float>);
  REQUIRE(!r.error);
  float v[2];
  std::memcpy(v, r.values.data(), sizeof v);
  CHECK(v[0] == 0.1f);
  CHECK(v[1] == 16777216.0f);
}

TEST_CASE("import and export: files round trip, errors leave nothing behind") {
  ooc::testing::ScratchDir dir;
  const std::string csv = (dir.path() / "a.csv").string();
  const std::string npy = (dir.path() / "a.npy").string();
  {
    std::ofstream f(csv, std::ios::binary);
    f << "\xEF\xBB\xBF# x,y\n1,2\r\n3,4.5\n-inf,nan";
  }
  const ooc::TextImportResult r = ooc::import_text(csv, npy);
  CHECK(r.shape == ooc::Shape{3, 2});
  CHECK(r.rows == 3);
  {
    const ooc::MappedArray a = ooc::map_file(npy);
    CHECK(a.shape() == ooc::Shape{3, 2});
    const auto v = a.values<double>();
    CHECK(v[3] == 4.5);
    CHECK(std::isinf(v[4]));
  }
  const std::string out = (dir.path() / "b.csv").string();
  ooc::export_text(npy, out);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "1,2\n3,4.5\n-inf,nan\n");

  {
    std::ofstream f(csv, std::ios::binary);
    f << "1,2\n3\n";
  }
  const std::string bad = (dir.path() / "bad.npy").string();
  CHECK_THROWS_WITH_AS(ooc::import_text(csv, bad), (csv + ":2:2: expected 2 fields, found 1").c_str(), ooc::Error);
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  CHECK(files == 3);  // a.csv, a.npy, b.csv and no trace of bad.npy
}
