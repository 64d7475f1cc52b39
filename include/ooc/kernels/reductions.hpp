#pragma once
/// Full reductions: sum, mean, min, max, with numpy 1.24's result dtypes and NaN rules.
/// Use with ooc::reduce(array, ooc::kernels::Sum{}); each returns an ooc::Scalar.

#include "ooc/dtype.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/kernel.hpp"
#include "ooc/kernels/elementwise.hpp"
#include "ooc/internal/reductions.hpp"
#include "ooc/scalar.hpp"
#include "ooc/state_bytes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace ooc::kernels {

/// numpy's pairwise summation (numpy/core/src/umath/loops_utils.h.src), step for step:
/// below 8 elements a plain loop, up to 128 eight accumulators, above that halves split
/// at a multiple of 8. Summing a whole array this way gives numpy's bits exactly.
template <class Acc, class T>
Acc pairwise_sum(const T* a, std::int64_t n) {
  if (n < 8) {
    Acc res = Acc(0);
    for (std::int64_t i = 0; i < n; ++i) res += static_cast<Acc>(a[i]);
    return res;
  }
  if (n <= 128) {
    Acc r[8];
    for (int k = 0; k < 8; ++k) r[k] = static_cast<Acc>(a[k]);
    std::int64_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int k = 0; k < 8; ++k) r[k] += static_cast<Acc>(a[i + k]);
    Acc res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += static_cast<Acc>(a[i]);
    return res;
  }
  std::int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum<Acc>(a, n2) + pairwise_sum<Acc>(a + n2, n - n2);
}

/// The type numpy's pairwise loop adds T's in: float for float16 and float32, double
/// for float64; integers are summed exactly (with wrap-around) in 64 bits.
template <class T>
using sum_accumulator_t = std::conditional_t<
    std::is_same_v<T, double>, double,
    std::conditional_t<is_floating_v<T>, float,
                       std::conditional_t<std::is_unsigned_v<T> && !std::is_same_v<T, bool>, std::uint64_t,
                                          std::int64_t>>>;

/// numpy's dtype of a.sum() for an array of T.
template <class T>
using sum_result_t = std::conditional_t<is_floating_v<T>, T, sum_accumulator_t<T>>;

/// A sum taken numpy's way: each block's pairwise sum (in Acc) is added, in array order,
/// to a running total kept in Total, the dtype numpy keeps its output in (so a float16
/// total is rounded to float16 after every block, as numpy's is). Tiles record their
/// block sums; the in-order merge adds them to the running total. Not associative in
/// floating point: a tile's blocks must be added to the total of everything before it,
/// which is why MPI ranks hand the running state on rather than merging their own.
template <class Acc, class Total>
struct BlockedSum {
  Total total{};
  std::vector<Acc> blocks;  // block sums of a tile, not yet added to a total
  std::int64_t count = 0;

  void save(StateWriter& out) const {
    out.put(total);
    out.put_vector(blocks);
    out.put(count);
  }
  void load(StateReader& in) {
    total = in.get<Total>();
    blocks = in.get_vector<Acc>();
    count = in.get<std::int64_t>();
  }

  template <class Values>
  void add_block(const Values& x) {
    count += x.size();
    if constexpr (std::is_integral_v<Acc>) {
      // Unsigned arithmetic wraps by definition; the cast back gives numpy's int64 wrap.
      std::uint64_t sum = 0;
      using Value = typename Values::Scalar;
      if constexpr (std::is_same_v<Value, bool>) {
        // Any nonzero byte is True to numpy; reading a byte of 2 as a C++ bool is not defined.
        const auto* p = reinterpret_cast<const std::uint8_t*>(x.data());
        for (std::int64_t i = 0; i < x.size(); ++i) sum += p[i] != 0;
      } else {
        const auto* p = x.data();
        for (std::int64_t i = 0; i < x.size(); ++i) sum += static_cast<std::uint64_t>(static_cast<Acc>(p[i]));
      }
      total = static_cast<Total>(static_cast<std::uint64_t>(total) + sum);
    } else {
      blocks.push_back(pairwise_sum<Acc>(x.data(), x.size()));
    }
  }
  void append(BlockedSum&& next) {
    count += next.count;
    if constexpr (std::is_integral_v<Acc>) {
      total = static_cast<Total>(static_cast<std::uint64_t>(total) + static_cast<std::uint64_t>(next.total));
    } else {
      for (Acc block : blocks) total = static_cast<Total>(static_cast<Acc>(total) + block);
      blocks.clear();
      for (Acc block : next.blocks) total = static_cast<Total>(static_cast<Acc>(total) + block);
    }
  }
};

