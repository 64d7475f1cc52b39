// Tests for kernels/axis.{hpp,cpp}: where an axis lies in memory, and reductions along it.

#include "ooc/ooc.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using ooc::kernels::AxisLayout;
using ooc::kernels::ReduceOp;
using ooc::testing::ScratchDir;

namespace {

bool same(const AxisLayout& l, std::int64_t outer, std::int64_t reduce, std::int64_t inner) {
  return l.outer == outer && l.reduce == reduce && l.inner == inner;
}

ooc::MappedArray make(const std::string& path, const std::vector<double>& values, const ooc::Shape& shape,
                      ooc::Order order) {
  ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<double>, shape, order);
  if (!values.empty()) std::memcpy(out.writable_bytes().data(), values.data(), values.size() * sizeof(double));
  out.commit();
  return ooc::map_file(path);
}

}  // namespace

TEST_CASE("an axis is outer slabs of rows of inner elements, in memory order") {
  const ooc::Shape cube{2, 3, 4};
  CHECK(same(ooc::kernels::axis_layout(cube, ooc::Order::c, 0), 1, 2, 12));
  CHECK(same(ooc::kernels::axis_layout(cube, ooc::Order::c, 1), 2, 3, 4));
  CHECK(same(ooc::kernels::axis_layout(cube, ooc::Order::c, 2), 6, 4, 1));
  CHECK(same(ooc::kernels::axis_layout(cube, ooc::Order::fortran, 0), 12, 2, 1));
  CHECK(same(ooc::kernels::axis_layout(cube, ooc::Order::fortran, 2), 1, 4, 6));
  CHECK(ooc::kernels::drop_axis(cube, 1) == ooc::Shape{2, 4});
}

TEST_CASE("axes are normalised as numpy's, and out of range is a usage error") {
  CHECK(ooc::kernels::normalize_axis(-1, 3) == 2);
  CHECK(ooc::kernels::normalize_axis(0, 1) == 0);
  CHECK_THROWS_WITH_AS(ooc::kernels::normalize_axis(3, 3), "axis 3 is out of bounds for array of dimension 3",
                       ooc::UsageError);
  CHECK_THROWS_AS(ooc::kernels::normalize_axis(0, 0), ooc::UsageError);
}

TEST_CASE("column sums add rows one by one, row sums take blocks from each row's start") {
  ScratchDir dir;
  // Column 0 added in row order is ((0 + 1e16) + 1) - 1e16 = 0, as numpy adds it; a
  // pairwise or reordered sum could give 1.
  const std::vector<double> values{1e16, 1.0, 1.0, 2.0, -1e16, 3.0};
  const auto a = make(dir.file("a.npy"), values, {3, 2}, ooc::Order::c);
  std::vector<double> columns(2), rows(3);
  ReduceOp::parse("sum").run_axis(a, 0, std::as_writable_bytes(std::span(columns)));
  CHECK(columns[0] == ((0.0 + 1e16) + 1.0) + -1e16);
  CHECK(columns[1] == 6.0);
  ReduceOp::parse("sum").run_axis(a, -1, std::as_writable_bytes(std::span(rows)));
  CHECK(rows == std::vector<double>{1e16 + 1.0, 3.0, -1e16 + 3.0});
}

TEST_CASE("a reduction along an empty axis fills the result with the empty reduction") {
  ScratchDir dir;
  const auto a = make(dir.file("e.npy"), {}, {0, 3}, ooc::Order::c);
  std::vector<double> sums(3, -1.0);
  ReduceOp::parse("sum").run_axis(a, 0, std::as_writable_bytes(std::span(sums)));
  CHECK(sums == std::vector<double>{0, 0, 0});
  CHECK_THROWS_WITH_AS(ReduceOp::parse("max").run_axis(a, 0, std::as_writable_bytes(std::span(sums))),
                       doctest::Contains("zero-size array"), ooc::Error);
  std::vector<double> wrong(2);
  CHECK_THROWS_AS(ReduceOp::parse("sum").run_axis(a, 0, std::as_writable_bytes(std::span(wrong))), ooc::UsageError);
}

TEST_CASE("result dtypes along an axis are the full reduction's") {
  const ooc::DType i1(ooc::Kind::signed_int, 1), f2(ooc::Kind::floating, 2), u2(ooc::Kind::unsigned_int, 2);
  CHECK(ReduceOp::parse("sum").result_dtype(i1).name() == "int64");
  CHECK(ReduceOp::parse("prod").result_dtype(u2).name() == "uint64");
  CHECK(ReduceOp::parse("mean").result_dtype(f2).name() == "float16");
  CHECK(ReduceOp::parse("norm").result_dtype(i1).name() == "float64");
  CHECK(ReduceOp::parse("argmax").result_dtype(f2).name() == "int64");
  CHECK(ReduceOp::parse("all").result_dtype(f2).name() == "bool");
  CHECK(ReduceOp::parse("nanmin").result_dtype(u2).name() == "uint16");
}

