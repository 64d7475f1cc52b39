// Tests for include/ooc/dtype.hpp, src/dtype.cpp and src/convert.cpp: parsing and
// printing numpy type strings, numpy's promotion and casting tables, and astype.

#include "ooc/dtype.hpp"
#include "ooc/error.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ooc::ByteOrder;
using ooc::DType;
using ooc::Kind;

constexpr ByteOrder kForeignOrder =
    ooc::kNativeOrder == ByteOrder::little ? ByteOrder::big : ByteOrder::little;

// The 12 dtypes ooc supports, in the order of numpy's own listing used by the tables below.
const std::array<std::string_view, 12> kCodes = {"b1", "i1", "i2", "i4", "i8", "u1",
                                                 "u2", "u4", "u8", "f2", "f4", "f8"};

DType code(std::string_view c) { return DType::parse(c); }

template <class T>
std::vector<std::byte> bytes_of(std::initializer_list<T> values, bool swapped = false) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::size_t at = 0;
  for (const T& v : values) {
    std::memcpy(out.data() + at, static_cast<const void*>(&v), sizeof(T));
    if (swapped) std::reverse(out.begin() + static_cast<std::ptrdiff_t>(at),
                              out.begin() + static_cast<std::ptrdiff_t>(at + sizeof(T)));
    at += sizeof(T);
  }
  return out;
}

template <class T>
std::vector<T> values_of(const std::vector<std::byte>& bytes, bool swapped = false) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::vector<std::byte> copy = bytes;
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto first = copy.begin() + static_cast<std::ptrdiff_t>(i * sizeof(T));
    if (swapped) std::reverse(first, first + static_cast<std::ptrdiff_t>(sizeof(T)));
    T value;
    std::memcpy(static_cast<void*>(&value), &*first, sizeof(T));
    out[i] = value;
  }
  return out;
}

// Converts `values` of type From (native) to dtype `to`, returning the raw output bytes.
template <class From>
std::vector<std::byte> convert_to(std::initializer_list<From> values, DType to) {
  const auto in = bytes_of(values);
  std::vector<std::byte> out(values.size() * static_cast<std::size_t>(to.itemsize()));
  ooc::convert(ooc::dtype_of<From>, in.data(), to, out.data(),
               static_cast<std::int64_t>(values.size()));
  return out;
}

// float64 -> float16 as raw half bits.
std::uint16_t half_bits_of(double x) {
  std::uint16_t bits = 0;
  ooc::convert(ooc::dtype_of<double>, &x, DType(Kind::floating, 2), &bits, 1);
  return bits;
}

}  // namespace

// ---- DType::parse -----------------------------------------------------------------

TEST_CASE("a little-endian float64 descr parses to a little-endian float64") {
  const DType d = DType::parse("<f8");
  CHECK(d.kind() == Kind::floating);
  CHECK(d.itemsize() == 8);
  CHECK(d.byte_order() == ByteOrder::little);
}

TEST_CASE("a big-endian float64 descr parses to a big-endian dtype") {
  const DType d = DType::parse(">f8");
  CHECK(d.kind() == Kind::floating);
  CHECK(d.itemsize() == 8);
  CHECK(d.byte_order() == ByteOrder::big);
  CHECK(d == DType(Kind::floating, 8, ByteOrder::big));
}

TEST_CASE("a descr with '|', '=' or no order character parses to the native order") {
  for (std::string_view text : {"|f8", "=f8", "f8"}) {
    CAPTURE(text);
    const DType d = DType::parse(text);
    CHECK(d == DType(Kind::floating, 8));
    CHECK(d.is_native());
  }
}