struct Sum {
  template <class T> using state_for = BlockedSum<sum_accumulator_t<T>, sum_result_t<T>>;

  template <class State, class Values>
  void partial(State& s, const Values& x) const { s.add_block(x); }
  template <class State>
  void merge(State& left, State&& right) const { left.append(std::move(right)); }
  template <class T>
  Scalar result(const state_for<T>& s) const { return Scalar::of(s.total); }
};

/// numpy's mean: integers and bool are summed as float64, float16 as float32, and the
/// sum divided by the count (see detail::mean_value), then rounded to the result dtype.
/// Empty: NaN.
struct Mean {
  bool array_result = false;  ///< an element of an axis reduction's array (see mean_value)
  template <class T>
  using input_for = std::conditional_t<std::is_same_v<T, half>, float,
                                       std::conditional_t<is_floating_v<T>, T, double>>;
  template <class T> using state_for = BlockedSum<input_for<T>, input_for<T>>;

  template <class State, class Values>
  void partial(State& s, const Values& x) const { s.add_block(x); }
  template <class State>
  void merge(State& left, State&& right) const { left.append(std::move(right)); }
  template <class T>
  Scalar result(const state_for<T>& s) const { return detail::mean_value<T>(s.total, s.count, array_result); }
};

struct Min : detail::ExtremumKernel<true> {};
struct Max : detail::ExtremumKernel<false> {};
/// np.nanmin / np.nanmax: NaN is skipped (numpy's fmin/fmax), NaN only when all are NaN.
struct NanMin : detail::ExtremumKernel<true, true> {};
struct NanMax : detail::ExtremumKernel<false, true> {};

/// np.nansum: NaN counts as 0 (numpy replaces NaN by 0 and sums the copy, so the blocks
/// and their order are sum's).
struct NanSum : Sum {
  template <class State, class T>
  void partial(State& s, const ConstArrayMap<T>& x) const {
    if constexpr (is_floating_v<T>) s.add_block(detail::without_nan(x));
    else s.add_block(x);
  }
};

/// np.nanmean: the NaN-free sum taken as nansum takes it (a float16 total for float16),
/// divided by the count of non-NaN values in float64, rounded to the input's float type.
/// Integers and bools: np.mean.
struct NanMean {
  template <class T> using input_for = std::conditional_t<is_floating_v<T>, T, double>;
  template <class T> struct State : BlockedSum<sum_accumulator_t<input_for<T>>, input_for<T>> {
    std::int64_t nans = 0;
    // For MPI; without these the base's would drop `nans` on the way.
    void save(StateWriter& out) const {
      State::BlockedSum::save(out);
      out.put(nans);
    }
    void load(StateReader& in) {
      State::BlockedSum::load(in);
      nans = in.get<std::int64_t>();
    }
  };
  template <class T> using state_for = State<T>;

  template <class S, class E>
  void partial(S& s, const ConstArrayMap<E>& x) const {
    if constexpr (is_floating_v<E>) {
      const auto clean = detail::without_nan(x);
      s.nans += x.size() - (x == x).count();
      s.add_block(clean);
    } else {
      s.add_block(x);
    }
  }
  template <class S>
  void merge(S& left, S&& right) const {
    left.nans += right.nans;
    left.append(std::move(right));
  }
  template <class T>
  Scalar result(const state_for<T>& s) const {
    const double mean = static_cast<double>(s.total) / static_cast<double>(s.count - s.nans);
    if constexpr (is_floating_v<T>) return detail::half_aware_scalar<T>(mean);
    else return Scalar::of(mean);
  }
};

/// np.prod: integers multiply in int64 (uint64 for unsigned), wrapping, in any order;
/// floats one multiply after another in the array's own type, as numpy's loop does
/// (float16 in float32 within each block of kBlockElements, rounded to float16 after
/// it), which is not associative: the kernel runs in order on the commit stage.
struct Prod {
  template <class T> struct State {
    sum_result_t<T> total = sum_result_t<T>(1);
  };
  template <class T> using state_for = State<T>;
  template <class T> using input_for = sum_result_t<T>;
  template <class T> static constexpr bool in_order = is_floating_v<T>;

