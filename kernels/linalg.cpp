// ooc::linalg: gram, cov, corrcoef and matmul of tall arrays, streamed in one pass.
//
// Every function sees its array as N observations of M variables. Where an observation's
// variables lie side by side in memory (the rows of a C-order tall array) the tiles of a
// slab plan hold whole rows and are streamed by for_each_block; where each variable's
// observations are contiguous instead (an F-order tall array, a C-order wide one with
// rowvar) the observations are read in batches, one range per variable. Either way the
// observations are cut into chunks of a fixed number of rows, the chunk size a function
// of M alone, and the chunks' partial results are merged strictly in chunk order: the
// bits depend on neither the thread count nor the tile size.

#include "gram_rows.hpp"
#include "layer.hpp"

#include "ooc/blocks.hpp"
#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/linalg.hpp"
#include "ooc/linalg_qr.hpp"

#include <Eigen/Dense>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ooc::linalg {
namespace {

using Eigen::Dynamic;
using Eigen::MatrixXd;
using Eigen::VectorXd;
template <class S> using ColMajor = Eigen::Matrix<S, Dynamic, Dynamic>;
template <class S> using RowMajor = Eigen::Matrix<S, Dynamic, Dynamic, Eigen::RowMajor>;

// Where observation o of variable v lies: element o * M + v (observation-major) or
// v * N + o (variable-major), in the array's memory order.
struct Layout {
  std::int64_t observations = 0;
  std::int64_t variables = 0;
  bool observation_major = true;
};

Layout layout_of(const MappedArray& x, bool variables_in_rows) {
  const Shape& shape = x.shape();
  std::int64_t rows = 1, cols = 1;
  if (shape.size() == 1) (variables_in_rows ? cols : rows) = shape[0];
  if (shape.size() == 2) rows = shape[0], cols = shape[1];
  Layout layout;
  if (variables_in_rows) {
    layout = {cols, rows, x.order() == Order::fortran};
  } else {
    layout = {rows, cols, x.order() == Order::c};
  }
  // One variable or one observation: both layouts are the same bytes.
  if (layout.variables <= 1 || layout.observations <= 1) layout.observation_major = true;
  return layout;
}

// Observations per chunk: large enough that a chunk's product dominates its merge (at
// least 4 M rows, for an M x M merge), small enough that a tile holds several.
std::int64_t chunk_rows(std::int64_t variables) {
  const std::int64_t m = std::max<std::int64_t>(variables, 1);
  return std::clamp<std::int64_t>(std::max<std::int64_t>(4 * m, (std::int64_t{1} << 16) / m), 256, 8192);
}

// Converts count elements of the array's dtype into S (a copy for native S).
template <class S>
void convert_into(DType from, const std::byte* src, std::vector<S>& into, std::int64_t count) {
  if (static_cast<std::int64_t>(into.size()) < count) into.resize(static_cast<std::size_t>(count));
  convert(from, src, dtype_of<S>, into.data(), count);
}

// Streams the observations of `x` in chunks: chunk(Y, first) gets the chunk as a K x M
// Eigen expression of S (observations by variables) and the number of its first
// observation, on any thread, and returns its State; fold(State&&) gets the states on
// one thread in chunk order.
template <class S, class State, class Chunk, class Fold>
void stream_chunks(const MappedArray& x, const Layout& layout, const PipelineOptions& options, Chunk&& chunk,
                   Fold&& fold) {
  const std::int64_t n = layout.observations, m = layout.variables;
  if (n == 0 || m == 0) return;
  const std::int64_t k = chunk_rows(m);
  const DType dtype = x.dtype();
  const auto item = static_cast<std::uint64_t>(dtype.itemsize());
  const std::uint64_t chunk_bytes = static_cast<std::uint64_t>(k * m) * item;
  const std::uint64_t chunks_per_tile = std::max<std::uint64_t>(1, options.tile_bytes / chunk_bytes);
  const bool direct = std::is_same_v<S, double> && dtype == dtype_of<double>;

  if (layout.observation_major) {
    // Tiles of whole chunks: rows_per_tile a multiple of k, so every chunk lies in one tile.
    const TilePlan plan = TilePlan::slabs(n, m, dtype.itemsize(), chunks_per_tile * chunk_bytes);
    const MappedArray* inputs[] = {&x};
    for_each_block(
        inputs, nullptr, plan, options,
        [&](const Block& block) {
          const std::int64_t first = block.tile.begin / m, rows = block.tile.size() / m;
          const S* values = nullptr;
          thread_local std::vector<S> converted;
          if (direct && reinterpret_cast<std::uintptr_t>(block.inputs[0]) % alignof(S) == 0) {
            values = reinterpret_cast<const S*>(block.inputs[0]);
          } else {
            convert_into<S>(dtype, block.inputs[0], converted, rows * m);
            values = converted.data();
          }
          std::vector<State> states;
          for (std::int64_t row = 0; row < rows; row += k) {
            const std::int64_t size = std::min(k, rows - row);
            const Eigen::Map<const RowMajor<S>> y(values + row * m, size, m);
            states.push_back(chunk(y, first + row));
          }
          return states;
        },
        [&](const Tile&, std::vector<State>&& states) {
          for (State& state : states) fold(std::move(state));
        });
    return;
  }

  // Variable-major: batches of whole chunks, each variable's range read on every core,
  // then the batch's chunks computed in parallel and folded in order.
  const std::int64_t batch = static_cast<std::int64_t>(chunks_per_tile) * k;
  PipelineOptions read_options = options;
  read_options.on_progress = nullptr;
  read_options.tiles = TileRange{};
  std::vector<std::byte> raw(static_cast<std::size_t>(std::min(batch, n)) * item);
  std::vector<S> values(static_cast<std::size_t>(std::min(batch, n) * m));
  std::vector<S> converted;
  const int threads = detail::resolve_threads(options.threads);
  Progress progress;
  progress.elements = n * m;
  for (std::int64_t begin = 0; begin < n; begin += batch) {
    const std::int64_t size = std::min(batch, n - begin);
    const std::int64_t stride = std::min(batch, n);
    for (std::int64_t v = 0; v < m; ++v) {
      const std::int64_t at = v * n + begin;
      read(x, ElementRange{at, at + size}, std::span<std::byte>(raw.data(), static_cast<std::size_t>(size) * item),
           read_options);
      convert_into<S>(dtype, raw.data(), converted, size);
      std::copy_n(converted.data(), size, values.data() + v * stride);
    }
    const std::int64_t chunks = (size + k - 1) / k;
    std::vector<State> states(static_cast<std::size_t>(chunks));
    detail::run_in_arena(threads, [&] {
      tbb::parallel_for(std::int64_t{0}, chunks, [&](std::int64_t c) {
        const std::int64_t rows = std::min(k, size - c * k);
        const Eigen::Map<const ColMajor<S>, 0, Eigen::OuterStride<>> y(values.data() + c * k, rows, m,
                                                                       Eigen::OuterStride<>(stride));
        states[static_cast<std::size_t>(c)] = chunk(y, begin + c * k);
      });
    });
    for (State& state : states) fold(std::move(state));
    progress.elements_done += size * m;
    if (options.on_progress) options.on_progress(progress);
  }
}

// The observation-major lower triangle of a symmetric matrix copied to its upper one.
template <class M>
void symmetrize(M& matrix) {
  matrix.template triangularView<Eigen::StrictlyUpper>() = matrix.transpose();
}

// lower(part) += Yᵀ Y for a chunk: the AVX2 loop for a row-major chunk where the CPU has
// it (kernels/gram_rows.cpp), Eigen's rank update otherwise.
template <class Y>
void add_chunk_gram(const Y& y, MatrixXd& part) {
  if constexpr (Y::IsRowMajor) {
    if (kernel::add_gram_of_rows(y.data(), y.rows(), y.cols(), part.data())) return;
  }
  part.selfadjointView<Eigen::Lower>().rankUpdate(y.transpose());
}

// A floating gram: per chunk Yᵀ Y (lower triangle) in float64, summed in chunk order.
MatrixXd gram_floating(const MappedArray& x, const Layout& layout, const PipelineOptions& options) {
  const std::int64_t m = layout.variables;
  MatrixXd total = MatrixXd::Zero(m, m);
  stream_chunks<double, MatrixXd>(
      x, layout, options,
      [m](const auto& y, std::int64_t) {
        MatrixXd part = MatrixXd::Zero(m, m);
        add_chunk_gram(y, part);
        return part;
      },
      [&](MatrixXd&& part) { total.triangularView<Eigen::Lower>() += part; });
  symmetrize(total);
  return total;
}

// An integer (or bool) gram: exact products and sums modulo 2^64, which wrap to any
// narrower dtype as numpy's integer matmul wraps.
ColMajor<std::uint64_t> gram_integer(const MappedArray& x, const Layout& layout, const PipelineOptions& options) {
  using U = std::uint64_t;
  const std::int64_t m = layout.variables;
  ColMajor<U> total = ColMajor<U>::Zero(m, m);
  stream_chunks<U, ColMajor<U>>(
      x, layout, options,
      [m](const auto& y, std::int64_t) {
        ColMajor<U> part = ColMajor<U>::Zero(m, m);
        for (Eigen::Index r = 0; r < y.rows(); ++r)
          for (Eigen::Index j = 0; j < m; ++j) {
            const U yj = y(r, j);
            for (Eigen::Index i = j; i < m; ++i) part(i, j) += y(r, i) * yj;
          }
        return part;
      },
      [&](ColMajor<U>&& part) { total += part; });
  symmetrize(total);
  return total;
}

// A chunk's (or a run of chunks') count, mean and co-moment Σ(y - mean)(y - mean)ᵀ (lower
// triangle) of the data shifted by the first observation.
struct Moments {
  std::int64_t count = 0;
  VectorXd mean;
  MatrixXd comoment;
};

// Chan, Golub and LeVeque's pairwise update: `right` holds the observations after `left`'s.
void merge(Moments& left, Moments&& right) {
  if (right.count == 0) return;
  if (left.count == 0) {
    left = std::move(right);
    return;
  }
  const double n = static_cast<double>(left.count + right.count);
  const VectorXd delta = right.mean - left.mean;
  left.mean += delta * (static_cast<double>(right.count) / n);
  left.comoment.triangularView<Eigen::Lower>() += right.comoment;
  left.comoment.selfadjointView<Eigen::Lower>().rankUpdate(
      delta, static_cast<double>(left.count) * static_cast<double>(right.count) / n);
  left.count += right.count;
}

// The first observation, every variable's value, in float64.
VectorXd first_observation(const MappedArray& x, const Layout& layout, const PipelineOptions& options) {
  const std::int64_t m = layout.variables;
  const auto item = static_cast<std::size_t>(x.dtype().itemsize());
  std::vector<std::byte> raw(static_cast<std::size_t>(m) * item);
  PipelineOptions read_options = options;
  read_options.on_progress = nullptr;
  read_options.tiles = TileRange{};
  if (layout.observation_major) {
    read(x, ElementRange{0, m}, raw, read_options);
  } else {
    for (std::int64_t v = 0; v < m; ++v)
      read(x, ElementRange{v * layout.observations, v * layout.observations + 1},
           std::span<std::byte>(raw.data() + static_cast<std::size_t>(v) * item, item), read_options);
  }
  VectorXd values(m);
  convert(x.dtype(), raw.data(), dtype_of<double>, values.data(), m);
  return values;
}

Moments moments(const MappedArray& x, const Layout& layout, const PipelineOptions& options) {
  const std::int64_t m = layout.variables;
  Moments total{0, VectorXd::Zero(m), MatrixXd::Zero(m, m)};
  if (layout.observations == 0 || m == 0) return total;
  const VectorXd shift = first_observation(x, layout, options);
  stream_chunks<double, Moments>(
      x, layout, options,
      [&](const auto& y, std::int64_t) {
        using Stored = Eigen::Matrix<double, Dynamic, Dynamic, std::decay_t<decltype(y)>::IsRowMajor ? Eigen::RowMajor : Eigen::ColMajor>;
        Moments part{y.rows(), VectorXd(m), MatrixXd::Zero(m, m)};
        if constexpr (std::decay_t<decltype(y)>::IsRowMajor) {
          // The chunk's mean, then its product centred on shift + mean as it is read
          // again from cache: co-moments about a centre off by the rounding of that sum
          // (an ulp of the shift) differ from the exact ones by count·ulp², nothing.
          if (kernel::shifted_means(y.data(), y.rows(), m, shift.data(), part.mean.data())) {
            const VectorXd centre = shift + part.mean;
            kernel::add_gram_of_rows(y.data(), y.rows(), m, part.comoment.data(), centre.data());
            return part;
          }
        }
        // Otherwise a centred copy in y's own storage order (contiguous, vectorised),
        // then the product's pass.
        thread_local Stored centred;
        centred = y.rowwise() - shift.transpose();
        const Eigen::RowVectorXd mean = centred.colwise().sum() / static_cast<double>(y.rows());
        centred.rowwise() -= mean;
        part.mean = mean.transpose();
        add_chunk_gram(centred, part.comoment);
        return part;
      },
      [&](Moments&& part) { merge(total, std::move(part)); });
  symmetrize(total.comoment);
  return total;
}

void check_cov_dimensions(const MappedArray& x) {
  if (x.ndim() > 2) throw UsageError(x.path(), "m has more than 2 dimensions");
}

// np.cov's own steps after the centred products: c * (1 / fact), fact = N - ddof, with
// its warnings (an empty array: the mean of an empty slice; fact <= 0: 1 / 0).
Matrix covariance(const MappedArray& x, const CovOptions& how, const PipelineOptions& options) {
  check_cov_dimensions(x);
  const bool variables_in_rows = how.rowvar || x.ndim() < 2 || x.shape()[0] == 1;  // numpy keeps a (1, N) as rows
  const Layout layout = layout_of(x, variables_in_rows);
  Matrix result;
  result.dtype = dtype_of<double>;
  const std::int64_t m = layout.variables;
  if (m == 0) {  // numpy: np.array([]).reshape(0, 0)
    result.shape = {0, 0};
    result.values = MatrixXd(0, 0);
    return result;
  }
  const Moments total = moments(x, layout, options);
  const std::int64_t ddof = how.ddof ? *how.ddof : (how.bias ? 0 : 1);
  double fact = static_cast<double>(layout.observations) - static_cast<double>(ddof);
  if (layout.observations == 0) result.warnings.push_back("Mean of empty slice.");
  if (fact <= 0) {
    result.warnings.push_back("Degrees of freedom <= 0 for slice");
    fact = 0;
  }
  result.values = total.comoment * (1.0 / fact);
  result.shape = m == 1 ? Shape{} : Shape{m, m};
  return result;
}

// A float result rounded to `dtype` (held in float64).
MatrixXd rounded_to(const MatrixXd& values, DType dtype) {
  if (dtype == dtype_of<double>) return values;
  MatrixXd out(values.rows(), values.cols());
  std::vector<std::byte> narrow(static_cast<std::size_t>(values.size() * dtype.itemsize()));
  convert(dtype_of<double>, values.data(), dtype, narrow.data(), values.size());
  convert(dtype, narrow.data(), dtype_of<double>, out.data(), values.size());
  return out;
}

}  // namespace

