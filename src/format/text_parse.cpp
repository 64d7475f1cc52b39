#include "format/text_parse.hpp"

#include "ooc/error.hpp"

#include <fast_float/fast_float.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace ooc::text {

bool fused_parsing = true;

namespace {

// The length of a whitespace character at s[i] (0 for none): is_space's ASCII, and the
// UTF-8 encodings of the others Python's str.isspace() takes (U+0085, U+00A0, U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000): np.loadtxt strips fields of
// them and splits on them with delimiter=None ('1\u00a02' is two fields).
std::size_t space_at(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return is_space(s[i]) ? 1 : 0;
  auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  if (c == 0xC2) return at(1) == 0x85 || at(1) == 0xA0 ? 2 : 0;
  if (c == 0xE1) return at(1) == 0x9A && at(2) == 0x80 ? 3 : 0;
  if (c == 0xE2 && at(1) == 0x80) {
    const unsigned d = at(2);
    return (d >= 0x80 && d <= 0x8A) || d == 0xA8 || d == 0xA9 || d == 0xAF ? 3 : 0;
  }
  if (c == 0xE2) return at(1) == 0x81 && at(2) == 0x9F ? 3 : 0;
  if (c == 0xE3) return at(1) == 0x80 && at(2) == 0x80 ? 3 : 0;
  return 0;
}

// The length of a whitespace character that ends just before s[e] (0 for none).
std::size_t space_before(std::string_view s, std::size_t e) {
  if (e == 0) return 0;
  if (static_cast<unsigned char>(s[e - 1]) < 0x80) return is_space(s[e - 1]) ? 1 : 0;
  for (const std::size_t n : {std::size_t{2}, std::size_t{3}})
    if (e >= n && space_at(s.substr(0, e), e - n) == n) return n;
  return 0;
}

std::string_view trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e) {
    const std::size_t n = space_at(s, b);
    if (n == 0) break;
    b += n;
  }
  while (e > b) {
    const std::size_t n = space_before(s, e);
    if (n == 0 || e - n < b) break;
    e -= n;
  }
  return s.substr(b, e - b);
}

// What a field looks like in a message: quoted, shortened, control bytes escaped.
std::string shown(std::string_view field) {
  constexpr std::size_t kMax = 40;
  std::string out = "'";
  for (std::size_t i = 0; i < field.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(field[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (field.size() > kMax) out += "...";
  return out + "'";
}

// "1 field", "3 fields": the row width in a message.
std::string fields_text(int n) { return std::to_string(n) + (n == 1 ? " field" : " fields"); }

bool equals_lower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != lower[i]) return false;
  return true;
}

}  // namespace

std::string_view line_content(std::string_view line, const Dialect& dialect) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!dialect.comment.empty()) {
    // The first occurrence of the comment string (np.loadtxt: line.split(comment, 1)[0]).
    for (std::size_t from = 0; from < line.size();) {
      const void* c = std::memchr(line.data() + from, dialect.comment[0], line.size() - from);
      if (c == nullptr) break;
      const auto i = static_cast<std::size_t>(static_cast<const char*>(c) - line.data());
      if (line.substr(i).starts_with(dialect.comment)) {
        line = line.substr(0, i);
        break;
      }
      from = i + 1;
    }
  }
  return line;
}

bool blank(std::string_view content, const Dialect& dialect) {
  if (dialect.delimiter != 0) return content.empty();
  return trim(content).empty();
}

void split_fields(std::string_view content, const Dialect& dialect,
                  std::vector<std::pair<std::size_t, std::size_t>>& out) {
  out.clear();
  const std::size_t n = content.size();
  if (dialect.delimiter == 0) {
    std::size_t i = 0;
    while (true) {
      std::size_t k = 0;
      while (i < n && (k = space_at(content, i)) != 0) i += k;
      if (i == n) return;
      const std::size_t b = i;
      while (i < n && space_at(content, i) == 0) ++i;
      out.emplace_back(b, i);
    }
  }
  std::size_t b = 0;
  while (true) {
    const void* d = std::memchr(content.data() + b, dialect.delimiter, n - b);
    if (d == nullptr) {
      out.emplace_back(b, n);
      return;
    }
    const auto e = static_cast<std::size_t>(static_cast<const char*>(d) - content.data());
    out.emplace_back(b, e);
    b = e + 1;
  }
}

