// Tests for src/format/npy.hpp and src/format/npy.cpp: the .npy header writer, byte for
// byte against numpy 1.24, and the strict header reader.

#include "format/npy.hpp"
#include "fuzz/npy_header_check.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <string_view>

using namespace std::string_view_literals;

namespace {

using ooc::DType;
using ooc::Kind;
using ooc::Order;
using ooc::Shape;
using ooc::npy::FormatError;
using ooc::npy::Header;

constexpr ooc::ByteOrder kLittle = ooc::ByteOrder::little;
constexpr ooc::ByteOrder kBig = ooc::ByteOrder::big;

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// A file image: magic, version, little-endian header length (2 bytes for 1.x, 4 for
// 2.x/3.x), the header text exactly as given, then `data_bytes` zero bytes.
std::string npy_file(const std::string& header, std::uint64_t data_bytes = 0, int major = 1,
                     int minor = 0) {
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(static_cast<char>(minor));
  const int width = major == 1 ? 2 : 4;
  for (int i = 0; i < width; ++i)
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  out += header;
  out.append(data_bytes, '\0');
  return out;
}

Header parse(const std::string& file) { return ooc::npy::parse_header(as_bytes(file), file.size()); }

// The message parse_header throws for this header text (with enough data after it).
std::string error_of(const std::string& header, std::uint64_t data_bytes = 1 << 10) {
  try {
    parse(npy_file(header, data_bytes));
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(no error)";
}

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

const std::string kPlain = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";

}  // namespace

// ---- make_header: byte-identical to np.save -------------------------------------------
//
// Expected prefixes generated once with numpy 1.24.2 (Debian's python3-numpy):
//   b = io.BytesIO(); np.save(b, a); b.getvalue()[:len(b.getvalue()) - a.nbytes]
// and, for shapes too large to allocate, numpy.lib.format._write_array_header(b, d, None),
// the function np.save calls.

TEST_CASE("the header of a 0-d float64 array is numpy's") {
  // np.save of np.zeros((), '<f8')
  CHECK(ooc::npy::make_header(DType(Kind::floating, 8, kLittle), {}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (), }                                                              \n"sv);
}

TEST_CASE("the header of an empty 1-d float64 array is numpy's") {
  // np.save of np.zeros((0,), '<f8')
  CHECK(ooc::npy::make_header(DType(Kind::floating, 8, kLittle), {0}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }                                                            \n"sv);
}

TEST_CASE("the header of a three-element int32 array is numpy's") {
  // np.save of np.zeros((3,), '<i4')
  CHECK(ooc::npy::make_header(DType(Kind::signed_int, 4, kLittle), {3}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }                                                            \n"sv);
}

TEST_CASE("the header of a Fortran-order 2x3x4 float64 array is numpy's") {
  // np.save of np.asfortranarray(np.zeros((2, 3, 4), '<f8'))
  CHECK(ooc::npy::make_header(DType(Kind::floating, 8, kLittle), {2, 3, 4}, Order::fortran) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }                                                        \n"sv);
}

TEST_CASE("a Fortran-order array laid out as a C-order one is written as np.save writes it: C") {
  // np.save of np.zeros(shape, '<f8', order='F'): both contiguous, so fortran_order False
  CHECK(ooc::npy::make_header(DType(Kind::floating, 8, kLittle), {5}, Order::fortran) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }                                                            \n"sv);
  CHECK(ooc::npy::make_header(DType(Kind::floating, 8, kLittle), {5, 1}, Order::fortran) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (5, 1), }                                                          \n"sv);
  CHECK(ooc::npy::make_header(DType(Kind::floating, 8, kLittle), {0, 3, 4}, Order::fortran) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3, 4), }                                                       \n"sv);
}

TEST_CASE("the header of a big-endian int16 array is numpy's") {
  // np.save of np.zeros((2, 3, 4), '>i2')
  CHECK(ooc::npy::make_header(DType(Kind::signed_int, 2, kBig), {2, 3, 4}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '>i2', 'fortran_order': False, 'shape': (2, 3, 4), }                                                       \n"sv);
}

TEST_CASE("the header of a bool array is numpy's") {
  // np.save of np.zeros((5,), '|b1')
  CHECK(ooc::npy::make_header(DType(Kind::boolean, 1), {5}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }                                                            \n"sv);
}

TEST_CASE("the header of a one-element 2-d float16 array is numpy's") {
  // np.save of np.zeros((1, 1), '<f2')
  CHECK(ooc::npy::make_header(DType(Kind::floating, 2, kLittle), {1, 1}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1), }                                                          \n"sv);
}

TEST_CASE("a long first axis takes room from the growth padding in C order") {
  // _write_array_header of {'descr': '<u8', 'fortran_order': False, 'shape': (12345678901, 98765, 3)}
  CHECK(ooc::npy::make_header(DType(Kind::unsigned_int, 8, kLittle), {12345678901, 98765, 3}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<u8', 'fortran_order': False, 'shape': (12345678901, 98765, 3), }                                         \n"sv);
}

TEST_CASE("a long last axis takes room from the growth padding in Fortran order") {
  // _write_array_header of {'descr': '<u8', 'fortran_order': True, 'shape': (3, 98765, 12345678901)}
  CHECK(ooc::npy::make_header(DType(Kind::unsigned_int, 8, kLittle), {3, 98765, 12345678901}, Order::fortran) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '<u8', 'fortran_order': True, 'shape': (3, 98765, 12345678901), }                                          \n"sv);
}

TEST_CASE("a dimension of INT64_MAX, the most digits a shape can have, is written as numpy does") {
  // _write_array_header of {'descr': '|u1', 'fortran_order': False, 'shape': (9223372036854775807,)}
  CHECK(ooc::npy::make_header(DType(Kind::unsigned_int, 1), {std::numeric_limits<std::int64_t>::max()}, Order::c) ==
        "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (9223372036854775807,), }                                          \n"sv);
}

TEST_CASE("a header that ends exactly on a 64-byte boundary gets 64 bytes of padding, as numpy's") {
  // _write_array_header of {'descr': '<f8', 'fortran_order': False, 'shape': (1,) * 36}
  CHECK(ooc::npy::make_header(DType(Kind::floating, 8, kLittle), Shape(36, 1), Order::c) ==
        "\x93NUMPY\x01\x00\xf6\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), }                                                                                    \n"sv);
}

TEST_CASE("a 20-axis big-endian Fortran header spans several 64-byte lines, as numpy's") {
  // _write_array_header of {'descr': '>f4', 'fortran_order': True, 'shape': (1000,) * 20}
  CHECK(ooc::npy::make_header(DType(Kind::floating, 4, kBig), Shape(20, 1000), Order::fortran) ==
        "\x93NUMPY\x01\x00\xf6\x00{'descr': '>f4', 'fortran_order': True, 'shape': (1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000), }                                                                         \n"sv);
}

TEST_CASE("every header make_header writes is a multiple of 64 bytes and ends in a newline") {
  for (std::int64_t first : {0LL, 1LL, 9LL, 10LL, 99999LL, 1LL << 40}) {
    for (std::size_t ndim = 1; ndim < 12; ++ndim) {
      Shape shape(ndim, 7);
      shape[0] = first;
      const std::string h = ooc::npy::make_header(DType(Kind::floating, 4), shape, Order::c);
      CAPTURE(ooc::shape_repr(shape));
      CHECK(h.size() % 64 == 0);
      CHECK(h.back() == '\n');
    }
  }
}

// numpy packs the header length in 16 bits for version 1.0 and switches to 2.0 when the
// padded header (dict, padding, newline) exceeds 65535 bytes. numpy caps ndim at 32, so
// np.save itself never gets there; these shapes go through numpy's _write_array_header,
// the function np.save calls (it warns and picks 2.0), for the expected bytes:
//   shape = (1, x) + (1,) * 21815, d = {'descr': '<f8', 'fortran_order': False, 'shape': shape}
//   x = 1:  header text + newline = 65525 bytes, padded to 65526: the largest 1.0 header
//   x = 10: one byte longer: version 2.0, 4-byte length 0x00010034
// The FNV-1a 64 hashes are of numpy's complete prefixes.
TEST_CASE("the longest header version 1.0 can hold stays at version 1.0, byte for byte numpy's") {
  Shape shape(21817, 1);
  const std::string h = ooc::npy::make_header(DType(Kind::floating, 8, kLittle), shape, Order::c);
  CHECK(h.size() == 65536);
  CHECK(h.substr(0, 12) == "\x93NUMPY\x01\x00\xf6\xff{'"sv);
  CHECK(fnv1a(h) == 0x2f2cf7af2c797ff9ull);
}

TEST_CASE("a header one byte too long for version 1.0 switches to version 2.0, byte for byte numpy's") {
  Shape shape(21817, 1);
  shape[1] = 10;
  const std::string h = ooc::npy::make_header(DType(Kind::floating, 8, kLittle), shape, Order::c);
  CHECK(h.size() == 65600);
  CHECK(h.substr(0, 12) == "\x93NUMPY\x02\x00\x34\x00\x01\x00"sv);
  CHECK(fnv1a(h) == 0xe7218d5f6469937eull);
}

TEST_CASE("a version 2.0 header (a 4-byte length) parses, padded past 64 KiB") {
  // np.save writes version 2.0 only for headers over 65535 bytes, which 32 dimensions
  // never need: such a header is made by hand here, its dict padded with spaces.
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 5), }";
  const std::size_t total = 70016;  // a multiple of 64, over 65535
  dict.append(total - 12 - dict.size() - 1, ' ');
  dict += '\n';
  const auto length = static_cast<std::uint32_t>(dict.size());
  std::string file("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) file += static_cast<char>((length >> (8 * i)) & 0xff);
  file += dict + std::string(10 * 8, '\0');
  CHECK(ooc::npy::prefix_length(as_bytes(file)) == total);
  const Header h = parse(file);
  CHECK(h.major_version == 2);
  CHECK(h.shape == Shape{2, 5});
  CHECK(h.data_offset == total);
  CHECK(h.data_bytes == 80);
}

TEST_CASE("a header of more than 32 dimensions is refused, as np.load refuses it") {
  const std::string ok = ooc::npy::make_header(DType(Kind::floating, 8, kLittle), Shape(32, 1), Order::c);
  CHECK(parse(ok + std::string(8, '\0')).shape.size() == 32);
  const std::string over = ooc::npy::make_header(DType(Kind::floating, 8, kLittle), Shape(33, 1), Order::c);
  CHECK_THROWS_WITH_AS(parse(over + std::string(8, '\0')), "maximum supported dimension for an ndarray is 32, found 33",
                       ooc::npy::FormatError);
}

TEST_CASE("what make_header writes, parse_header reads back") {
  struct Case { DType dtype; Shape shape; Order order; };
  const Case cases[] = {
      {DType(Kind::floating, 8, kLittle), {}, Order::c},
      {DType(Kind::floating, 8, kBig), {0}, Order::c},
      {DType(Kind::boolean, 1), {1}, Order::c},
      {DType(Kind::unsigned_int, 2, kBig), {2, 3, 4}, Order::fortran},
      {DType(Kind::floating, 2, kLittle), {5, 0, 7}, Order::c},
  };
  for (const Case& c : cases) {
    const std::string prefix = ooc::npy::make_header(c.dtype, c.shape, c.order);
    const std::int64_t bytes = *ooc::element_count(c.shape) * c.dtype.itemsize();
    const Header h = parse(prefix + std::string(static_cast<std::size_t>(bytes), '\0'));
    CAPTURE(prefix);
    CHECK(h.dtype == c.dtype);
    CHECK(h.shape == c.shape);
    CHECK(h.order == c.order);
    CHECK(h.major_version == 1);
    CHECK(h.data_offset == prefix.size());
    CHECK(h.data_bytes == static_cast<std::uint64_t>(bytes));
  }
}

// ---- parse_header: what it accepts ----------------------------------------------------

TEST_CASE("a plain version 1.0 header parses to its dtype, shape, order and offsets") {
  const std::string file = npy_file(kPlain, 24);
  const Header h = parse(file);
  CHECK(h.major_version == 1);
  CHECK(h.minor_version == 0);
  CHECK(h.dtype == DType(Kind::floating, 8, kLittle));
  CHECK(h.shape == Shape{3});
  CHECK(h.order == Order::c);
  CHECK(h.data_offset == 10 + kPlain.size());
  CHECK(h.data_bytes == 24);
}

TEST_CASE("versions 2.0 and 3.0 use a four-byte header length") {
  for (int major : {2, 3}) {
    CAPTURE(major);
    const std::string file = npy_file(kPlain, 24, major);
    const Header h = parse(file);
    CHECK(h.major_version == major);
    CHECK(h.minor_version == 0);
    CHECK(h.data_offset == 12 + kPlain.size());
    CHECK(h.shape == Shape{3});
    CHECK(ooc::npy::prefix_length(as_bytes(file)) == 12 + kPlain.size());
  }
}

TEST_CASE("prefix_length reads the length from the first twelve bytes alone") {
  const std::string file = npy_file(kPlain, 24);
  CHECK(ooc::npy::prefix_length(as_bytes(file).first(ooc::npy::kPreambleBytes)) == 10 + kPlain.size());
  CHECK(ooc::npy::prefix_length(as_bytes(file).first(10)) == 10 + kPlain.size());
}

TEST_CASE("the data offset is the whole prefix length, padding included") {
  const std::string header = kPlain + std::string(40, ' ') + "\n";
  const Header h = parse(npy_file(header, 24));
  CHECK(h.data_offset == 10 + header.size());
}

TEST_CASE("a 0-d header parses to an empty shape of one element") {
  const Header h = parse(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8));
  CHECK(h.shape.empty());
  CHECK(h.data_bytes == 8);
}

TEST_CASE("an empty array's header parses with no data after it") {
  const std::string file = npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 5), }");
  const Header h = parse(file);
  CHECK(h.shape == Shape{0, 5});
  CHECK(h.data_bytes == 0);
  CHECK(h.data_offset == file.size());
}

TEST_CASE("a one-element header parses") {
  const Header h = parse(npy_file("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", 1));
  CHECK(h.shape == Shape{1});
  CHECK(h.data_bytes == 1);
}

TEST_CASE("double quotes work as well as single quotes") {
  const Header h = parse(npy_file(R"({"descr": ">i4", "fortran_order": True, "shape": (2, 3)})", 24));
  CHECK(h.dtype == DType(Kind::signed_int, 4, kBig));
  CHECK(h.order == Order::fortran);
  CHECK(h.shape == (Shape{2, 3}));
}

TEST_CASE("extra whitespace and newlines anywhere between tokens are accepted") {
  const Header h = parse(npy_file(
      "  \n{ \t'descr' :\n'<u2' ,\r\n 'fortran_order'  :  False,'shape':(\n 4 ,\t5\n) \n}  \t\n", 40));
  CHECK(h.dtype == DType(Kind::unsigned_int, 2, kLittle));
  CHECK(h.shape == (Shape{4, 5}));
}

TEST_CASE("trailing commas in the dict and the shape are accepted, and so is their absence") {
  CHECK(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3,),}", 24)).shape == Shape{3});
  CHECK(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}", 24)).shape == Shape{3});
  CHECK(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 1,)}", 24)).shape ==
        (Shape{3, 1}));
  CHECK(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 1)}", 24)).shape ==
        (Shape{3, 1}));
}