std::vector<std::byte> Matrix::bytes() const {
  const auto item = static_cast<std::size_t>(dtype.itemsize());
  const bool floating = dtype.kind() == Kind::floating;
  const Eigen::Index rows = floating ? values.rows() : integers.rows();
  const Eigen::Index cols = floating ? values.cols() : integers.cols();
  std::vector<std::byte> out(static_cast<std::size_t>(rows * cols) * item);
  std::size_t at = 0;
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j, at += item) {
      if (floating) {
        const double value = values(i, j);
        convert(dtype_of<double>, &value, dtype, out.data() + at, 1);
      } else if (dtype.kind() == Kind::boolean) {
        out[at] = std::byte{integers(i, j) != 0};
      } else {
        // Two's complement: the low bytes of the 64-bit pattern (little- or big-endian).
        const std::uint64_t bits = integers(i, j);
        for (std::size_t b = 0; b < item; ++b) {
          const auto byte = static_cast<std::byte>((bits >> (8 * b)) & 0xff);
          out[at + (kNativeOrder == ByteOrder::little ? b : item - 1 - b)] = byte;
        }
      }
    }
  return out;
}

Matrix gram(const MappedArray& x, const PipelineOptions& options) {
  if (x.ndim() < 1 || x.ndim() > 2)
    throw UsageError(x.path(), "gram takes a 1-d or 2-d array, not " + std::to_string(x.ndim()) + "-d");
  const Layout layout = layout_of(x, false);
  Matrix result;
  result.dtype = x.dtype().native();
  result.shape = x.ndim() == 1 ? Shape{} : Shape{layout.variables, layout.variables};
  if (result.dtype.kind() == Kind::floating) {
    result.values = rounded_to(gram_floating(x, layout, options), result.dtype);
  } else {
    result.integers = gram_integer(x, layout, options);
  }
  return result;
}

