#include "ooc/kernels/elementwise.hpp"

#include "ooc/error.hpp"
#include "ooc/kernel.hpp"
#include "vecmath.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace ooc::kernels {
namespace {

// numpy's min_scalar_type, and whether a non-negative integer would also fit the
// signed type of the same size ("small unsigned", which numpy then treats as signed
// when the array is signed or float).
struct MinScalar {
  DType dtype;
  bool small_unsigned = false;
};

MinScalar min_scalar_type(const PyScalar& s) {
  if (!s.is_integer) {
    const double v = s.float_value;
    if (!std::isfinite(v) || (v > -65000.0 && v < 65000.0)) return {DType(Kind::floating, 2)};
    if (v > -3.4e38 && v < 3.4e38) return {DType(Kind::floating, 4)};
    return {DType(Kind::floating, 8)};
  }
  if (s.negative) {
    const std::int64_t v = s.int_value;
    for (int size : {1, 2, 4}) {
      const std::int64_t low = -(std::int64_t{1} << (8 * size - 1));
      if (v >= low) return {DType(Kind::signed_int, size)};
    }
    return {DType(Kind::signed_int, 8)};
  }
  const std::uint64_t v = s.uint_value;
  for (int size : {1, 2, 4, 8}) {
    const std::uint64_t high = size == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * size)) - 1;
    if (v <= high) return {DType(Kind::unsigned_int, size), v <= (high >> 1)};
  }
  return {DType(Kind::unsigned_int, 8)};
}

int category(Kind kind) {
  switch (kind) {
    case Kind::boolean: return 0;
    case Kind::floating: return 2;
    default: return 1;
  }
}

}  // namespace

PyScalar PyScalar::parse(std::string_view text) {
  PyScalar s;
  const std::string str(text);
  if (str.empty()) throw UsageError("empty constant");
  std::size_t digits_from = (str[0] == '-' || str[0] == '+') ? 1 : 0;
  const bool integer = str.size() > digits_from &&
                       str.find_first_not_of("0123456789", digits_from) == std::string::npos;
  if (integer) {
    s.is_integer = true;
    s.negative = str[0] == '-';
    errno = 0;
    char* end = nullptr;
    if (s.negative) {
      s.int_value = std::strtoll(str.c_str(), &end, 10);
      if (errno == ERANGE) throw UsageError("constant " + str + " is below int64's range");
      if (s.int_value == 0) s.negative = false;  // "-0" is the integer 0
    } else {
      s.uint_value = std::strtoull(str.c_str() + digits_from, &end, 10);
      if (errno == ERANGE) throw UsageError("constant " + str + " is above uint64's range");
    }
    return s;
  }
  if (str.find_first_of("xXpP") != std::string::npos)
    throw UsageError("'" + str + "' is not a number");
  char* end = nullptr;
  s.is_integer = false;
  s.float_value = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size()) throw UsageError("'" + str + "' is not a number");
  return s;
}

PyScalar PyScalar::of_int(std::int64_t value) {
  PyScalar s;
  s.negative = value < 0;
  if (s.negative) s.int_value = value;
  else s.uint_value = static_cast<std::uint64_t>(value);
  return s;
}

PyScalar PyScalar::of_uint(std::uint64_t value) {
  PyScalar s;
  s.uint_value = value;
  return s;
}

PyScalar PyScalar::of_double(double value) {
  PyScalar s;
  s.is_integer = false;
  s.float_value = value;
  return s;
}

double PyScalar::as_double() const {
  if (!is_integer) return float_value;
  return negative ? static_cast<double>(int_value) : static_cast<double>(uint_value);
}

DType PyScalar::default_dtype() const {
  if (!is_integer) return DType(Kind::floating, 8);
  const bool fits_int64 = negative || uint_value <= static_cast<std::uint64_t>(INT64_MAX);
  return DType(fits_int64 ? Kind::signed_int : Kind::unsigned_int, 8);
}