TEST_CASE("the keys may come in any order") {
  const Header h = parse(npy_file("{'shape': (2,), 'fortran_order': True, 'descr': '<i2', }", 4));
  CHECK(h.dtype == DType(Kind::signed_int, 2, kLittle));
  CHECK(h.order == Order::fortran);
  CHECK(h.shape == Shape{2});
}

TEST_CASE("Python 2 long suffixes on dimensions are accepted") {
  const Header h = parse(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 24));
  CHECK(h.shape == (Shape{2, 3}));
  CHECK_THROWS_AS(parse(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6l,), }", 24)), FormatError);
  CHECK(parse(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6L,), }", 24, 2)).shape == Shape{6});
  // Version 3.0 came after Python 2: numpy does not filter its header, and refuses 6L.
  CHECK_THROWS_AS(parse(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6L,), }", 24, 3)), FormatError);
}

TEST_CASE("a file with more bytes than the header promises is accepted") {
  const Header h = parse(npy_file(kPlain, 100));
  CHECK(h.data_bytes == 24);
}

// ---- parse_header: what it refuses -----------------------------------------------------

TEST_CASE("a file that does not start with numpy's magic is refused") {
  std::string file = npy_file(kPlain, 24);
  file[1] = 'n';
  CHECK_THROWS_WITH_AS(parse(file), doctest::Contains("bad magic"), FormatError);
  CHECK_THROWS_WITH_AS(ooc::npy::prefix_length(as_bytes(file)), doctest::Contains("bad magic"), FormatError);
  const std::string text = "just some text, long enough";
  CHECK_THROWS_WITH_AS(parse(text), doctest::Contains("bad magic"), FormatError);
}