Matrix cov(const MappedArray& x, const CovOptions& how, const PipelineOptions& options) {
  return covariance(x, how, options);
}

Matrix corrcoef(const MappedArray& x, bool rowvar, const PipelineOptions& options) {
  CovOptions how;
  how.rowvar = rowvar;
  Matrix c = covariance(x, how, options);
  MatrixXd& v = c.values;
  if (v.size() == 0) return c;
  const VectorXd stddev = v.diagonal().array().sqrt();
  // 0 / 0 (a constant variable, or no observations) and inf / inf: numpy warns.
  bool invalid = false;
  for (Eigen::Index i = 0; i < stddev.size(); ++i)
    if (stddev(i) == 0 || std::isinf(stddev(i))) invalid = true;
  if (c.shape.empty()) {  // numpy: c / c for a single variable, unclipped
    v(0, 0) = v(0, 0) / v(0, 0);
  } else {
    for (Eigen::Index j = 0; j < v.cols(); ++j)
      for (Eigen::Index i = 0; i < v.rows(); ++i) {
        const double value = v(i, j) / stddev(i) / stddev(j);
        v(i, j) = std::isnan(value) ? value : std::clamp(value, -1.0, 1.0);
      }
  }
  if (invalid) c.warnings.push_back("invalid value encountered in divide");
  return c;
}

