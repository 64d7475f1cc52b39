// The product Yᵀ Y of a block of rows, the inner loop of gram and cov (kernels/linalg.cpp).
#pragma once

#include <cstdint>

namespace ooc::linalg::kernel {

// lower(g) += yᵀ y, with y a row-major block of `rows` observations of m float64 variables
// (row stride m) and g an m x m column-major matrix. Only the lower triangle (i >= j) is
// promised; entries above the diagonal may change too. Each entry is one chain of fused
// multiply-adds over the rows in their order, so its bits depend on y alone.
// Returns false, touching nothing, where the CPU lacks AVX2 and FMA or OOC_VECMATH asks
// for less (scalar, sse): the caller then takes Eigen's product.
bool add_gram_of_rows(const double* y, std::int64_t rows, std::int64_t m, double* g);

// A chunk centred for its co-moment: out = (y - shift) - mean, row by row, where mean (m
// values, written) is the mean over the rows of y - shift, each column summed in row order.
// y and out are row-major blocks of `rows` x m float64. Returns false, touching nothing,
// where add_gram_of_rows would.
bool centre_rows(const double* y, std::int64_t rows, std::int64_t m, const double* shift, double* out, double* mean);

}  // namespace ooc::linalg::kernel