TEST_CASE("a file shorter than the magic and version is refused") {
  CHECK_THROWS_WITH_AS(parse(""), doctest::Contains("only 0 bytes"), FormatError);
  CHECK_THROWS_WITH_AS(parse("\x93NUMPY\x01"), doctest::Contains("only 7 bytes"), FormatError);
  CHECK_THROWS_AS(ooc::npy::prefix_length(as_bytes(std::string("\x93NUMPY\x01"))), FormatError);
}

TEST_CASE("a version 2.0 preamble cut short before its four-byte length is refused") {
  const std::string file = npy_file(kPlain, 24, 2);
  CHECK_THROWS_WITH_AS(ooc::npy::prefix_length(as_bytes(file).first(11)),
                       doctest::Contains("truncated preamble"), FormatError);
}

TEST_CASE("format versions other than 1.0, 2.0 and 3.0 are refused, naming the version") {
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain, 24, 0, 9)), doctest::Contains("version 0.9"), FormatError);
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain, 24, 0, 0)), doctest::Contains("version 0.0"), FormatError);
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain, 24, 4, 0)), doctest::Contains("version 4.0"), FormatError);
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain, 24, 1, 1)), doctest::Contains("version 1.1"), FormatError);
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain, 24, 2, 1)), doctest::Contains("version 2.1"), FormatError);
}

