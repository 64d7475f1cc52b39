#pragma once
// The values' keys that order statistics sort and select on: unsigned integers of the
// values' width, ordered as numpy sorts the values (NaN last), and the walk over the
// slices of an axis in memory order. Shared by order.cpp (quantiles, unique) and sort.cpp.

#include "layer.hpp"
#include "ooc/dtype.hpp"
#include "ooc/error.hpp"

#include <Eigen/Core>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace ooc::order_keys {

// ---- keys: unsigned integers ordered as numpy sorts the values, NaN last -------------

template <class U>
U swap_bytes(U v) {
  if constexpr (sizeof(U) == 1) return v;
  else if constexpr (sizeof(U) == 2) return __builtin_bswap16(v);
  else if constexpr (sizeof(U) == 4) return __builtin_bswap32(v);
  else return __builtin_bswap64(v);
}

template <class U>
constexpr U kSign = U(U(1) << (8 * sizeof(U) - 1));
template <class U>
constexpr U kInfinity = sizeof(U) == 2 ? U(0x7c00) : sizeof(U) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);

// A float's bits as an ordered key and back, without a branch on the sign (random signs
// would mispredict half the time: that branch was most of a median's time): a negative
// value's bits are all flipped, a positive one's sign bit set; a key with its top bit set
// came from a positive value.
template <class U>
U float_key(U bits) {
  return bits ^ (U(U(0) - U(bits >> (8 * sizeof(U) - 1))) | kSign<U>);
}
template <class U>
U float_bits(U key) {
  return key ^ (U(U(key >> (8 * sizeof(U) - 1)) - U(1)) | kSign<U>);
}

template <class U>
U bits_of(U key, Kind kind) {
  switch (kind) {
    case Kind::signed_int: return key ^ kSign<U>;
    case Kind::floating: return float_bits(key);
    default: return key;
  }
}

template <class U>
bool is_nan_key(U key, Kind kind) {
  return kind == Kind::floating && key == std::numeric_limits<U>::max();
}

// Reads the keys of a tile's raw bytes, in a dtype of kind K and byte order (Swap: not
// native) known when compiled, so the loops over a tile carry no branch of their own.
template <class U, Kind K, bool Swap>
struct StaticKeyReader {
  U operator()(const std::byte* bytes, std::int64_t j) const {
    U bits;
    std::memcpy(&bits, bytes + j * static_cast<std::int64_t>(sizeof(U)), sizeof(U));
    if constexpr (Swap) bits = swap_bytes(bits);
    if constexpr (K == Kind::signed_int) return bits ^ kSign<U>;
    else if constexpr (K == Kind::floating) {
      const U key = float_key(bits);
      return U(bits & ~kSign<U>) > kInfinity<U> ? std::numeric_limits<U>::max() : key;  // every NaN, last
    } else return bits;
  }
};

// The array's kind and byte order at run time; visit(f) calls f with the StaticKeyReader.
template <class U>
struct KeyReader {
  Kind kind;
  bool swap;
  template <class F>
  void visit(F&& f) const {
    auto with_kind = [&]<Kind K>() {
      if (swap) f(StaticKeyReader<U, K, true>{});
      else f(StaticKeyReader<U, K, false>{});
    };
    switch (kind) {
      case Kind::signed_int: return with_kind.template operator()<Kind::signed_int>();
      case Kind::floating: return with_kind.template operator()<Kind::floating>();
      default: return with_kind.template operator()<Kind::unsigned_int>();  // and bool: the bits
    }
  }
};

// ---- the slices of a run, in memory order -------------------------------------------

// In memory order the array is (outer, length, inner), `length` the axis reduced: the
// element at memory position p belongs to slice (p / (length * inner)) * inner + p % inner,
// which numbers the slices in the memory order of the reduced shape.
struct Geometry {
  std::int64_t outer = 1, length = 0, inner = 1;
  std::int64_t slices() const { return outer * inner; }
};

// Walks the slice numbers of consecutive memory positions without a division each.
struct SliceWalk {
  const Geometry& g;
  std::int64_t o, l, i;
  SliceWalk(const Geometry& geometry, std::int64_t p) : g(geometry) {
    i = g.inner == 0 ? 0 : p % g.inner;
    const std::int64_t rows = g.inner == 0 ? 0 : p / g.inner;
    l = g.length == 0 ? 0 : rows % g.length;
    o = g.length == 0 ? 0 : rows / g.length;
  }
  std::int64_t slice() const { return o * g.inner + i; }
  void next() {
    if (++i < g.inner) return;
    i = 0;
    if (++l < g.length) return;
    l = 0;
    ++o;
  }
};

template <class T> using Bits = std::conditional_t<sizeof(T) == 1, std::uint8_t, std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

template <class T>
T value_of_key(Bits<T> key, Kind kind) {
  const Bits<T> bits = bits_of(key, kind);
  return std::bit_cast<T>(bits);
}

/// Inside a catch block: rethrows the current exception, an ooc::Error without a file
/// given `path` (a UsageError staying one), a Cancelled as it is (oocrun tells a signal by
/// it), anything else unchanged.
[[noreturn]] inline void rethrow_naming_array(const std::string& path) {
  try {
    throw;
  } catch (const Cancelled&) {
    throw;
  } catch (const Error& e) {
    if (!e.path().empty()) throw;
    if (e.kind() == ErrorKind::usage) throw UsageError(path, e.problem(), e.option());
    throw Error(path, e.problem(), e.kind(), e.option());
  }
}

}  // namespace ooc::order_keys
