#pragma once
/// Linear algebra on tall arrays, streamed in one pass: ooc::linalg::gram (X.T @ X),
/// cov and corrcoef (np.cov, np.corrcoef), matmul (X @ W, W in memory), and by TSQR the R
/// of a QR factorisation (np.linalg.qr(x, mode='r')) and the singular values.
///
/// The data are N observations of M variables (N in the billions, M up to a few hundred).
/// Every result is numpy's, in numpy's dtype, and the same bits for any thread count and
/// tile size: rows are accumulated in chunks of a fixed number of observations (chosen
/// from M alone) and the chunks' partial results are merged strictly in chunk order.
/// cov and corrcoef shift the data by its first observation and merge per-chunk means
/// and co-moments as Chan et al. do, so a mean of 1e8 with a spread of 1 loses no digits
/// (docs/decisions/2026-12-04-linalg-accumulation.md).

#include "ooc/dtype.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/shape.hpp"

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ooc::linalg {

/// A result in numpy's dtype and shape. Floating results are in `values` (already rounded
/// to the dtype); integer and bool results in `integers`, as two's complement bits wrapped
/// to the dtype's width, as numpy's integer matmul wraps (bool: 0 or 1).
struct Matrix {
  DType dtype{Kind::floating, 8};
  Shape shape;  ///< numpy's: (M, M), or () where numpy gives one value (a single variable)
  Eigen::MatrixXd values;
  Eigen::Matrix<std::uint64_t, Eigen::Dynamic, Eigen::Dynamic> integers;
  /// numpy's RuntimeWarnings for this result, in its words ("Degrees of freedom <= 0 for
  /// slice", "invalid value encountered in divide").
  std::vector<std::string> warnings;

  /// The elements in C order, in `dtype` (native byte order).
  std::vector<std::byte> bytes() const;
};

/// np.cov's options.
struct CovOptions {
  bool rowvar = true;                ///< each row a variable (numpy's default); false: each column
  bool bias = false;                 ///< normalise by N (true) or by N - 1
  std::optional<std::int64_t> ddof;  ///< when set, overrides bias: normalise by N - ddof
};

/// X.T @ X of a 1-d or 2-d array, an (M, M) matrix (a 1-d x gives x @ x, shape ()), in
/// numpy's dtype for it: the input's own (float32 stays float32, int8 wraps as int8).
Matrix gram(const MappedArray& x, const PipelineOptions& options = {});

/// np.cov(x, rowvar=, bias=, ddof=): float64, (M, M), or shape () for one variable.
/// Throws UsageError for an array of more than 2 dimensions.
Matrix cov(const MappedArray& x, const CovOptions& how = {}, const PipelineOptions& options = {});

/// np.corrcoef(x, rowvar=): float64, clipped to [-1, 1] as numpy clips it.
Matrix corrcoef(const MappedArray& x, bool rowvar = true, const PipelineOptions& options = {});

/// R of x = QR (np.linalg.qr(x, mode='r')) of a 2-d x, by TSQR: a Householder QR of each
/// chunk of rows, the R factors merged in chunk order by the QR of the two stacked. min(N,
/// M) x M, upper triangular, with a non-negative diagonal (numpy's R up to the sign of each
/// row: LAPACK's signs depend on its own elimination order). float32 stays float32; other
/// dtypes give float64; float16 is numpy's error ("array type float16 is unsupported in
/// linalg").
Matrix qr_r(const MappedArray& x, const PipelineOptions& options = {});

/// np.linalg.svd(x, compute_uv=False): the min(N, M) singular values, descending, of
/// the TSQR R (Jacobi SVD, accurate to the smallest values). dtypes as qr_r.
Matrix singular_values(const MappedArray& x, const PipelineOptions& options = {});

/// np.linalg.lstsq(x, y, rcond)'s four results.
struct LeastSquares {
  Matrix solution;     ///< (M,) or (M, K)
  Matrix residuals;    ///< (K,) (or (1,) for a 1-d y) when rank == M < N, else (0,)
  std::int64_t rank = 0;
  Matrix singular_values;  ///< (min(N, M),), descending
};

/// np.linalg.lstsq(x, y, rcond) of a 2-d (N, M) x and a (N,) or (N, K) y, streamed side
/// by side: TSQR of [x y], then the SVD of R. rcond: singular values at or below rcond x
/// the largest count as zero (default, as numpy's rcond=None: eps x max(N, M)). float32
/// x and y stay float32. Throws UsageError "Incompatible dimensions" (numpy's
/// LinAlgError) where their lengths differ.
LeastSquares lstsq(const MappedArray& x, const MappedArray& y, std::optional<double> rcond = std::nullopt,
                   const PipelineOptions& options = {});

/// A small matrix W held in memory, for matmul: its bytes in `dtype` (either byte order)
/// and `order`, of `shape` (M, K) or (M,).
struct InMemory {
  const std::byte* data = nullptr;
  DType dtype{Kind::floating, 8};
  Shape shape;
  Order order = Order::c;
};

/// numpy's result dtype of x @ w (promote_types; bool @ bool is bool).
DType matmul_dtype(DType x, DType w);

/// numpy's result shape of x @ w for a 1-d or 2-d x and w: (N, K), (N,), (K,) or ().
/// Throws UsageError with numpy's text where the inner dimensions differ or an operand
/// is 0-d, and for an x of more than 2 dimensions (ooc streams a 2-d X).
Shape matmul_shape(const MappedArray& x, const Shape& w);

/// x @ w, streamed over x's rows (C or Fortran order), into `out`: matmul_shape's
/// elements of matmul_dtype, C order, native byte order. Integer results wrap as numpy's
/// do; float results are computed in float64 and rounded once.
void matmul(const MappedArray& x, const InMemory& w, std::span<std::byte> out, const PipelineOptions& options = {});

}  // namespace ooc::linalg