namespace {

MinScalar min_scalar_type(const Operand& op) {
  if (op.dtype.kind() == Kind::boolean) return {op.dtype};
  if (op.dtype.kind() == Kind::floating) {
    // A float scalar never takes an integer type; float16 cannot shrink.
    if (op.dtype.itemsize() == 2) return {op.dtype};
    MinScalar m = min_scalar_type(PyScalar::of_double(op.value.as_double()));
    if (m.dtype.itemsize() > op.dtype.itemsize()) m.dtype = op.dtype;
    return m;
  }
  return min_scalar_type(op.value.is_integer ? op.value : PyScalar::of_int(static_cast<std::int64_t>(op.value.float_value)));
}

// numpy's promote_types with its "small unsigned" rule: a non-negative scalar that also
// fits the signed type of its size promotes as that signed type against signed ints
// and floats (so int8 + 3 stays int8).
DType promote_small(DType a, DType b, bool a_small, bool b_small) {
  auto as_signed = [](DType t) { return DType(Kind::signed_int, t.itemsize()); };
  if (a_small && b.kind() != Kind::boolean && b.kind() != Kind::unsigned_int)
    return promote_types(as_signed(a), b);
  if (!a_small && b_small && a.kind() != Kind::boolean && a.kind() != Kind::unsigned_int)
    return promote_types(a, as_signed(b));
  return promote_types(a, b);
}

// Whether numpy's value-based casting applies: some operand is an array, and no scalar is
// of a higher category (bool < integer < float) than every array.
bool scalars_count_by_value(std::span<const Operand> operands) {
  int max_array = -1;
  int max_scalar = -1;
  for (const Operand& op : operands)
    (op.scalar ? max_scalar : max_array) = std::max(op.scalar ? max_scalar : max_array, category(op.dtype.kind()));
  return max_array >= 0 && max_array >= max_scalar;
}

}  // namespace

DType result_type(std::span<const Operand> operands) {
  if (operands.empty()) throw std::logic_error("result_type of nothing");
  const bool by_value = scalars_count_by_value(operands);
  DType ret = operands[0].dtype;
  bool ret_small = false;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Operand& op = operands[i];
    MinScalar t{op.dtype.native()};
    if (by_value && op.scalar) t = min_scalar_type(op);
    if (i == 0) {
      ret = t.dtype;
      ret_small = t.small_unsigned;
    } else {
      ret = promote_small(t.dtype, ret, t.small_unsigned, ret_small);
      ret_small = ret_small && t.small_unsigned;
    }
  }
  return ret.native();
}

namespace {

// np.power's loop: power has no type resolver of its own, so numpy 1.24 takes the first
// of its loops (bb->b, BB->B, hh->h, HH->H, ..., QQ->Q, ee->e, ff->f, dd->d) that every
// operand casts to safely, a scalar judged by its value as in result_type. That is not
// always result_type: uint8 ** 256 computes in int16 (256 fits it, and uint8 casts to
// it), where uint8 + 256 is uint16.
DType power_loop(std::span<const Operand> operands) {
  const bool by_value = scalars_count_by_value(operands);
  auto casts_safely = [](DType from, DType to) { return promote_types(from, to) == to; };
  static const DType loops[] = {
      DType(Kind::signed_int, 1), DType(Kind::unsigned_int, 1), DType(Kind::signed_int, 2),
      DType(Kind::unsigned_int, 2), DType(Kind::signed_int, 4), DType(Kind::unsigned_int, 4),
      DType(Kind::signed_int, 8), DType(Kind::unsigned_int, 8), DType(Kind::floating, 2),
      DType(Kind::floating, 4), DType(Kind::floating, 8)};
  for (const DType& loop : loops) {
    const bool every_operand_casts = std::all_of(operands.begin(), operands.end(), [&](const Operand& op) {
      DType from = op.dtype.native();
      if (op.scalar && by_value) {
        const MinScalar m = min_scalar_type(op);
        from = m.small_unsigned && loop.kind() != Kind::unsigned_int ? DType(Kind::signed_int, m.dtype.itemsize())
                                                                      : m.dtype;
      }
      return casts_safely(from, loop);
    });
    if (every_operand_casts) return loop;
  }
  return DType(Kind::floating, 8);  // every dtype ooc reads casts to float64 safely
}

}  // namespace

DType result_type(DType array, const PyScalar& scalar) {
  const Operand operands[] = {Operand::array(array), Operand::python(scalar)};
  return result_type(operands);
}

