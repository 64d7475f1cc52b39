// The product Yᵀ Y of a block of rows, the inner loop of gram and cov (kernels/linalg.cpp).
#pragma once

#include <cstdint>

namespace ooc::linalg::kernel {

// lower(g) += (y - c)ᵀ (y - c), with y a row-major block of `rows` observations of m float64
// variables (row stride m), c the m values of `centre` subtracted from every row (none where
// null) and g an m x m column-major matrix. Only the lower triangle (i >= j) is promised;
// entries above the diagonal may change too. Each entry is one chain of fused
// multiply-adds over the rows in their order, so its bits depend on y and c alone.
// Returns false, touching nothing, where the CPU lacks AVX2 and FMA or OOC_VECMATH asks
// for less (scalar, sse): the caller then takes Eigen's product.
bool add_gram_of_rows(const double* y, std::int64_t rows, std::int64_t m, double* g, const double* centre = nullptr);

// mean = the mean over the rows of y - shift (m values), each column summed in row order.
// Returns false, touching nothing, where add_gram_of_rows would.
bool shifted_means(const double* y, std::int64_t rows, std::int64_t m, const double* shift, double* mean);

}  // namespace ooc::linalg::kernel
