// linear_fit: the least-squares line through (x, y) and its residuals, for arrays larger
// than memory, in two streamed passes over two input files side by side.
//
//   linear_fit X.npy Y.npy RESIDUALS.npy [--tile-bytes BYTES] [--threads N]
//
// The example of kernels over several inputs. Pass 1 is a reduction whose partial takes
// one block of x and the matching block of y (ooc::reduce(ooc::inputs(x, y), ...)): it
// keeps counts, means and co-moments, merged tile by tile with Chan's formulas, so the
// answer is stable and does not depend on the thread count. Pass 2 is a transform over
// both inputs (ooc::transform_as(ooc::inputs(x, y), out, ...)) writing
// y - (intercept + slope * x). It prints one line of JSON:
//
//   $ linear_fit x.npy y.npy r.npy
//   {"slope": 2.0000000000000004, "intercept": -0.99999999999999956, "count": 1000000}
//
// which is np.polyfit(x, y, 1) within rounding; RESIDUALS.npy is float64, of x's shape
// and memory order, and equals y - (intercept + slope * x) computed by numpy with the
// printed numbers, bit for bit. x and y must have one shape and order (any numeric
// dtype each; both are read as float64).
//
// Exit status: 0 ok, 1 an array could not be read or written, 2 bad arguments.

#include <ooc/ooc.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

/// Count, means and co-moments of a run of (x, y) pairs: sxx = sum((x - mean_x)^2),
/// sxy = sum((x - mean_x) * (y - mean_y)).
struct CoMoments {
  std::int64_t n = 0;
  double mean_x = 0, mean_y = 0, sxx = 0, sxy = 0;
};

/// A reduction kernel over two inputs (the contract is in <ooc/kernel.hpp>): partial()
/// gets the block of x and the block of y for the same elements.
struct LeastSquares {
  using State = CoMoments;
  /// Whatever x's and y's dtypes, partial() sees both as float64.
  template <class T> using input_for = double;

  void partial(State& s, const ooc::ConstArrayMap<double>& x, const ooc::ConstArrayMap<double>& y) const {
    State block;
    block.n = x.size();
    if (block.n == 0) return;
    block.mean_x = x.mean();
    block.mean_y = y.mean();
    const auto dx = x - block.mean_x;  // two passes over the block, which is in cache
    block.sxx = (dx * dx).sum();
    block.sxy = (dx * (y - block.mean_y)).sum();
    merge(s, std::move(block));
  }

  /// Chan et al.'s update: `right` holds the elements just after `left`'s.
  void merge(State& left, State&& right) const {
    if (right.n == 0) return;
    if (left.n == 0) {
      left = right;
      return;
    }
    const double n = static_cast<double>(left.n + right.n);
    const double weight = static_cast<double>(left.n) * static_cast<double>(right.n) / n;
    const double dx = right.mean_x - left.mean_x;
    const double dy = right.mean_y - left.mean_y;
    left.sxx += right.sxx + dx * dx * weight;
    left.sxy += right.sxy + dx * dy * weight;
    left.mean_x += dx * static_cast<double>(right.n) / n;
    left.mean_y += dy * static_cast<double>(right.n) / n;
    left.n += right.n;
  }

  State result(const State& s) const { return s; }
};

std::string repr(double value) {  // Python's repr: the shortest text that reads back the same
  char buf[32];
  const auto [end, error] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, end);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view usage = "usage: linear_fit X.npy Y.npy RESIDUALS.npy [--tile-bytes BYTES] [--threads N]";
  ooc::PipelineOptions options;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if ((arg == "--tile-bytes" || arg == "--threads") && i + 1 < argc) {
      std::uint64_t value = 0;
      const std::string_view text = argv[++i];
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || value == 0 || value > (1ull << 40)) {
        std::cerr << "linear_fit: " << arg << " wants a positive integer (" << usage << ")\n";
        return 2;
      }
      if (arg == "--threads") options.threads = static_cast<int>(std::min<std::uint64_t>(value, 4096));
      else options.tile_bytes = value;
    } else {
      args.emplace_back(arg);
    }
  }
  if (args.size() != 3) {
    std::cerr << "linear_fit: expected X.npy Y.npy RESIDUALS.npy (" << usage << ")\n";
    return 2;
  }

  try {
    const ooc::MappedArray x = ooc::map_file(args[0]);
    const ooc::MappedArray y = ooc::map_file(args[1]);
    // Pass 1: one reduction over both files side by side.
    const CoMoments m = ooc::reduce(ooc::inputs(x, y), LeastSquares{}, options);
    if (m.n < 2 || m.sxx == 0) throw ooc::UsageError(args[0], "a line needs two distinct x values");
    const double slope = m.sxy / m.sxx;
    const double intercept = m.mean_y - slope * m.mean_x;
    // Pass 2: residuals, element by element over both files, in float64.
    ooc::MappedArray out = ooc::create_npy(args[2], ooc::dtype_of<double>, x.shape(), x.order());
    ooc::transform_as<double>(ooc::inputs(x, y), out, [=](const auto& xs, const auto& ys) {
      return ys - (intercept + slope * xs);
    }, options);
    out.commit();
    std::cout << "{\"slope\": " << repr(slope) << ", \"intercept\": " << repr(intercept) << ", \"count\": " << m.n
              << "}\n";
  } catch (const ooc::UsageError& e) {
    std::cerr << "linear_fit: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {  // ooc::Error's what() names the file and the problem
    std::cerr << "linear_fit: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