const char* ufunc_name(Ufunc f) {
  switch (f) {
    case Ufunc::add: return "add";
    case Ufunc::subtract: return "subtract";
    case Ufunc::multiply: return "multiply";
    case Ufunc::divide: return "true_divide";
    case Ufunc::power: return "power";
    case Ufunc::maximum: return "maximum";
    case Ufunc::minimum: return "minimum";
    case Ufunc::less: return "less";
    case Ufunc::less_equal: return "less_equal";
    case Ufunc::greater: return "greater";
    case Ufunc::greater_equal: return "greater_equal";
    case Ufunc::equal: return "equal";
    case Ufunc::not_equal: return "not_equal";
    case Ufunc::negative: return "negative";
    case Ufunc::absolute: return "absolute";
    case Ufunc::sqrt: return "sqrt";
    case Ufunc::exp: return "exp";
    case Ufunc::log: return "log";
    case Ufunc::log1p: return "log1p";
    case Ufunc::expm1: return "expm1";
    case Ufunc::sin: return "sin";
    case Ufunc::cos: return "cos";
    case Ufunc::tanh: return "tanh";
    case Ufunc::clip: default: return "clip";
  }
}

bool is_comparison(Ufunc f) { return f >= Ufunc::less && f <= Ufunc::not_equal; }
bool is_unary(Ufunc f) { return f >= Ufunc::negative && f <= Ufunc::tanh; }

DType loop_dtype(Ufunc f, std::span<const Operand> operands) {
  const DType first = operands.front().dtype.native();
  auto is_int_or_bool = [](DType t) { return t.kind() != Kind::floating; };
  switch (f) {
    case Ufunc::negative:
      if (first.kind() == Kind::boolean)
        throw UsageError("numpy boolean negative, the `-` operator, is not supported, use the `~` operator "
                             "or the logical_not function instead");
      return first;
    case Ufunc::absolute:
      return first;
    case Ufunc::sqrt: case Ufunc::exp: case Ufunc::log: case Ufunc::log1p: case Ufunc::expm1:
    case Ufunc::sin: case Ufunc::cos: case Ufunc::tanh:
      // numpy's loops are e->e, f->f, d->d: the first the input casts to safely.
      if (first.kind() == Kind::floating) return first;
      if (first.itemsize() == 1) return DType(Kind::floating, 2);
      if (first.itemsize() == 2) return DType(Kind::floating, 4);
      return DType(Kind::floating, 8);
    case Ufunc::divide:
      // np.true_divide computes any pair of integer or boolean dtypes in float64.
      if (std::all_of(operands.begin(), operands.end(), [&](const Operand& op) { return is_int_or_bool(op.dtype); }))
        return DType(Kind::floating, 8);
      return result_type(operands);
    case Ufunc::subtract: {
      const DType t = result_type(operands);
      if (t.kind() == Kind::boolean)
        throw UsageError("numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
                             "the `^` operator, or the logical_xor function instead");
      return t;
    }
    case Ufunc::power: {
      const DType t = power_loop(operands);
      if (t.kind() == Kind::signed_int)
        for (const Operand& op : operands.subspan(1))
          if (op.scalar && op.value.is_integer && op.value.negative)
            throw UsageError("Integers to negative integer powers are not allowed.");
      return t;
    }
    default:
      return result_type(operands);
  }
}

DType output_dtype(Ufunc f, DType loop) { return is_comparison(f) ? DType(Kind::boolean, 1) : loop; }