// One number at p as Python's float() reads it: an optional sign, then what fast_float
// reads, where a non-finite value must be the word nan, inf or infinity (fast_float also
// takes "nan(...)") or an overflowing number with digits ("1e400", infinite as in Python).
// Returns where the number ends, or nullptr when there is none.
static const char* signed_number(const char* p, const char* end, double& out) {
  bool negative = false;
  if (p < end && (*p == '+' || *p == '-')) {
    negative = *p == '-';
    ++p;
  }
  if (p == end || *p == '+' || *p == '-') return nullptr;
  double value = 0;
  const auto r = fast_float::from_chars(p, end, value);
  if (r.ec != std::errc()) return nullptr;
  if (!std::isfinite(value) && !(*p >= '0' && *p <= '9') && *p != '.') {
    const std::string_view word(p, static_cast<std::size_t>(r.ptr - p));
    if (!equals_lower(word, "nan") && !equals_lower(word, "inf") && !equals_lower(word, "infinity")) return nullptr;
  }
  out = negative ? -value : value;
  return r.ptr;
}

bool parse_double(std::string_view field, double& out) {
  const std::string_view s = trim(field);
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  double value = 0;
  if (signed_number(s.data(), end, value) != end) return false;
  out = value;
  return true;
}

template <class T> IntResult parse_integer(std::string_view field, T& out) {
  const std::string_view s = trim(field);
  const char* p = s.data();
  const char* e = p + s.size();
  bool negative = false;
  if (p < e && (*p == '+' || *p == '-')) {
    negative = *p == '-';
    ++p;
  }
  if (p == e) return IntResult::invalid;
  for (const char* q = p; q < e; ++q)
    if (*q < '0' || *q > '9') return IntResult::invalid;
  std::uint64_t magnitude = 0;
  const auto r = std::from_chars(p, e, magnitude);
  if (r.ec == std::errc::result_out_of_range) return IntResult::overflow;
  if (r.ec != std::errc() || r.ptr != e) return IntResult::invalid;
  if constexpr (std::is_signed_v<T>) {
    const auto max = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    if (negative) {
      if (magnitude > max + 1) return IntResult::overflow;
      out = static_cast<T>(static_cast<std::int64_t>(0 - magnitude));
    } else {
      if (magnitude > max) return IntResult::overflow;
      out = static_cast<T>(magnitude);
    }
  } else {
    if (negative && magnitude != 0) return IntResult::overflow;
    if (magnitude > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return IntResult::overflow;
    out = static_cast<T>(magnitude);
  }
  return IntResult::ok;
}

template IntResult parse_integer<std::int8_t>(std::string_view, std::int8_t&);
template IntResult parse_integer<std::int16_t>(std::string_view, std::int16_t&);
template IntResult parse_integer<std::int32_t>(std::string_view, std::int32_t&);
template IntResult parse_integer<std::int64_t>(std::string_view, std::int64_t&);
template IntResult parse_integer<std::uint8_t>(std::string_view, std::uint8_t&);
template IntResult parse_integer<std::uint16_t>(std::string_view, std::uint16_t&);
template IntResult parse_integer<std::uint32_t>(std::string_view, std::uint32_t&);
template IntResult parse_integer<std::uint64_t>(std::string_view, std::uint64_t&);

namespace {

// T: the type values are parsed into (double for every float dtype).
template <class T> std::string parse_one(std::string_view field, T& out, DType dtype) {
  if constexpr (std::is_same_v<T, double>) {
    if (parse_double(field, out)) return {};
    return "could not convert " + shown(field) + " to " + dtype.name();
  } else {
    switch (parse_integer(field, out)) {
      case IntResult::ok: return {};
      case IntResult::overflow: return "integer " + shown(trim(field)) + " is out of range for " + dtype.name();
      case IntResult::invalid: break;
    }
    return "could not convert " + shown(field) + " to " + dtype.name();
  }
}

// A delimiter no float's text can hold, so that the float parser stops before it.
bool number_free(char delimiter) {
  const auto c = static_cast<unsigned char>(delimiter);
  return c != 0 && !std::isalnum(c) && std::string_view(".+-()_").find(delimiter) == std::string_view::npos;
}

// A float at p, with the whitespace around it, up to the delimiter or `end`: where that
// delimiter (or end) is, or nullptr when the field is not exactly one number (the
// caller then takes the plain path, which says why). Accepts what parse_double accepts
// of the same field, with the same value.
const char* number_then_delimiter(const char* p, const char* end, char delimiter, double& out) {
  while (p < end && *p != delimiter && is_space(*p)) ++p;
  double value = 0;
  const char* q = signed_number(p, end, value);
  if (q == nullptr) return nullptr;
  while (q < end && *q != delimiter && is_space(*q)) ++q;
  if (q != end && *q != delimiter) return nullptr;
  out = value;
  return q;
}

// Values of type T appended to a byte buffer that is reused from chunk to chunk: its
// pages stay mapped, so a chunk costs no page faults
// (docs/decisions/2026-12-01-text-import-stream.md).
template <class T> class ValueSink {
 public:
  explicit ValueSink(std::vector<std::byte>& buf) : buf_(buf) { buf_.resize(buf_.capacity()); }
  // Room for n more values at the end: where they go (written, then kept by advance(n)).
  T* reserve(std::size_t n) {
    const std::size_t at = n_ * sizeof(T);
    if (at + n * sizeof(T) > buf_.size())
      buf_.resize(std::max<std::size_t>(2 * buf_.size(), at + n * sizeof(T) + (64 << 10)));
    return reinterpret_cast<T*>(buf_.data() + at);
  }
  void advance(std::size_t n) { n_ += n; }
  void push(const T& v) {
    const std::size_t at = n_ * sizeof(T);
    if (at + sizeof(T) > buf_.size()) buf_.resize(std::max<std::size_t>(2 * buf_.size(), at + (64 << 10)));
    std::memcpy(buf_.data() + at, &v, sizeof(T));
    ++n_;
  }
  std::size_t size() const { return n_; }
  void truncate(std::size_t n) { n_ = std::min(n, n_); }
  const std::byte* data() const { return buf_.data(); }
  void finish() { buf_.resize(n_ * sizeof(T)); }

 private:
  std::vector<std::byte>& buf_;
  std::size_t n_ = 0;
};

template <class T>
void parse_typed(std::string_view chunk, const Dialect& dialect, const Layout& layout, DType dtype,
                 const std::optional<std::vector<std::byte>>& missing, ChunkResult& result,
                 std::vector<std::byte>& scratch) {
  result.rows = 0;
  result.lines = 0;
  result.error.reset();
  const bool fused = fused_parsing && number_free(dialect.delimiter);
  // Values parsed as T go straight to the result when T is the dtype, else to scratch.
  const DType parsed = dtype_of<T>;
  ValueSink<T> values(parsed == dtype ? result.values : scratch);
  const int kept = layout.kept();
  const bool all = layout.columns.empty();
  T missing_value{};
  if (missing) std::memcpy(&missing_value, missing->data(), sizeof(T));
  std::vector<std::pair<std::size_t, std::size_t>> fields;
  std::size_t pos = 0;
  auto fail = [&](std::size_t column, std::string problem, std::string option = {}) {
    result.error = ParseError{result.lines, static_cast<std::int64_t>(column) + 1, std::move(problem), std::move(option)};
  };
  // np.loadtxt reads a file with Python's universal newlines: a lone '\r' (old Mac line
  // ends) ends a line as '\n' and "\r\n" do. Chunks end after a '\n' or at the end of
  // the input, so a '\r' last in a chunk is not half of a "\r\n". Looked for per line
  // only in a chunk that has one (found out when the first line takes the plain path).
  int has_cr = -1;
  // The fast path (float dtypes, all columns, a delimiter no number holds): a line is
  // parsed in one pass from its start, numbers and delimiters in turn, the values
  // written straight to the result, without finding the line's end or its comment
  // first. Any byte it does not expect (a comment, whitespace other than ' ', a lone
  // '\r', an empty or bad field, a field too many or too few) sends the line to the
  // plain path below, which parses it from the start again and says what is wrong.
  // A comment character that a number or the spaces around it could hold ('e', '.',
  // ' ') would be read as part of the number: no fast path then.
  const bool fast = std::is_same_v<T, double> && fused && all && layout.fields > 0 &&
                    (dialect.comment.empty() || (number_free(dialect.comment[0]) && dialect.comment[0] != ' '));
  const bool skip_blanks = dialect.delimiter != ' ';
  const char* const chunk_end = chunk.data() + chunk.size();
  const auto row_width = static_cast<std::size_t>(layout.fields);
  while (pos < chunk.size()) {
    if constexpr (std::is_same_v<T, double>) {
      if (fast) {
        double* out = values.reserve(row_width);
        const char* q = chunk.data() + pos;
        std::size_t k = 0;
        for (; k < row_width; ++k) {
          if (skip_blanks)
            while (q < chunk_end && *q == ' ') ++q;
          const char* r = signed_number(q, chunk_end, out[k]);
          if (r == nullptr) break;
          if (skip_blanks)
            while (r < chunk_end && *r == ' ') ++r;
          if (k + 1 < row_width) {
            if (r == chunk_end || *r != dialect.delimiter) break;
            q = r + 1;
          } else if (r == chunk_end) {
            q = r;
          } else if (*r == '\n') {
            q = r + 1;
          } else if (*r == '\r' && r + 1 < chunk_end && r[1] == '\n') {
            q = r + 2;
          } else {
            break;
          }
        }
        if (k == row_width) {
          values.advance(row_width);
          pos = static_cast<std::size_t>(q - chunk.data());
          ++result.rows;
          ++result.lines;
          continue;
        }
      }
    }
    if (has_cr < 0) has_cr = !chunk.empty() && std::memchr(chunk.data(), '\r', chunk.size()) != nullptr;
    const void* nl = std::memchr(chunk.data() + pos, '\n', chunk.size() - pos);
    std::size_t end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - chunk.data()) + 1 : chunk.size();
    if (has_cr) {
      const void* cr = std::memchr(chunk.data() + pos, '\r', end - pos);
      if (cr != nullptr) {
        const auto i = static_cast<std::size_t>(static_cast<const char*>(cr) - chunk.data());
        if (i + 1 == chunk.size() || chunk[i + 1] != '\n') end = i + 1;
      }
    }
    const std::string_view content = line_content(chunk.substr(pos, end - pos), dialect);
    pos = end;
    if (blank(content, dialect)) {
      ++result.lines;
      continue;
    }
    auto value_of = [&](std::size_t b, std::size_t e) -> bool {
      const std::string_view field = content.substr(b, e - b);
      T v{};
      if (missing && trim(field).empty()) {
        v = missing_value;
      } else {
        std::string problem = parse_one<T>(field, v, dtype);
        if (!problem.empty()) {
          const bool empty = trim(field).empty();
          if (empty) problem += " (an empty field; missing says what it stands for)";
          fail(b, std::move(problem), empty ? "missing" : "");
          return false;
        }
      }
      values.push(v);
      return true;
    };
    if (all && dialect.delimiter != 0) {
      // The common case, without building a field list: split and parse as we go.
      std::size_t b = 0;
      int count = 0;
      bool ok = true;
      while (true) {
        if constexpr (std::is_same_v<T, double>) {
          // Fused: the number parsed straight from the line, its end found by the
          // parser, not by a scan for the delimiter first (the plain path below takes
          // anything else: an empty field, a bad one, --missing).
          if (fused && count < layout.fields) {
            double v = 0;
            const char* q = number_then_delimiter(content.data() + b, content.data() + content.size(),
                                                  dialect.delimiter, v);
            if (q != nullptr) {
              values.push(v);
              ++count;
              if (q == content.data() + content.size()) break;
              b = static_cast<std::size_t>(q - content.data()) + 1;
              continue;
            }
          }
        }
        const void* d = std::memchr(content.data() + b, dialect.delimiter, content.size() - b);
        const std::size_t e = d ? static_cast<std::size_t>(static_cast<const char*>(d) - content.data()) : content.size();
        if (count == layout.fields) {
          fail(b, "expected " + fields_text(layout.fields) + ", found more");
          ok = false;
          break;
        }
        if (!value_of(b, e)) {
          ok = false;
          break;
        }
        ++count;
        if (d == nullptr) break;
        b = e + 1;
      }
      if (!ok) break;
      if (count != layout.fields) {
        fail(content.size(), "expected " + fields_text(layout.fields) + ", found " + std::to_string(count));
        break;
      }
    } else {
      split_fields(content, dialect, fields);
      const int count = static_cast<int>(fields.size());
      bool ok = true;
      if (all) {
        if (count != layout.fields) {
          const std::size_t at = count > layout.fields ? fields[static_cast<std::size_t>(layout.fields)].first
                                                       : content.size();
          fail(at, "expected " + fields_text(layout.fields) + ", found " + std::to_string(count));
          break;
        }
        for (const auto& [b, e] : fields)
          if (!(ok = value_of(b, e))) break;
      } else {
        // As np.loadtxt's usecols: a row needs only the fields it is asked for.
        for (const int c : layout.columns) {
          const int i = c < 0 ? c + count : c;
          if (i < 0 || i >= count) {
            fail(content.size(), "column " + std::to_string(c) + " is not in a row of " + fields_text(count));
            ok = false;
            break;
          }
          const auto& [b, e] = fields[static_cast<std::size_t>(i)];
          if (!(ok = value_of(b, e))) break;
        }
      }
      if (!ok) break;
    }
    ++result.rows;
    ++result.lines;
  }
  if (result.error) values.truncate(static_cast<std::size_t>(result.rows) * static_cast<std::size_t>(kept));
  values.finish();
  if (parsed != dtype) {
    // Float dtypes are parsed as float64 and rounded to theirs as numpy's loadtxt does
    // (`(float)double`, npy_double_to_half): convert is astype.
    result.values.resize(values.size() * static_cast<std::size_t>(dtype.itemsize()));
    if (values.size() > 0)
      convert(parsed, values.data(), dtype, result.values.data(), static_cast<std::int64_t>(values.size()));
  }
}

}  // namespace

