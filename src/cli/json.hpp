#pragma once
// oocrun's one JSON writer: every JSON text oocrun prints is built here, so escaping and
// the form of non-finite numbers are decided in one place.
//
// Output is RFC 8259 JSON that strict parsers (jq, Python's json with parse_constant
// refusing NaN) accept, in the layout Python's json.dumps gives (", " and ": ").
// Integers are exact, floats the shortest text that reads back to the same value of
// their dtype, and the three values JSON has no number for are the strings "NaN",
// "Infinity" and "-Infinity" (Python's float() reads each back). A writer made with
// NonFinite::bare writes those three bare instead: the numpy-like text oocrun prints
// without --json.

#include "ooc/dtype.hpp"
#include "ooc/scalar.hpp"
#include "ooc/shape.hpp"

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ooc::cli {

class Json {
 public:
  enum class NonFinite { quoted, bare };

  explicit Json(NonFinite non_finite = NonFinite::quoted) : bare_non_finite_(non_finite == NonFinite::bare) {}

  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  /// The next member's name (inside an object).
  Json& key(std::string_view name);

  Json& string(std::string_view text);
  Json& boolean(bool value);
  Json& null();
  Json& integer(std::int64_t value);
  Json& unsigned_integer(std::uint64_t value);
  /// A float64 value (non-finite ones as the strings above).
  Json& number(double value);
  /// A value of its dtype: true/false, an exact integer, or a float as number() writes it
  /// (shortest for the float's own size).
  Json& scalar(const Scalar& value);
  /// The values of an array of `dtype` and `shape` stored in `order` at `data`, nested as
  /// numpy's tolist() nests them (C order).
  Json& array_values(const std::byte* data, DType dtype, const Shape& shape, Order order);

  /// Shorthands for a member: key(name) then the value.
  template <class F>
    requires std::invocable<F, Json&>
  Json& member(std::string_view name, F&& write_value) {
    key(name);
    write_value(*this);
    return *this;
  }
  Json& member(std::string_view name, std::string_view text) { return key(name).string(text); }
  Json& member(std::string_view name, const char* text) { return key(name).string(text); }
  Json& member(std::string_view name, bool value) { return key(name).boolean(value); }
  Json& member(std::string_view name, std::int64_t value) { return key(name).integer(value); }
  Json& member(std::string_view name, int value) { return key(name).integer(value); }
  Json& member(std::string_view name, std::uint64_t value) { return key(name).unsigned_integer(value); }
  Json& member(std::string_view name, double value) { return key(name).number(value); }
  Json& member(std::string_view name, const Scalar& value) { return key(name).scalar(value); }

  /// The text written so far.
  const std::string& text() const { return out_; }

 private:
  void before_value();
  /// A number's text as written: non-finite ones unquoted for NonFinite::bare.
  void write_number(std::string text);

  bool bare_non_finite_;
  std::string out_;
  // For each open object or array: whether it has a member yet.
  std::vector<bool> open_;
  bool after_key_ = false;
};

/// A JSON string literal (quotes included) for `text`: quotes, backslashes and control
/// characters escaped; bytes that are not UTF-8 (a file name in Latin-1) as \udcXX,
/// the lone surrogate Python's os.fsencode turns back into that byte, so the text stays
/// valid UTF-8 and no byte of a name is lost.
std::string json_string(std::string_view text);

/// The JSON text of a float of `itemsize` bytes (2, 4 or 8): the shortest number that
/// reads back to it, or "NaN", "Infinity", "-Infinity" (quoted).
std::string json_float(double value, int itemsize);

}  // namespace ooc::cli