namespace {

// ---- the loops --------------------------------------------------------------------

// A float function as numpy's loop applies it: float16 goes through float32, as numpy's
// e->e loops do (npy_half_to_float, the float function, npy_float_to_half).
template <class C, class F>
C via_float(C x, F f) {
  if constexpr (std::is_same_v<C, half>) return half(f(static_cast<float>(x)));
  else return f(x);
}

template <class C>
bool is_nan(C x) {
  if constexpr (is_floating_v<C>) return Eigen::numext::isnan(x);
  else return false;
}

template <class C>
C integer_power(C base, C exponent) {
  if constexpr (std::is_signed_v<C>)
    if (exponent < 0) throw std::domain_error("Integers to negative integer powers are not allowed.");
  if (exponent == 0 || base == 1) return C(1);
  C out = (exponent & 1) ? base : C(1);
  exponent = static_cast<C>(exponent >> 1);
  while (exponent > 0) {
    base = static_cast<C>(base * base);  // wraps, as numpy's loop (and -fwrapv) do
    if (exponent & 1) out = static_cast<C>(out * base);
    exponent = static_cast<C>(exponent >> 1);
  }
  return out;
}

// np.clip's loop: max with the lower bound, then min with the upper, NaN in x kept; the
// float16 loop keeps x on ties, the others take the bound.
template <class C>
C clip_value(C x, C lo, C hi) {
  if constexpr (std::is_same_v<C, half>) {
    const C y = (is_nan(x) || x >= lo) ? x : lo;
    return (is_nan(y) || y <= hi) ? y : hi;
  } else {
    const C y = is_nan(x) ? x : (x > lo ? x : lo);
    return is_nan(y) ? y : (y < hi ? y : hi);
  }
}

template <class Out, class C, class Op>
void map_unary(std::span<const LoopInput> in, Out* out, std::int64_t n, Op op) {
  const C* x = static_cast<const C*>(in[0].data);
  for (std::int64_t i = 0; i < n; ++i) out[i] = op(x[in[0].repeated ? 0 : i]);
}

template <class Out, class C, class Op>
void map_binary(std::span<const LoopInput> in, Out* out, std::int64_t n, Op op) {
  const C* x = static_cast<const C*>(in[0].data);
  const C* y = static_cast<const C*>(in[1].data);
  // Separate loops for a repeated operand, so that the compiler vectorises each.
  if (in[1].repeated && !in[0].repeated) {
    const C c = *y;
    for (std::int64_t i = 0; i < n; ++i) out[i] = op(x[i], c);
  } else if (in[0].repeated && !in[1].repeated) {
    const C c = *x;
    for (std::int64_t i = 0; i < n; ++i) out[i] = op(c, y[i]);
  } else {
    const std::int64_t xs = in[0].repeated ? 0 : 1;
    const std::int64_t ys = in[1].repeated ? 0 : 1;
    for (std::int64_t i = 0; i < n; ++i) out[i] = op(x[i * xs], y[i * ys]);
  }
}

template <class C>
void run_typed(Ufunc f, std::span<const LoopInput> in, void* out_bytes, std::int64_t n) {
  C* out = static_cast<C*>(out_bytes);
  auto map = [&](auto op) { map_binary<C, C>(in, out, n, op); };
  auto map1 = [&](auto op) { map_unary<C, C>(in, out, n, op); };
  auto compare = [&](auto op) { map_binary<bool, C>(in, static_cast<bool*>(out_bytes), n, op); };
  switch (f) {
    case Ufunc::add:
      if constexpr (std::is_same_v<C, bool>) map([](bool a, bool b) { return a || b; });
      else map([](C a, C b) { return static_cast<C>(a + b); });
      return;
    case Ufunc::subtract:
      if constexpr (!std::is_same_v<C, bool>) return map([](C a, C b) { return static_cast<C>(a - b); });
      break;  // no bool loop: loop_dtype refuses it, as numpy does
    case Ufunc::multiply:
      if constexpr (std::is_same_v<C, bool>) map([](bool a, bool b) { return a && b; });
      else map([](C a, C b) { return static_cast<C>(a * b); });
      return;
    case Ufunc::divide:
      if constexpr (is_floating_v<C>) return map([](C a, C b) { return static_cast<C>(a / b); });
      break;  // true_divide loops are float only
    case Ufunc::power:
      if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>)
        return vecmath::pow(static_cast<const C*>(in[0].data), in[0].repeated ? 0 : 1,
                            static_cast<const C*>(in[1].data), in[1].repeated ? 0 : 1, out, n);
      else if constexpr (is_floating_v<C>) return map([](C a, C b) { return via_float(a, [b](auto v) { return std::pow(v, static_cast<decltype(v)>(b)); }); });
      else if constexpr (!std::is_same_v<C, bool>) return map([](C a, C b) { return integer_power(a, b); });
      break;  // no bool loop
    case Ufunc::maximum:
    case Ufunc::minimum: {
      // numpy 1.24's loops, on every SIMD path: a NaN in either wins (the first if both),
      // and of two equal values (0.0 and -0.0) float64 and float32 give the second,
      // float16 (npy_half_ge, npy_half_le) the first.
      const bool max = f == Ufunc::maximum;
      if constexpr (std::is_same_v<C, bool>) {
        map([max](bool a, bool b) { return max ? a || b : a && b; });
      } else if constexpr (std::is_same_v<C, half>) {
        map([max](C a, C b) { return is_nan(a) || (max ? a >= b : a <= b) ? a : b; });
      } else if constexpr (is_floating_v<C>) {
        map([max](C a, C b) { return is_nan(a) || (max ? a > b : a < b) ? a : b; });
      } else {
        map([max](C a, C b) { return (max ? a > b : a < b) ? a : b; });
      }
      return;
    }
    case Ufunc::less: compare([](C a, C b) { return a < b; }); return;
    case Ufunc::less_equal: compare([](C a, C b) { return a <= b; }); return;
    case Ufunc::greater: compare([](C a, C b) { return a > b; }); return;
    case Ufunc::greater_equal: compare([](C a, C b) { return a >= b; }); return;
    case Ufunc::equal: compare([](C a, C b) { return a == b; }); return;
    case Ufunc::not_equal: compare([](C a, C b) { return a != b; }); return;
    case Ufunc::negative:
      if constexpr (!std::is_same_v<C, bool>) return map1([](C a) { return static_cast<C>(-a); });
      break;  // no bool loop
    case Ufunc::absolute:
      if constexpr (std::is_same_v<C, half>) map1([](C a) { return Eigen::numext::bit_cast<half>(static_cast<std::uint16_t>(Eigen::numext::bit_cast<std::uint16_t>(a) & 0x7fffu)); });
      else if constexpr (is_floating_v<C>) map1([](C a) { return std::fabs(a); });
      else if constexpr (std::is_signed_v<C>) map1([](C a) { return static_cast<C>(a < 0 ? -a : a); });
      else map1([](C a) { return a; });
      return;
    case Ufunc::clip: {
      const C* x = static_cast<const C*>(in[0].data);
      const C* lo = static_cast<const C*>(in[1].data);
      const C* hi = static_cast<const C*>(in[2].data);
      if (in[1].repeated && in[2].repeated && !in[0].repeated) {
        for (std::int64_t i = 0; i < n; ++i) out[i] = clip_value(x[i], *lo, *hi);
      } else {
        const std::int64_t xs = in[0].repeated ? 0 : 1, ls = in[1].repeated ? 0 : 1, hs = in[2].repeated ? 0 : 1;
        for (std::int64_t i = 0; i < n; ++i) out[i] = clip_value(x[i * xs], lo[i * ls], hi[i * hs]);
      }
      return;
    }
    default:
      break;
  }
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    // The transcendental functions, vectorised (vecmath.cpp); a repeated input is one value.
    const auto vectorised = [&](vecmath::Fn fn) {
      const C* x = static_cast<const C*>(in[0].data);
      if (in[0].repeated) {
        vecmath::unary(fn, x, out, 1);
        std::fill(out + 1, out + std::max<std::int64_t>(n, 1), out[0]);
      } else {
        vecmath::unary(fn, x, out, n);
      }
    };
    switch (f) {
      case Ufunc::exp: vectorised(vecmath::Fn::exp); return;
      case Ufunc::log: vectorised(vecmath::Fn::log); return;
      case Ufunc::log1p: vectorised(vecmath::Fn::log1p); return;
      case Ufunc::expm1: vectorised(vecmath::Fn::expm1); return;
      case Ufunc::sin: vectorised(vecmath::Fn::sin); return;
      case Ufunc::cos: vectorised(vecmath::Fn::cos); return;
      case Ufunc::tanh: vectorised(vecmath::Fn::tanh); return;
      default: break;
    }
  }
  if constexpr (is_floating_v<C>) {
    // float16 computes in float32 with glibc's scalar functions, as numpy's e->e loops do.
    switch (f) {
      case Ufunc::sqrt: map1([](C a) { return via_float(a, [](auto v) { return std::sqrt(v); }); }); return;
      case Ufunc::exp: map1([](C a) { return via_float(a, [](auto v) { return std::exp(v); }); }); return;
      case Ufunc::log: map1([](C a) { return via_float(a, [](auto v) { return std::log(v); }); }); return;
      case Ufunc::log1p: map1([](C a) { return via_float(a, [](auto v) { return std::log1p(v); }); }); return;
      case Ufunc::expm1: map1([](C a) { return via_float(a, [](auto v) { return std::expm1(v); }); }); return;
      case Ufunc::sin: map1([](C a) { return via_float(a, [](auto v) { return std::sin(v); }); }); return;
      case Ufunc::cos: map1([](C a) { return via_float(a, [](auto v) { return std::cos(v); }); }); return;
      case Ufunc::tanh: map1([](C a) { return via_float(a, [](auto v) { return std::tanh(v); }); }); return;
      default: break;
    }
  }
  throw std::logic_error(std::string("no ") + ufunc_name(f) + " loop for this dtype");
}

}  // namespace