DType matmul_dtype(DType x, DType w) { return promote_types(x, w); }

Shape matmul_shape(const MappedArray& x, const Shape& w) {
  const std::string signature = "(n?,k),(k,m?)->(n?,m?)";
  const Shape& xs = x.shape();
  if (xs.empty() || w.empty())
    throw UsageError(x.path(), "matmul: Input operand " + std::string(xs.empty() ? "0" : "1") +
                                   " does not have enough dimensions (has 0, gufunc core with signature " + signature +
                                   " requires 1)");
  if (xs.size() > 2) throw UsageError(x.path(), "matmul streams a 1-d or 2-d X, not " + std::to_string(xs.size()) + "-d");
  if (w.size() > 2) throw UsageError(x.path(), "matmul takes a 1-d or 2-d W, not " + std::to_string(w.size()) + "-d");
  const std::int64_t inner = xs.back();
  if (w[0] != inner)
    throw UsageError(x.path(), "matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature " + signature +
                                   " (size " + std::to_string(w[0]) + " is different from " + std::to_string(inner) + ")");
  Shape shape;
  if (xs.size() == 2) shape.push_back(xs[0]);
  if (w.size() == 2) shape.push_back(w[1]);
  return shape;
}

void matmul(const MappedArray& x, const InMemory& w, std::span<std::byte> out, const PipelineOptions& options) {
  matmul_shape(x, w.shape);
  const DType dtype = matmul_dtype(x.dtype(), w.dtype);
  const std::int64_t m = x.shape().back();
  const std::int64_t k = w.shape.size() == 2 ? w.shape[1] : 1;
  const auto item = static_cast<std::size_t>(dtype.itemsize());
  const std::int64_t count = (x.ndim() == 2 ? x.shape()[0] : 1) * k;
  if (out.size() != static_cast<std::size_t>(count) * item)
    throw UsageError(x.path(), "matmul: an output of " + std::to_string(out.size()) + " bytes for " +
                                   std::to_string(count) + " elements of " + dtype.name());
  if (m == 0) std::fill(out.begin(), out.end(), std::byte{0});  // empty sums
  // A 1-d x is one observation of m variables.
  const Layout layout = x.ndim() == 2 ? layout_of(x, false) : Layout{1, m, true};
  auto run = [&]<class S>(std::type_identity<S>) {
    // W as a column-major m x k matrix of S.
    std::vector<S> converted(static_cast<std::size_t>(m * k));
    convert(w.dtype, w.data, dtype_of<S>, converted.data(), m * k);
    ColMajor<S> weights(m, k);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < k; ++j)
        weights(i, j) = converted[static_cast<std::size_t>(w.order == Order::c ? i * k + j : j * m + i)];
    struct Written {};
    stream_chunks<S, Written>(
        x, layout, options,
        [&](const auto& y, std::int64_t first) {
          const RowMajor<S> product = y * weights;
          convert(dtype_of<S>, product.data(), dtype, out.data() + static_cast<std::size_t>(first * k) * item,
                  product.size());
          return Written{};
        },
        [](Written&&) {});
  };
  if (dtype.kind() == Kind::floating) {
    run(std::type_identity<double>{});
  } else {
    run(std::type_identity<std::uint64_t>{});  // wraps to any integer width; bool: nonzero
  }
}

