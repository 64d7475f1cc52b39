#pragma once
/// INTERNAL: not part of ooc's API (installed for <ooc/kernels/reductions.hpp>'s Min/Max).
/// The sign of a zero min/max as numpy 1.24 lands on it.
///
/// -0.0 and 0.0 compare equal, so which of them np.min / np.max / np.nanmin / np.nanmax
/// return depends only on the order in which numpy's loop compares the elements: its
/// SIMD loop (numpy/core/src/umath/loops_minmax.dispatch.c.src) keeps one accumulator
/// per lane, folds eight vectors at a time in a tree, reduces the lanes in a fixed tree
/// and finishes the tail one element at a time, each compare keeping its second operand
/// on a tie (x86 maxpd/minpd) except the tail of fmax/fmin (C's fmax keeps the first).
/// The reduction copies element 0 into the result and calls that loop on [1, 8192),
/// [8192, 16384), ... (the iterator's 8192-element buffers), each call starting its lanes
/// from the running result. The lane count is numpy's dispatch on this CPU: 512-bit
/// vectors with AVX512_SKX, 256-bit with AVX2, else 128-bit, and, as numpy,
/// NPY_DISABLE_CPU_FEATURES turns the wider ones off.
///
/// Only float32 and float64 take that loop (float16 is compared one element after another,
/// keeping the first on ties). Nonzero ties have the same bits, so only a zero result
/// needs this: a reduction keeps, for each 8192-block whose extreme is zero, how the
/// block maps the class of the running result (not a zero, +0, -0) to the class after it.
/// Composing these maps is associative, so tiles keep their own and the in-order merge
/// composes them; the final class gives the zero's sign.

#include <array>
#include <cstdint>

namespace ooc::kernels::numpy_extremum {

/// The class of a running result: 0 not a zero (or no value yet), 1 +0.0, 2 -0.0.
using ZeroClass = std::uint8_t;
inline constexpr ZeroClass kNotZero = 0, kPositiveZero = 1, kNegativeZero = 2;

/// What a block does to the class of the running result; the identity by default.
struct ZeroMap {
  std::array<ZeroClass, 3> to{kNotZero, kPositiveZero, kNegativeZero};

  /// This map, then `next`.
  ZeroMap then(const ZeroMap& next) const {
    ZeroMap out;
    for (int c = 0; c < 3; ++c) out.to[c] = next.to[to[c]];
    return out;
  }
};

enum class Op : std::uint8_t { minimum, maximum, fmin, fmax };

/// numpy's vector width in bytes for its min/max loops on this CPU (64, 32 or 16).
int simd_bytes();

/// The map of one call of numpy's loop on `values` (n > 0), the running result entering
/// as each class (a value that is not a zero enters as the op's identity, which loses to
/// every zero as any such value does when the result ends as a zero).
template <class T>
ZeroMap block_map(Op op, const T* values, std::int64_t n);

/// The class numpy's reduction of `values` ends in when it starts with element 0 as its
/// result and runs its loop on the rest (the first block of an array).
template <class T>
ZeroClass first_block_class(Op op, const T* values, std::int64_t n);

}  // namespace ooc::kernels::numpy_extremum