void run_loop(Ufunc f, DType loop, std::span<const LoopInput> in, void* out, std::int64_t n) {
  visit_dtype(loop, [&]<class C>(std::type_identity<C>) { run_typed<C>(f, in, out, n); });
}

// ---- ElementwiseOp ----------------------------------------------------------------

namespace {

struct NamedUfunc {
  std::string_view name;
  Ufunc ufunc;
  int constants;  // Python scalars the name takes after ':'
};

constexpr NamedUfunc kOperations[] = {
    {"add", Ufunc::add, 1},       {"sub", Ufunc::subtract, 1}, {"mul", Ufunc::multiply, 1},
    {"scale", Ufunc::multiply, 1}, {"div", Ufunc::divide, 1},   {"pow", Ufunc::power, 1},
    {"neg", Ufunc::negative, 0},  {"abs", Ufunc::absolute, 0}, {"sqrt", Ufunc::sqrt, 0},
    {"exp", Ufunc::exp, 0},       {"log", Ufunc::log, 0},      {"log1p", Ufunc::log1p, 0},
    {"expm1", Ufunc::expm1, 0},
    {"sin", Ufunc::sin, 0},       {"cos", Ufunc::cos, 0},      {"tanh", Ufunc::tanh, 0},
    {"clip", Ufunc::clip, 2},
};

constexpr std::string_view kKnownOperations =
    "add-one, add:C, sub:C, mul:C, scale:C, div:C, pow:C, neg, abs, sqrt, exp, log, log1p, expm1, sin, cos, "
    "tanh, "
    "clip:LO:HI, cast:DTYPE";

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t from = 0;
  while (true) {
    const std::size_t at = text.find(separator, from);
    parts.push_back(text.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
    if (at == std::string_view::npos) return parts;
    from = at + 1;
  }
}

}  // namespace