TEST_CASE("every supported kind and size parses in every byte order") {
  struct Case { std::string_view text; Kind kind; int size; };
  const Case cases[] = {
      {"b1", Kind::boolean, 1},       {"i1", Kind::signed_int, 1},   {"i2", Kind::signed_int, 2},
      {"i4", Kind::signed_int, 4},    {"i8", Kind::signed_int, 8},   {"u1", Kind::unsigned_int, 1},
      {"u2", Kind::unsigned_int, 2},  {"u4", Kind::unsigned_int, 4}, {"u8", Kind::unsigned_int, 8},
      {"f2", Kind::floating, 2},      {"f4", Kind::floating, 4},     {"f8", Kind::floating, 8},
  };
  for (const Case& c : cases) {
    for (std::string_view prefix : {"", "<", ">", "|", "="}) {
      const std::string text = std::string(prefix) + std::string(c.text);
      CAPTURE(text);
      const DType d = DType::parse(text);
      CHECK(d.kind() == c.kind);
      CHECK(d.itemsize() == c.size);
      if (c.size == 1 || prefix.empty() || prefix == "|" || prefix == "=")
        CHECK(d.is_native());
      else
        CHECK(d.byte_order() == (prefix == "<" ? ByteOrder::little : ByteOrder::big));
    }
  }
}

TEST_CASE("the descrs numpy writes for bool, uint8, int16, uint32 and float16 parse") {
  CHECK(DType::parse("|b1") == DType(Kind::boolean, 1));
  CHECK(DType::parse("|u1") == DType(Kind::unsigned_int, 1));
  CHECK(DType::parse("<i2") == DType(Kind::signed_int, 2, ByteOrder::little));
  CHECK(DType::parse(">u4") == DType(Kind::unsigned_int, 4, ByteOrder::big));
  CHECK(DType::parse("<f2") == DType(Kind::floating, 2, ByteOrder::little));
}

TEST_CASE("a one-byte dtype has no byte order, whatever order it is spelled with") {
  CHECK(DType::parse(">u1") == DType::parse("<u1"));
  CHECK(DType::parse(">i1").is_native());
  CHECK(DType::parse(">b1").is_native());
  CHECK(DType(Kind::unsigned_int, 1, kForeignOrder).is_native());
}

