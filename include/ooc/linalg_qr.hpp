#pragma once
/// Q of a tall array's QR and U of its SVD, by TSQR in two passes (ooc::linalg::qr,
/// ooc::linalg::svd): np.linalg.qr(x, mode='reduced') and np.linalg.svd(x,
/// full_matrices=False) of an (N, M) x whose N x min(N, M) factor is too large for memory.
///
/// The first pass is qr_r's: a Householder QR of each fixed chunk of rows and the chunks'
/// R factors folded in chunk order. The second pass reads x again, chunk groups last to
/// first, recomputes each chunk's QR and the fold from a checkpoint of the first pass, and
/// writes the chunk's rows of Q (or U = Q U_R) by applying its Householder reflectors to
/// the fold's factors: Q is orthonormal to rounding whatever x's condition (never X R⁻¹,
/// never the Cholesky factor of the gram). The same bits for any thread count and tile
/// size (docs/decisions/2026-12-04-linalg-tsqr.md).
///
/// Signs: R has a non-negative diagonal and Q the matching columns (numpy's Q and R up to
/// the sign of each column of Q and row of R: LAPACK's follow its own elimination order).
/// The SVD's singular vectors are unique up to the sign of each pair (u_i, v_i), as
/// numpy's are.

#include "ooc/linalg.hpp"

#include <span>
#include <string>

namespace ooc::linalg {

/// The shape of x's Q (and U): (N, min(N, M)) for a 2-d x. Throws UsageError with
/// numpy's text for an x that is not 2-d or is float16.
Shape q_shape(const MappedArray& x);

/// The dtype of x's Q, R, U, s and Vt, as numpy.linalg's: float32 stays float32, other
/// dtypes give float64. Throws as q_shape.
DType factor_dtype(const MappedArray& x);

/// x = QR: R as qr_r returns it, and Q written into `q`, q_shape's elements of R's dtype,
/// C order, native byte order. Throws UsageError where `q` has the wrong size.
Matrix qr(const MappedArray& x, std::span<std::byte> q, const PipelineOptions& options = {});

/// qr writing Q to a new file `q_path` (path.npy or file.h5:/dataset), committed once
/// complete; nothing is left under that name when it throws.
Matrix qr(const MappedArray& x, const std::string& q_path, bool overwrite = false,
          const PipelineOptions& options = {});

/// np.linalg.svd(x, full_matrices=False)'s s and Vt: s (K,) descending, vt (K, M), in
/// R's dtype, K = min(N, M). The SVD of the TSQR R (Jacobi, accurate to the smallest
/// values).
struct SingularValueDecomposition {
  Matrix s;
  Matrix vt;
};

/// s and Vt only, in one pass. Throws UsageError "Arrays cannot be empty" as numpy's
/// LinAlgError for an array with no elements.
SingularValueDecomposition svd(const MappedArray& x, const PipelineOptions& options = {});

/// s and Vt, and U = Q U_R written into `u` (q_shape's elements of R's dtype, C order,
/// native byte order) from a second pass.
SingularValueDecomposition svd(const MappedArray& x, std::span<std::byte> u, const PipelineOptions& options = {});

/// svd writing U to a new file `u_path`, committed once complete.
SingularValueDecomposition svd(const MappedArray& x, const std::string& u_path, bool overwrite = false,
                               const PipelineOptions& options = {});

}  // namespace ooc::linalg