namespace {

// The dtype numpy.linalg computes and returns for x: float32 stays, the rest float64.
DType linalg_dtype(const MappedArray& x) {
  if (x.ndim() != 2)
    throw UsageError(x.path(), std::to_string(x.ndim()) + "-dimensional array given. Array must be two-dimensional");
  if (x.dtype().kind() == Kind::floating && x.dtype().itemsize() == 2)
    throw UsageError(x.path(), "array type float16 is unsupported in linalg");
  return x.dtype().native() == dtype_of<float> ? dtype_of<float> : dtype_of<double>;
}

// The upper triangle (rows min(rows, cols)) of a computed Householder QR.
MatrixXd upper_factor(const Eigen::HouseholderQR<MatrixXd>& qr) {
  const Eigen::Index rows = std::min(qr.matrixQR().rows(), qr.matrixQR().cols());
  return qr.matrixQR().topRows(rows).triangularView<Eigen::Upper>();
}

MatrixXd r_factor(const MatrixXd& stacked) { return upper_factor(Eigen::HouseholderQR<MatrixXd>(stacked)); }

// The R of a chunk of rows, factored in this thread's own HouseholderQR, whose storage
// is reused from chunk to chunk (a chunk is hundreds of KB: a fresh allocation each time
// costs page faults). The same bits as r_factor.
template <class Chunk>
MatrixXd chunk_r_factor(const Chunk& chunk) {
  thread_local Eigen::HouseholderQR<MatrixXd> qr;
  qr.compute(chunk);
  return upper_factor(qr);
}

// One step of the TSQR fold: the R of [total; part] (part alone for the first chunk).
MatrixXd fold_step(MatrixXd&& total, MatrixXd&& part) {
  if (total.rows() == 0) return std::move(part);
  MatrixXd stacked(total.rows() + part.rows(), total.cols());
  stacked << total, part;
  return r_factor(stacked);
}

// The fold's running R before every `group_chunks`-th chunk, recorded by the first pass:
// the second pass restarts the fold there, last group first.
struct Checkpoints {
  std::int64_t group_chunks = 1;
  std::vector<MatrixXd> totals;
};

// Chunks per checkpoint group: about a tile of float64 rows. Only memory depends on it.
std::int64_t group_chunks_for(const Layout& layout, const PipelineOptions& options) {
  const auto chunk_bytes = static_cast<std::uint64_t>(chunk_rows(layout.variables) * std::max<std::int64_t>(layout.variables, 1)) * sizeof(double);
  return static_cast<std::int64_t>(std::max<std::uint64_t>(1, options.tile_bytes / chunk_bytes));
}

// The TSQR R of x, its rows' signs as the fold leaves them.
MatrixXd tsqr_raw(const MappedArray& x, const Layout& layout, const PipelineOptions& options,
                  Checkpoints* checkpoints = nullptr) {
  MatrixXd total(0, layout.variables);
  std::int64_t chunk = 0;
  stream_chunks<double, MatrixXd>(
      x, layout, options, [](const auto& y, std::int64_t) { return chunk_r_factor(y); },
      [&](MatrixXd&& part) {
        if (checkpoints != nullptr && chunk % checkpoints->group_chunks == 0) checkpoints->totals.push_back(total);
        ++chunk;
        total = fold_step(std::move(total), std::move(part));
      });
  return total;
}

// ±1 per row of a raw R, so that diag(signs) R has a non-negative diagonal.
// numpy's LinAlgError for the SVD of data holding NaN or inf (LAPACK's does not converge;
// Eigen's would return numbers).
void check_finite(const MappedArray& x, const MatrixXd& r, const char* problem) {
  if (!r.allFinite()) throw Error(x.path(), problem, ErrorKind::value);
}

VectorXd diagonal_signs(const MatrixXd& raw) {
  VectorXd signs = VectorXd::Ones(raw.rows());
  for (Eigen::Index i = 0; i < raw.rows(); ++i)
    if (raw(i, i) < 0) signs(i) = -1;
  return signs;
}

MatrixXd tsqr_r(const MappedArray& x, const PipelineOptions& options) {
  const MatrixXd raw = tsqr_raw(x, layout_of(x, false), options);
  return diagonal_signs(raw).asDiagonal() * raw;
}

}  // namespace

Matrix qr_r(const MappedArray& x, const PipelineOptions& options) {
  Matrix result;
  result.dtype = linalg_dtype(x);
  result.values = rounded_to(tsqr_r(x, options), result.dtype);
  result.shape = {result.values.rows(), result.values.cols()};
  return result;
}

Matrix singular_values(const MappedArray& x, const PipelineOptions& options) {
  Matrix result;
  result.dtype = linalg_dtype(x);
  const MatrixXd r = tsqr_r(x, options);
  check_finite(x, r, "SVD did not converge");
  const VectorXd s = r.size() == 0 ? VectorXd(0) : VectorXd(Eigen::JacobiSVD<MatrixXd>(r).singularValues());
  result.values = rounded_to(MatrixXd(s.transpose()), result.dtype);
  result.shape = {s.size()};
  return result;
}

