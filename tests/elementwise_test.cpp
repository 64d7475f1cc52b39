#include "ooc/kernels/elementwise.hpp"

#include "ooc/error.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

using ooc::DType;
using ooc::Kind;
using ooc::kernels::LoopInput;
using ooc::kernels::Operand;
using ooc::kernels::PyScalar;
using ooc::kernels::Ufunc;

namespace {

const DType b1(Kind::boolean, 1), i1(Kind::signed_int, 1), i2(Kind::signed_int, 2), i4(Kind::signed_int, 4),
    i8(Kind::signed_int, 8), u1(Kind::unsigned_int, 1), u2(Kind::unsigned_int, 2), u4(Kind::unsigned_int, 4),
    u8(Kind::unsigned_int, 8), f2(Kind::floating, 2), f4(Kind::floating, 4), f8(Kind::floating, 8);

Operand py(const char* text) { return Operand::python(PyScalar::parse(text)); }

std::string loop(Ufunc f, std::vector<Operand> operands) { return ooc::kernels::loop_dtype(f, operands).name(); }

template <class T>
std::vector<T> run(Ufunc f, DType loop_dtype, std::vector<T> x, std::vector<T> y = {}, bool y_repeated = false) {
  std::vector<T> out(x.size());
  std::vector<LoopInput> in{{x.data(), false}};
  if (!y.empty()) in.push_back({y.data(), y_repeated});
  ooc::kernels::run_loop(f, loop_dtype, in, out.data(), static_cast<std::int64_t>(x.size()));
  return out;
}

}  // namespace

TEST_CASE("result_type with several scalars folds them as numpy 1.24 does") {
  // Each expectation is numpy 1.24's np.result_type(np.zeros(2, dtype), *scalars).
  auto rt = [](std::vector<Operand> ops) { return ooc::kernels::result_type(ops).name(); };
  CHECK(rt({Operand::array(i1), py("0"), py("300")}) == "int16");
  CHECK(rt({Operand::array(u1), py("-1"), py("3")}) == "int16");
  CHECK(rt({Operand::array(i1), py("0.5"), py("2")}) == "float64");
  CHECK(rt({Operand::array(f2), py("1"), py("70000")}) == "float64");
  CHECK(rt({Operand::array(i1), Operand::array(u1)}) == "int16");
  CHECK(rt({Operand::array(u8), Operand::array(i8)}) == "float64");
  // Only scalars: plain promotion of their dtypes (np.float32(1) + 2.5 is float64).
  CHECK(rt({Operand::numpy_scalar(f4, PyScalar::of_double(1)), py("2.5")}) == "float64");
  CHECK(rt({py("1"), py("2")}) == "int64");
  // A numpy scalar counts by value too: np.zeros(2, int8) + np.int64(3) is int8.
  CHECK(rt({Operand::array(i1), Operand::numpy_scalar(i8, PyScalar::of_int(3))}) == "int8");
  CHECK(rt({Operand::array(i1), Operand::numpy_scalar(f4, PyScalar::of_double(3))}) == "float32");
  CHECK(rt({Operand::array(f2), Operand::numpy_scalar(f8, PyScalar::of_double(3))}) == "float16");
  CHECK(rt({Operand::array(b1), Operand::numpy_scalar(b1, PyScalar::of_int(1))}) == "bool");
}

TEST_CASE("math functions compute in the first float type the input casts to safely") {
  CHECK(loop(Ufunc::sqrt, {Operand::array(b1)}) == "float16");
  CHECK(loop(Ufunc::exp, {Operand::array(i1)}) == "float16");
  CHECK(loop(Ufunc::exp, {Operand::array(u1)}) == "float16");
  CHECK(loop(Ufunc::log, {Operand::array(i2)}) == "float32");
  CHECK(loop(Ufunc::sin, {Operand::array(u2)}) == "float32");
  CHECK(loop(Ufunc::cos, {Operand::array(i4)}) == "float64");
  CHECK(loop(Ufunc::tanh, {Operand::array(u8)}) == "float64");
  CHECK(loop(Ufunc::log1p, {Operand::array(f4)}) == "float32");
  CHECK(loop(Ufunc::expm1, {Operand::array(i1)}) == "float16");  // as log1p
  CHECK(loop(Ufunc::expm1, {Operand::array(i2)}) == "float32");
  CHECK(loop(Ufunc::expm1, {Operand::array(u4)}) == "float64");
  CHECK(loop(Ufunc::expm1, {Operand::array(b1)}) == "float16");
  CHECK(loop(Ufunc::absolute, {Operand::array(b1)}) == "bool");
  CHECK(ooc::kernels::ElementwiseOp::parse("expm1").result_dtype(i2) == f4);
}