  template <class T> State<T> identity() const { return {}; }

  template <class S, class E>
  void partial(S& s, const ConstArrayMap<E>& x) const {
    if constexpr (std::is_same_v<E, half>) {
      float product = static_cast<float>(s.total);
      for (Eigen::Index i = 0; i < x.size(); ++i) product *= static_cast<float>(x[i]);
      s.total = half(product);
    } else if constexpr (is_floating_v<E>) {
      for (Eigen::Index i = 0; i < x.size(); ++i) s.total *= x[i];
    } else {
      std::uint64_t product = static_cast<std::uint64_t>(s.total);  // wraps, as numpy's int64
      for (Eigen::Index i = 0; i < x.size(); ++i) product *= static_cast<std::uint64_t>(x[i]);
      s.total = static_cast<E>(product);
    }
  }
  template <class S>
  void merge(S& left, S&& right) const {
    left.total = static_cast<decltype(left.total)>(static_cast<std::uint64_t>(left.total) *
                                                   static_cast<std::uint64_t>(right.total));
  }
  template <class T>
  Scalar result(const state_for<T>& s) const { return Scalar::of(s.total); }
};

/// Count, mean and sum of squared deviations of a run of values, merged with Chan's
/// formula: one pass, mergeable.
struct Moments {
  std::int64_t count = 0;
  double mean = 0;
  double m2 = 0;
  /// What rounding `mean` left out (mean + mean_low is the mean to about twice double's
  /// precision). Merging needs the difference of two blocks' means, and on data with a
  /// large common offset (timestamps near 1.7e12, sensor readings with a bias) that
  /// difference lies in the last digits of the rounded means: merging them alone lost
  /// 3e-6 of a variance of 1e12 + U(0, 1) values, where numpy's two passes lose 5e-11.
  double mean_low = 0;

  /// The moments of one block: its mean, then the deviations from that rounded mean,
  /// whose sum corrects both the mean (mean_low) and the squared deviations (the
  /// corrected two-pass algorithm of Chan, Golub and LeVeque), with pairwise sums over
  /// the block (in cache).
  static Moments of_block(const ConstArrayMap<double>& x);
  /// Adds the moments of the values just after these.
  void merge(const Moments& right);
  /// m2 / max(count - ddof, 0), as numpy divides.
  double variance(std::int64_t ddof) const;
};

/// Block moments folded into a running total one block at a time, in array order (tiles
/// only collect theirs), so that, as for sums, the result does not depend on how the
/// array is cut into tiles nor on the thread count.
struct BlockedMoments {
  Moments total;
  std::vector<Moments> blocks;

  void add_block(const ConstArrayMap<double>& x) { blocks.push_back(Moments::of_block(x)); }
  void save(StateWriter& out) const {
    out.put(total);
    out.put_vector(blocks);
  }
  void load(StateReader& in) {
    total = in.get<Moments>();
    blocks = in.get_vector<Moments>();
  }
  void append(BlockedMoments&& next) {
    for (const Moments& b : blocks) total.merge(b);
    blocks.clear();
    total.merge(next.total);
    for (const Moments& b : next.blocks) total.merge(b);
  }
  Moments folded() const {
    Moments m = total;
    for (const Moments& b : blocks) m.merge(b);
    return m;
  }
};

/// np.var / np.std (ddof as numpy's), in one pass: each block's moments are merged into
/// the running ones (Chan et al.), in float64 whatever the input. numpy takes two passes
/// (the mean, then the squared deviations) in the input's float type, so results agree
/// within rounding, not bit for bit (docs/decisions/2026-11-29-var-std-one-pass.md gives the tolerance). Result dtype:
/// float16/float32 for those inputs, float64 otherwise; std is the square root taken in
/// that dtype.
struct Var {
  std::int64_t ddof = 0;
  bool std = false;
  using State = BlockedMoments;
  template <class T> using input_for = double;