namespace {

// Reads observations [begin, begin + count) of `a`, laid out as `layout`, into `raw` as
// stored (the array's dtype and byte order): observation by observation, or variable by
// variable (each variable's `count` observations together). `raw` only grows, so a
// buffer reused across batches is allocated (and its pages faulted in) once.
void read_batch(const MappedArray& a, const Layout& layout, std::int64_t begin, std::int64_t count,
                std::vector<std::byte>& raw, const PipelineOptions& options) {
  const std::int64_t m = layout.variables;
  const auto item = static_cast<std::size_t>(a.dtype().itemsize());
  const std::size_t bytes = static_cast<std::size_t>(count * m) * item;
  if (raw.size() < bytes) raw.resize(bytes);
  if (layout.observation_major) {
    read(a, ElementRange{begin * m, (begin + count) * m}, std::span<std::byte>(raw.data(), bytes), options);
    return;
  }
  for (std::int64_t v = 0; v < m; ++v) {
    const std::int64_t at = v * layout.observations + begin;
    read(a, ElementRange{at, at + count},
         std::span<std::byte>(raw.data() + static_cast<std::size_t>(v * count) * item, static_cast<std::size_t>(count) * item),
         options);
  }
}

// Observations [first, first + rows) of a batch of `count` that read_batch read, as
// float64, into the columns [column, column + M) of `into` (rows x at least that).
void unpack(const std::vector<std::byte>& raw, DType dtype, const Layout& layout, std::int64_t count,
            std::int64_t first, std::int64_t rows, MatrixXd& into, std::int64_t column) {
  const std::int64_t m = layout.variables;
  const auto item = static_cast<std::size_t>(dtype.itemsize());
  if (layout.observation_major) {
    const std::byte* at = raw.data() + static_cast<std::size_t>(first * m) * item;
    if (dtype == dtype_of<double> && reinterpret_cast<std::uintptr_t>(at) % alignof(double) == 0) {
      into.middleCols(column, m) = Eigen::Map<const RowMajor<double>>(reinterpret_cast<const double*>(at), rows, m);
      return;
    }
    thread_local std::vector<double> values;
    convert_into<double>(dtype, at, values, rows * m);
    into.middleCols(column, m) = Eigen::Map<const RowMajor<double>>(values.data(), rows, m);
    return;
  }
  for (std::int64_t v = 0; v < m; ++v)
    convert(dtype, raw.data() + static_cast<std::size_t>(v * count + first) * item, dtype_of<double>,
            into.col(column + v).data(), rows);
}

// The TSQR R of [x y] (rows min(N, M + K)), x and y read side by side in batches of
// whole chunks, each chunk unpacked and factored on any thread, the chunks' R factors
// folded in chunk order.
MatrixXd tsqr_r_beside(const MappedArray& x, const Layout& xl, const MappedArray& y, const Layout& yl,
                       const PipelineOptions& options) {
  const std::int64_t n = xl.observations, columns = xl.variables + yl.variables;
  const std::int64_t k = chunk_rows(columns);
  const auto row_bytes = static_cast<std::uint64_t>(columns) * sizeof(double);
  const std::int64_t batch =
      static_cast<std::int64_t>(std::max<std::uint64_t>(1, options.tile_bytes / (row_bytes * static_cast<std::uint64_t>(k)))) * k;
  PipelineOptions read_options = options;
  read_options.on_progress = nullptr;
  read_options.tiles = TileRange{};
  const int threads = detail::resolve_threads(options.threads);
  MatrixXd total(0, columns);
  // Two slots: the next batch is read on a thread of its own while this one's chunks are
  // factored (read, then compute, left a core idle in each and the disk idle in the other).
  std::vector<std::byte> raw_xs[2], raw_ys[2];
  auto read_slot = [&](int slot, std::int64_t begin) {
    const std::int64_t size = std::min(batch, n - begin);
    read_batch(x, xl, begin, size, raw_xs[slot], read_options);
    read_batch(y, yl, begin, size, raw_ys[slot], read_options);
  };
  if (n > 0) read_slot(0, 0);
  for (std::int64_t begin = 0, slot = 0; begin < n; begin += batch, slot ^= 1) {
    const std::int64_t size = std::min(batch, n - begin);
    // Waited for by its destructor too, should this batch throw.
    std::future<void> next;
    if (begin + batch < n) next = std::async(std::launch::async, read_slot, static_cast<int>(slot ^ 1), begin + batch);
    const std::vector<std::byte>& raw_x = raw_xs[slot];
    const std::vector<std::byte>& raw_y = raw_ys[slot];
    const std::int64_t chunks = (size + k - 1) / k;
    std::vector<MatrixXd> parts(static_cast<std::size_t>(chunks));
    detail::run_in_arena(threads, [&] {
      tbb::parallel_for(std::int64_t{0}, chunks, [&](std::int64_t c) {
        const std::int64_t rows = std::min(k, size - c * k);
        thread_local MatrixXd chunk;
        chunk.resize(rows, columns);
        unpack(raw_x, x.dtype(), xl, size, c * k, rows, chunk, 0);
        unpack(raw_y, y.dtype(), yl, size, c * k, rows, chunk, xl.variables);
        parts[static_cast<std::size_t>(c)] = chunk_r_factor(chunk);
      });
    });
    for (MatrixXd& part : parts) total = fold_step(std::move(total), std::move(part));
    if (next.valid()) next.get();  // the next batch's read errors, here
    if (options.cancel != nullptr && options.cancel->load()) throw Cancelled(x.path(), "cancelled");
  }
  return total;
}

}  // namespace

LeastSquares lstsq(const MappedArray& x, const MappedArray& y, std::optional<double> rcond,
                   const PipelineOptions& options) {
  const DType x_dtype = linalg_dtype(x);
  if (y.ndim() < 1 || y.ndim() > 2)
    throw UsageError(y.path(), std::to_string(y.ndim()) + "-dimensional array given. Array must be one- or two-dimensional");
  if (y.dtype().kind() == Kind::floating && y.dtype().itemsize() == 2)
    throw UsageError(y.path(), "array type float16 is unsupported in linalg");
  if (y.shape()[0] != x.shape()[0]) throw UsageError(y.path(), "Incompatible dimensions");
  const DType dtype = x_dtype == dtype_of<float> && y.dtype().native() == dtype_of<float> ? dtype_of<float>
                                                                                          : dtype_of<double>;
  const Layout xl = layout_of(x, false);
  const Layout yl = y.ndim() == 1 ? Layout{y.shape()[0], 1, true} : layout_of(y, false);
  const std::int64_t n = xl.observations, m = xl.variables, k = yl.variables;
  MatrixXd r_aug = MatrixXd::Zero(m + k, m + k);
  if (n > 0 && m + k > 0) {
    const MatrixXd r = tsqr_r_beside(x, xl, y, yl, options);
    check_finite(x, r.leftCols(m), "SVD did not converge in Linear Least Squares");  // NaN in y alone: NaN b, as numpy's
    r_aug.topRows(r.rows()) = r;
  }
  const MatrixXd r = r_aug.topLeftCorner(m, m);
  const MatrixXd qty = r_aug.topRightCorner(m, k);
  const Eigen::JacobiSVD<MatrixXd> svd(r, Eigen::ComputeFullU | Eigen::ComputeFullV);
  const VectorXd s = svd.singularValues();
  const std::int64_t kept = std::min(n, m);
  const double cutoff =
      (rcond ? *rcond : std::numeric_limits<double>::epsilon() * static_cast<double>(std::max(n, m))) *
      (s.size() > 0 ? s(0) : 0.0);
  LeastSquares result;
  for (std::int64_t i = 0; i < kept; ++i)
    if (s(i) > cutoff) ++result.rank;
  VectorXd inverse = VectorXd::Zero(m);
  for (std::int64_t i = 0; i < result.rank; ++i) inverse(i) = 1.0 / s(i);
  const MatrixXd solution = svd.matrixV() * inverse.asDiagonal() * svd.matrixU().transpose() * qty;
  result.solution.dtype = dtype;
  result.solution.values = rounded_to(solution, dtype);
  result.solution.shape = y.ndim() == 1 ? Shape{m} : Shape{m, k};
  result.residuals.dtype = dtype;
  if (result.rank == m && n > m) {
    const MatrixXd tail = r_aug.bottomRightCorner(k, k);
    result.residuals.values = rounded_to(MatrixXd(tail.colwise().squaredNorm()), dtype);
    result.residuals.shape = {k};
  } else {
    result.residuals.values = MatrixXd(1, 0);
    result.residuals.shape = {0};
  }
  result.singular_values.dtype = dtype;
  result.singular_values.values = rounded_to(MatrixXd(s.head(kept).transpose()), dtype);
  result.singular_values.shape = {kept};
  return result;
}

