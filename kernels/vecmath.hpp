// Vectorised transcendental functions for the float32 and float64 loops: glibc's libmvec
// (the vector variants GCC's `#pragma omp declare simd` calls, IFUNC-dispatched inside
// glibc), at the widest vector the CPU takes. See docs/decisions/2026-12-01-vecmath-libmvec.md.
#pragma once

#include "layer.hpp"

#include <cstdint>

namespace ooc::kernels::vecmath {

enum class Fn : int { exp, log, log1p, expm1, sin, cos, tanh };

/// The vector width the loops call libmvec at: scalar (libm, one element at a time), sse
/// (2 doubles, 4 floats), avx2 (4, 8) or avx512 (8, 16). The widest the CPU has, unless
/// OOC_VECMATH names a narrower one (scalar, sse, avx2, avx512), for tests and comparisons.
enum class Level : int { scalar, sse, avx2, avx512 };
Level level();
const char* level_name(Level l);

/// out[i] = f(x[i]) for i < n. A tail shorter than a vector is padded into one, so every
/// element's result is the same wherever it sits in the array.
void unary(Fn f, const double* x, double* out, std::int64_t n);
void unary(Fn f, const float* x, float* out, std::int64_t n);

/// out[i] = pow(x[i * xs], y[i * ys]) for i < n; a stride of 0 repeats one value.
void pow(const double* x, std::int64_t xs, const double* y, std::int64_t ys, double* out, std::int64_t n);
void pow(const float* x, std::int64_t xs, const float* y, std::int64_t ys, float* out, std::int64_t n);

}  // namespace ooc::kernels::vecmath