TEST_CASE("a header length that runs past the end of the file is refused") {
  const std::string file = npy_file(kPlain, 0);
  const std::string cut = file.substr(0, file.size() - 5);
  CHECK_THROWS_WITH_AS(ooc::npy::parse_header(as_bytes(cut), cut.size()),
                       doctest::Contains("runs past the end of the file"), FormatError);
}

TEST_CASE("a header longer than ooc's limit is refused before it is read") {
  std::string file = npy_file(kPlain, 24, 2);
  const std::uint32_t huge = 2u << 20;
  for (int i = 0; i < 4; ++i) file[8 + i] = static_cast<char>((huge >> (8 * i)) & 0xff);
  CHECK_THROWS_WITH_AS(ooc::npy::parse_header(as_bytes(file), 1ull << 30),
                       doctest::Contains("too large"), FormatError);
}

TEST_CASE("a prefix buffer shorter than the header length is refused") {
  const std::string file = npy_file(kPlain, 24);
  CHECK_THROWS_WITH_AS(ooc::npy::parse_header(as_bytes(file).first(20), file.size()),
                       doctest::Contains("truncated"), FormatError);
}

TEST_CASE("a header missing any of the three keys is refused, naming the key") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'fortran_order': False, 'shape': (3,), }", 24)),
                       doctest::Contains("lacks the key 'descr'"), FormatError);
  CHECK(error_of("{'descr': '<f8', 'shape': (3,), }").find("lacks the key 'fortran_order'") != std::string::npos);
  CHECK(error_of("{'descr': '<f8', 'fortran_order': False}").find("lacks the key 'shape'") != std::string::npos);
  CHECK(error_of("{}").find("lacks the key") != std::string::npos);
}

