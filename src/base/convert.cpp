#include "ooc/dtype.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ooc {
namespace {

template <class T>
T load(const std::byte* p, bool swap) {
  if constexpr (std::is_same_v<T, bool>) {
    return *p != std::byte{0};  // any nonzero byte is True, as numpy reads it
  } else if constexpr (sizeof(T) == 1) {
    T v;
    std::memcpy(static_cast<void*>(&v), p, 1);
    return v;
  } else {
    using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t,
                 std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
    Bits bits;
    std::memcpy(&bits, p, sizeof bits);
    if (swap) {
      if constexpr (sizeof(T) == 2) bits = __builtin_bswap16(bits);
      else if constexpr (sizeof(T) == 4) bits = __builtin_bswap32(bits);
      else bits = __builtin_bswap64(bits);
    }
    T v;
    std::memcpy(static_cast<void*>(&v), &bits, sizeof v);
    return v;
  }
}

template <class T>
void store(std::byte* p, T v, bool swap) {
  if constexpr (sizeof(T) == 1) {
    std::memcpy(p, static_cast<const void*>(&v), 1);
  } else {
    using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t,
                 std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
    Bits bits;
    std::memcpy(&bits, static_cast<const void*>(&v), sizeof bits);
    if (swap) {
      if constexpr (sizeof(T) == 2) bits = __builtin_bswap16(bits);
      else if constexpr (sizeof(T) == 4) bits = __builtin_bswap32(bits);
      else bits = __builtin_bswap64(bits);
    }
    std::memcpy(p, &bits, sizeof bits);
  }
}

// double -> half rounded once, as numpy's npy_double_to_half: round to float with
// round-to-odd (no information lost for the second rounding), then to half.
half double_to_half(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(d) && static_cast<double>(f) != d) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    bits |= 1;
    std::memcpy(&f, &bits, sizeof f);
  }
  return half(f);
}

// x86-64's truncating conversions (cvttsd2si), which numpy's cast loops compile to: a
// value out of range (or NaN) gives the most negative integer. Spelled out because a C++
// cast of such a value is undefined behaviour.
std::int32_t truncate_to_int32(double v) {
  return v > -2147483649.0 && v < 2147483648.0 ? static_cast<std::int32_t>(v) : INT32_MIN;
}
std::int64_t truncate_to_int64(double v) {
  return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? static_cast<std::int64_t>(v) : INT64_MIN;
}

// A float to an integer type as numpy 1.24 does on x86-64, out-of-range values included
// (measured: 300.7 -> int8 44, 3e9 -> int8 0, -3e9 -> uint32 2147483648, NaN -> int64
// min): types of up to 32 bits through int32 and wrapped, int64 directly, and the
// unsigned types of 32 and 64 bits with the "subtract 2^(n-1), flip the top bit" trick
// for the upper half of their range.
template <class To>
To float_to_integer(double v) {
  if constexpr (std::is_same_v<To, std::int64_t>) {
    return truncate_to_int64(v);
  } else if constexpr (std::is_same_v<To, std::uint64_t>) {
    constexpr double kTop = 9223372036854775808.0;
    if (v >= kTop) return static_cast<std::uint64_t>(truncate_to_int64(v - kTop)) ^ (std::uint64_t{1} << 63);
    return static_cast<std::uint64_t>(truncate_to_int64(v));
  } else if constexpr (std::is_same_v<To, std::uint32_t>) {
    constexpr double kTop = 2147483648.0;
    if (v >= kTop) return static_cast<std::uint32_t>(truncate_to_int32(v - kTop)) ^ (std::uint32_t{1} << 31);
    return static_cast<std::uint32_t>(truncate_to_int32(v));
  } else {
    return static_cast<To>(static_cast<std::uint32_t>(truncate_to_int32(v)));  // wraps, as C++20 defines
  }
}

template <class To, class From>
To cast(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (std::is_same_v<To, bool>) return v != From(0);
  else if constexpr (std::is_same_v<To, half>) {
    if constexpr (std::is_same_v<From, double>) return double_to_half(v);
    else return half(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_same_v<From, half>) {
    // numpy's float16 loop is scalar code, where a float goes to uint32 through int64.
    const double x = static_cast<double>(static_cast<float>(v));
    if constexpr (std::is_same_v<To, std::uint32_t>) return static_cast<std::uint32_t>(truncate_to_int64(x));
    else return float_to_integer<To>(x);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return float_to_integer<To>(static_cast<double>(v));
  } else if constexpr (std::is_same_v<From, half>) return static_cast<To>(static_cast<float>(v));
  else return static_cast<To>(v);
}

template <class From, class To, bool SwapIn, bool SwapOut>
void convert_run(const std::byte* in, std::byte* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    store<To>(out + i * sizeof(To), cast<To>(load<From>(in + i * sizeof(From), SwapIn)), SwapOut);
}

}  // namespace

void convert(DType from, const void* src, DType to, void* dst, std::int64_t count) {
  if (count == 0) return;  // the pointers of an empty array may be null
  if (from == to && from.kind() != Kind::boolean) {  // nothing to convert (bools are normalised to 0/1)
    if (src != dst) std::memmove(dst, src, static_cast<std::size_t>(count) * static_cast<std::size_t>(from.itemsize()));
    return;
  }
  const bool swap_in = !from.is_native();
  const bool swap_out = !to.is_native();
  const auto* in = static_cast<const std::byte*>(src);
  auto* out = static_cast<std::byte*>(dst);
  visit_dtype(from, [&]<class From>(std::type_identity<From>) {
    visit_dtype(to, [&]<class To>(std::type_identity<To>) {
      // The byte orders as template arguments: the native loop has no test per element
      // and vectorises (float64 -> float32: 15% of a cast-and-compress run's time before).
      if (!swap_in && !swap_out) convert_run<From, To, false, false>(in, out, count);
      else if (swap_in && !swap_out) convert_run<From, To, true, false>(in, out, count);
      else if (!swap_in) convert_run<From, To, false, true>(in, out, count);
      else convert_run<From, To, true, true>(in, out, count);
    });
  });
}

}  // namespace ooc