TEST_CASE("vectorised functions give each element the same result wherever it sits") {
  // A tail shorter than a vector is padded into one, never computed by a scalar call, so
  // an element's bits do not depend on the length of the run it is in or its offset.
  std::vector<double> x;
  for (int i = 0; i < 67; ++i) x.push_back(0.37 * i - 9.1 + 1e-3 * i * i);
  x[5] = NAN;
  x[9] = -INFINITY;
  x[12] = -0.0;
  x[20] = 1e-310;
  for (Ufunc f : {Ufunc::exp, Ufunc::log, Ufunc::log1p, Ufunc::expm1, Ufunc::sin, Ufunc::cos, Ufunc::tanh}) {
    const std::vector<double> whole = run<double>(f, f8, x);
    const std::vector<float> whole_f = run<float>(f, f4, std::vector<float>(x.begin(), x.end()));
    for (std::size_t from : {0, 1, 3, 7}) {
      for (std::size_t n = 1; from + n <= x.size(); n += 5) {
        const std::vector<double> part = run<double>(f, f8, std::vector<double>(x.begin() + from, x.begin() + from + n));
        const std::vector<float> part_f =
            run<float>(f, f4, std::vector<float>(x.begin() + from, x.begin() + from + n));
        for (std::size_t i = 0; i < n; ++i) {
          CHECK(std::memcmp(&part[i], &whole[from + i], sizeof(double)) == 0);
          CHECK(std::memcmp(&part_f[i], &whole_f[from + i], sizeof(float)) == 0);
        }
      }
    }
  }
  // pow, with either operand repeated, against the same pairs computed element by element.
  const std::vector<double> y(x.size(), 2.5);
  const std::vector<double> by_array = run<double>(Ufunc::power, f8, x, y);
  const std::vector<double> by_constant = run<double>(Ufunc::power, f8, x, {2.5}, true);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::vector<double> one = run<double>(Ufunc::power, f8, {x[i]}, {2.5});
    CHECK(std::memcmp(&one[0], &by_array[i], sizeof(double)) == 0);
    CHECK(std::memcmp(&one[0], &by_constant[i], sizeof(double)) == 0);
  }
  // Special values keep numpy's (C99's) answers.
  const std::vector<double> special{0.0, -0.0, INFINITY, -INFINITY, NAN, -1.0, -2.0};
  const std::vector<double> lg = run<double>(Ufunc::log1p, f8, special);
  CHECK(lg[0] == 0.0);
  CHECK(!std::signbit(lg[0]));
  CHECK(std::signbit(lg[1]));
  CHECK(lg[2] == INFINITY);
  CHECK(std::isnan(lg[3]));
  CHECK(std::isnan(lg[4]));
  CHECK(lg[5] == -INFINITY);
  CHECK(std::isnan(lg[6]));
  const std::vector<double> em = run<double>(Ufunc::expm1, f8, special);
  CHECK(std::signbit(em[1]));
  CHECK(em[2] == INFINITY);
  CHECK(em[3] == -1.0);
  CHECK(std::fabs(em[5] - std::expm1(-1.0)) < 1e-15);
}

TEST_CASE("division, power and subtraction have numpy's special cases") {
  CHECK(loop(Ufunc::divide, {Operand::array(i1), py("2")}) == "float64");
  CHECK(loop(Ufunc::divide, {Operand::array(b1), Operand::array(b1)}) == "float64");
  CHECK(loop(Ufunc::divide, {Operand::array(f2), py("2")}) == "float16");
  CHECK(loop(Ufunc::divide, {Operand::array(i1), py("2.5")}) == "float64");
  CHECK(loop(Ufunc::power, {Operand::array(b1), Operand::array(b1)}) == "int8");
  CHECK(loop(Ufunc::power, {Operand::array(b1), py("2")}) == "int64");
  CHECK(loop(Ufunc::power, {Operand::array(u8), py("-1")}) == "float64");
  // power searches its loops in order (bb, BB, hh, HH, ...): not result_type's answer
  // where an unsigned array meets a constant that fits the next signed type.
  CHECK(loop(Ufunc::power, {Operand::array(u1), py("256")}) == "int16");
  CHECK(loop(Ufunc::power, {Operand::array(u1), py("255")}) == "uint8");
  CHECK(loop(Ufunc::power, {Operand::array(u2), py("65536")}) == "int32");
  CHECK(loop(Ufunc::power, {Operand::array(u4), py("4294967296")}) == "int64");
  CHECK(loop(Ufunc::power, {Operand::array(u1), py("9223372036854775807")}) == "int64");
  CHECK(loop(Ufunc::power, {Operand::array(u1), py("9223372036854775808")}) == "uint64");
  CHECK(loop(Ufunc::power, {py("256"), Operand::array(u1)}) == "int16");
  CHECK(loop(Ufunc::power, {Operand::array(u1), Operand::array(i1)}) == "int16");
  CHECK(loop(Ufunc::power, {Operand::array(u1), py("2.5")}) == "float64");  // a float scalar: not by value
  CHECK(loop(Ufunc::power, {Operand::array(f2), py("2.5")}) == "float16");
  CHECK_THROWS_WITH_AS(loop(Ufunc::power, {Operand::array(i4), py("-1")}),
                       doctest::Contains("negative integer powers"), ooc::UsageError);
  CHECK_THROWS_WITH_AS(loop(Ufunc::subtract, {Operand::array(b1), Operand::array(b1)}),
                       doctest::Contains("boolean subtract"), ooc::UsageError);
  CHECK_THROWS_WITH_AS(loop(Ufunc::negative, {Operand::array(b1)}), doctest::Contains("boolean negative"),
                       ooc::UsageError);
  CHECK(ooc::kernels::output_dtype(Ufunc::less, f8) == b1);
}

