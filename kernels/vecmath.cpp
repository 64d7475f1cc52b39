// Vectorised exp, log, log1p, expm1, sin, cos, tanh and pow through glibc's libmvec.
//
// libmvec exports each function at three vector widths under the x86-64 vector function
// ABI's names: _ZGVbN2v_log1p takes an __m128d (SSE; glibc's IFUNC picks its SSE4.1 code
// where the CPU has it), _ZGVdN4v_log1p an __m256d (AVX2), _ZGVeN8v_log1p an __m512d
// (AVX-512); `vv` names the two-argument pow. float32 goes through the float64 ones. The
// AVX2 and AVX-512 loops are in files of their own compiled for those instruction sets
// (vecmath_avx2.cpp, vecmath_avx512.cpp; vecmath_loops.hpp says why), run only where
// __builtin_cpu_supports says the CPU has them. A tail
// shorter than a vector is padded into one (never a scalar libm call), so an element's
// result does not depend on where it sits. libmvec handles NaN, the infinities, zeros,
// subnormals and domain errors by calling glibc's scalar functions for those lanes.

#include "vecmath.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(OOC_HAVE_LIBMVEC) && defined(__x86_64__)
#include "vecmath_loops.hpp"
#include "vecmath_wide.hpp"
#define OOC_VECMATH_X86 1
#endif

namespace ooc::kernels::vecmath {

namespace {

Level detect() {
  Level best = Level::scalar;
#ifdef OOC_VECMATH_X86
  __builtin_cpu_init();
  best = Level::sse;
  if (__builtin_cpu_supports("avx2")) best = Level::avx2;
  if (__builtin_cpu_supports("avx512f")) best = Level::avx512;
#endif
  if (const char* asked = std::getenv("OOC_VECMATH")) {
    for (Level l : {Level::scalar, Level::sse, Level::avx2, Level::avx512})
      if (std::strcmp(asked, level_name(l)) == 0 && l <= best) return l;
  }
  return best;
}

template <class T>
T scalar_fn(Fn f, T x) {
  switch (f) {
    case Fn::exp: return std::exp(x);
    case Fn::log: return std::log(x);
    case Fn::log1p: return std::log1p(x);
    case Fn::expm1: return std::expm1(x);
    case Fn::sin: return std::sin(x);
    case Fn::cos: return std::cos(x);
    case Fn::tanh: default: return std::tanh(x);
  }
}

}  // namespace

const char* level_name(Level l) {
  switch (l) {
    case Level::scalar: return "scalar";
    case Level::sse: return "sse";
    case Level::avx2: return "avx2";
    case Level::avx512: default: return "avx512";
  }
}

Level level() {
  static const Level chosen = detect();
  return chosen;
}

#ifdef OOC_VECMATH_X86

extern "C" {
// SSE (baseline x86-64)
__m128d _ZGVbN2v_exp(__m128d);
__m128d _ZGVbN2v_log(__m128d);
__m128d _ZGVbN2v_log1p(__m128d);
__m128d _ZGVbN2v_expm1(__m128d);
__m128d _ZGVbN2v_sin(__m128d);
__m128d _ZGVbN2v_cos(__m128d);
__m128d _ZGVbN2v_tanh(__m128d);
__m128d _ZGVbN2vv_pow(__m128d, __m128d);
}

namespace {

#define OOC_PICK(PREFIX, SUFFIX)                  \
  switch (f) {                                    \
    case Fn::exp: return PREFIX##exp##SUFFIX;     \
    case Fn::log: return PREFIX##log##SUFFIX;     \
    case Fn::log1p: return PREFIX##log1p##SUFFIX; \
    case Fn::expm1: return PREFIX##expm1##SUFFIX; \
    case Fn::sin: return PREFIX##sin##SUFFIX;     \
    case Fn::cos: return PREFIX##cos##SUFFIX;     \
    case Fn::tanh: default: return PREFIX##tanh##SUFFIX; \
  }

using Sse2d = __m128d (*)(__m128d);
Sse2d sse_d(Fn f) { OOC_PICK(_ZGVbN2v_, ) }
#undef OOC_PICK

#define OOC_NO_TARGET
OOC_VECTOR_LOOPS(loop_sse_d, OOC_NO_TARGET, __m128d, double, 2, _mm_loadu_pd, _mm_storeu_pd, _mm_set1_pd)
#undef OOC_VECTOR_LOOPS
#undef OOC_NO_TARGET

}  // namespace

#endif  // OOC_VECMATH_X86

namespace {

constexpr std::int64_t kChunk = 512;
const double kDefaultNaN = std::bit_cast<double>(std::uint64_t{0xfff8000000000000});

void vector_unary(Fn f, const double* x, double* out, std::int64_t n) {
  switch (level()) {
#ifdef OOC_VECMATH_X86
    case Level::avx512: return unary_avx512(f, x, out, n);
    case Level::avx2: return unary_avx2(f, x, out, n);
    case Level::sse: return loop_sse_d(sse_d(f), x, out, n);
#endif
    default:
      for (std::int64_t i = 0; i < n; ++i) out[i] = scalar_fn(f, x[i]);
  }
}

}  // namespace

void unary(Fn f, const double* x, double* out, std::int64_t n) {
  if ((f != Fn::log && f != Fn::log1p) || level() == Level::scalar) return vector_unary(f, x, out, n);
  // log and log1p outside their domain: libmvec sends a vector with any such lane (or a
  // NaN) to glibc's scalar code lane by lane, which made log1p of normal values (16%
  // below -1) four times slower. Those lanes are answered here instead, as C99 and glibc
  // answer them: -inf at the pole (log(+-0), log1p(-1)), NaN below it (x86's default
  // NaN, which glibc's 0/0 gives), a NaN input returned quiet.
  const double pole = f == Fn::log ? 0.0 : -1.0;
  double inside[kChunk], result[kChunk];
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    const double* xi = x + i;
    // Every chunk takes the two passes (vectorised, in L1): cheaper than scanning for
    // lanes outside first, which GCC does not vectorise.
    for (std::int64_t k = 0; k < m; ++k) inside[k] = xi[k] > pole ? xi[k] : 1.0;
    vector_unary(f, inside, result, m);
    for (std::int64_t k = 0; k < m; ++k) {  // selects, no branches: the compiler vectorises it
      const double v = xi[k];
      double r = v > pole ? result[k] : kDefaultNaN;
      r = v == pole ? -HUGE_VAL : r;
      out[i + k] = v != v ? v + v : r;
    }
  }
}

