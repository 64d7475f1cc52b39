#include "ooc/dtype.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include "ooc/error.hpp"

#include <stdexcept>

namespace ooc {
namespace {

constexpr std::string_view kSupported = "b1, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8";

bool valid_size(Kind kind, int size) {
  switch (kind) {
    case Kind::boolean: return size == 1;
    case Kind::floating: return size == 2 || size == 4 || size == 8;
    default: return size == 1 || size == 2 || size == 4 || size == 8;
  }
}

char kind_char(Kind kind) {
  switch (kind) {
    case Kind::boolean: return 'b';
    case Kind::signed_int: return 'i';
    case Kind::unsigned_int: return 'u';
    case Kind::floating: default: return 'f';
  }
}

// numpy's "same_kind" ordering: b < u < i < f.
int kind_rank(Kind kind) {
  switch (kind) {
    case Kind::boolean: return 0;
    case Kind::unsigned_int: return 1;
    case Kind::signed_int: return 2;
    case Kind::floating: default: return 3;
  }
}

bool is_integer(Kind kind) { return kind == Kind::signed_int || kind == Kind::unsigned_int; }

}  // namespace

DType DType::parse(std::string_view descr) {
  const std::string quoted = "'" + std::string(descr) + "'";
  if (descr.empty()) throw UsageError("empty dtype descr");
  ByteOrder order = kNativeOrder;
  std::string_view rest = descr;
  switch (rest.front()) {
    case '<': order = ByteOrder::little; rest.remove_prefix(1); break;
    case '>': order = ByteOrder::big; rest.remove_prefix(1); break;
    case '|': case '=': rest.remove_prefix(1); break;
    default: break;
  }
  if (rest.empty()) throw UsageError("unsupported dtype " + quoted);
  if (rest.front() == 'O')
    throw UsageError("object arrays are not supported (ooc never unpickles data)");
  Kind kind;
  switch (rest.front()) {
    case 'b': kind = Kind::boolean; break;
    case 'i': kind = Kind::signed_int; break;
    case 'u': kind = Kind::unsigned_int; break;
    case 'f': kind = Kind::floating; break;
    default:
      throw UsageError("unsupported dtype " + quoted + " (ooc handles " +
                                  std::string(kSupported) + ")");
  }
  rest.remove_prefix(1);
  int size = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), size);
  if (ec != std::errc() || end != rest.data() + rest.size() || !valid_size(kind, size))
    throw UsageError("unsupported dtype " + quoted + " (ooc handles " +
                                std::string(kSupported) + ")");
  return DType(kind, size, order);
}

DType DType::from_name(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, DType>, 12> kNames{{
      {"bool", DType(Kind::boolean, 1)},       {"int8", DType(Kind::signed_int, 1)},
      {"int16", DType(Kind::signed_int, 2)},   {"int32", DType(Kind::signed_int, 4)},
      {"int64", DType(Kind::signed_int, 8)},   {"uint8", DType(Kind::unsigned_int, 1)},
      {"uint16", DType(Kind::unsigned_int, 2)}, {"uint32", DType(Kind::unsigned_int, 4)},
      {"uint64", DType(Kind::unsigned_int, 8)}, {"float16", DType(Kind::floating, 2)},
      {"float32", DType(Kind::floating, 4)},   {"float64", DType(Kind::floating, 8)},
  }};
  for (const auto& [n, dtype] : kNames)
    if (n == name) return dtype;
  throw UsageError("unknown dtype name '" + std::string(name) + "'");
}

DType DType::from_numpy(std::string_view text) {
  // numpy's other names and its one-letter codes for the dtypes ooc handles (np.dtype(...)
  // on x86-64 Linux: int is int64, intc int32, long double and complex are not handled).
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 40> kAliases{{
      {"float", "f8"},  {"double", "f8"},   {"float_", "f8"},  {"single", "f4"},    {"half", "f2"},
      {"int", "i8"},    {"int_", "i8"},     {"intp", "i8"},    {"int0", "i8"},      {"longlong", "i8"},
      {"intc", "i4"},   {"short", "i2"},    {"byte", "i1"},    {"uint", "u8"},      {"uintp", "u8"},
      {"uint0", "u8"},  {"ulonglong", "u8"}, {"uintc", "u4"},  {"ushort", "u2"},    {"ubyte", "u1"},
      {"bool_", "b1"},  {"?", "b1"},        {"e", "f2"},       {"f", "f4"},         {"d", "f8"},
      {"b", "i1"},      {"h", "i2"},        {"i", "i4"},       {"l", "i8"},         {"q", "i8"},
      {"p", "i8"},      {"B", "u1"},        {"H", "u2"},       {"I", "u4"},         {"L", "u8"},
      {"Q", "u8"},      {"P", "u8"},        {"long", "i8"},    {"ulong", "u8"},     {"bool8", "b1"},
  }};
  // A one-letter code may carry a byte order, as in '>d' or '<H'; a name may not.
  const bool ordered_code = text.size() == 2 && std::string_view("<>=|").find(text[0]) != std::string_view::npos;
  const std::string order(ordered_code ? text.substr(0, 1) : "");
  const std::string_view code = text.substr(order.size());
  for (const auto& [alias, descr] : kAliases)
    if (alias == code) return parse(order + std::string(descr));
  try {
    return from_name(text);
  } catch (const UsageError&) {
    return parse(text);
  }
}

std::string DType::descr() const {
  const char order = itemsize_ == 1 ? '|' : (order_ == ByteOrder::little ? '<' : '>');
  return std::string{order, kind_char(kind_)} + std::to_string(itemsize_);
}

std::string DType::name() const {
  const int bits = itemsize_ * 8;
  switch (kind_) {
    case Kind::boolean: return "bool";
    case Kind::signed_int: return "int" + std::to_string(bits);
    case Kind::unsigned_int: return "uint" + std::to_string(bits);
    case Kind::floating: default: return "float" + std::to_string(bits);
  }
}

DType promote_types(DType a, DType b) {
  a = a.native();
  b = b.native();
  if (a == b) return a;
  if (a.kind() == Kind::boolean) return b;
  if (b.kind() == Kind::boolean) return a;
  if (a.kind() == b.kind()) return a.itemsize() >= b.itemsize() ? a : b;
  if (is_integer(a.kind()) && is_integer(b.kind())) {
    const DType s = a.kind() == Kind::signed_int ? a : b;
    const DType u = a.kind() == Kind::signed_int ? b : a;
    if (u.itemsize() < s.itemsize()) return s;
    if (u.itemsize() < 8) return DType(Kind::signed_int, 2 * u.itemsize());
    return DType(Kind::floating, 8);
  }
  // One integer, one float: the float must hold every value of the integer exactly.
  const DType i = is_integer(a.kind()) ? a : b;
  const DType f = is_integer(a.kind()) ? b : a;
  const int holder = i.itemsize() == 1 ? 2 : i.itemsize() == 2 ? 4 : 8;
  return DType(Kind::floating, std::max(holder, f.itemsize()));
}

bool can_cast_same_kind(DType from, DType to) {
  return kind_rank(from.kind()) <= kind_rank(to.kind());
}

}  // namespace ooc
