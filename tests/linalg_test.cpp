#include "ooc/ooc.hpp"
#include "ooc/linalg_qr.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <Eigen/Dense>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

using ooc::testing::ScratchDir;

namespace {

// An (n, m) array of `values` (given row by row) stored in `order` as `dtype`.
ooc::MappedArray make_matrix(const std::string& path, const std::vector<double>& values, std::int64_t n,
                             std::int64_t m, ooc::Order order, ooc::DType dtype = ooc::dtype_of<double>) {
  std::vector<double> stored(values.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j)
      stored[static_cast<std::size_t>(order == ooc::Order::c ? i * m + j : j * n + i)] =
          values[static_cast<std::size_t>(i * m + j)];
  ooc::MappedArray out = ooc::create_npy(path, dtype, {n, m}, order);
  ooc::convert(ooc::dtype_of<double>, stored.data(), dtype, out.writable_bytes().data(), n * m);
  out.commit();
  return ooc::map_file(path);
}

// n observations of m variables around `mean`, spread 1, correlated.
std::vector<double> sample(std::int64_t n, std::int64_t m, double mean, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<std::size_t>(n * m));
  for (std::int64_t i = 0; i < n; ++i) {
    const double common = normal(rng);
    for (std::int64_t j = 0; j < m; ++j) v[static_cast<std::size_t>(i * m + j)] = mean + normal(rng) + 0.5 * j * common;
  }
  return v;
}

// np.cov(x, rowvar=False) by two passes in long double.
Eigen::MatrixXd reference_cov(const std::vector<double>& v, std::int64_t n, std::int64_t m, std::int64_t ddof) {
  std::vector<long double> mean(static_cast<std::size_t>(m), 0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) mean[j] += v[static_cast<std::size_t>(i * m + j)];
  for (auto& x : mean) x /= n;
  Eigen::MatrixXd c(m, m);
  for (std::int64_t a = 0; a < m; ++a)
    for (std::int64_t b = 0; b < m; ++b) {
      long double s = 0;
      for (std::int64_t i = 0; i < n; ++i)
        s += (v[static_cast<std::size_t>(i * m + a)] - mean[a]) * (v[static_cast<std::size_t>(i * m + b)] - mean[b]);
      c(a, b) = static_cast<double>(s / (n - ddof));
    }
  return c;
}

double max_error(const Eigen::MatrixXd& got, const Eigen::MatrixXd& want) {
  return (got - want).cwiseAbs().maxCoeff() / want.cwiseAbs().maxCoeff();
}

ooc::PipelineOptions with(int threads, std::uint64_t tile_bytes) {
  ooc::PipelineOptions options;
  options.threads = threads;
  options.tile_bytes = tile_bytes;
  return options;
}

bool same_bits(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

}  // namespace

TEST_CASE("cov of data with a mean of 1e8 keeps its digits, in either memory order") {
  ScratchDir dir;
  const std::int64_t n = 60000, m = 5;
  const auto v = sample(n, m, 1e8, 1);
  const Eigen::MatrixXd want = reference_cov(v, n, m, 1);
  for (ooc::Order order : {ooc::Order::c, ooc::Order::fortran}) {
    const auto x = make_matrix(dir.file(order == ooc::Order::c ? "c.npy" : "f.npy"), v, n, m, order);
    ooc::linalg::CovOptions how;
    how.rowvar = false;
    const ooc::linalg::Matrix c = ooc::linalg::cov(x, how);
    CHECK(c.dtype == ooc::dtype_of<double>);
    CHECK(c.shape == ooc::Shape{m, m});
    CHECK(max_error(c.values, want) < 1e-12);
    CHECK(c.warnings.empty());
  }
}