namespace {

// The second TSQR pass: writes the rows of Q_raw · last into `out` (N x last.cols(), C
// order, `dtype`), Q_raw the thin Q with Q_raw R_raw = x of the fold that `checkpoints`
// recorded. Groups of chunks are read last to first; each group's chunk QRs and fold
// steps are recomputed (the same inputs, so the same bits as the first pass). A fold
// step [T; R_c] = [A_c; B_c] T' gives x's chunk c the rows Q_c B_c P_{c+1}, where
// P_{c+1} = A_{c+1} ... A_{C-1} last is built backwards, one chunk at a time: the bits
// depend on neither the group size nor the thread count.
void write_q(const MappedArray& x, const Layout& layout, const Checkpoints& checkpoints, const MatrixXd& last,
             DType dtype, std::span<std::byte> out, const PipelineOptions& options) {
  const std::int64_t n = layout.observations, m = layout.variables, width = last.cols();
  if (n == 0 || m == 0 || width == 0) return;
  const std::int64_t k = chunk_rows(m);
  const std::int64_t group_rows = checkpoints.group_chunks * k;
  const auto item = static_cast<std::size_t>(dtype.itemsize());
  PipelineOptions read_options = options;
  read_options.on_progress = nullptr;
  read_options.tiles = TileRange{};
  const int threads = detail::resolve_threads(options.threads);
  Progress progress;
  progress.elements = n * m;
  std::vector<std::byte> raw;
  std::vector<Eigen::HouseholderQR<MatrixXd>> chunk_qr;
  MatrixXd after = last;  // P_{c+1}: the fold's R after chunk c, in terms of the final R's rows
  const auto groups = static_cast<std::int64_t>(checkpoints.totals.size());
  for (std::int64_t g = groups - 1; g >= 0; --g) {
    const std::int64_t begin = g * group_rows, size = std::min(group_rows, n - begin);
    read_batch(x, layout, begin, size, raw, read_options);
    const std::int64_t chunks = (size + k - 1) / k;
    auto rows_of = [&](std::int64_t c) { return std::min(k, size - c * k); };
    chunk_qr.resize(static_cast<std::size_t>(chunks));  // kept across groups: storage reused
    detail::run_in_arena(threads, [&] {
      tbb::parallel_for(std::int64_t{0}, chunks, [&](std::int64_t c) {
        thread_local MatrixXd chunk;
        chunk.resize(rows_of(c), m);
        unpack(raw, x.dtype(), layout, size, c * k, rows_of(c), chunk, 0);
        chunk_qr[static_cast<std::size_t>(c)].compute(chunk);
      });
    });
    // The fold again from the group's checkpoint, keeping each step's thin Q in two parts.
    std::vector<MatrixXd> above(static_cast<std::size_t>(chunks)), below(static_cast<std::size_t>(chunks));
    MatrixXd total = checkpoints.totals[static_cast<std::size_t>(g)];
    for (std::int64_t c = 0; c < chunks; ++c) {
      MatrixXd part = upper_factor(chunk_qr[static_cast<std::size_t>(c)]);
      if (total.rows() == 0) {  // x's first chunk: its R is the fold's first total
        total = std::move(part);
        continue;
      }
      MatrixXd stacked(total.rows() + part.rows(), m);
      stacked << total, part;
      const Eigen::HouseholderQR<MatrixXd> step(stacked);
      const Eigen::Index rows = std::min(stacked.rows(), stacked.cols());
      const MatrixXd thin = step.householderQ() * MatrixXd::Identity(stacked.rows(), rows);
      above[static_cast<std::size_t>(c)] = thin.topRows(total.rows());
      below[static_cast<std::size_t>(c)] = thin.bottomRows(part.rows());
      total = upper_factor(step);
    }
    std::vector<MatrixXd> factor(static_cast<std::size_t>(chunks));
    for (std::int64_t c = chunks - 1; c >= 0; --c) {
      const auto i = static_cast<std::size_t>(c);
      if (g == 0 && c == 0) {
        factor[i] = after;
      } else {
        factor[i] = below[i] * after;
        after = above[i] * after;
      }
    }
    detail::run_in_arena(threads, [&] {
      tbb::parallel_for(std::int64_t{0}, chunks, [&](std::int64_t c) {
        const auto i = static_cast<std::size_t>(c);
        MatrixXd rows = MatrixXd::Zero(rows_of(c), width);
        rows.topRows(factor[i].rows()) = factor[i];
        rows.applyOnTheLeft(chunk_qr[i].householderQ());
        const RowMajor<double> by_rows = rows;
        convert(dtype_of<double>, by_rows.data(), dtype,
                out.data() + static_cast<std::size_t>((begin + c * k) * width) * item, by_rows.size());
      });
    });
    if (options.cancel != nullptr && options.cancel->load()) throw Cancelled(x.path(), "cancelled");
    progress.elements_done += size * m;
    if (options.on_progress) options.on_progress(progress);
  }
}

// The first pass: R_raw and the fold's checkpoints.
struct Factored {
  Layout layout;
  Checkpoints checkpoints;
  MatrixXd raw;
  VectorXd signs;  ///< R = diag(signs) R_raw has a non-negative diagonal
};

Factored factor_once(const MappedArray& x, const PipelineOptions& options) {
  Factored f;
  f.layout = layout_of(x, false);
  f.checkpoints.group_chunks = group_chunks_for(f.layout, options);
  f.raw = tsqr_raw(x, f.layout, options, &f.checkpoints);
  f.signs = diagonal_signs(f.raw);
  return f;
}

void check_output_size(const MappedArray& x, std::span<std::byte> out, const char* what) {
  const Shape shape = q_shape(x);
  const auto bytes = static_cast<std::size_t>(shape[0] * shape[1]) * static_cast<std::size_t>(linalg_dtype(x).itemsize());
  if (out.size() != bytes)
    throw UsageError(x.path(), std::string(what) + ": an output of " + std::to_string(out.size()) + " bytes for " +
                                   std::to_string(shape[0] * shape[1]) + " elements of " + linalg_dtype(x).name());
}

// s and Vt of R = diag(signs) R_raw, and U_R in `u_r` when asked.
SingularValueDecomposition small_svd(const MappedArray& x, const Factored& f, DType dtype, MatrixXd* u_r) {
  const MatrixXd r = f.signs.asDiagonal() * f.raw;
  check_finite(x, r, "SVD did not converge");
  SingularValueDecomposition result;
  result.s.dtype = result.vt.dtype = dtype;
  MatrixXd s(1, r.rows()), vt(r.rows(), r.cols());
  if (r.size() != 0) {
    const Eigen::JacobiSVD<MatrixXd> svd(r, Eigen::ComputeThinU | Eigen::ComputeThinV);
    s = svd.singularValues().transpose();
    vt = svd.matrixV().transpose();
    if (u_r != nullptr) *u_r = svd.matrixU();
  } else if (u_r != nullptr) {
    *u_r = MatrixXd::Identity(r.rows(), r.rows());
  }
  result.s.values = rounded_to(s, dtype);
  result.s.shape = {s.cols()};
  result.vt.values = rounded_to(vt, dtype);
  result.vt.shape = {vt.rows(), vt.cols()};
  return result;
}

// Creates `path`, runs `write` into it, and commits it unless cancelled.
template <class Write>
auto into_new_file(const MappedArray& x, const std::string& path, bool overwrite, const PipelineOptions& options,
                   Write&& write) {
  std::error_code ec;
  if (std::filesystem::equivalent(x.path(), path, ec)) throw UsageError(path, "output is an input file");
  MappedArray file = create_array(path, linalg_dtype(x), q_shape(x), Order::c, overwrite);
  auto result = write(file.writable_bytes());
  if (options.cancel != nullptr && options.cancel->load()) throw Cancelled(path, "cancelled; no output written");
  file.commit();
  return result;
}

}  // namespace