  void partial(State& s, const ConstArrayMap<double>& x) const { s.add_block(x); }
  void merge(State& left, State&& right) const { left.append(std::move(right)); }
  template <class T>
  Scalar result(const State& s) const { return result<T>(s.folded()); }
  template <class T>
  Scalar result(const Moments& s) const {
    using R = std::conditional_t<std::is_same_v<T, half> || std::is_same_v<T, float>, T, double>;
    double variance = s.variance(ddof);
    // numpy sums the values and then the squared deviations in R: where either sum is
    // beyond R's range its answer is infinite, and so is ooc's.
    if (std::isfinite(variance) && (overflows<R>(s.mean * static_cast<double>(s.count)) || overflows<R>(s.m2)))
      variance = INFINITY;
    const Scalar var = detail::half_aware_scalar<R>(variance);
    if (!std) return var;
    return detail::half_aware_scalar<R>(static_cast<double>(detail::round_sqrt<R>(static_cast<R>(var.as_double()))));
  }

 private:
  template <class R>
  static bool overflows(double value) {
    return !std::isfinite(detail::half_aware_scalar<R>(value).as_double());
  }
};

/// np.linalg.norm of the flattened array: sqrt(sum(x * x)), integers as float64. The
/// squares are rounded to the float type and summed as sum() sums (numpy's axis norm);
/// numpy's full norm uses BLAS dot instead, so a full norm agrees within rounding.
struct Norm {
  template <class T> using input_for = std::conditional_t<is_floating_v<T>, T, double>;
  template <class T> using state_for = BlockedSum<sum_accumulator_t<input_for<T>>, input_for<T>>;

  template <class S, class E>
  void partial(S& s, const ConstArrayMap<E>& x) const {
    E* squares = reinterpret_cast<E*>(ooc::detail::scratch(ooc::detail::ScratchSlot::kernel_second, sizeof(E) * static_cast<std::size_t>(x.size())));
    for (Eigen::Index i = 0; i < x.size(); ++i) squares[i] = static_cast<E>(x[i] * x[i]);
    s.add_block(ConstArrayMap<E>(squares, x.size()));
  }
  template <class S>
  void merge(S& left, S&& right) const { left.append(std::move(right)); }
  template <class T>
  Scalar result(const state_for<T>& s) const {
    return Scalar::of(detail::round_sqrt<input_for<T>>(s.total));
  }
};

/// np.count_nonzero: NaN is nonzero, -0.0 is zero. Result int64.
struct CountNonzero {
  using State = std::int64_t;
  template <class T>
  void partial(State& s, const ConstArrayMap<T>& x) const {
    if constexpr (std::is_same_v<T, bool>) s += x.count();
    else s += (x != T(0)).count();
  }
  void merge(State& left, State&& right) const { left += right; }
  Scalar result(const State& s) const { return Scalar::of(s); }
};

/// np.any / np.all: NaN is true. Empty: any is False, all is True.
template <bool kAll>
struct Truth {
  struct State {
    bool value = kAll;
  };
  template <class T>
  void partial(State& s, const ConstArrayMap<T>& x) const {
    if constexpr (std::is_same_v<T, bool>) s.value = kAll ? (s.value && x.all()) : (s.value || x.any());
    else s.value = kAll ? (s.value && (x != T(0)).all()) : (s.value || (x != T(0)).any());
  }
  void merge(State& left, State&& right) const { left.value = kAll ? left.value && right.value : left.value || right.value; }
  Scalar result(const State& s) const { return Scalar::of(s.value); }
};
using Any = Truth<false>;
using All = Truth<true>;

/// np.argmin / np.argmax of the flattened array: the index of the first extreme value
/// in C order (numpy ravels a Fortran array in C order first), the first NaN if there is
/// one. Empty: an error, as numpy's. Result int64.
template <bool kMin>
class ArgExtremum {
 public:
  /// For a memory-order index in an array of this shape and order.
  explicit ArgExtremum(Shape shape = {}, Order order = Order::c);

  template <class T> struct State {
    T value{};
    std::int64_t index = -1;  // C-order index; -1 while nothing is seen
  };
  template <class T> using state_for = State<T>;