TEST_CASE("gram, cov and corrcoef give the same bits for any thread count and tile size") {
  ScratchDir dir;
  const std::int64_t n = 50000, m = 7;
  const auto v = sample(n, m, 3e7, 2);
  for (ooc::Order order : {ooc::Order::c, ooc::Order::fortran}) {
    const auto x = make_matrix(dir.file(order == ooc::Order::c ? "c.npy" : "f.npy"), v, n, m, order);
    ooc::linalg::CovOptions how;
    how.rowvar = false;
    const auto g = ooc::linalg::gram(x, with(1, 64 << 10)).values;
    const auto c = ooc::linalg::cov(x, how, with(1, 64 << 10)).values;
    const auto r = ooc::linalg::corrcoef(x, false, with(1, 64 << 10)).values;
    for (auto options : {with(3, 64 << 10), with(3, 1 << 20), with(1, 16 << 20)}) {
      CHECK(same_bits(ooc::linalg::gram(x, options).values, g));
      CHECK(same_bits(ooc::linalg::cov(x, how, options).values, c));
      CHECK(same_bits(ooc::linalg::corrcoef(x, false, options).values, r));
    }
  }
}

TEST_CASE("gram of float64 matches X.T @ X; float32 stays float32; a wide array streams with rowvar") {
  ScratchDir dir;
  const std::int64_t n = 20000, m = 4;
  const auto v = sample(n, m, 1, 3);
  Eigen::MatrixXd want = Eigen::MatrixXd::Zero(m, m);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t a = 0; a < m; ++a)
      for (std::int64_t b = 0; b < m; ++b)
        want(a, b) += v[static_cast<std::size_t>(i * m + a)] * v[static_cast<std::size_t>(i * m + b)];
  const auto x = make_matrix(dir.file("x.npy"), v, n, m, ooc::Order::c);
  CHECK(max_error(ooc::linalg::gram(x).values, want) < 1e-12);
  const auto x32 = make_matrix(dir.file("x32.npy"), v, n, m, ooc::Order::fortran, ooc::dtype_of<float>);
  const auto g32 = ooc::linalg::gram(x32);
  CHECK(g32.dtype == ooc::dtype_of<float>);
  CHECK(max_error(g32.values, want) < 1e-6);
  // The same data as a wide (m, n) C-order array, each row a variable.
  std::vector<double> wide(v.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) wide[static_cast<std::size_t>(j * n + i)] = v[static_cast<std::size_t>(i * m + j)];
  const auto w = make_matrix(dir.file("w.npy"), wide, m, n, ooc::Order::c);
  CHECK(max_error(ooc::linalg::cov(w, {}, with(2, 64 << 10)).values, reference_cov(v, n, m, 1)) < 1e-12);
}

TEST_CASE("integer and bool grams wrap and saturate as numpy's matmul does") {
  ScratchDir dir;
  const auto x = make_matrix(dir.file("i8.npy"), {100, -3, 100, 2, 1, 0}, 3, 2, ooc::Order::c,
                             ooc::DType(ooc::Kind::signed_int, 1));
  const auto g = ooc::linalg::gram(x);
  CHECK(g.dtype == ooc::DType(ooc::Kind::signed_int, 1));
  const auto bytes = g.bytes();
  // 100*100*2 + 1 = 20001 wraps to 33 in int8; 100*-3 + 100*2 + 0 = -100; 9 + 4 = 13.
  CHECK(static_cast<std::int8_t>(bytes[0]) == 33);
  CHECK(static_cast<std::int8_t>(bytes[1]) == -100);
  CHECK(static_cast<std::int8_t>(bytes[2]) == -100);
  CHECK(static_cast<std::int8_t>(bytes[3]) == 13);
  const auto b = make_matrix(dir.file("b.npy"), {1, 0, 0, 0}, 2, 2, ooc::Order::c, ooc::DType(ooc::Kind::boolean, 1));
  const auto gb = ooc::linalg::gram(b).bytes();
  CHECK(gb == std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0}});
}