void pow(const double* x, std::int64_t xs, const double* y, std::int64_t ys, double* out, std::int64_t n) {
  switch (level()) {
#ifdef OOC_VECMATH_X86
    case Level::avx512: return pow_avx512(x, xs, y, ys, out, n);
    case Level::avx2: return pow_avx2(x, xs, y, ys, out, n);
    case Level::sse: return loop_sse_d_pow(_ZGVbN2vv_pow, x, xs, y, ys, out, n);
#endif
    default:
      for (std::int64_t i = 0; i < n; ++i) out[i] = std::pow(x[i * xs], y[i * ys]);
  }
}

// float32 through the float64 variants, rounded once at the end: libmvec's own float
// functions are a few units in the last place off, and numpy's own float32 log up to 4
// the other way (libmvec's logf was 6 from it in a 10^6 sample; docs/decisions/2026-12-01-vecmath-libmvec.md).
void unary(Fn f, const float* x, float* out, std::int64_t n) {
  double wide[kChunk];
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    for (std::int64_t k = 0; k < m; ++k) wide[k] = x[i + k];
    unary(f, wide, wide, m);
    for (std::int64_t k = 0; k < m; ++k) out[i + k] = static_cast<float>(wide[k]);
  }
}

void pow(const float* x, std::int64_t xs, const float* y, std::int64_t ys, float* out, std::int64_t n) {
  double wide_x[kChunk], wide_y[kChunk];
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    for (std::int64_t k = 0; k < m; ++k) wide_x[k] = x[(i + k) * xs];
    for (std::int64_t k = 0; k < m; ++k) wide_y[k] = y[(i + k) * ys];
    pow(wide_x, 1, wide_y, 1, wide_x, m);
    for (std::int64_t k = 0; k < m; ++k) out[i + k] = static_cast<float>(wide_x[k]);
  }
}

}  // namespace ooc::kernels::vecmath