  template <class T>
  void partial(State<T>& s, const ConstArrayMap<T>& x, std::int64_t first) const {
    if (x.size() == 0) return;
    // The first extreme value of the block in memory order (the first NaN if any).
    Eigen::Index best = 0;
    for (Eigen::Index i = 1; i < x.size() && !detail::is_nan(x[best]); ++i)
      if (detail::is_nan(x[i]) || (kMin ? x[i] < x[best] : x[i] > x[best])) best = i;
    std::int64_t index = c_index(first + best);
    if (reorder_) {  // a tie later in memory may come first in C order
      const bool nan = detail::is_nan(x[best]);
      for (Eigen::Index i = best + 1; i < x.size(); ++i)
        if (nan ? detail::is_nan(x[i]) : x[i] == x[best]) index = std::min(index, c_index(first + i));
    }
    take(s, State<T>{x[best], index});
  }
  template <class T>
  void merge(State<T>& left, State<T>&& right) const { take(left, right); }
  template <class T>
  Scalar result(const State<T>& s) const {
    if (s.index < 0) throw std::domain_error(std::string("attempt to get ") + (kMin ? "argmin" : "argmax") +
                                             " of an empty sequence");
    return Scalar::of(s.index);
  }

 private:
  template <class T>
  static void take(State<T>& s, const State<T>& other) {
    if (other.index < 0) return;
    if (s.index < 0) {
      s = other;
      return;
    }
    const bool s_nan = detail::is_nan(s.value), o_nan = detail::is_nan(other.value);
    bool better;
    if (s_nan || o_nan) better = o_nan && (!s_nan || other.index < s.index);
    else if (other.value == s.value) better = other.index < s.index;
    else better = kMin ? other.value < s.value : other.value > s.value;
    if (better) s = other;
  }
  std::int64_t c_index(std::int64_t memory_index) const;

  Shape shape_;
  Shape c_strides_;       // elements between neighbours along each axis, in C order
  bool reorder_ = false;  // Fortran order with more than one dimension
};
using ArgMin = ArgExtremum<true>;
using ArgMax = ArgExtremum<false>;

/// What np.histogram(a, bins, range) returns: the counts and the bin edges (in the
/// edges' dtype: the array's float type, float64 for other arrays).
struct HistogramResult {
  std::vector<std::int64_t> counts;
  std::vector<double> edges;
  DType edge_dtype{Kind::floating, 8};
};

/// np.histogram with `bins` equal bins over [lo, hi], computed as numpy's does: the edges
/// are np.linspace(lo, hi, bins + 1) rounded to the edges' dtype E, a value's bin is first
/// guessed as int((x - lo) * (bins / (hi - lo))) in numpy's arithmetic (x - lo in E, the
/// product in E or wider by value-based casting), then moved by at most one bin against
/// the edges; the last bin includes hi; values outside and NaN are not counted.
class Histogram {
 public:
  /// lo < hi, both finite (widen lo == hi first, as numpy does); `edges` is
  /// Histogram::edge_dtype of the array and the range.
  /// `width` is hi - lo as numpy takes it when that is not the doubles' difference (two
  /// integer bounds: exact).
  Histogram(std::int64_t bins, double lo, double hi, DType edges, std::optional<double> width = std::nullopt);

  /// np.histogram's edge dtype: np.result_type(lo, hi, a) with lo and hi as the Python
  /// numbers given (value-based), float64 if that is an integer or bool type.
  static DType edge_dtype(DType array, const PyScalar& lo, const PyScalar& hi);

  /// numpy keeps a value x when x >= lo and x <= hi, each compared in
  /// result_type(array, bound): for an int64 or uint64 array and a Python int bound in
  /// its range that is the array's own type, an exact comparison where float64 would
  /// round both sides (nanosecond timestamps, 64-bit ids). Call after construction.
  void compare_exactly(DType array, const PyScalar& lo, const PyScalar& hi);

  using State = std::vector<std::int64_t>;
  State identity() const { return State(static_cast<std::size_t>(bins_), 0); }
  // 64-bit integers arrive as themselves, for compare_exactly; other integers as double.
  template <class T>
  using input_for = std::conditional_t<is_floating_v<T> || std::is_same_v<T, std::int64_t> ||
                                           std::is_same_v<T, std::uint64_t>,
                                       T, double>;

  template <class T>
  void partial(State& counts, const ConstArrayMap<T>& x) const {
    switch (edge_size_) {
      case 2: count_as<half>(counts, x); break;
      case 4: count_as<float>(counts, x); break;
      default: count_as<double>(counts, x); break;
    }
  }
  void merge(State& left, State&& right) const {
    for (std::size_t i = 0; i < left.size(); ++i) left[i] += right[i];
  }
  HistogramResult result(const State& counts) const {
    return HistogramResult{counts, edges_, DType(Kind::floating, edge_size_)};
  }

