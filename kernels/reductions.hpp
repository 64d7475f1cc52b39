#pragma once
/// Full reductions: sum, mean, min, max, with numpy 1.24's result dtypes and NaN rules.
/// Use with ooc::reduce(array, ooc::kernels::Sum{}); each returns an ooc::Scalar.

#include "ooc/dtype.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/scalar.hpp"
#include "ooc/state_bytes.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
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

namespace detail {

template <class T>
Scalar half_aware_scalar(double value) {
  if constexpr (std::is_same_v<T, half>) {
    half h;
    convert(dtype_of<double>, &value, dtype_of<half>, &h, 1);  // one rounding, as numpy
    return Scalar::of(h);
  } else {
    return Scalar::of(static_cast<T>(value));
  }
}

}  // namespace detail

/// numpy's mean: integers and bool are summed as float64, float16 as float32, and the
/// sum divided by the count in float64, then rounded to the result dtype. Empty: NaN.
struct Mean {
  template <class T>
  using input_for = std::conditional_t<std::is_same_v<T, half>, float,
                                       std::conditional_t<is_floating_v<T>, T, double>>;
  template <class T> using state_for = BlockedSum<input_for<T>, input_for<T>>;

  template <class State, class Values>
  void partial(State& s, const Values& x) const { s.add_block(x); }
  template <class State>
  void merge(State& left, State&& right) const { left.append(std::move(right)); }
  template <class T>
  Scalar result(const state_for<T>& s) const {
    const double mean = static_cast<double>(s.total) / static_cast<double>(s.count);
    if constexpr (is_floating_v<T>) return detail::half_aware_scalar<T>(mean);
    else return Scalar::of(mean);
  }
};

namespace detail {

template <class T> struct Extremum {
  T value{};
  bool seen = false;
};

template <bool kMin, class T>
T pick(T a, T b) {
  if constexpr (is_floating_v<T>) {
    if (Eigen::numext::isnan(a)) return a;  // numpy's min and max propagate NaN
    if (Eigen::numext::isnan(b)) return b;
  }
  if constexpr (kMin) return b < a ? b : a;
  else return a < b ? b : a;
}

template <bool kMin>
struct ExtremumKernel {
  template <class T> using state_for = Extremum<T>;

  template <class T>
  void partial(Extremum<T>& s, const ConstArrayMap<T>& x) const {
    if (x.size() == 0) return;
    T m;
    if constexpr (std::is_same_v<T, bool>) {
      // As bytes: any nonzero byte is True to numpy (a C++ bool must be 0 or 1).
      const auto bytes = Eigen::Map<const Eigen::Array<std::uint8_t, Eigen::Dynamic, 1>>(
          reinterpret_cast<const std::uint8_t*>(x.data()), x.size());
      m = kMin ? (bytes != 0).all() : (bytes != 0).any();
    }
    else if constexpr (is_floating_v<T>) m = kMin ? x.template minCoeff<Eigen::PropagateNaN>()
                                                  : x.template maxCoeff<Eigen::PropagateNaN>();
    else m = kMin ? x.minCoeff() : x.maxCoeff();
    s.value = s.seen ? pick<kMin>(s.value, m) : m;
    s.seen = true;
  }
  template <class T>
  void merge(Extremum<T>& left, Extremum<T>&& right) const {
    if (!right.seen) return;
    left.value = left.seen ? pick<kMin>(left.value, right.value) : right.value;
    left.seen = true;
  }
  template <class T>
  Scalar result(const Extremum<T>& s) const {
    if (!s.seen)
      throw std::domain_error(std::string("zero-size array to reduction operation ") +
                              (kMin ? "minimum" : "maximum") + " which has no identity");
    return Scalar::of(s.value);
  }
};

}  // namespace detail

struct Min : detail::ExtremumKernel<true> {};
struct Max : detail::ExtremumKernel<false> {};

}  // namespace ooc::kernels

#include "ooc/pipeline.hpp"

#include <string>
#include <string_view>

namespace ooc::kernels {

/// A full reduction chosen by name at run time ("sum", "mean", "min", "max").
class ReduceOp {
 public:
  enum class Code { sum, mean, min, max };
  /// Throws ooc::UsageError for an unknown name.
  static ReduceOp parse(std::string_view name);
  const std::string& name() const { return name_; }
  Scalar run(const MappedArray& in, const PipelineOptions& options = {}) const;
  /// Calls f(kernel) with the kernel object this operation names and returns what f
  /// returns: the one switch from a name to a kernel type, for run() and ooc::mpi.
  template <class F> decltype(auto) visit(F&& f) const {
    switch (code_) {
      case Code::sum: return f(Sum{});
      case Code::mean: return f(Mean{});
      case Code::min: return f(Min{});
      case Code::max: default: return f(Max{});
    }
  }

 private:
  std::string name_;
  Code code_ = Code::sum;
};

}  // namespace ooc::kernels