TEST_CASE("reduce_axis returns the reduced array with its dtype, shape and order, typed by kernel or by name") {
  ScratchDir dir;
  const auto a = make(dir.file("a.npy"), {1, 2, 3, 4, 5, 6}, {2, 3}, ooc::Order::c);
  const ooc::ReducedArray means = ooc::reduce_axis(a, 0, ooc::kernels::Mean{});
  CHECK(means.dtype == ooc::dtype_of<double>);
  CHECK(means.shape == ooc::Shape{3});
  CHECK(std::vector<double>(means.values<double>().begin(), means.values<double>().end()) ==
        std::vector<double>{2.5, 3.5, 4.5});
  CHECK_THROWS_AS(means.values<float>(), ooc::UsageError);
  const ooc::ReducedArray stds = ooc::reduce_axis(a, -1, ooc::kernels::Var{.ddof = 1, .std = true});
  CHECK(stds.shape == ooc::Shape{2});
  CHECK(stds.values<double>()[0] == doctest::Approx(1.0));
  const ooc::ReducedArray argmax = ooc::reduce_axis(a, 1, ReduceOp::parse("argmax"));
  CHECK(argmax.dtype == ooc::dtype_of<std::int64_t>);
  CHECK(argmax.values<std::int64_t>()[1] == 2);
  CHECK_THROWS_WITH_AS(ooc::reduce_axis(a, 2, ooc::kernels::Sum{}), doctest::Contains("out of bounds"), ooc::UsageError);
  try {
    ooc::reduce_axis(a, 2, ooc::kernels::Sum{});
  } catch (const ooc::UsageError& e) {
    CHECK(e.path() == dir.file("a.npy"));
  }
}

TEST_CASE("reductions along an axis together: each one's own bits, one read, two with var or std") {
  ScratchDir dir;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  const std::vector<std::string> names{"sum", "prod", "mean", "min", "max", "argmin", "argmax", "count_nonzero",
                                       "any", "all", "nansum", "nanmean", "nanmin", "nanmax", "norm", "var", "std"};
  // Short rows (many runs), columns folded row by row, slabs larger than a tile, a cube.
  const std::vector<ooc::Shape> shapes{{3001, 9}, {9, 3001}, {5, 20000}, {6, 7, 250}, {4001}};
  for (const ooc::Shape& shape : shapes) {
    for (ooc::Order order : {ooc::Order::c, ooc::Order::fortran}) {
      std::int64_t n = 1;
      for (std::int64_t extent : shape) n *= extent;
      std::vector<double> values(static_cast<std::size_t>(n));
      for (double& v : values) v = 1 + normal(rng) * 1e-3;
      values[7] = NAN;
      const auto a = make(dir.file("a.npy"), values, shape, order);
      ooc::PipelineOptions options;
      options.tile_bytes = 64 << 10;
      options.threads = 2;
      for (int axis = -1; axis < static_cast<int>(shape.size()); ++axis) {
        ooc::kernels::ReduceParams ddof_1;
        ddof_1.ddof = 1;
        std::vector<ReduceOp> ops;
        for (const auto& name : names) ops.push_back(ReduceOp::parse(name, ddof_1));
        CAPTURE(shape.size());
        CAPTURE(shape[0]);
        CAPTURE(axis);
        CAPTURE(order == ooc::Order::c);
        const ooc::AxisReductions together = ooc::reduce_axis_together(a, axis, ops, options);
        CHECK(together.passes == 2);
        for (std::size_t i = 0; i < ops.size(); ++i) {
          CAPTURE(names[i]);
          const ooc::ReducedArray alone = ooc::reduce_axis(a, axis, ops[i], options);
          CHECK(together.arrays[i].dtype == alone.dtype);
          CHECK(together.arrays[i].shape == alone.shape);
          CHECK(together.arrays[i].order == alone.order);
          CHECK(together.arrays[i].bytes == alone.bytes);
        }
        ops.resize(ops.size() - 2);  // without var and std: one read
        CHECK(ooc::reduce_axis_together(a, axis, ops, options).passes == 1);
      }
    }
  }
}

TEST_CASE("reductions along an axis together: an empty axis reads nothing, histogram and bad axes are refused") {
  ScratchDir dir;
  const auto a = make(dir.file("e.npy"), {}, {0, 3}, ooc::Order::c);
  const std::vector<ReduceOp> ops{ReduceOp::parse("sum"), ReduceOp::parse("mean"), ReduceOp::parse("std")};
  const ooc::AxisReductions r = ooc::reduce_axis_together(a, 0, ops, {});
  CHECK(r.passes == 0);
  CHECK(r.arrays[0].values<double>()[2] == 0);
  CHECK(std::isnan(r.arrays[2].values<double>()[0]));
  const std::vector<ReduceOp> with_histogram{ReduceOp::parse("sum"), ReduceOp::parse("histogram")};
  CHECK_THROWS_WITH_AS(ooc::reduce_axis_together(a, 0, with_histogram, {}), doctest::Contains("histogram takes no axis"),
                       ooc::UsageError);
  CHECK_THROWS_WITH_AS(ooc::reduce_axis_together(a, 2, ops, {}), doctest::Contains("out of bounds"), ooc::UsageError);
}