 private:
  template <class E, class T>
  void count_as(State& counts, const ConstArrayMap<T>& x) const {
    if constexpr (sizeof(E) >= sizeof(T)) {  // the edges' dtype holds the array's values
      const E first = static_cast<E>(low_.value);  // numpy subtracts lo, not the first edge
      for (Eigen::Index k = 0; k < x.size(); ++k) {
        const E v = static_cast<E>(x[k]);
        if (!(low_.admits<T, true>(x[k], static_cast<double>(v)) && high_.admits<T, false>(x[k], static_cast<double>(v))))
          continue;
        const double guess = position(static_cast<E>(v - first));
        // Beyond the last edge (or not a number) only when E's arithmetic overflowed.
        if (!(guess < static_cast<double>(bins_) + 1)) overflowed(edge_size_);
        std::int64_t i = static_cast<std::int64_t>(guess);
        if (i >= bins_) i = bins_ - 1;
        if (static_cast<double>(v) < edges_[static_cast<std::size_t>(i)]) --i;
        if (i != bins_ - 1 && static_cast<double>(v) >= edges_[static_cast<std::size_t>(i) + 1]) ++i;
        ++counts[static_cast<std::size_t>(std::clamp<std::int64_t>(i, 0, bins_ - 1))];
      }
    }
  }
  // (x - lo) * norm in the dtype numpy multiplies in: result_type(E array, norm).
  template <class E>
  double position(E offset) const {
    if (multiply_size_ == 2) return static_cast<double>(half(offset) * norm_half_);
    if (multiply_size_ == 4) return static_cast<double>(static_cast<float>(offset) * norm_float_);
    return static_cast<double>(offset) * norm_;
  }

  static double rounded_to(DType dtype, double value);
  [[noreturn]] static void overflowed(int edge_size);

  // One end of the range and how numpy compares values with it.
  struct Bound {
    enum class Kind { float64, int64, uint64 } kind = Kind::float64;
    double value = 0;  // the bound in the edges' dtype
    std::int64_t int_value = 0;
    std::uint64_t uint_value = 0;
    template <class T, bool kLow>
    bool admits(T x, double as_double) const {
      if constexpr (std::is_same_v<T, std::int64_t>)
        if (kind == Kind::int64) return kLow ? x >= int_value : x <= int_value;
      if constexpr (std::is_same_v<T, std::uint64_t>)
        if (kind == Kind::uint64) return kLow ? x >= uint_value : x <= uint_value;
      return kLow ? as_double >= value : as_double <= value;
    }
  };

  std::int64_t bins_;
  Bound low_, high_;
  int edge_size_;
  int multiply_size_;
  double norm_;
  float norm_float_;
  half norm_half_;
  std::vector<double> edges_;  // rounded to the edges' dtype
};

}  // namespace ooc::kernels

namespace ooc::kernels {

/// The parameters some reductions take.
struct ReduceParams {
  std::int64_t ddof = 0;                               ///< var, std
  std::int64_t bins = 10;                              ///< histogram
  std::optional<std::pair<PyScalar, PyScalar>> range;  ///< histogram; default: the data's min and max
};

/// A full reduction chosen by name at run time: sum prod mean min max argmin argmax var
/// std count_nonzero any all nansum nanmean nanmin nanmax norm, and histogram.
class ReduceOp {
 public:
  enum class Code {
    sum, prod, mean, min, max, argmin, argmax, var, std, count_nonzero, any, all,
    nansum, nanmean, nanmin, nanmax, norm, histogram
  };
  using Params = ReduceParams;

  /// Throws ooc::UsageError for an unknown name or parameters that make no sense.
  static ReduceOp parse(std::string_view name, Params params = {});
  const std::string& name() const { return name_; }
  Code code() const { return code_; }
  const Params& params() const { return params_; }
  /// The reduction of every element (not for histogram).
  Scalar run(const MappedArray& in, const PipelineOptions& options = {}) const;
  /// Calls fn(kernel) with this reduction's kernel (not for histogram); `shape` and
  /// `order` are those of the values it will see, for argmin/argmax's C-order index.
  template <class Fn>
  decltype(auto) with_kernel(const Shape& shape, Order order, Fn&& fn) const;
  /// np.histogram(in, bins, range).
  HistogramResult histogram(const MappedArray& in, const PipelineOptions& options = {}) const;
  /// numpy's result dtype for an array of `input` (native order; not for histogram).
  DType result_dtype(DType input) const;
  /// The reduction along `axis` (negative counts from the end, as numpy's): the result
  /// has in's shape without that axis, in in's memory order, and is written as
  /// result_dtype() values into `out` (exactly that many bytes). Streams the array once,
  /// without transposing it. Not for histogram.
  void run_axis(const MappedArray& in, int axis, std::span<std::byte> out, const PipelineOptions& options = {}) const;

