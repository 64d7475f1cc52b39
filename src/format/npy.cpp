#include "format/npy.hpp"

#include "ooc/error.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

namespace ooc::npy {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kAlign = 64;              // numpy's ARRAY_ALIGN
constexpr std::size_t kGrowthAxisMaxDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS

std::uint32_t read_le(std::span<const std::byte> bytes, std::size_t at, std::size_t width) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i)
    value |= static_cast<std::uint32_t>(bytes[at + i]) << (8 * i);
  return value;
}

// A recursive-descent reader for the one Python literal numpy writes. It accepts the
// spellings numpy's own reader accepts (either quote, any whitespace, trailing commas,
// Python 2 "L" suffixes) and nothing that would need evaluating.
class DictReader {
 public:
  // Python 2 long literals (3L) only in versions 1.0 and 2.0, which Python 2 wrote:
  // numpy filters them out of those alone.
  DictReader(std::string_view text, bool python2_longs) : text_(text), python2_longs_(python2_longs) {}

  Header read() {
    Header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = read_string("a key");
      expect(':');
      if (key == "descr") {
        once(seen_descr, key);
        skip_space();
        if (peek() == '[') fail("structured dtypes are not supported");
        const std::string descr = read_string("a dtype string");
        try {
          h.dtype = DType::from_numpy(descr);  // numpy's reader takes whatever np.dtype(descr) reads
        } catch (const UsageError& e) {
          throw FormatError(e.problem());
        }
      } else if (key == "fortran_order") {
        once(seen_order, key);
        h.order = read_bool() ? Order::fortran : Order::c;
      } else if (key == "shape") {
        once(seen_shape, key);
        h.shape = read_shape();
      } else {
        fail("header has an unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail_at("expected ',' or '}'");
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) fail_at("unexpected text after the header dict");
    if (!seen_descr) fail("header lacks the key 'descr'");
    if (!seen_order) fail("header lacks the key 'fortran_order'");
    if (!seen_shape) fail("header lacks the key 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw FormatError(what); }
  [[noreturn]] void fail_at(const std::string& what) const {
    throw FormatError("header is not the dict numpy writes: " + what + " at character " +
                      std::to_string(pos_));
  }
  void once(bool& seen, const std::string& key) const {
    if (seen) fail("header repeats the key '" + key + "'");
    seen = true;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail_at(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string read_string(const char* what) {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail_at(std::string("expected ") + what);
    const std::size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail_at("escape sequences are not allowed");
      ++pos_;
    }
    if (pos_ == text_.size()) fail_at("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }
  bool read_bool() {
    skip_space();
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail_at("expected True or False for 'fortran_order'");
  }
  std::int64_t read_dimension() {
    skip_space();
    const bool minus = peek() == '-';  // -0 is 0 to Python; anything else below is refused
    if (minus) ++pos_;
    if (peek() < '0' || peek() > '9') fail_at("expected a dimension");
    std::int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, peek() - '0', &value))
        fail("shape has a dimension that overflows int64");
      ++pos_;
    }
    if (python2_longs_ && peek() == 'L') ++pos_;  // Python 2 long literal (numpy strips only 'L')
    if (minus && value != 0) fail("shape has a negative dimension");
    return value;
  }
  Shape read_shape() {
    skip_space();
    if (peek() != '(') fail_at("expected a tuple for 'shape'");
    ++pos_;
    Shape shape;
    skip_space();
    if (peek() == ')') {
      ++pos_;
      return shape;
    }
    while (true) {
      shape.push_back(read_dimension());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
        if (peek() == ')') break;
        continue;
      }
      if (peek() != ')') fail_at("expected ',' or ')' in 'shape'");
      // "(3)" is the integer 3 in Python, not a tuple: numpy refuses it too.
      if (shape.size() == 1) fail_at("'shape' is not a tuple");
      break;
    }
    ++pos_;
    return shape;
  }

  std::string_view text_;
  bool python2_longs_;
  std::size_t pos_ = 0;
};

}  // namespace

std::uint64_t prefix_length(std::span<const std::byte> preamble) {
  if (preamble.size() < 10 ||
      std::memcmp(preamble.data(), kMagic.data(), kMagic.size()) != 0)
    throw FormatError("not a .npy file (bad magic)");
  const int major = static_cast<int>(preamble[6]);
  const int minor = static_cast<int>(preamble[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw FormatError("unsupported .npy format version " + std::to_string(major) + "." +
                      std::to_string(minor));
  if (major == 1) return 10 + read_le(preamble, 8, 2);
  if (preamble.size() < 12) throw FormatError("not a .npy file (truncated preamble)");
  return 12 + std::uint64_t{read_le(preamble, 8, 4)};
}

Header parse_header(std::span<const std::byte> prefix, std::uint64_t file_size) {
  if (file_size < 10) throw FormatError("not a .npy file (only " + std::to_string(file_size) + " bytes)");
  const std::uint64_t length = prefix_length(prefix);
  if (length > file_size)
    throw FormatError("header length " + std::to_string(length) + " runs past the end of the file (" +
                      std::to_string(file_size) + " bytes)");
  if (length > kMaxHeaderBytes + kPreambleBytes)
    throw FormatError("header of " + std::to_string(length) + " bytes is too large");
  if (prefix.size() < length) throw FormatError("header truncated");
  const std::size_t start = prefix[6] == std::byte{1} ? 10 : 12;
  std::string_view text(reinterpret_cast<const char*>(prefix.data()) + start, length - start);
  if (std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80 || c == '\0'; }))
    throw FormatError("header contains bytes that are not ASCII");

  Header h = DictReader(text, prefix[6] != std::byte{3}).read();
  h.major_version = static_cast<int>(prefix[6]);
  h.minor_version = 0;
  h.data_offset = length;
  // numpy's limit (NPY_MAXDIMS): np.load refuses more dimensions.
  if (h.shape.size() > kMaxDimensions)
    throw FormatError("maximum supported dimension for an ndarray is " + std::to_string(kMaxDimensions) + ", found " +
                      std::to_string(h.shape.size()));
  // numpy's rule: the nonzero dimensions times the itemsize fit in int64, even where
  // another dimension is 0 (numpy: "array is too big").
  const auto bytes = byte_count(h.shape, h.dtype.itemsize());
  if (!bytes) throw FormatError("shape " + shape_repr(h.shape) + " overflows");
  h.data_bytes = static_cast<std::uint64_t>(*bytes);
  if (file_size - length < h.data_bytes)
    throw FormatError("header says " + std::to_string(h.data_bytes) + " bytes of data, file holds " +
                      std::to_string(file_size - length));
  return h;
}

std::string make_header(DType dtype, const Shape& shape, Order order) {
  // np.save writes fortran_order True only for an array that is Fortran- and not also
  // C-contiguous: two axes longer than 1 and no empty one. Otherwise both orders lay the
  // bytes out alike (a 1-d array, (n, 1), (0, 3, 4)) and numpy says False.
  const auto longer_than_one = std::count_if(shape.begin(), shape.end(), [](std::int64_t n) { return n > 1; });
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  const bool fortran = order == Order::fortran && longer_than_one >= 2 && !empty;
  std::string dict = "{'descr': '" + dtype.descr() + "', 'fortran_order': " +
                     (fortran ? "True" : "False") + ", 'shape': " + shape_repr(shape) + ", }";
  // numpy leaves room to grow the first (C) or last (Fortran) axis in place.
  if (!shape.empty()) {
    const std::size_t digits = std::to_string(fortran ? shape.back() : shape.front()).size();
    dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  const std::size_t with_newline = dict.size() + 1;
  int major = 1;
  std::size_t preamble = 10;
  std::size_t pad = kAlign - (preamble + with_newline) % kAlign;  // 1..64, never 0, as numpy
  if (with_newline + pad > 0xffff) {  // too long for version 1.0's 16-bit length
    major = 2;
    preamble = 12;
    pad = kAlign - (preamble + with_newline) % kAlign;
  }
  const std::uint32_t hlen = static_cast<std::uint32_t>(with_newline + pad);
  std::string out(kMagic);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (std::size_t i = 0; i < preamble - 8; ++i) out.push_back(static_cast<char>((hlen >> (8 * i)) & 0xff));
  out += dict;
  out.append(pad, ' ');
  out.push_back('\n');
  return out;
}

}  // namespace ooc::npy