ElementwiseOp ElementwiseOp::parse(std::string_view spec) {
  ElementwiseOp op;
  op.spec_ = std::string(spec);
  const std::vector<std::string_view> parts = split(spec, ':');
  const std::string_view name = parts[0];
  const std::size_t given = parts.size() - 1;
  if (name == "add-one" && given == 0) {
    op.ufunc_ = Ufunc::add;
    op.constants_ = {PyScalar::of_int(1)};
    return op;
  }
  if (name == "cast") {
    if (given != 1) throw UsageError("operation '" + op.spec_ + "' needs a dtype, as in cast:float32");
    op.cast_ = true;
    try {
      op.cast_to_ = DType::from_numpy(parts[1]);  // astype keeps the byte order asked for
    } catch (const UsageError& e) {
      throw UsageError("operation '" + op.spec_ + "': " + e.problem() +
                               " (known: bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
                               "float16, float32, float64, and numpy's other names and codes for them)");
    }
    return op;
  }
  for (const NamedUfunc& known : kOperations) {
    if (known.name != name) continue;
    op.ufunc_ = known.ufunc;
    if (static_cast<int>(given) != known.constants) {
      if (known.constants == 0) throw UsageError("operation '" + op.spec_ + "' takes no constant");
      throw UsageError("operation '" + op.spec_ + "' needs " +
                               (known.constants == 1 ? "a constant, as in " + std::string(name) + ":2"
                                                     : "two constants, as in " + std::string(name) + ":0:1"));
    }
    for (std::size_t i = 1; i < parts.size(); ++i) {
      try {
        op.constants_.push_back(PyScalar::parse(parts[i]));
      } catch (const UsageError& e) {
        throw UsageError("operation '" + op.spec_ + "': " + e.problem());
      }
    }
    if (op.ufunc_ == Ufunc::clip) {
      // np.clip reads a NaN bound as no bound (numpy 1.17's deprecated behaviour), on
      // native arrays; apply() gives a non-native one what numpy gives it.
      auto is_nan_constant = [](const PyScalar& c) { return !c.is_integer && std::isnan(c.float_value); };
      op.nan_bound_ = is_nan_constant(op.constants_[0]) || is_nan_constant(op.constants_[1]);
      if (is_nan_constant(op.constants_[0])) op.constants_[0] = PyScalar::of_double(-INFINITY);
      if (is_nan_constant(op.constants_[1])) op.constants_[1] = PyScalar::of_double(INFINITY);
    }
    return op;
  }
  throw UsageError("unknown operation '" + op.spec_ + "' (known: " + std::string(kKnownOperations) + ")");
}

