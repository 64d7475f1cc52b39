// The AVX-512 loops over libmvec's 8-double variants; this file is compiled with
// -mavx512f (CMakeLists.txt) and called only where the CPU has it (vecmath.cpp).
#if defined(OOC_HAVE_LIBMVEC) && defined(__x86_64__)

#include "vecmath_loops.hpp"
#include "vecmath_wide.hpp"

extern "C" {
__m512d _ZGVeN8v_exp(__m512d);
__m512d _ZGVeN8v_log(__m512d);
__m512d _ZGVeN8v_log1p(__m512d);
__m512d _ZGVeN8v_expm1(__m512d);
__m512d _ZGVeN8v_sin(__m512d);
__m512d _ZGVeN8v_cos(__m512d);
__m512d _ZGVeN8v_tanh(__m512d);
__m512d _ZGVeN8vv_pow(__m512d, __m512d);
}

namespace ooc::kernels::vecmath {

namespace {
#define OOC_NO_TARGET
OOC_VECTOR_LOOPS(loop, OOC_NO_TARGET, __m512d, double, 8, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd)
#undef OOC_NO_TARGET
#undef OOC_VECTOR_LOOPS
}  // namespace

void unary_avx512(Fn f, const double* x, double* out, std::int64_t n) {
  switch (f) {
    case Fn::exp: return loop(&_ZGVeN8v_exp, x, out, n);
    case Fn::log: return loop(&_ZGVeN8v_log, x, out, n);
    case Fn::log1p: return loop(&_ZGVeN8v_log1p, x, out, n);
    case Fn::expm1: return loop(&_ZGVeN8v_expm1, x, out, n);
    case Fn::sin: return loop(&_ZGVeN8v_sin, x, out, n);
    case Fn::cos: return loop(&_ZGVeN8v_cos, x, out, n);
    case Fn::tanh: default: return loop(&_ZGVeN8v_tanh, x, out, n);
  }
}

void pow_avx512(const double* x, std::int64_t xs, const double* y, std::int64_t ys, double* out, std::int64_t n) {
  loop_pow(&_ZGVeN8vv_pow, x, xs, y, ys, out, n);
}

}  // namespace ooc::kernels::vecmath

#endif
