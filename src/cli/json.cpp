#include "cli/json.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <cstdio>
#include <cstring>
#include <type_traits>

namespace ooc::cli {
namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), or 0 if there is none.
std::size_t utf8_sequence(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
  else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // U+D800..U+DFFF are not characters
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  return n;
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out = "\"";
  char buf[8];
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      if (const std::size_t n = utf8_sequence(text.substr(i)); n > 0) {
        out.append(text.substr(i, n));
        i += n;
      } else {
        std::snprintf(buf, sizeof buf, "\\udc%02x", u);
        out += buf;
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
    ++i;
  }
  return out + "\"";
}

std::string json_float(double value, int itemsize) {
  switch (itemsize) {
    case 2: return Scalar::of(half(value)).to_json();
    case 4: return Scalar::of(static_cast<float>(value)).to_json();
    default: return Scalar::of(value).to_json();
  }
}

void Json::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!open_.empty()) {
    if (open_.back()) out_ += ", ";
    open_.back() = true;
  }
}

Json& Json::begin_object() {
  before_value();
  out_ += '{';
  open_.push_back(false);
  return *this;
}

Json& Json::end_object() {
  open_.pop_back();
  out_ += '}';
  return *this;
}

Json& Json::begin_array() {
  before_value();
  out_ += '[';
  open_.push_back(false);
  return *this;
}

Json& Json::end_array() {
  open_.pop_back();
  out_ += ']';
  return *this;
}

Json& Json::key(std::string_view name) {
  before_value();
  out_ += json_string(name);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

Json& Json::string(std::string_view text) {
  before_value();
  out_ += json_string(text);
  return *this;
}

Json& Json::boolean(bool value) {
  before_value();
  out_ += value ? "true" : "false";
  return *this;
}

Json& Json::null() {
  before_value();
  out_ += "null";
  return *this;
}

Json& Json::integer(std::int64_t value) {
  before_value();
  out_ += std::to_string(value);
  return *this;
}

Json& Json::unsigned_integer(std::uint64_t value) {
  before_value();
  out_ += std::to_string(value);
  return *this;
}

void Json::write_number(std::string text) {
  before_value();
  if (bare_non_finite_ && text.size() > 1 && text.front() == '"') text = text.substr(1, text.size() - 2);
  out_ += text;
}

Json& Json::number(double value) {
  write_number(json_float(value, 8));
  return *this;
}

Json& Json::scalar(const Scalar& value) {
  write_number(value.to_json());
  return *this;
}

Json& Json::array_values(const std::byte* data, DType dtype, const Shape& shape, Order order) {
  const Shape memory_stride = element_strides(shape, order);
  auto element = [&](std::int64_t at) {
    visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
      T v;
      std::memcpy(static_cast<void*>(&v), data + at * dtype.itemsize(), sizeof v);
      scalar(Scalar::of(v));
    });
  };
  auto walk = [&](auto&& self, std::size_t axis, std::int64_t at) -> void {
    if (axis == shape.size()) {
      element(at);
      return;
    }
    begin_array();
    for (std::int64_t i = 0; i < shape[axis]; ++i) self(self, axis + 1, at + i * memory_stride[axis]);
    end_array();
  };
  walk(walk, 0, 0);
  return *this;
}

}  // namespace ooc::cli