DType ElementwiseOp::result_dtype(DType input, int ndim) const {
  if (cast_) return cast_to_;
  std::vector<Operand> operands{ndim == 0 ? Operand::numpy_scalar(input, PyScalar{}) : Operand::array(input)};
  for (const PyScalar& c : constants_) operands.push_back(Operand::python(c));
  try {
    return output_dtype(ufunc_, loop_dtype(ufunc_, operands));
  } catch (const UsageError& e) {
    throw UsageError(spec_ + " of " + input.name() + ": " + e.problem());
  }
}

void ElementwiseOp::apply(const MappedArray& in, MappedArray& out, const PipelineOptions& options) const {
  DType compute = cast_to_.native();  // transform_as swaps into out's order
  if (!cast_) {
    try {
      compute = result_dtype(in.dtype(), in.ndim());
    } catch (const UsageError& e) {
      throw UsageError(in.path(), e.problem());
    }
  }
  // cast:T stores astype(T) back as numpy's `a[...] = a.astype(T)` does, which casts
  // unsafely (any numeric dtype to any other); a ufunc's result must pass same_kind, as
  // for numpy's `np.OP(a, C, out=a)` and `a OP= C`.
  if (!cast_ && !can_cast_same_kind(compute, out.dtype()))
    throw UsageError(out.path(), "cannot store the " + compute.name() + " result of " + spec_ + " in a " +
                                     out.dtype().name() + " array (numpy's same_kind rule)");
  visit_dtype(compute, [&]<class C>(std::type_identity<C>) {
    if (cast_) {  // astype: transform_as converts to C and C to out's dtype
      transform_as<C>(in, out, [](const auto& x) { return x; }, options);
      return;
    }
    C constants[2]{};  // at most LO and HI
    for (std::size_t i = 0; i < constants_.size(); ++i) constants[i] = constants_[i].template as<C>();
    if constexpr (is_floating_v<C>) {  // a NaN bound makes the loop a float one
      // numpy's fast clip loop, which reads a NaN bound as no bound, takes native arrays
      // only; a byte-swapped one goes through maximum and minimum, which propagate the
      // NaN into every element.
      if (nan_bound_ && in.dtype().itemsize() > 1 && !in.dtype().is_native())
        constants[0] = constants[1] = std::numeric_limits<C>::quiet_NaN();
    }
    const Ufunc f = ufunc_;
    if constexpr (!std::is_same_v<C, bool>) {
      if (f == Ufunc::add || f == Ufunc::multiply) {
        // The common cases as Eigen expressions, which vectorise.
        const C c = constants[0];
        if (f == Ufunc::add) transform_as<C>(in, out, [c](const auto& x) { return x + c; }, options);
        else transform_as<C>(in, out, [c](const auto& x) { return x * c; }, options);
        return;
      }
    }
    transform_as<C>(in, out, [&](const ConstArrayMap<C>& x) {
      C* result = reinterpret_cast<C*>(detail::scratch(detail::ScratchSlot::kernel, sizeof(C) * static_cast<std::size_t>(x.size())));
      std::vector<LoopInput> inputs{{x.data(), false}};
      for (std::size_t i = 0; i < constants_.size(); ++i) inputs.push_back({&constants[i], true});
      run_loop(f, dtype_of<C>, inputs, result, x.size());
      return ConstArrayMap<C>(result, x.size());
    }, options);
  });
}

}  // namespace ooc::kernels
