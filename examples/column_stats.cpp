// column_stats: the first look at a tall matrix larger than memory, each step one call.
//
//   column_stats X.npy LOG_OUT.npy [--tile-bytes BYTES]
// X is a 2-d float32 or float64 array (N, M) with M >= 2, a .npy path or "file.h5:/x".
//
// It prints, one line each (numbers as Python's repr prints them):
//   mean: ...    np.mean(X, axis=0)                 (ooc::reduce_axis, numpy's bits)
//   std: ...     np.std(X, axis=0, ddof=1)          (ooc::reduce_axis, within rounding)
//   above: K     np.count_nonzero(X[:, 0] > X[:, 1])   (a reduction kernel over two columns)
//   hist2d: ...  np.histogram2d(X[:, 0], X[:, 1], bins=4, range=[[lo0, hi0], [lo1, hi1]])[0]
//                with each column's min and max as its range, row by row (a reduction
//                kernel with a State of counts)
//   every10: S   np.sum(X[::10, 1])                 (a selection, read without a copy)
// and writes LOG_OUT = 2 * log1p(|X|) (ooc::transform<ooc::Floating>, within a few ulp
// of numpy's np.log1p). An integer X is refused with one line: the kernel takes floats.
//
// Exit status: 0 ok, 1 the array could not be read or written, 2 bad arguments.

#include <ooc/ooc.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

/// A custom count over two arrays side by side: rows where the first exceeds the second.
struct CountGreater {
  using State = std::int64_t;
  template <class T> using input_for = double;  // compare as numpy compares float columns
  void partial(State& count, const ooc::ConstArrayMap<double>& x, const ooc::ConstArrayMap<double>& y) const {
    count += (x > y).count();
  }
  void merge(State& left, State&& right) const { left += right; }
  std::int64_t result(const State& count) const { return count; }
};

/// np.histogram2d's counts for Bins x Bins equal bins over [lo, hi] of each column.
template <int Bins>
class Histogram2d {
 public:
  Histogram2d(std::array<double, 2> lo, std::array<double, 2> hi) {
    for (int axis = 0; axis < 2; ++axis) {
      // np.linspace(lo, hi, Bins + 1): i * step + lo, the last edge exactly hi.
      const double step = (hi[axis] - lo[axis]) / Bins;
      for (int i = 0; i < Bins; ++i) edges_[axis][i] = static_cast<double>(i) * step + lo[axis];
      edges_[axis][Bins] = hi[axis];
    }
  }
  using State = std::array<std::int64_t, Bins * Bins>;
  template <class T> using input_for = double;
  State identity() const { return State{}; }
  void partial(State& counts, const ooc::ConstArrayMap<double>& x, const ooc::ConstArrayMap<double>& y) const {
    for (Eigen::Index i = 0; i < x.size(); ++i) {
      const int bx = bin(0, x[i]), by = bin(1, y[i]);
      if (bx >= 0 && by >= 0) ++counts[static_cast<std::size_t>(bx * Bins + by)];
    }
  }
  void merge(State& left, State&& right) const {
    for (std::size_t i = 0; i < left.size(); ++i) left[i] += right[i];
  }
  State result(const State& counts) const { return counts; }

 private:
  /// numpy's searchsorted(edges, v, 'right') - 1, the last edge closing the last bin;
  /// -1 outside the range (and for NaN).
  int bin(int axis, double v) const {
    const auto& e = edges_[axis];
    if (!(v >= e.front() && v <= e.back())) return -1;
    if (v == e.back()) return Bins - 1;
    return static_cast<int>(std::upper_bound(e.begin(), e.end(), v) - e.begin()) - 1;
  }
  std::array<std::array<double, Bins + 1>, 2> edges_{};
};

std::string repr(double v) {
  std::array<char, 32> text{};
  const auto end = std::to_chars(text.data(), text.data() + text.size(), v).ptr;
  return std::string(text.data(), end);
}

void print_row(const char* name, const ooc::ReducedArray& row) {
  std::cout << name << ":";
  if (row.dtype == ooc::dtype_of<float>)
    for (float v : row.values<float>()) std::cout << ' ' << repr(v);
  else
    for (double v : row.values<double>()) std::cout << ' ' << repr(v);
  std::cout << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::string(argv[3]) == "--tile-bytes")) {
    std::cerr << "usage: column_stats X.npy LOG_OUT.npy [--tile-bytes BYTES]\n";
    return 2;
  }
  const std::string path = argv[1], log_path = argv[2];
  ooc::PipelineOptions options;
  if (argc == 5) options.tile_bytes = std::stoll(argv[4]);
  try {
    const ooc::MappedArray x = ooc::map_file(path);
    if (x.ndim() != 2 || x.shape()[1] < 2) throw ooc::UsageError(path, "column_stats takes an (N, M) array, M >= 2");

    // A float-only kernel: ooc::Floating compiles it for float and double alone (an integer
    // X is refused here, before any output is published).
    ooc::MappedArray out = ooc::create_npy(log_path, x.dtype().native(), x.shape(), x.order());
    ooc::transform<ooc::Floating>(x, out, [](const auto& v) { return v.abs().log1p() * 2; }, options);
    out.commit();

    // Column statistics: a typed call per statistic, each streaming the file once.
    print_row("mean", ooc::reduce_axis(x, 0, ooc::kernels::Mean{}, options));
    print_row("std", ooc::reduce_axis(x, 0, ooc::kernels::Var{.ddof = 1, .std = true}, options));

    // Two columns as arrays of their own (selections), read side by side.
    const ooc::MappedArray c0 = ooc::map_file(path + "[:, 0]");
    const ooc::MappedArray c1 = ooc::map_file(path + "[:, 1]");
    std::cout << "above: " << ooc::reduce(ooc::inputs(c0, c1), CountGreater{}, options) << '\n';

    const ooc::ReducedArray lo = ooc::reduce_axis(x, 0, ooc::kernels::Min{}, options);
    const ooc::ReducedArray hi = ooc::reduce_axis(x, 0, ooc::kernels::Max{}, options);
    auto column = [](const ooc::ReducedArray& row, int i) {
      return row.dtype == ooc::dtype_of<float> ? static_cast<double>(row.values<float>()[i]) : row.values<double>()[i];
    };
    const Histogram2d<4> histogram({column(lo, 0), column(lo, 1)}, {column(hi, 0), column(hi, 1)});
    std::cout << "hist2d:";
    for (std::int64_t count : ooc::reduce(ooc::inputs(c0, c1), histogram, options)) std::cout << ' ' << count;
    std::cout << '\n';

    // A strided selection is an array like any other; Scalar::value<T>() is checked.
    const ooc::Scalar every10 = ooc::reduce(ooc::map_file(path + "[::10, 1]"), ooc::kernels::Sum{}, options);
    std::cout << "every10: " << every10.to_string() << '\n';

  } catch (const std::exception& e) {
    std::cerr << "column_stats: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
