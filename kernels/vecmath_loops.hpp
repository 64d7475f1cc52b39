// The loops that feed libmvec one vector at a time (kernels/vecmath*.cpp). Each
// translation unit that includes this is compiled for one instruction set as a whole
// (vecmath.cpp the x86-64 baseline, vecmath_avx2.cpp -mavx2, vecmath_avx512.cpp
// -mavx512f): the x86-64 calling convention for a 256- or 512-bit vector argument is the
// compiler's for the whole file, and clang ignores a function's target attribute there
// (an AVX2 loop under `target("avx2")` in a baseline file passed its vectors to libmvec in
// memory, which reads them from registers: garbage, caught by the sanitized tree's clang).
// Everything here has internal linkage, so nothing compiled for a wider set leaks into
// code that runs on a narrower CPU.
#pragma once

#include "layer.hpp"

#include <cstdint>

#include "vecmath.hpp"

#include <immintrin.h>

namespace ooc::kernels::vecmath {
namespace {

// The padding of a tail's unused lanes: a value every function takes without a special
// case (no callout to the scalar code, no exception flags of interest).
constexpr double kPad = 0.5;

// One wrapper per vector type: NAME(fn, x, out, n) and NAME##_pow(fn, x, xs, y, ys, out, n).
#define OOC_VECTOR_LOOPS(NAME, TARGET, VEC, T, W, LOADU, STOREU, SET1)                                   \
  TARGET void NAME(VEC (*fn)(VEC), const T* x, T* out, std::int64_t n) {                                 \
    std::int64_t i = 0;                                                                                  \
    for (; i + W <= n; i += W) STOREU(out + i, fn(LOADU(x + i)));                                        \
    if (i < n) {                                                                                         \
      alignas(64) T buffer[W];                                                                           \
      for (std::int64_t k = 0; k < W; ++k) buffer[k] = i + k < n ? x[i + k] : static_cast<T>(kPad);      \
      STOREU(buffer, fn(LOADU(buffer)));                                                                 \
      for (std::int64_t k = 0; i + k < n; ++k) out[i + k] = buffer[k];                                   \
    }                                                                                                    \
  }                                                                                                      \
  TARGET VEC NAME##_load(const T* x, std::int64_t xs, std::int64_t i, std::int64_t n) {                  \
    if (xs == 0) return SET1(*x);                                                                        \
    if (xs == 1 && i + W <= n) return LOADU(x + i);                                                      \
    alignas(64) T buffer[W];                                                                             \
    for (std::int64_t k = 0; k < W; ++k) buffer[k] = i + k < n ? x[(i + k) * xs] : static_cast<T>(kPad); \
    return LOADU(buffer);                                                                                \
  }                                                                                                      \
  TARGET void NAME##_pow(VEC (*fn)(VEC, VEC), const T* x, std::int64_t xs, const T* y, std::int64_t ys,  \
                         T* out, std::int64_t n) {                                                       \
    std::int64_t i = 0;                                                                                  \
    for (; i + W <= n; i += W) STOREU(out + i, fn(NAME##_load(x, xs, i, n), NAME##_load(y, ys, i, n)));  \
    if (i < n) {                                                                                         \
      alignas(64) T buffer[W];                                                                           \
      STOREU(buffer, fn(NAME##_load(x, xs, i, n), NAME##_load(y, ys, i, n)));                            \
      for (std::int64_t k = 0; i + k < n; ++k) out[i + k] = buffer[k];                                   \
    }                                                                                                    \
  }

}  // namespace
}  // namespace ooc::kernels::vecmath
