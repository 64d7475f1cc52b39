// Tests for kernels/expr.{hpp,cpp}: parsing with columns, numpy's typing, blocked evaluation.

#include "ooc/ooc.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

using ooc::kernels::Binding;
using ooc::kernels::Expression;
using ooc::testing::ScratchDir;

namespace {

template <class T>
ooc::MappedArray make(const std::string& path, const std::vector<T>& values, const ooc::Shape& shape,
                      ooc::Order order = ooc::Order::c) {
  ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<T>, shape, order);
  if (!values.empty()) std::memcpy(out.writable_bytes().data(), values.data(), values.size() * sizeof(T));
  out.commit();
  return ooc::map_file(path);
}

std::string error_of(std::string_view text, const std::vector<Binding>& bindings) {
  try {
    Expression::compile(text, bindings);
  } catch (const ooc::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("shapes broadcast by numpy's rules") {
  using ooc::kernels::broadcast_shapes;
  CHECK(broadcast_shapes({3, 4}, {4}) == ooc::Shape{3, 4});
  CHECK(broadcast_shapes({3, 1}, {1, 5}) == ooc::Shape{3, 5});
  CHECK(broadcast_shapes({}, {2, 2}) == ooc::Shape{2, 2});
  CHECK(broadcast_shapes({0, 4}, {1}) == ooc::Shape{0, 4});
  CHECK_FALSE(broadcast_shapes({3, 4}, {3}).has_value());
}

TEST_CASE("every parse error names the column and shows where") {
  ScratchDir dir;
  const auto a = make<double>(dir.file("a.npy"), {1, 2, 3}, {3});
  const std::vector<Binding> bound{{"a", &a}};
  CHECK(error_of("2*a + ", bound) == "eval: 2*a + ^ expected an operand at column 7");
  CHECK(error_of("", bound) == "eval: ^ expected an operand at column 1");
  CHECK(error_of("a +* 2", bound) == "eval: a + ^* 2 expected an operand at column 4");
  CHECK(error_of("(a", bound) == "eval: (a ^ expected ')' at column 3");
  CHECK(error_of("a a", bound) == "eval: a ^a unexpected 'a' after the expression at column 3");
  CHECK(error_of("a = 2", bound) == "eval: a ^= 2 unexpected character '=' at column 3");
  CHECK(error_of("b", bound) == "eval: ^b unknown name 'b' (bound: a) at column 1");
  CHECK(error_of("sqrt(a, a)", bound) == "eval: ^sqrt(a, a) sqrt() takes 1 argument, not 2 at column 1");
  CHECK(error_of("1 < a <= 2", bound).find("chained comparisons") != std::string::npos);
  CHECK(error_of("2 + mean(a)", bound).find("must be the outermost call") != std::string::npos);
  CHECK(error_of("sum(a) + 1", bound).find("unexpected '+' after the expression at column 8") != std::string::npos);
  CHECK(error_of("1 / 0", bound).find("division by zero") != std::string::npos);
  CHECK(error_of("(-8) ** 0.5", bound).find("complex") != std::string::npos);
}

TEST_CASE("dtypes follow numpy: Python numbers by value, scalars promoted plainly") {
  ScratchDir dir;
  const auto i8 = make<std::int8_t>(dir.file("i.npy"), {1, 2}, {2});
  const auto f4 = make<float>(dir.file("f.npy"), {1, 2}, {2});
  const auto zero_d = make<float>(dir.file("z.npy"), {2.5f}, {});
  const std::vector<Binding> bound{{"i", &i8}, {"f", &f4}, {"z", &zero_d}};
  auto dtype = [&](std::string_view text) { return Expression::compile(text, bound).dtype().name(); };
  CHECK(dtype("i + 1") == "int8");
  CHECK(dtype("i + 300") == "int16");
  CHECK(dtype("i + 1.5") == "float64");
  CHECK(dtype("i / 2") == "float64");
  CHECK(dtype("f * 2.5") == "float32");
  CHECK(dtype("f * 1e300") == "float64");
  CHECK(dtype("i * z") == "float32");    // a float scalar against an int array: its own dtype
  CHECK(dtype("z * 2") == "float64");    // scalars among themselves: plain promotion
  CHECK(dtype("z ** 2") == "float32");   // a 0-d ndarray squared keeps its dtype (numpy's fast path)
  CHECK(dtype("sqrt(i)") == "float16");
  CHECK(dtype("i < f") == "bool");
  CHECK(dtype("where(i > 1, i, 0.5)") == "float64");
  CHECK(dtype("2 * 3") == "int64");
  CHECK(Expression::compile("sum(i)", bound).reduction().has_value());
}

TEST_CASE("the result is Fortran-ordered when every deciding input is") {
  ScratchDir dir;
  std::vector<double> values(12);
  std::iota(values.begin(), values.end(), 0.0);
  const auto f = make(dir.file("f.npy"), values, {3, 4}, ooc::Order::fortran);
  const auto c = make(dir.file("c.npy"), values, {3, 4}, ooc::Order::c);
  const auto row = make<double>(dir.file("r.npy"), {1, 2, 3, 4}, {4});
  const std::vector<Binding> bound{{"f", &f}, {"c", &c}, {"r", &row}};
  CHECK(Expression::compile("f + r", bound).order() == ooc::Order::fortran);
  CHECK(Expression::compile("f + c", bound).order() == ooc::Order::c);
  CHECK(Expression::compile("c * 2", bound).order() == ooc::Order::c);
}

TEST_CASE("evaluation broadcasts across tiles and pieces, in the result's memory order") {
  ScratchDir dir;
  const std::int64_t rows = 3000;
  std::vector<double> values(static_cast<std::size_t>(rows) * 3);
  std::iota(values.begin(), values.end(), 0.0);
  const auto a = make(dir.file("a.npy"), values, {rows, 3}, ooc::Order::fortran);
  const auto m = make<double>(dir.file("m.npy"), {100, 200, 300}, {3});
  const auto e = Expression::compile("a * 2 + m", {{"a", &a}, {"m", &m}});
  ooc::PipelineOptions options;
  options.tile_bytes = 1;  // one block a tile
  options.threads = 3;
  const auto bytes = e.evaluate(options);
  const double* got = reinterpret_cast<const double*>(bytes.data());
  for (std::int64_t col = 0; col < 3; ++col)
    for (std::int64_t row = 0; row < rows; row += 499) {
      const std::int64_t at = col * rows + row;  // Fortran order, as the input
      CHECK(got[at] == values[static_cast<std::size_t>(at)] * 2 + 100.0 * static_cast<double>(col + 1));
    }
  CHECK(Expression::compile("sum(a)", {{"a", &a}}).reduce(options).as_double() == (3.0 * rows - 1) * 3.0 * rows / 2);
}

TEST_CASE("maximum, minimum and power(x, y) are numpy's ufuncs") {
  ScratchDir dir;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto x = make<double>(dir.file("x.npy"), {nan, 1.0, -0.0, 2.0}, {4});
  const auto y = make<double>(dir.file("y.npy"), {1.0, nan, 0.0, 3.0}, {4});
  const auto b = make<std::uint8_t>(dir.file("b.npy"), {1, 0}, {2});
  ooc::MappedArray bools = ooc::create_npy(dir.file("bool.npy"), ooc::DType(ooc::Kind::boolean, 1), {2});
  std::memcpy(bools.writable_bytes().data(), b.bytes().data(), 2);
  bools.commit();
  const auto flags = ooc::map_file(dir.file("bool.npy"));
  const std::vector<Binding> bound{{"x", &x}, {"y", &y}, {"b", &flags}};
  auto values = [&](std::string_view text) {
    const auto bytes = Expression::compile(text, bound).evaluate();
    std::vector<double> out(bytes.size() / sizeof(double));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  };
  const auto high = values("maximum(x, y)");  // a NaN wins; of two equal zeros, the second
  CHECK((std::isnan(high[0]) && std::isnan(high[1]) && high[2] == 0.0 && !std::signbit(high[2]) && high[3] == 3.0));
  const auto low = values("minimum(y, x)");
  CHECK((std::isnan(low[0]) && std::isnan(low[1]) && std::signbit(low[2]) && low[3] == 2.0));
  auto dtype = [&](std::string_view text) { return Expression::compile(text, bound).dtype().name(); };
  CHECK(dtype("b ** 2") == "int8");      // ndarray's ** fast path: np.square
  CHECK(dtype("power(b, 2)") == "int64");  // the ufunc: no fast path
  CHECK(dtype("power(2, 3)") == "int64");  // numpy's scalars, not Python's ints
  CHECK(dtype("maximum(b, 5)") == "int64");
}

TEST_CASE("an expression read as an array: its values, tile by tile, through any run") {
  ScratchDir dir;
  const std::int64_t rows = 5000;
  std::vector<double> values(static_cast<std::size_t>(rows) * 4);
  std::iota(values.begin(), values.end(), 0.0);
  std::vector<ooc::MappedArray> arrays;
  arrays.push_back(make(dir.file("a.npy"), values, {rows, 4}, ooc::Order::fortran));
  arrays.push_back(make<double>(dir.file("m.npy"), {1, 2, 3, 4}, {4}));
  const ooc::MappedArray e = ooc::kernels::map_expression("a * 2 - m", {"a", "m"}, std::move(arrays));
  CHECK(e.shape() == ooc::Shape{rows, 4});
  CHECK(e.order() == ooc::Order::fortran);
  CHECK(e.dtype().name() == "float64");
  CHECK_FALSE(e.mapped());
  ooc::PipelineOptions options;
  options.tile_bytes = 4096;
  options.threads = 3;
  // column sums along axis 0: sum over rows of (value * 2 - m[col])
  std::vector<double> sums(4);
  ooc::kernels::ReduceOp::parse("sum").run_axis(e, 0, std::as_writable_bytes(std::span(sums)), options);
  for (std::int64_t col = 0; col < 4; ++col) {
    double expected = 0;
    for (std::int64_t row = 0; row < rows; ++row)
      expected += values[static_cast<std::size_t>(col * rows + row)] * 2 - static_cast<double>(col + 1);
    CHECK(sums[static_cast<std::size_t>(col)] == doctest::Approx(expected).epsilon(1e-12));
  }
  auto out = ooc::create_npy(dir.file("e.npy"), e.dtype(), e.shape(), e.order());
  ooc::kernels::ElementwiseOp::parse("cast:float64").apply(e, out, options);
  out.commit();
  const auto written = ooc::map_file(dir.file("e.npy"));
  const auto* got = reinterpret_cast<const double*>(written.bytes().data());
  for (std::int64_t at = 0; at < rows * 4; at += 997)
    CHECK(got[at] == values[static_cast<std::size_t>(at)] * 2 - static_cast<double>(at / rows + 1));
  std::vector<ooc::MappedArray> none;
  CHECK_THROWS_AS(ooc::kernels::map_expression("2 * 3", {}, std::move(none)), ooc::UsageError);
  std::vector<ooc::MappedArray> one;
  one.push_back(ooc::map_file(dir.file("m.npy")));
  CHECK_THROWS_AS(ooc::kernels::map_expression("sum(m)", {"m"}, std::move(one)), ooc::UsageError);
}