TEST_CASE("numpy's warnings and errors: no observations, ddof too large, a constant variable, 3-d") {
  ScratchDir dir;
  ooc::linalg::CovOptions how;
  how.rowvar = false;
  const auto empty = make_matrix(dir.file("e.npy"), {}, 0, 3, ooc::Order::c);
  const auto c = ooc::linalg::cov(empty, how);
  CHECK(c.values.array().isNaN().all());
  CHECK(c.warnings == std::vector<std::string>{"Mean of empty slice.", "Degrees of freedom <= 0 for slice"});
  const auto none = make_matrix(dir.file("n.npy"), {}, 3, 0, ooc::Order::c);
  CHECK(ooc::linalg::cov(none, how).shape == ooc::Shape{0, 0});
  const auto flat = make_matrix(dir.file("k.npy"), {1, 5, 1, 6, 1, 8}, 3, 2, ooc::Order::c);
  const auto r = ooc::linalg::corrcoef(flat, false);
  CHECK(std::isnan(r.values(0, 0)));
  CHECK(r.values(1, 1) == 1.0);
  CHECK(r.warnings == std::vector<std::string>{"invalid value encountered in divide"});
  how.ddof = 5;
  const auto over = ooc::linalg::cov(flat, how);
  CHECK(over.warnings == std::vector<std::string>{"Degrees of freedom <= 0 for slice"});
  CHECK(std::isinf(over.values(1, 1)));
  ooc::MappedArray cube = ooc::create_npy(dir.file("cube.npy"), ooc::dtype_of<double>, {2, 2, 2});
  cube.commit();
  CHECK_THROWS_WITH_AS(ooc::linalg::cov(ooc::map_file(dir.file("cube.npy"))), doctest::Contains("m has more than 2 dimensions"),
                       ooc::UsageError);
}

TEST_CASE("matmul streams X's rows against an in-memory W, numpy's dtype and errors") {
  ScratchDir dir;
  const std::int64_t n = 30000, m = 3;
  const auto v = sample(n, m, 0, 4);
  const std::vector<double> w = {1, 2, -1, 0.5, 3, 0};  // (3, 2), C order
  for (ooc::Order order : {ooc::Order::c, ooc::Order::fortran}) {
    const auto x = make_matrix(dir.file(order == ooc::Order::c ? "c.npy" : "f.npy"), v, n, m, order);
    const ooc::linalg::InMemory weights{reinterpret_cast<const std::byte*>(w.data()), ooc::dtype_of<double>, {3, 2}};
    CHECK(ooc::linalg::matmul_shape(x, weights.shape) == ooc::Shape{n, 2});
    std::vector<double> out(static_cast<std::size_t>(n * 2));
    ooc::linalg::matmul(x, weights, std::as_writable_bytes(std::span(out)), with(3, 64 << 10));
    double worst = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < 2; ++j) {
        double want = 0;
        for (std::int64_t k = 0; k < m; ++k) want += v[static_cast<std::size_t>(i * m + k)] * w[static_cast<std::size_t>(k * 2 + j)];
        worst = std::max(worst, std::abs(out[static_cast<std::size_t>(i * 2 + j)] - want));
      }
    CHECK(worst < 1e-12);
    CHECK_THROWS_WITH_AS(ooc::linalg::matmul_shape(x, {4, 2}), doctest::Contains("(size 4 is different from 3)"),
                         ooc::UsageError);
  }
  CHECK(ooc::linalg::matmul_dtype(ooc::dtype_of<float>, ooc::DType(ooc::Kind::signed_int, 1)) == ooc::dtype_of<float>);
}

TEST_CASE("TSQR: R with a non-negative diagonal whose Rᵀ R is the gram; singular values; the same bits") {
  ScratchDir dir;
  const std::int64_t n = 20000, m = 4;
  const auto v = sample(n, m, 10, 5);
  const auto x = make_matrix(dir.file("x.npy"), v, n, m, ooc::Order::fortran);
  const auto r = ooc::linalg::qr_r(x, with(1, 64 << 10)).values;
  CHECK(r.rows() == m);
  for (std::int64_t i = 0; i < m; ++i) CHECK(r(i, i) >= 0);
  const Eigen::MatrixXd g = ooc::linalg::gram(x).values;
  CHECK(max_error(r.transpose() * r, g) < 1e-12);
  CHECK(same_bits(ooc::linalg::qr_r(x, with(3, 1 << 20)).values, r));
  const Eigen::VectorXd s = ooc::linalg::singular_values(x).values.row(0);
  const Eigen::VectorXd eigen = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(g).eigenvalues().reverse();
  CHECK(max_error(s.array().square().matrix(), eigen) < 1e-10);
}