void parse_chunk(std::string_view chunk, const Dialect& dialect, const Layout& layout, DType dtype,
                 const std::optional<std::vector<std::byte>>& missing, ChunkResult& result,
                 std::vector<std::byte>& scratch) {
  if (dtype.kind() == Kind::boolean) throw UsageError("text import reads numbers: bool is not supported");
  if (dtype.kind() == Kind::floating) {
    std::optional<std::vector<std::byte>> as_double;
    if (missing) {  // the missing value, held as the float64 it was parsed from
      double d = 0;
      convert(dtype, missing->data(), dtype_of<double>, &d, 1);
      as_double.emplace(sizeof d);
      std::memcpy(as_double->data(), &d, sizeof d);
    }
    return parse_typed<double>(chunk, dialect, layout, dtype, as_double, result, scratch);
  }
  visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      parse_typed<T>(chunk, dialect, layout, dtype, missing, result, scratch);
  });
}

ChunkResult parse_chunk(std::string_view chunk, const Dialect& dialect, const Layout& layout, DType dtype,
                        const std::optional<std::vector<std::byte>>& missing) {
  ChunkResult result;
  std::vector<std::byte> scratch;
  parse_chunk(chunk, dialect, layout, dtype, missing, result, scratch);
  return result;
}

std::string parse_value(std::string_view field, DType dtype, std::byte* out) {
  if (dtype.kind() == Kind::floating) {
    double d = 0;
    std::string problem = parse_one<double>(field, d, dtype);
    if (problem.empty()) convert(dtype_of<double>, &d, dtype, out, 1);
    return problem;
  }
  return visit_dtype(dtype, [&]<class T>(std::type_identity<T>) -> std::string {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      T v{};
      std::string problem = parse_one<T>(field, v, dtype);
      if (problem.empty()) std::memcpy(out, &v, sizeof v);
      return problem;
    } else {
      return "text import reads numbers: bool is not supported";
    }
  });
}

}  // namespace ooc::text