  /// The ReduceOp of one of the built-in kernels above (Sum, Mean, Var{ddof, std}, ...).
  template <class Kernel>
  static ReduceOp of(const Kernel& kernel);

 private:
  std::string name_;
  Code code_ = Code::sum;
  Params params_;
};

/// What one of several reductions taken together gives (ooc::reduce_together): a value,
/// as ReduceOp::run gives it, or a histogram's counts and edges.
using Reduction = std::variant<Scalar, HistogramResult>;

template <class Fn>
decltype(auto) ReduceOp::with_kernel(const Shape& shape, Order order, Fn&& fn) const {
  switch (code_) {
    case Code::sum: return fn(Sum{});
    case Code::prod: return fn(Prod{});
    case Code::mean: return fn(Mean{});
    case Code::min: return fn(Min{});
    case Code::max: return fn(Max{});
    case Code::argmin: return fn(ArgMin(shape, order));
    case Code::argmax: return fn(ArgMax(shape, order));
    case Code::var: return fn(Var{params_.ddof, false});
    case Code::std: return fn(Var{params_.ddof, true});
    case Code::count_nonzero: return fn(CountNonzero{});
    case Code::any: return fn(Any{});
    case Code::all: return fn(All{});
    case Code::nansum: return fn(NanSum{});
    case Code::nanmean: return fn(NanMean{});
    case Code::nanmin: return fn(NanMin{});
    case Code::nanmax: return fn(NanMax{});
    case Code::norm: return fn(Norm{});
    case Code::histogram: default:
      throw UsageError("histogram gives counts and edges, not one value");
  }
}

template <class Kernel>
ReduceOp ReduceOp::of(const Kernel& kernel) {
  Params params;
  const char* name = nullptr;
  if constexpr (std::is_same_v<Kernel, Sum>) name = "sum";
  else if constexpr (std::is_same_v<Kernel, Prod>) name = "prod";
  else if constexpr (std::is_same_v<Kernel, Mean>) name = "mean";
  else if constexpr (std::is_same_v<Kernel, Min>) name = "min";
  else if constexpr (std::is_same_v<Kernel, Max>) name = "max";
  else if constexpr (std::is_same_v<Kernel, ArgMin>) name = "argmin";
  else if constexpr (std::is_same_v<Kernel, ArgMax>) name = "argmax";
  else if constexpr (std::is_same_v<Kernel, CountNonzero>) name = "count_nonzero";
  else if constexpr (std::is_same_v<Kernel, Any>) name = "any";
  else if constexpr (std::is_same_v<Kernel, All>) name = "all";
  else if constexpr (std::is_same_v<Kernel, NanSum>) name = "nansum";
  else if constexpr (std::is_same_v<Kernel, NanMean>) name = "nanmean";
  else if constexpr (std::is_same_v<Kernel, NanMin>) name = "nanmin";
  else if constexpr (std::is_same_v<Kernel, NanMax>) name = "nanmax";
  else if constexpr (std::is_same_v<Kernel, Norm>) name = "norm";
  else if constexpr (std::is_same_v<Kernel, Var>) {
    name = kernel.std ? "std" : "var";
    params.ddof = kernel.ddof;
  } else {
    static_assert(sizeof(Kernel) == 0, "ReduceOp::of takes one of ooc::kernels' built-in reductions");
  }
  (void)kernel;
  return parse(name, params);
}

}  // namespace ooc::kernels

namespace ooc {

/// A small array held in memory, in numpy's layout: what reduce_axis returns.
struct ReducedArray {
  DType dtype = dtype_of<double>;  ///< numpy's result dtype (native byte order)
  Shape shape;                  ///< the input's shape without the reduced axis
  Order order = Order::c;       ///< the input's memory order
  std::vector<std::byte> bytes; ///< the elements, in `order`

