// The AVX2 and AVX-512 loops (vecmath_avx2.cpp, vecmath_avx512.cpp), each compiled for its
// instruction set; only plain pointers cross between the files, never a vector type.
#pragma once

#include "layer.hpp"

#include <cstdint>

#include "vecmath.hpp"

namespace ooc::kernels::vecmath {

void unary_avx2(Fn f, const double* x, double* out, std::int64_t n);
void pow_avx2(const double* x, std::int64_t xs, const double* y, std::int64_t ys, double* out, std::int64_t n);
void unary_avx512(Fn f, const double* x, double* out, std::int64_t n);
void pow_avx512(const double* x, std::int64_t xs, const double* y, std::int64_t ys, double* out, std::int64_t n);

}  // namespace ooc::kernels::vecmath