TEST_CASE("TSQR's second pass: Q (to memory or a file) and U, orthonormal, Q R = X, the same bits") {
  ScratchDir dir;
  const std::int64_t n = 30000, m = 5;
  const auto v = sample(n, m, 1e3, 8);
  Eigen::MatrixXd want(n, m);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) want(i, j) = v[static_cast<std::size_t>(i * m + j)];
  const auto x = make_matrix(dir.file("x.npy"), v, n, m, ooc::Order::c);
  CHECK(ooc::linalg::q_shape(x) == ooc::Shape{n, m});
  CHECK(ooc::linalg::factor_dtype(x) == ooc::dtype_of<double>);
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> q(n, m), again(n, m);
  const auto bytes = [](auto& matrix) {
    return std::span<std::byte>(reinterpret_cast<std::byte*>(matrix.data()), sizeof(double) * matrix.size());
  };
  const auto r = ooc::linalg::qr(x, bytes(q), with(1, 64 << 10));
  CHECK(same_bits(r.values, ooc::linalg::qr_r(x).values));
  CHECK((Eigen::MatrixXd(q.transpose() * q) - Eigen::MatrixXd::Identity(m, m)).cwiseAbs().maxCoeff() < 1e-13);
  CHECK((q * r.values - want).norm() / want.norm() < 1e-14);
  ooc::linalg::qr(x, bytes(again), with(3, 1 << 20));
  CHECK(std::memcmp(q.data(), again.data(), sizeof(double) * q.size()) == 0);
  ooc::linalg::qr(x, dir.file("q.npy"));
  const auto file = ooc::map_file(dir.file("q.npy"));
  CHECK(file.shape() == ooc::Shape{n, m});
  CHECK(std::memcmp(file.bytes().data(), q.data(), sizeof(double) * q.size()) == 0);
  const auto svd = ooc::linalg::svd(x, bytes(again), with(2, 256 << 10));
  const Eigen::VectorXd s = svd.s.values.row(0);
  CHECK(same_bits(svd.s.values, ooc::linalg::svd(x).s.values));
  CHECK(svd.vt.shape == ooc::Shape{m, m});
  CHECK((again * s.asDiagonal() * svd.vt.values - want).norm() / want.norm() < 1e-14);
  CHECK((Eigen::MatrixXd(again.transpose() * again) - Eigen::MatrixXd::Identity(m, m)).cwiseAbs().maxCoeff() < 1e-13);
  std::vector<std::byte> wrong(8);
  CHECK_THROWS_WITH_AS(ooc::linalg::qr(x, wrong), doctest::Contains("an output of 8 bytes"), ooc::UsageError);
  CHECK_THROWS_WITH_AS(ooc::linalg::svd(x, dir.file("x.npy")), doctest::Contains("output is an input file"),
                       ooc::UsageError);
  CHECK(ooc::map_file(dir.file("x.npy")).shape() == ooc::Shape{n, m});
}

TEST_CASE("lstsq streams X and y side by side: an exact fit, its rank, and numpy's error for unequal lengths") {
  ScratchDir dir;
  const std::int64_t n = 10000, m = 3;
  const auto v = sample(n, m, 0, 6);
  const std::vector<double> b = {0.5, -2, 3};
  std::vector<double> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) y[static_cast<std::size_t>(i)] += v[static_cast<std::size_t>(i * m + j)] * b[static_cast<std::size_t>(j)];
  const auto x = make_matrix(dir.file("x.npy"), v, n, m, ooc::Order::fortran);
  const auto ys = make_matrix(dir.file("y.npy"), y, n, 1, ooc::Order::c);
  const auto fit = ooc::linalg::lstsq(x, ys, std::nullopt, with(2, 64 << 10));
  CHECK(fit.rank == m);
  CHECK(fit.solution.shape == ooc::Shape{m, 1});
  for (std::int64_t j = 0; j < m; ++j) CHECK(std::abs(fit.solution.values(j, 0) - b[static_cast<std::size_t>(j)]) < 1e-12);
  CHECK(fit.residuals.shape == ooc::Shape{1});
  CHECK(fit.residuals.values(0, 0) < 1e-20);
  const auto short_y = make_matrix(dir.file("s.npy"), std::vector<double>(9, 1.0), 9, 1, ooc::Order::c);
  CHECK_THROWS_WITH_AS(ooc::linalg::lstsq(x, short_y), doctest::Contains("Incompatible dimensions"), ooc::UsageError);
}
