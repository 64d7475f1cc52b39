// running_histogram: the counts of a fixed-range histogram of an array larger than memory.
//
//   running_histogram IN BINS LO HI [--tile-bytes BYTES]
// IN is a .npy path or an HDF5 dataset ("run.h5:/sim/pressure", chunked ones too).
//
// The reduction example: a custom reduction kernel (State, partial, merge, result),
// streamed tile by tile. It prints one line of JSON, the list of BINS counts:
//
//   $ running_histogram pressure.npy 4 0 1
//   [12, 40, 39, 9]
//
// which is np.histogram(np.load(IN), BINS, range=(LO, HI))[0].tolist(): BINS equal bins
// over [LO, HI], each bin [edge_i, edge_i+1) but the last, which includes HI; values
// outside the range and NaN are not counted; LO == HI means [LO - 0.5, HI + 0.5].
// The array's shape and order do not matter (every element counts once).
//
// Exit status: 0 ok, 1 the array could not be read, 2 bad arguments.
// Errors are one line on stderr.

#include <ooc/ooc.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

/// A reduction kernel (the contract is in <ooc/kernel.hpp>). ooc::reduce calls, for each
/// tile, in parallel: identity() for a fresh State, then partial() on the tile's blocks
/// in order. It then merge()s the tile States into a running State strictly in tile
/// order, and hands the final one to result(). Nothing here needs a lock: each State
/// belongs to one tile until it is merged.
class Histogram {
 public:
  Histogram(std::int64_t bins, double lo, double hi) : bins_(bins), lo_(lo), hi_(hi) {
    if (lo_ == hi_) {  // numpy widens an empty range rather than divide by zero
      lo_ -= 0.5;
      hi_ += 0.5;
    }
    scale_ = static_cast<double>(bins_) / (hi_ - lo_);
    fill_edges<double>();
    fill_edges<float>();
    fill_edges<ooc::half>();
  }

  /// The partial result: one count per bin.
  using State = std::vector<std::int64_t>;

  /// Counts start at zero; a State{} would have no bins.
  State identity() const { return State(static_cast<std::size_t>(bins_), 0); }

  /// Which type partial() sees the values in. numpy compares a float array with the
  /// edges in the array's own float type (np.result_type(LO, HI, a), for LO and HI
  /// within that type's range), and anything else in float64. ooc converts the values
  /// for us, as numpy's `a.astype(edges.dtype)` does.
  template <class T>
  using input_for = std::conditional_t<ooc::is_floating_v<T>, T, double>;

  /// Counts one block of values (at most ooc::kBlockElements, all from one tile).
  template <class E>
  void partial(State& counts, const ooc::ConstArrayMap<E>& x) const {
    const std::vector<E>& edges = std::get<std::vector<E>>(edges_);
    const E first = edges.front();
    const E last = edges.back();
    for (Eigen::Index k = 0; k < x.size(); ++k) {
      const E v = x[k];
      if (!(v >= first && v <= last)) continue;  // outside [LO, HI], or NaN
      // Guess the bin from the position, then settle it against the edges as rounded
      // to E: near an edge the guess can be one off, and the edges decide, as in numpy.
      std::int64_t i = static_cast<std::int64_t>((static_cast<double>(v) - lo_) * scale_);
      i = std::clamp<std::int64_t>(i, 0, bins_ - 1);
      while (i > 0 && v < edges[i]) --i;
      while (i < bins_ - 1 && v >= edges[i + 1]) ++i;
      ++counts[i];
    }
  }

  /// `right` counted the elements just after `left`'s. Adding counts is associative
  /// (and exact), so the answer cannot depend on how the array was cut or on threads.
  void merge(State& left, State&& right) const {
    for (std::size_t i = 0; i < left.size(); ++i) left[i] += right[i];
  }

  /// The answer, of one type whatever the array's dtype.
  std::vector<std::int64_t> result(const State& counts) const { return counts; }

 private:
  // np.linspace(LO, HI, BINS + 1): i * step + LO in float64, the last edge exactly HI,
  // then rounded once to the comparison type E.
  template <class E>
  void fill_edges() {
    std::vector<E>& edges = std::get<std::vector<E>>(edges_);
    edges.resize(static_cast<std::size_t>(bins_) + 1);
    const double step = (hi_ - lo_) / static_cast<double>(bins_);
    for (std::int64_t i = 0; i <= bins_; ++i) {
      const double edge = i == bins_ ? hi_ : static_cast<double>(i) * step + lo_;
      ooc::convert(ooc::dtype_of<double>, &edge, ooc::dtype_of<E>, &edges[static_cast<std::size_t>(i)], 1);
    }
  }

  std::int64_t bins_;
  double lo_;
  double hi_;
  double scale_;
  std::tuple<std::vector<double>, std::vector<float>, std::vector<ooc::half>> edges_;
};

std::int64_t parse_positive(std::string_view what, std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0)
    throw std::invalid_argument(std::string(what) + " wants a positive integer, not '" + std::string(text) + "'");
  return value;
}

double parse_finite(std::string_view what, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
    throw std::invalid_argument(std::string(what) + " wants a finite number, not '" + text + "'");
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view usage = "usage: running_histogram IN BINS LO HI [--tile-bytes BYTES]";
  ooc::PipelineOptions options;
  std::vector<std::string> args;
  std::int64_t bins = 0;
  double lo = 0;
  double hi = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--tile-bytes" && i + 1 < argc)
        options.tile_bytes = static_cast<std::uint64_t>(parse_positive("--tile-bytes", argv[++i]));
      else args.emplace_back(arg);
    }
    if (args.size() != 4) throw std::invalid_argument("expected IN BINS LO HI");
    bins = parse_positive("BINS", args[1]);
    lo = parse_finite("LO", args[2]);
    hi = parse_finite("HI", args[3]);
    if (lo > hi) throw std::invalid_argument("LO must not be above HI");
  } catch (const std::invalid_argument& e) {
    std::cerr << "running_histogram: " << e.what() << " (" << usage << ")\n";
    return 2;
  }

  try {
    const ooc::MappedArray in = ooc::map_file(args[0]);
    // Tiles are counted in parallel and merged in tile order; memory stays bounded by
    // the tiles in flight, whatever the file's size.
    const std::vector<std::int64_t> counts = ooc::reduce(in, Histogram(bins, lo, hi), options);
    std::cout << '[';
    for (std::size_t i = 0; i < counts.size(); ++i) std::cout << (i ? ", " : "") << counts[i];
    std::cout << "]\n";
  } catch (const ooc::UsageError& e) {
    std::cerr << "running_histogram: " << e.what() << "\n";
    return 2;
  } catch (const ooc::Error& e) {  // what() names the file and the problem
    std::cerr << "running_histogram: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "running_histogram: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