TEST_CASE("integer power wraps and refuses negative exponents from an array") {
  CHECK(run<std::int8_t>(Ufunc::power, i1, {3, 2, -2, 1, 0}, {5, 7, 3, 100, 0}) ==
        std::vector<std::int8_t>{-13, -128, -8, 1, 1});  // 243 wraps to -13, as numpy's int8
  CHECK(run<std::uint64_t>(Ufunc::power, u8, {2, 3}, {64, 2}) == std::vector<std::uint64_t>{0, 9});
  CHECK_THROWS_AS(run<std::int32_t>(Ufunc::power, i4, {2}, {-1}), std::domain_error);
}

TEST_CASE("clip keeps NaN, applies the upper bound last, and float16 keeps x on ties") {
  std::vector<double> x{NAN, -5, 5, 0.5, -0.0};
  double lo = 0.0, hi = 1.0;
  std::vector<double> out(x.size());
  const LoopInput in[] = {{x.data(), false}, {&lo, true}, {&hi, true}};
  ooc::kernels::run_loop(Ufunc::clip, f8, in, out.data(), 5);
  CHECK(std::isnan(out[0]));
  CHECK(out[1] == 0.0);
  CHECK(out[2] == 1.0);
  CHECK(out[3] == 0.5);
  CHECK_FALSE(std::signbit(out[4]));  // -0.0 is not above 0.0: the bound is taken
  double lo2 = 3, hi2 = 1;
  const LoopInput crossed[] = {{x.data(), false}, {&lo2, true}, {&hi2, true}};
  ooc::kernels::run_loop(Ufunc::clip, f8, crossed, out.data(), 5);
  CHECK(out[1] == 1.0);
  std::vector<ooc::half> hx{ooc::half(-0.0f)};
  ooc::half hlo(0.0f), hhi(1.0f), hout;
  const LoopInput hin[] = {{hx.data(), false}, {&hlo, true}, {&hhi, true}};
  ooc::kernels::run_loop(Ufunc::clip, f2, hin, &hout, 1);
  CHECK(std::signbit(static_cast<float>(hout)));
}

TEST_CASE("comparisons give booleans and treat NaN as numpy does") {
  std::vector<double> x{1, NAN, 3}, y{2, NAN, 3};
  bool out[3];
  const LoopInput in[] = {{x.data(), false}, {y.data(), false}};
  ooc::kernels::run_loop(Ufunc::less, f8, in, out, 3);
  CHECK((out[0] && !out[1] && !out[2]));
  ooc::kernels::run_loop(Ufunc::not_equal, f8, in, out, 3);
  CHECK((out[0] && out[1] && !out[2]));
}

TEST_CASE("new operation names parse with their constants and dtypes") {
  using ooc::kernels::ElementwiseOp;
  CHECK(ElementwiseOp::parse("sqrt").result_dtype(i1) == f2);
  CHECK(ElementwiseOp::parse("div:2").result_dtype(i2) == f8);
  CHECK(ElementwiseOp::parse("clip:0:300").result_dtype(i1) == i2);
  CHECK(ElementwiseOp::parse("cast:uint16").result_dtype(f8) == u2);
  CHECK(ElementwiseOp::parse("cast:<i8").result_dtype(f8) == i8);
  CHECK(ElementwiseOp::parse("cast:>f4").result_dtype(f8) == DType::parse(">f4"));  // astype keeps the order
  CHECK(ElementwiseOp::parse("add-one").result_dtype(DType::parse(">f4")) == f4);   // a ufunc gives native
  CHECK(ElementwiseOp::parse("pow:2").result_dtype(f4, 0) == f8);  // a 0-d array is a scalar to numpy
  CHECK(ElementwiseOp::parse("pow:2").result_dtype(f4) == f4);
  CHECK_THROWS_WITH_AS(ElementwiseOp::parse("neg").result_dtype(b1), doctest::Contains("neg of bool"), ooc::UsageError);
  CHECK_THROWS_AS(ElementwiseOp::parse("clip:1"), ooc::UsageError);
  CHECK_THROWS_AS(ElementwiseOp::parse("abs:1"), ooc::UsageError);
  CHECK_THROWS_AS(ElementwiseOp::parse("cast:complex64"), ooc::UsageError);
  CHECK_THROWS_AS(ElementwiseOp::parse("cast"), ooc::UsageError);
}