Shape q_shape(const MappedArray& x) {
  linalg_dtype(x);
  const std::int64_t n = x.shape()[0], m = x.shape()[1];
  return {n, std::min(n, m)};
}

DType factor_dtype(const MappedArray& x) { return linalg_dtype(x); }

Matrix qr(const MappedArray& x, std::span<std::byte> q, const PipelineOptions& options) {
  check_output_size(x, q, "qr");
  Matrix result;
  result.dtype = linalg_dtype(x);
  const Factored f = factor_once(x, options);
  write_q(x, f.layout, f.checkpoints, MatrixXd(f.signs.asDiagonal()), result.dtype, q, options);
  result.values = rounded_to(f.signs.asDiagonal() * f.raw, result.dtype);
  result.shape = {result.values.rows(), result.values.cols()};
  return result;
}

Matrix qr(const MappedArray& x, const std::string& q_path, bool overwrite, const PipelineOptions& options) {
  return into_new_file(x, q_path, overwrite, options, [&](std::span<std::byte> q) { return qr(x, q, options); });
}

SingularValueDecomposition svd(const MappedArray& x, const PipelineOptions& options) {
  const DType dtype = linalg_dtype(x);
  Factored f;
  f.layout = layout_of(x, false);
  f.raw = tsqr_raw(x, f.layout, options);
  f.signs = diagonal_signs(f.raw);
  return small_svd(x, f, dtype, nullptr);
}

SingularValueDecomposition svd(const MappedArray& x, std::span<std::byte> u, const PipelineOptions& options) {
  check_output_size(x, u, "svd");
  const DType dtype = linalg_dtype(x);
  const Factored f = factor_once(x, options);
  MatrixXd u_r;
  SingularValueDecomposition result = small_svd(x, f, dtype, &u_r);
  // X = Q_raw R_raw = (Q_raw diag(signs)) (U_R S Vt): U = Q_raw (diag(signs) U_R).
  write_q(x, f.layout, f.checkpoints, f.signs.asDiagonal() * u_r, dtype, u, options);
  return result;
}

SingularValueDecomposition svd(const MappedArray& x, const std::string& u_path, bool overwrite,
                               const PipelineOptions& options) {
  return into_new_file(x, u_path, overwrite, options, [&](std::span<std::byte> u) { return svd(x, u, options); });
}

}  // namespace ooc::linalg