TEST_CASE("a header that repeats a key is refused, naming the key") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24)),
                       doctest::Contains("repeats the key 'descr'"), FormatError);
  CHECK(error_of("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'shape': (3,)}")
            .find("repeats the key 'shape'") != std::string::npos);
}

TEST_CASE("a header with a key numpy does not write is refused, naming the key") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'extra': 1}", 24)),
                       doctest::Contains("unexpected key 'extra'"), FormatError);
}

TEST_CASE("header text that is not a dict is refused") {
  for (const char* text : {"['descr', '<f8']", "descr: <f8", "", "   ", "('descr', '<f8')"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse(npy_file(text, 24)), doctest::Contains("not the dict numpy writes"), FormatError);
  }
}

TEST_CASE("a dict that is not closed or is malformed is refused") {
  for (const char* text : {"{'descr': '<f8', 'fortran_order': False, 'shape': (3,)",
                           "{'descr' '<f8', 'fortran_order': False, 'shape': (3,)}",
                           "{'descr': '<f8' 'fortran_order': False, 'shape': (3,)}",
                           "{'descr': '<f8',, 'fortran_order': False, 'shape': (3,)}",
                           "{'descr': '<f8, 'fortran_order': False, 'shape': (3,)}",
                           "{descr: '<f8', 'fortran_order': False, 'shape': (3,)}",
                           "{'de\\x73cr': '<f8', 'fortran_order': False, 'shape': (3,)}"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse(npy_file(text, 24)), FormatError);
  }
}

