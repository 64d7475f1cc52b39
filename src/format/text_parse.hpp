#pragma once
// Text (CSV) parsing: the line splitter and field parsers behind `oocrun import`, with
// no I/O, so that unit tests and the fuzzer reach them directly. A chunk is whole lines
// of text (the serial read stage cut it at a line end); parse_chunk turns it into the
// values of its data rows, or says where the first bad field is.

#include "format/layer.hpp"

#include "ooc/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ooc::text {

/// How lines split into fields, as np.loadtxt's arguments say it.
struct Dialect {
  char delimiter = ',';  ///< 0: runs of whitespace (np.loadtxt's delimiter=None)
  /// Empty: no comments; otherwise the rest of a line from its first occurrence is
  /// dropped (np.loadtxt's comments=, one character or several, as "//").
  std::string comment = "#";
};

/// Python's str.isspace() for one byte of ASCII, '\n' excluded (it ends lines).
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || (c >= 0x1c && c <= 0x1f);
}

/// The content of one line: without its '\r' before the '\n' and without a comment.
std::string_view line_content(std::string_view line, const Dialect& dialect);

/// True for a line np.loadtxt skips: empty once the comment is gone (or, with the
/// whitespace delimiter, nothing but whitespace).
bool blank(std::string_view content, const Dialect& dialect);

/// The fields of a line's content as [begin, end) byte offsets into it, untrimmed.
void split_fields(std::string_view content, const Dialect& dialect, std::vector<std::pair<std::size_t, std::size_t>>& out);

/// Parses a field as Python's float() parses it (the grammar of PyOS_string_to_double,
/// which np.loadtxt uses: optional sign, decimal digits with optional point and exponent,
/// inf, infinity, nan in any case, surrounding whitespace; no underscores, no hex),
/// correctly rounded. False if the text is not such a number.
bool parse_double(std::string_view field, double& out);

enum class IntResult { ok, invalid, overflow };
/// Parses a field as an integer of type T: surrounding whitespace, an optional sign, then
/// decimal digits only. No float round trip: "1.0" and "1e3" are invalid.
template <class T> IntResult parse_integer(std::string_view field, T& out);

/// The first bad thing in a chunk: its line (0-based within the chunk), byte column in
/// that line (1-based) and what is wrong.
struct ParseError {
  std::int64_t line = 0;
  std::int64_t column = 1;
  std::string problem;
  std::string option;  ///< the words of `problem` naming an option (ooc::Error::option())
};

/// What the data rows look like: fields per row (the first data row's count) and the
/// fields kept (np.loadtxt's usecols; negative counts from the end; empty: all).
struct Layout {
  int fields = 0;
  std::vector<int> columns;
  int kept() const { return columns.empty() ? fields : static_cast<int>(columns.size()); }
};

/// One chunk's values: rows x kept columns of `dtype` (native order), row after row.
struct ChunkResult {
  std::vector<std::byte> values;
  std::int64_t rows = 0;
  std::int64_t lines = 0;  ///< lines of the chunk parsed (all of them unless `error`)
  std::optional<ParseError> error;
};

/// Parses whole lines of text (each ends with '\n', the last may not) into values of
/// `dtype` (native; float16 and float32 are parsed as float64 and rounded, as numpy
/// does). `missing`, when set, holds the value (one element of `dtype`) an empty field
/// stands for. Stops at the first bad line.
ChunkResult parse_chunk(std::string_view chunk, const Dialect& dialect, const Layout& layout, DType dtype,
                        const std::optional<std::vector<std::byte>>& missing);

/// The same, into `result` and `scratch` whose buffers are reused from chunk to chunk.
void parse_chunk(std::string_view chunk, const Dialect& dialect, const Layout& layout, DType dtype,
                 const std::optional<std::vector<std::byte>>& missing, ChunkResult& result,
                 std::vector<std::byte>& scratch);

/// For the fuzzer: false parses every float field through the plain path (find the
/// field's end, then parse it), which the fused path (parse, and find the end as the
/// parser stops) must agree with. True by default.
extern bool fused_parsing;

/// Parses one field as a value of `dtype` into `out` (itemsize bytes); an empty string
/// on success, else the problem ("could not convert 'abc' to float64").
std::string parse_value(std::string_view field, DType dtype, std::byte* out);

}  // namespace ooc::text