  std::int64_t size() const { return static_cast<std::int64_t>(bytes.size()) / dtype.itemsize(); }
  /// The elements as T, which must be the dtype's own type (UsageError otherwise: a
  /// float32 mean is read as values<float>()).
  template <class T>
  std::span<const T> values() const {
    if (dtype_of<T> != dtype)
      throw UsageError("the reduced array holds " + dtype.name() + ", not " + dtype_of<T>.name());
    return {reinterpret_cast<const T*>(bytes.data()), static_cast<std::size_t>(size())};
  }
};

/// The reduction `op` along `axis` of `in` (negative counts from the end, as numpy's), as
/// np.<op>(in, axis=axis) gives it: `ooc::reduce_axis(x, 0, "mean")`. Streams the array
/// once. Not for histogram.
ReducedArray reduce_axis(const MappedArray& in, int axis, const kernels::ReduceOp& op, const PipelineOptions& options = {});

/// The same with a built-in kernel: `ooc::reduce_axis(x, 0, ooc::kernels::Mean{})`,
/// `ooc::reduce_axis(x, 0, ooc::kernels::Var{.ddof = 1, .std = true})`.
template <class Kernel>
ReducedArray reduce_axis(const MappedArray& in, int axis, const Kernel& kernel, const PipelineOptions& options = {}) {
  return reduce_axis(in, axis, kernels::ReduceOp::of(kernel), options);
}

/// Several reductions of one array, and how many times it was read for them.
struct Reductions {
  std::vector<kernels::Reduction> values;  ///< one per operation, in their order
  int passes = 0;                          ///< reads of the array: runs of the pipeline over it
};

/// Several reductions of every element of `in` (`sum`, `mean`, `std`, `histogram`, ...)
/// over one read of it: each tile's blocks go to every reduction, so each value is, bit
/// for bit, the one its own ReduceOp::run (or histogram) gives. A histogram without a
/// range takes a second read: the first finds the data's min and max beside everything
/// else. Where some fail (an empty array's min), the error is the first one's in `ops`'
/// order, as running them one after another would raise it.
Reductions reduce_together(const MappedArray& in, std::span<const kernels::ReduceOp> ops,
                           const PipelineOptions& options = {});

/// Several reductions along one axis, and how many times the array was read for them.
struct AxisReductions {
  std::vector<ReducedArray> arrays;  ///< one per operation, in their order
  int passes = 0;                    ///< reads of the array
};

/// Several reductions of `in` along `axis`, each as reduce_axis gives it, bit for bit,
/// over one read of the array; two where var or std is among them (numpy's two passes:
/// the means with everything else, then the squared deviations). Not for histogram.
AxisReductions reduce_axis_together(const MappedArray& in, int axis, std::span<const kernels::ReduceOp> ops,
                                    const PipelineOptions& options = {});

// The whole-array reductions of ReduceOp are compiled once, in the library
// (reductions.cpp): a program calling ooc::reduce(a, kernels::Sum{}) links that copy
// instead of compiling the pipeline for every dtype again.
// (reductions.cpp instantiates each of these; keep the two lists alike.)
extern template detail::reduce_result_t<kernels::Sum> reduce(const MappedArray&, const kernels::Sum&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::Prod> reduce(const MappedArray&, const kernels::Prod&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::Mean> reduce(const MappedArray&, const kernels::Mean&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::Min> reduce(const MappedArray&, const kernels::Min&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::Max> reduce(const MappedArray&, const kernels::Max&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::ArgMin> reduce(const MappedArray&, const kernels::ArgMin&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::ArgMax> reduce(const MappedArray&, const kernels::ArgMax&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::Var> reduce(const MappedArray&, const kernels::Var&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::CountNonzero> reduce(const MappedArray&, const kernels::CountNonzero&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::Any> reduce(const MappedArray&, const kernels::Any&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::All> reduce(const MappedArray&, const kernels::All&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::NanSum> reduce(const MappedArray&, const kernels::NanSum&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::NanMean> reduce(const MappedArray&, const kernels::NanMean&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::NanMin> reduce(const MappedArray&, const kernels::NanMin&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::NanMax> reduce(const MappedArray&, const kernels::NanMax&, const PipelineOptions&);
extern template detail::reduce_result_t<kernels::Norm> reduce(const MappedArray&, const kernels::Norm&, const PipelineOptions&);

}  // namespace ooc