TEST_CASE("a structured descr is refused as structured") {
  CHECK_THROWS_WITH_AS(
      parse(npy_file("{'descr': [('a', '<f8'), ('b', '<i4')], 'fortran_order': False, 'shape': (3,), }", 36)),
      doctest::Contains("structured dtypes are not supported"), FormatError);
}

TEST_CASE("an object descr is refused without unpickling anything") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", 24)),
                       doctest::Contains("object arrays are not supported"), FormatError);
}

TEST_CASE("an unsupported descr is refused, naming it") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }", 48)),
                       doctest::Contains("unsupported dtype '<c16'"), FormatError);
  CHECK(error_of("{'descr': '<U10', 'fortran_order': False, 'shape': (3,), }").find("'<U10'") != std::string::npos);
  CHECK(error_of("{'descr': '<M8', 'fortran_order': False, 'shape': (3,), }").find("'<M8'") != std::string::npos);
}

TEST_CASE("a negative dimension is refused") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, -1), }", 24)),
                       doctest::Contains("negative dimension"), FormatError);
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (-10,), }", 24)),
                       doctest::Contains("negative dimension"), FormatError);
}

TEST_CASE("-0 is a dimension of 0, as Python reads it") {
  CHECK(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (-0, 3), }", 0)).shape == (Shape{0, 3}));
  CHECK(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (-00,), }", 0)).shape == Shape{0});
  CHECK_THROWS_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (-,), }", 0)), FormatError);
}

TEST_CASE("a dimension that overflows int64 is refused") {
  CHECK_THROWS_WITH_AS(
      parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775808,), }", 24)),
      doctest::Contains("overflows int64"), FormatError);
  CHECK(error_of("{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999999,), }")
            .find("overflows int64") != std::string::npos);
}

TEST_CASE("a shape whose element count or byte size overflows is refused, naming the shape") {
  // The element count overflows int64.
  CHECK_THROWS_WITH_AS(
      parse(npy_file("{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 24)),
      doctest::Contains("shape (4294967296, 4294967296) overflows"), FormatError);
  // The count fits; count * itemsize does not.
  CHECK_THROWS_WITH_AS(
      parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", 24)),
      doctest::Contains("shape (2305843009213693952,) overflows"), FormatError);
}

TEST_CASE("a 0 dimension does not hide an overflow of the others, as in numpy") {
  // numpy multiplies the nonzero dimensions and the itemsize: "array is too big".
  for (const char* shape : {"(0, 9223372036854775807, 9223372036854775807)", "(9223372036854775807, 0, 9223372036854775807)",
                            "(1152921504606846976, 0)", "(0, 4294967296, 0, 4294967296)"})
    CHECK(error_of("{'descr': '<f8', 'fortran_order': False, 'shape': " + std::string(shape) + ", }") ==
          "shape " + std::string(shape) + " overflows");
  // 8 * (2**60 - 1) bytes fit: an empty array of that shape is numpy's too.
  const Header h = parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1152921504606846975), }", 0));
  CHECK(h.shape == ooc::Shape{0, 1152921504606846975});
  CHECK(h.data_bytes == 0);
}

