// The C++ snippets of examples/README.md, compiled with the examples; see readme.cpp for
// how the regions and the document are kept the same.

#include <ooc/ooc.hpp>

#include <cstdint>
#include <type_traits>

void add_constant(ooc::DType dtype) {
  // [snippet: elementwise]
  const ooc::MappedArray in = ooc::map_file("in.npy");                  // read-only
  ooc::MappedArray out = ooc::create_npy("out.npy", dtype, in.shape(), in.order());
  ooc::transform(in, out, [](const auto& x) {
    using T = typename std::decay_t<decltype(x)>::Scalar;               // the compute type
    return x * T(2) + T(1);
  });
  out.commit();                                                         // now out.npy exists
  // [end snippet]
}

// [snippet: reduction]
struct CountPositive {
  using State = std::int64_t;                              // 1. a partial result
  template <class T>
  void partial(State& s, const ooc::ConstArrayMap<T>& x) const {   // 2. fold in one block
    s += (x > T(0)).count();
  }
  void merge(State& left, State&& right) const { left += right; }  // 3. combine two
  std::int64_t result(const State& s) const { return s; }          // 4. the answer
};
// [end snippet]

void count_positive() {
  // [snippet: reduction]
  std::int64_t n = ooc::reduce(ooc::map_file("in.npy"), CountPositive{});
  // [end snippet]
  (void)n;
}

struct CoMoments {  // as examples/linear_fit.cpp keeps them
  std::int64_t n = 0;
  double mean_x = 0, mean_y = 0, sxx = 0, sxy = 0;
};

// [snippet: several_inputs]
struct LeastSquares {                                    // pass 1: a reduction
  using State = CoMoments;                               // n, means, sxx, sxy
  template <class T> using input_for = double;           // both arrays read as float64
  void partial(State& s, const ooc::ConstArrayMap<double>& x,
               const ooc::ConstArrayMap<double>& y) const;  // linear_fit.cpp has the body
  void merge(State& left, State&& right) const;          // Chan's formulas
  State result(const State& s) const { return s; }
};
// [end snippet]

void LeastSquares::partial(State& s, const ooc::ConstArrayMap<double>& x, const ooc::ConstArrayMap<double>& y) const {
  s.n += x.size();  // a stand-in: the real update is in linear_fit.cpp
  s.sxy += (x * y).sum();
}
void LeastSquares::merge(State& left, State&& right) const { left.n += right.n; }

void linear_fit() {
  // [snippet: several_inputs]
  const ooc::MappedArray x = ooc::map_file("x.npy"), y = ooc::map_file("y.npy");
  const CoMoments m = ooc::reduce(ooc::inputs(x, y), LeastSquares{});
  const double slope = m.sxy / m.sxx, intercept = m.mean_y - slope * m.mean_x;

  ooc::MappedArray r = ooc::create_npy("r.npy", ooc::dtype_of<double>, x.shape(), x.order());
  ooc::transform_as<double>(ooc::inputs(x, y), r,          // pass 2: elementwise
      [=](const auto& xs, const auto& ys) { return ys - (intercept + slope * xs); });
  r.commit();
  // [end snippet]
}
