// The AVX2 loops over libmvec's 4-double variants; this file is compiled with
// -mavx2 (CMakeLists.txt) and called only where the CPU has it (vecmath.cpp).
#if defined(OOC_HAVE_LIBMVEC) && defined(__x86_64__)

#include "vecmath_loops.hpp"
#include "vecmath_wide.hpp"

extern "C" {
__m256d _ZGVdN4v_exp(__m256d);
__m256d _ZGVdN4v_log(__m256d);
__m256d _ZGVdN4v_log1p(__m256d);
__m256d _ZGVdN4v_expm1(__m256d);
__m256d _ZGVdN4v_sin(__m256d);
__m256d _ZGVdN4v_cos(__m256d);
__m256d _ZGVdN4v_tanh(__m256d);
__m256d _ZGVdN4vv_pow(__m256d, __m256d);
}

namespace ooc::kernels::vecmath {

namespace {
#define OOC_NO_TARGET
OOC_VECTOR_LOOPS(loop, OOC_NO_TARGET, __m256d, double, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd)
#undef OOC_NO_TARGET
#undef OOC_VECTOR_LOOPS
}  // namespace

void unary_avx2(Fn f, const double* x, double* out, std::int64_t n) {
  switch (f) {
    case Fn::exp: return loop(&_ZGVdN4v_exp, x, out, n);
    case Fn::log: return loop(&_ZGVdN4v_log, x, out, n);
    case Fn::log1p: return loop(&_ZGVdN4v_log1p, x, out, n);
    case Fn::expm1: return loop(&_ZGVdN4v_expm1, x, out, n);
    case Fn::sin: return loop(&_ZGVdN4v_sin, x, out, n);
    case Fn::cos: return loop(&_ZGVdN4v_cos, x, out, n);
    case Fn::tanh: default: return loop(&_ZGVdN4v_tanh, x, out, n);
  }
}

void pow_avx2(const double* x, std::int64_t xs, const double* y, std::int64_t ys, double* out, std::int64_t n) {
  loop_pow(&_ZGVdN4vv_pow, x, xs, y, ys, out, n);
}

}  // namespace ooc::kernels::vecmath

#endif