TEST_CASE("the largest shape that fits int64 bytes is not mistaken for an overflow") {
  // 2**61 float64 elements (above) are 2**64 bytes and overflow; 2**59 elements are
  // 2**62 bytes, which fit, so that header is refused only for its missing data.
  CHECK(error_of("{'descr': '<f8', 'fortran_order': False, 'shape': (576460752303423488,), }")
            .find("header says 4611686018427387904 bytes of data") != std::string::npos);
}

TEST_CASE("a parenthesised single number is not a tuple and is refused") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3), }", 24)),
                       doctest::Contains("'shape' is not a tuple"), FormatError);
}

TEST_CASE("a list shape is refused") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': [3], }", 24)),
                       doctest::Contains("expected a tuple for 'shape'"), FormatError);
}

TEST_CASE("a shape with a missing or non-integer dimension is refused") {
  for (const char* shape : {"(,)", "(3,,)", "(3 4)", "(3.0,)", "(x,)", "(3, 'a')", "(0x10,)", "3"}) {
    CAPTURE(shape);
    CHECK_THROWS_AS(parse(npy_file(std::string("{'descr': '<f8', 'fortran_order': False, 'shape': ") + shape + "}", 1024)),
                    FormatError);
  }
}

TEST_CASE("a fortran_order that is not True or False is refused") {
  for (const char* value : {"1", "0", "'True'", "true", "None", "Truee", "Fals"}) {
    CAPTURE(value);
    CHECK_THROWS_AS(parse(npy_file(std::string("{'descr': '<f8', 'fortran_order': ") + value + ", 'shape': (3,)}", 24)),
                    FormatError);
  }
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': 1, 'shape': (3,)}", 24)),
                       doctest::Contains("expected True or False for 'fortran_order'"), FormatError);
}

TEST_CASE("text after the header dict is refused") {
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain + " x\n", 24)),
                       doctest::Contains("unexpected text after the header dict"), FormatError);
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain + "{}", 24)),
                       doctest::Contains("unexpected text after the header dict"), FormatError);
}

TEST_CASE("a header with bytes that are not ASCII is refused") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), '\xc3\xa9': 1}", 24)),
                       doctest::Contains("not ASCII"), FormatError);
  std::string with_nul = kPlain;
  with_nul.back() = '\0';
  CHECK_THROWS_WITH_AS(parse(npy_file(with_nul, 24)), doctest::Contains("not ASCII"), FormatError);
  // Version 3.0 allows UTF-8 in numpy, but the dict numpy writes is always ASCII.
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain + "\xff", 24, 3)), doctest::Contains("not ASCII"), FormatError);
}

TEST_CASE("a file shorter than the data its header promises is refused with both sizes") {
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain, 23)),
                       doctest::Contains("header says 24 bytes of data, file holds 23"), FormatError);
  CHECK_THROWS_WITH_AS(parse(npy_file(kPlain, 0)),
                       doctest::Contains("header says 24 bytes of data, file holds 0"), FormatError);
}

TEST_CASE("a 0-d header with no data after it is refused") {
  CHECK_THROWS_WITH_AS(parse(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 0)),
                       doctest::Contains("header says 8 bytes of data, file holds 0"), FormatError);
}

TEST_CASE("FormatError messages name the problem, not a file") {
  const std::string message = error_of("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1}");
  CHECK(message == "header has an unexpected key 'x'");
}

TEST_CASE("every file of the fuzzer's corpus is refused cleanly or round-trips through make_header") {
  // tests/fuzz/npy_header/ holds the seeds and every input the fuzzer ever crashed on.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(OOC_NPY_FUZZ_CORPUS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CAPTURE(entry.path().filename().string());
    CHECK_NOTHROW(ooc::fuzz::check_npy_header(std::as_bytes(std::span(bytes))));
    ++files;
  }
  CHECK(files >= 19);
}