TEST_CASE("an object descr is refused with a message that says why") {
  for (std::string_view text : {"|O", "|O8", "<O"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(DType::parse(text), doctest::Contains("object arrays are not supported"),
                         ooc::UsageError);
  }
}

TEST_CASE("complex, unicode, datetime and other kinds are refused naming the descr") {
  for (std::string_view text : {"<c16", "<c8", "<U10", "|S5", "<M8", "<m8", "|V8"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(DType::parse(text),
                         doctest::Contains(("unsupported dtype '" + std::string(text) + "'").c_str()),
                         ooc::UsageError);
  }
}

TEST_CASE("a supported kind with an unsupported item size is refused") {
  for (std::string_view text : {"<i3", "b2", "<f16", "<f1", "<u16", "<i0", "<f-8", "<f"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(DType::parse(text), doctest::Contains("unsupported dtype"),
                         ooc::UsageError);
  }
}

TEST_CASE("an unsupported descr's message lists what ooc handles") {
  CHECK_THROWS_WITH_AS(DType::parse("<c16"), doctest::Contains("b1, i1, i2, i4, i8"),
                       ooc::UsageError);
}

TEST_CASE("an empty descr and a bare order character are refused") {
  CHECK_THROWS_WITH_AS(DType::parse(""), doctest::Contains("empty"), ooc::UsageError);
  for (std::string_view text : {"<", ">", "|", "="}) {
    CAPTURE(text);
    CHECK_THROWS_AS(DType::parse(text), ooc::UsageError);
  }
}

TEST_CASE("a descr with stray characters around it is refused") {
  for (std::string_view text : {"<f8 ", " <f8", "<<f8", "<f8x", "f 8", "<F8", "<I4"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(DType::parse(text), ooc::UsageError);
  }
}

// ---- descr() and name() -------------------------------------------------------------

TEST_CASE("descr() writes numpy's descr and parses back to the same dtype") {
  for (std::string_view c : kCodes) {
    for (ByteOrder order : {ByteOrder::little, ByteOrder::big}) {
      const DType d = DType::parse(c).with_order(order);
      const std::string text = d.descr();
      CAPTURE(text);
      CHECK(DType::parse(text) == d);
      const char expected_order =
          d.itemsize() == 1 ? '|' : (order == ByteOrder::little ? '<' : '>');
      CHECK(text == std::string{expected_order, c[0], c[1]});
    }
  }
}

TEST_CASE("a native-order descr spelled with '=' comes back with an explicit order") {
  const char native = ooc::kNativeOrder == ByteOrder::little ? '<' : '>';
  CHECK(DType::parse("=i4").descr() == std::string{native, 'i', '4'});
  CHECK(DType::parse("f2").descr() == std::string{native, 'f', '2'});
  CHECK(DType::parse("=b1").descr() == "|b1");
}

TEST_CASE("name() gives numpy's type name and from_name reads it back") {
  const std::array<std::string_view, 12> names = {"bool",   "int8",   "int16",  "int32",
                                                  "int64",  "uint8",  "uint16", "uint32",
                                                  "uint64", "float16", "float32", "float64"};
  for (std::size_t i = 0; i < kCodes.size(); ++i) {
    CAPTURE(kCodes[i]);
    const DType d = DType::parse(kCodes[i]);
    CHECK(d.name() == names[i]);
    CHECK(DType::from_name(names[i]) == d);
  }
}

TEST_CASE("the name of a byte-swapped dtype is the same as the native one") {
  CHECK(DType::parse(">f8").name() == "float64");
  CHECK(DType::parse("<u2").name() == "uint16");
}

TEST_CASE("from_name gives native-order dtypes") {
  CHECK(DType::from_name("float64").is_native());
  CHECK(DType::from_name("uint16").is_native());
}

TEST_CASE("from_name refuses names numpy would not use for a supported dtype") {
  for (std::string_view name : {"", "float", "int", "Float64", "complex128", "float128",
                                "object", "bool_", "f8", " float64"}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(DType::from_name(name), doctest::Contains("unknown dtype name"),
                         ooc::UsageError);
  }
}

TEST_CASE("from_numpy reads what np.dtype reads for the dtypes ooc handles") {
  // np.dtype(text).str on x86-64 Linux, numpy 1.24.
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"float", "<f8"}, {"int", "<i8"},   {"double", "<f8"}, {"half", "<f2"},  {"single", "<f4"}, {"intc", "<i4"},
      {"byte", "|i1"},  {"ubyte", "|u1"}, {"short", "<i2"},  {"uint", "<u8"},  {"bool_", "|b1"},  {"b", "|i1"},
      {"B", "|u1"},     {"?", "|b1"},     {"e", "<f2"},      {"d", "<f8"},     {"L", "<u8"},      {"float32", "<f4"},
      {"bool", "|b1"},  {"<u2", "<u2"},   {">f4", ">f4"},    {"i8", "<i8"},    {">d", ">f8"},     {"=H", "<u2"},
      {"|f", "<f4"},    {">b", "|i1"},    {">?", "|b1"},     {"<L", "<u8"},    {">e", ">f2"},
      {"long", "<i8"},  {"ulong", "<u8"}, {"bool8", "|b1"},  {"P", "<u8"},     {">P", ">u8"}};
  for (const auto& c : cases) {  // not a structured binding: clang cannot capture one in CAPTURE
    CAPTURE(c.first);
    CHECK(DType::from_numpy(c.first).descr() == c.second);
  }
  // numpy takes a byte order on a one-letter code, not on a name
  for (std::string_view bad : {"complex128", "longdouble", "g", "F", "O", "", "float128", ">float32", "<int", ">>f4", ">"})
    CHECK_THROWS_AS(DType::from_numpy(bad), ooc::UsageError);
}

TEST_CASE("dtype_of maps each C++ element type to its native dtype") {
  CHECK(ooc::dtype_of<bool> == DType::parse("b1"));
  CHECK(ooc::dtype_of<std::int8_t> == DType::parse("i1"));
  CHECK(ooc::dtype_of<std::int64_t> == DType::parse("i8"));
  CHECK(ooc::dtype_of<std::uint32_t> == DType::parse("u4"));
  CHECK(ooc::dtype_of<ooc::half> == DType::parse("f2"));
  CHECK(ooc::dtype_of<float> == DType::parse("f4"));
  CHECK(ooc::dtype_of<double> == DType::parse("f8"));
}

TEST_CASE("visit_dtype hands each dtype the C++ type of its kind and size") {
  for (std::string_view c : kCodes) {
    CAPTURE(c);
    const DType d = DType::parse(c);
    const DType seen = ooc::visit_dtype(d, []<class T>(std::type_identity<T>) { return ooc::dtype_of<T>; });
    CHECK(seen == d);
    // Byte order is the caller's business: a swapped dtype visits the same type.
    const DType seen_swapped = ooc::visit_dtype(d.with_order(kForeignOrder),
        []<class T>(std::type_identity<T>) { return ooc::dtype_of<T>; });
    CHECK(seen_swapped == d);
  }
}

// ---- promote_types and can_cast_same_kind --------------------------------------------

// Generated once with numpy 1.24.2 (Debian's python3-numpy):
//   /usr/bin/python3 -c 'import numpy as np
//   ts="b1 i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8".split()
//   for a in ts: print(a, " ".join(np.promote_types(a,b).str[1:] for b in ts))'
// Row a, column b holds np.promote_types(a, b).
constexpr std::string_view kPromoteTable[12][12] = {
    /* b1 */ {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"},
    /* i1 */ {"i1", "i1", "i2", "i4", "i8", "i2", "i4", "i8", "f8", "f2", "f4", "f8"},
    /* i2 */ {"i2", "i2", "i2", "i4", "i8", "i2", "i4", "i8", "f8", "f4", "f4", "f8"},
    /* i4 */ {"i4", "i4", "i4", "i4", "i8", "i4", "i4", "i8", "f8", "f8", "f8", "f8"},
    /* i8 */ {"i8", "i8", "i8", "i8", "i8", "i8", "i8", "i8", "f8", "f8", "f8", "f8"},
    /* u1 */ {"u1", "i2", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"},
    /* u2 */ {"u2", "i4", "i4", "i4", "i8", "u2", "u2", "u4", "u8", "f4", "f4", "f8"},
    /* u4 */ {"u4", "i8", "i8", "i8", "i8", "u4", "u4", "u4", "u8", "f8", "f8", "f8"},
    /* u8 */ {"u8", "f8", "f8", "f8", "f8", "u8", "u8", "u8", "u8", "f8", "f8", "f8"},
    /* f2 */ {"f2", "f2", "f4", "f8", "f8", "f2", "f4", "f8", "f8", "f2", "f4", "f8"},
    /* f4 */ {"f4", "f4", "f4", "f8", "f8", "f4", "f4", "f8", "f8", "f4", "f4", "f8"},
    /* f8 */ {"f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8"},
};

// Generated once with numpy 1.24.2:
//   for a in ts: print(a, " ".join("1" if np.can_cast(a,b,"same_kind") else "0" for b in ts))
// Row `from`, column `to` holds np.can_cast(from, to, casting="same_kind").
constexpr int kSameKindTable[12][12] = {
    /* b1 */ {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* i1 */ {0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
    /* i2 */ {0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
    /* i4 */ {0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
    /* i8 */ {0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
    /* u1 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* u2 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* u4 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* u8 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* f2 */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1},
    /* f4 */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1},
    /* f8 */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1},
};

TEST_CASE("promote_types agrees with numpy 1.24 for every pair of supported dtypes") {
  for (std::size_t a = 0; a < 12; ++a) {
    for (std::size_t b = 0; b < 12; ++b) {
      CAPTURE(kCodes[a]);
      CAPTURE(kCodes[b]);
      CHECK(ooc::promote_types(code(kCodes[a]), code(kCodes[b])) == code(kPromoteTable[a][b]));
    }
  }
}

TEST_CASE("promote_types ignores byte order and answers in native order") {
  for (std::size_t a = 0; a < 12; ++a) {
    for (std::size_t b = 0; b < 12; ++b) {
      CAPTURE(kCodes[a]);
      CAPTURE(kCodes[b]);
      const DType result = ooc::promote_types(code(kCodes[a]).with_order(kForeignOrder),
                                              code(kCodes[b]).with_order(kForeignOrder));
      CHECK(result == code(kPromoteTable[a][b]));
      CHECK(result.is_native());
    }
  }
}

TEST_CASE("can_cast_same_kind agrees with numpy 1.24 for every pair of supported dtypes") {
  for (std::size_t from = 0; from < 12; ++from) {
    for (std::size_t to = 0; to < 12; ++to) {
      CAPTURE(kCodes[from]);
      CAPTURE(kCodes[to]);
      CHECK(ooc::can_cast_same_kind(code(kCodes[from]), code(kCodes[to])) ==
            (kSameKindTable[from][to] == 1));
      CHECK(ooc::can_cast_same_kind(code(kCodes[from]).with_order(kForeignOrder),
                                    code(kCodes[to])) == (kSameKindTable[from][to] == 1));
    }
  }
}

// ---- convert ----------------------------------------------------------------------

TEST_CASE("converting zero elements writes nothing") {
  std::array<std::byte, 8> dst;
  dst.fill(std::byte{0xAB});
  const double src = 1.0;
  ooc::convert(DType::parse("<f8"), &src, DType::parse(">i8"), dst.data(), 0);
  for (std::byte b : dst) CHECK(b == std::byte{0xAB});
}

TEST_CASE("converting one element writes exactly one element") {
  std::array<std::int32_t, 2> dst = {7, 7};
  const double src = 42.9;
  ooc::convert(ooc::dtype_of<double>, &src, ooc::dtype_of<std::int32_t>, dst.data(), 1);
  CHECK(dst[0] == 42);
  CHECK(dst[1] == 7);
}

TEST_CASE("converting to the same dtype copies the values") {
  const auto out = convert_to<std::int16_t>({1, -2, 32767, -32768}, ooc::dtype_of<std::int16_t>);
  CHECK(values_of<std::int16_t>(out) == std::vector<std::int16_t>{1, -2, 32767, -32768});
}

TEST_CASE("a byte-swapped float64 source converts to native int32") {
  const auto in = bytes_of<double>({1.5, -2.75, 1e6}, /*swapped=*/true);
  std::vector<std::int32_t> out(3);
  ooc::convert(DType(Kind::floating, 8, kForeignOrder), in.data(), ooc::dtype_of<std::int32_t>,
               out.data(), 3);
  CHECK(out == std::vector<std::int32_t>{1, -2, 1000000});
}

TEST_CASE("a native source converts to a byte-swapped destination") {
  const auto out = convert_to<std::int32_t>({1, -1, 0x01020304}, DType(Kind::signed_int, 8, kForeignOrder));
  CHECK(values_of<std::int64_t>(out, /*swapped=*/true) == std::vector<std::int64_t>{1, -1, 0x01020304});
}

TEST_CASE("a byte-swapped source converts to a byte-swapped destination of another size") {
  const auto in = bytes_of<std::uint16_t>({0x0102, 0xFFFF}, /*swapped=*/true);
  std::vector<std::byte> out(2 * 4);
  ooc::convert(DType(Kind::unsigned_int, 2, kForeignOrder), in.data(),
               DType(Kind::floating, 4, kForeignOrder), out.data(), 2);
  CHECK(values_of<float>(out, /*swapped=*/true) == std::vector<float>{258.0f, 65535.0f});
}

TEST_CASE("converting between byte orders of one dtype swaps the bytes") {
  const auto out = convert_to<std::uint32_t>({0x11223344u}, DType(Kind::unsigned_int, 4, kForeignOrder));
  CHECK(values_of<std::uint32_t>(out) == std::vector<std::uint32_t>{0x44332211u});
}

TEST_CASE("a byte-swapped float16 source converts to float64") {
  // numpy: np.float16(-2.5).view(np.uint16) == 0xc100
  const auto in = bytes_of<std::uint16_t>({0xC100, 0x3C00}, /*swapped=*/true);
  std::vector<double> out(2);
  ooc::convert(DType(Kind::floating, 2, kForeignOrder), in.data(), ooc::dtype_of<double>,
               out.data(), 2);
  CHECK(out == std::vector<double>{-2.5, 1.0});
}

TEST_CASE("conversion in place with equal item sizes swaps and converts") {
  auto buf = bytes_of<std::int32_t>({5, -6}, /*swapped=*/true);
  ooc::convert(DType(Kind::signed_int, 4, kForeignOrder), buf.data(), ooc::dtype_of<std::int32_t>,
               buf.data(), 2);
  CHECK(values_of<std::int32_t>(buf) == std::vector<std::int32_t>{5, -6});
  ooc::convert(ooc::dtype_of<std::int32_t>, buf.data(), ooc::dtype_of<float>, buf.data(), 2);
  CHECK(values_of<float>(buf) == std::vector<float>{5.0f, -6.0f});
}

TEST_CASE("any nonzero value converts to true, NaN included, and zero to false") {
  // numpy: np.array([nan, -0.0, 0.5, 1e-300]).astype(bool) == [True, False, True, True]
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto from_double = convert_to<double>({nan, -0.0, 0.5, 1e-300, 0.0}, DType(Kind::boolean, 1));
  CHECK(values_of<bool>(from_double) == std::vector<bool>{true, false, true, true, false});

  const auto from_int = convert_to<std::int64_t>({0, -1, 256, std::numeric_limits<std::int64_t>::min()},
                                                 DType(Kind::boolean, 1));
  CHECK(values_of<bool>(from_int) == std::vector<bool>{false, true, true, true});

  const auto from_half = convert_to<ooc::half>({ooc::half(std::nanf("")), ooc::half(0.0f), ooc::half(-0.0f),
                                                ooc::half(1e-7f)},
                                               DType(Kind::boolean, 1));
  CHECK(values_of<bool>(from_half) == std::vector<bool>{true, false, false, true});
}

// A stored 2 or 255 is True to numpy; copying the byte into a C++ bool would be UB.
TEST_CASE("a bool stored as a byte other than 0 or 1 converts as true, as numpy reads it") {
  // numpy: np.frombuffer(b"\x00\x01\x02\xff", bool).astype(np.int32) == [0, 1, 1, 1]
  const std::uint8_t raw[4] = {0, 1, 2, 255};
  std::int32_t out[4];
  ooc::convert(DType(Kind::boolean, 1), raw, ooc::dtype_of<std::int32_t>, out, 4);
  CHECK(out[0] == 0);
  CHECK(out[1] == 1);
  CHECK(out[2] == 1);
  CHECK(out[3] == 1);
}

TEST_CASE("bools convert to one and zero in every numeric dtype") {
  for (std::string_view c : kCodes) {
    CAPTURE(c);
    const DType to = DType::parse(c);
    const bool in[2] = {true, false};
    std::array<std::byte, 16> out{};
    ooc::convert(DType(Kind::boolean, 1), in, to, out.data(), 2);
    std::array<double, 2> back{};
    ooc::convert(to, out.data(), ooc::dtype_of<double>, back.data(), 2);
    CHECK(back[0] == 1.0);
    CHECK(back[1] == 0.0);
  }
}

TEST_CASE("narrowing integer conversions wrap as numpy's astype does") {
  // numpy: int32 300 -> int8 44; int64 -1 -> uint8 255; uint16 65535 -> int16 -1;
  //        int64 2**40+5 -> int32 5
  CHECK(values_of<std::int8_t>(convert_to<std::int32_t>({300}, ooc::dtype_of<std::int8_t>)) ==
        std::vector<std::int8_t>{44});
  CHECK(values_of<std::uint8_t>(convert_to<std::int64_t>({-1}, ooc::dtype_of<std::uint8_t>)) ==
        std::vector<std::uint8_t>{255});
  CHECK(values_of<std::int16_t>(convert_to<std::uint16_t>({65535}, ooc::dtype_of<std::int16_t>)) ==
        std::vector<std::int16_t>{-1});
  CHECK(values_of<std::int32_t>(convert_to<std::int64_t>({(std::int64_t{1} << 40) + 5},
                                                        ooc::dtype_of<std::int32_t>)) ==
        std::vector<std::int32_t>{5});
  CHECK(values_of<std::uint64_t>(convert_to<std::int8_t>({-1}, ooc::dtype_of<std::uint64_t>)) ==
        std::vector<std::uint64_t>{std::numeric_limits<std::uint64_t>::max()});
}

TEST_CASE("float to integer conversion truncates toward zero") {
  // numpy: np.array([2.7, -2.7]).astype(np.int32) == [2, -2]
  CHECK(values_of<std::int32_t>(convert_to<double>({2.7, -2.7, -0.5}, ooc::dtype_of<std::int32_t>)) ==
        std::vector<std::int32_t>{2, -2, 0});
  CHECK(values_of<std::int16_t>(convert_to<ooc::half>({ooc::half(-3.5f)}, ooc::dtype_of<std::int16_t>)) ==
        std::vector<std::int16_t>{-3});
}

TEST_CASE("integers convert to float16 rounding to nearest even, overflowing to inf") {
  // numpy: np.array([2049, 2051, 65519, 65520, 100000]).astype(np.float16)
  //        == [2048, 2052, 65504, inf, inf]
  const auto out = convert_to<std::int64_t>({2049, 2051, 65519, 65520, 100000}, DType(Kind::floating, 2));
  const auto bits = values_of<std::uint16_t>(out);
  CHECK(bits == std::vector<std::uint16_t>{0x6800, 0x6802, 0x7BFF, 0x7C00, 0x7C00});
}

TEST_CASE("float64 converts to float16 with numpy's bits") {
  // Expected bits from numpy 1.24.2: hex(np.float64(x).astype(np.float16).view(np.uint16))
  struct Case { double x; std::uint16_t bits; };
  const Case cases[] = {
      {0.1, 0x2E66},       {1.0, 0x3C00},     {-2.5, 0xC100},    {65504.0, 0x7BFF},
      {65519.0, 0x7BFF},   {65520.0, 0x7C00}, {1e-8, 0x0000},    {3e-8, 0x0001},
      {6e-5, 0x03EF},      {1e300, 0x7C00},   {-0.0, 0x8000},    {1.0 / 3.0, 0x3555},
      {1.00048828125, 0x3C00},  // exactly halfway between 1 and the next half: ties to even
  };
  for (const Case& c : cases) {
    CAPTURE(c.x);
    CHECK(half_bits_of(c.x) == c.bits);
  }
}

TEST_CASE("float64 to float16 rounds once, where rounding via float32 would go wrong") {
  // 1 + 2**-11 + 2**-40 lies just above the midpoint of two halves; float32 rounds it to the
  // midpoint and float32 -> float16 then ties to even (0x3c00). numpy rounds once: 0x3c01.
  CHECK(half_bits_of(std::ldexp(1.0, 0) + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)) == 0x3C01);
  // 1 + 3 * 2**-11 - 2**-40 lies just below a midpoint; via float32 it would become 0x3c02.
  CHECK(half_bits_of(1.0 + 3 * std::ldexp(1.0, -11) - std::ldexp(1.0, -40)) == 0x3C01);
  // The same on the negative side.
  CHECK(half_bits_of(-(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))) == 0xBC01);
}

TEST_CASE("float64 to float16 rounds once in the subnormal range too") {
  // 2**-25 is half the smallest subnormal half: it ties to even (zero); anything above
  // rounds up to the smallest subnormal. 2**-25 + 2**-70 is exact in float64 but
  // float32 cannot hold it and would round it to the tie.
  CHECK(half_bits_of(std::ldexp(1.0, -25)) == 0x0000);
  CHECK(half_bits_of(std::ldexp(1.0, -25) + std::ldexp(1.0, -70)) == 0x0001);
}

TEST_CASE("float64 to float16 keeps NaN and infinities") {
  const std::uint16_t nan_bits = half_bits_of(std::numeric_limits<double>::quiet_NaN());
  CHECK((nan_bits & 0x7C00) == 0x7C00);
  CHECK((nan_bits & 0x03FF) != 0);
  CHECK(half_bits_of(std::numeric_limits<double>::infinity()) == 0x7C00);
  CHECK(half_bits_of(-std::numeric_limits<double>::infinity()) == 0xFC00);
}

TEST_CASE("float64 converts to a byte-swapped float16") {
  const auto out = convert_to<double>({0.1, 1.0}, DType(Kind::floating, 2, kForeignOrder));
  CHECK(values_of<std::uint16_t>(out, /*swapped=*/true) == std::vector<std::uint16_t>{0x2E66, 0x3C00});
}

TEST_CASE("float16 widens exactly to float32 and float64") {
  const ooc::half h = ooc::half(1.0009765625f);  // 0x3c01
  CHECK(values_of<double>(convert_to<ooc::half>({h}, ooc::dtype_of<double>)) ==
        std::vector<double>{1.0009765625});
  CHECK(values_of<float>(convert_to<ooc::half>({h}, ooc::dtype_of<float>)) ==
        std::vector<float>{1.0009765625f});
}

TEST_CASE("uint64 max converts to the nearest float64") {
  CHECK(values_of<double>(convert_to<std::uint64_t>({std::numeric_limits<std::uint64_t>::max()},
                                                   ooc::dtype_of<double>)) ==
        std::vector<double>{18446744073709551616.0});
}
