#pragma once
/// Element types: the numpy dtypes ooc reads and writes, and the one dispatch point
/// that turns a run-time dtype into a C++ type.

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

// numpy's float16 is Eigen's; declared here, defined by <Eigen/Core> (which
// <ooc/array_map.hpp> and <ooc/kernel.hpp> include), so that naming dtypes costs no Eigen.
namespace Eigen {
struct half;
}

namespace ooc {

enum class Kind : std::uint8_t { boolean, signed_int, unsigned_int, floating };
enum class ByteOrder : std::uint8_t { little, big };

inline constexpr ByteOrder kNativeOrder =
    std::endian::native == std::endian::little ? ByteOrder::little : ByteOrder::big;

using half = Eigen::half;  // numpy float16

/// A numpy dtype of kind b, i, u or f: kind, item size and byte order.
class DType {
 public:
  constexpr DType(Kind kind, int itemsize, ByteOrder order = kNativeOrder)
      : kind_(kind), itemsize_(static_cast<std::uint8_t>(itemsize)),
        order_(itemsize == 1 ? kNativeOrder : order) {}

  /// Parses a numpy type string ("<f8", ">i4", "|b1", "=u2", "f4"); throws
  /// UsageError (with no file) naming what is unsupported.
  static DType parse(std::string_view descr);
  /// Parses a numpy type name ("float64", "int16", "bool"). Throws UsageError.
  static DType from_name(std::string_view name);
  /// What np.dtype(text) gives, for the dtypes ooc handles: a type name, another of
  /// numpy's names for it ("float", "int", "single", "ubyte"), a one-letter code ("d",
  /// "b", "?") or a descr ("<f4", "u2"). Throws UsageError.
  static DType from_numpy(std::string_view text);

  constexpr Kind kind() const { return kind_; }
  constexpr int itemsize() const { return itemsize_; }
  constexpr ByteOrder byte_order() const { return order_; }
  constexpr bool is_native() const { return order_ == kNativeOrder; }
  constexpr DType native() const { return DType(kind_, itemsize_, kNativeOrder); }
  constexpr DType with_order(ByteOrder order) const { return DType(kind_, itemsize_, order); }

  /// numpy's descr string: "<f8", ">i4", "|u1", "|b1".
  std::string descr() const;
  /// numpy's type name: "float64", "uint8", "bool".
  std::string name() const;

  constexpr bool operator==(const DType&) const = default;

 private:
  Kind kind_;
  std::uint8_t itemsize_;
  ByteOrder order_;
};

template <class T> struct dtype_traits;
#define OOC_DTYPE_TRAIT(T, K)                                   \
  template <> struct dtype_traits<T> {                          \
    static constexpr DType dtype{Kind::K, sizeof(T)};           \
  };
OOC_DTYPE_TRAIT(bool, boolean)
OOC_DTYPE_TRAIT(std::int8_t, signed_int)
OOC_DTYPE_TRAIT(std::int16_t, signed_int)
OOC_DTYPE_TRAIT(std::int32_t, signed_int)
OOC_DTYPE_TRAIT(std::int64_t, signed_int)
OOC_DTYPE_TRAIT(std::uint8_t, unsigned_int)
OOC_DTYPE_TRAIT(std::uint16_t, unsigned_int)
OOC_DTYPE_TRAIT(std::uint32_t, unsigned_int)
OOC_DTYPE_TRAIT(std::uint64_t, unsigned_int)
OOC_DTYPE_TRAIT(float, floating)
OOC_DTYPE_TRAIT(double, floating)
#undef OOC_DTYPE_TRAIT
template <> struct dtype_traits<half> {  // half may be incomplete here: its size is numpy's
  static constexpr DType dtype{Kind::floating, 2};
};

/// The native-order dtype of a C++ element type.
template <class T> inline constexpr DType dtype_of = dtype_traits<T>::dtype;

template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || std::is_same_v<T, half>;

/// Calls f(std::type_identity<T>{}) with the C++ type of dtype's kind and size (byte
/// order is the caller's business). This is the one switch from run-time to compile-time.
template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype.kind()) {
    case Kind::boolean: return f(std::type_identity<bool>{});
    case Kind::signed_int:
      switch (dtype.itemsize()) {
        case 1: return f(std::type_identity<std::int8_t>{});
        case 2: return f(std::type_identity<std::int16_t>{});
        case 4: return f(std::type_identity<std::int32_t>{});
        default: return f(std::type_identity<std::int64_t>{});
      }
    case Kind::unsigned_int:
      switch (dtype.itemsize()) {
        case 1: return f(std::type_identity<std::uint8_t>{});
        case 2: return f(std::type_identity<std::uint16_t>{});
        case 4: return f(std::type_identity<std::uint32_t>{});
        default: return f(std::type_identity<std::uint64_t>{});
      }
    case Kind::floating:
    default:
      switch (dtype.itemsize()) {
        case 2: return f(std::type_identity<half>{});
        case 4: return f(std::type_identity<float>{});
        default: return f(std::type_identity<double>{});
      }
  }
}

/// numpy.promote_types for the dtypes ooc supports (result in native order).
DType promote_types(DType a, DType b);
/// numpy.can_cast(from, to, casting="same_kind").
bool can_cast_same_kind(DType from, DType to);

}  // namespace ooc

namespace ooc {

/// Converts `count` elements from dtype `from` at `src` to dtype `to` at `dst`, as numpy's
/// astype does (C casts; any value to bool is value != 0), swapping bytes where either
/// side is not in native order. src and dst must not overlap unless they are equal and
/// the item sizes match.
void convert(DType from, const void* src, DType to, void* dst, std::int64_t count);

}  // namespace ooc
