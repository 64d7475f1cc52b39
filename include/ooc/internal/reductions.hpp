#pragma once
/// INTERNAL: not part of ooc's API, and may change in any release. Installed only
/// because the reduction kernels of <ooc/kernels/reductions.hpp> are templates that
/// expand in the user's code: float16-aware rounding, numpy's mean from a sum, and the
/// extremum kernel behind Min, Max, NanMin and NanMax.

#include "ooc/dtype.hpp"
#include "ooc/internal/kernel.hpp"
#include "ooc/internal/numpy_extremum.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/scalar.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace ooc::kernels::detail {

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

/// sqrt of a float value in its own type, as np.sqrt of a scalar of that type (float16
/// through float32).
template <class R>
R round_sqrt(R value) {
  if constexpr (std::is_same_v<R, half>) return half(std::sqrt(static_cast<float>(value)));
  else return std::sqrt(value);
}

/// The block with NaN replaced by 0, in a per-thread buffer.
template <class T>
ConstArrayMap<T> without_nan(const ConstArrayMap<T>& x) {
  T* clean = reinterpret_cast<T*>(ooc::detail::scratch(ooc::detail::ScratchSlot::kernel_second, sizeof(T) * static_cast<std::size_t>(x.size())));
  for (Eigen::Index i = 0; i < x.size(); ++i) clean[i] = Eigen::numext::isnan(x[i]) ? T(0) : x[i];
  return ConstArrayMap<T>(clean, x.size());
}

/// numpy's mean from the sum (in float32 for float16 and float32 inputs, float64
/// otherwise) and the count. A scalar result divides in float64 and rounds to the input's
/// float type; an array result (an axis reduction of a 2-d or larger array) divides in
/// the sum's own type, as np.true_divide(sum_array, n) does.
template <class T, class Total>
Scalar mean_value(Total total, std::int64_t count, bool array_result) {
  if constexpr (std::is_same_v<Total, float>) {
    if (array_result) return half_aware_scalar<T>(static_cast<double>(total / static_cast<float>(count)));
  }
  const double mean = static_cast<double>(total) / static_cast<double>(count);
  if constexpr (is_floating_v<T>) return half_aware_scalar<T>(mean);
  else return Scalar::of(mean);
}

template <class T> struct Extremum {
  T value{};
  bool seen = false;
  numpy_extremum::ZeroMap zeros;  // float32/float64: the sign of a zero result (numpy_extremum.hpp)
};

template <class T>
bool is_nan(T x) {
  if constexpr (is_floating_v<T>) return Eigen::numext::isnan(x);
  else return false;
}

// numpy's minimum/maximum propagate NaN; fmin/fmax (nanmin, nanmax) skip it.
template <bool kMin, bool kSkipNan, class T>
T pick(T a, T b) {
  if constexpr (is_floating_v<T>) {
    if (is_nan(a)) return kSkipNan ? b : a;
    if (is_nan(b)) return kSkipNan ? a : b;
  }
  if constexpr (kMin) return b < a ? b : a;
  else return a < b ? b : a;
}

/// The extreme of values[0, n) (n > 0) where none is NaN, taken in eight lanes so that the
/// loop vectorises, and whether one may be NaN (or infinite: x - x is NaN for both); the
/// extreme is then not this. Nonzero extremes have one set of bits; a zero's sign is the
/// ExtremumKernel's zero map's business.
template <bool kMin, class T>
T extreme_without_nan(const T* values, std::int64_t n, bool& nan) {
  using Lanes = Eigen::Array<T, 8, 1>;
  Lanes lanes = Lanes::Constant(values[0]), checks = Lanes::Zero();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const Eigen::Map<const Lanes> v(values + i);
    if constexpr (kMin) lanes = lanes.min(v);
    else lanes = lanes.max(v);
    checks += v - v;
  }
  T m = kMin ? lanes.minCoeff() : lanes.maxCoeff();
  T check = checks.sum();
  for (; i < n; ++i) {
    m = (kMin ? values[i] < m : values[i] > m) ? values[i] : m;
    check += values[i] - values[i];
  }
  nan = check != check;
  return m;
}

template <bool kMin, bool kSkipNan = false>
struct ExtremumKernel {
  template <class T> using state_for = Extremum<T>;
  static constexpr numpy_extremum::Op kOp =
      kSkipNan ? (kMin ? numpy_extremum::Op::fmin : numpy_extremum::Op::fmax)
               : (kMin ? numpy_extremum::Op::minimum : numpy_extremum::Op::maximum);

  /// `first`: the memory-order index of x[0]; blocks start at multiples of kBlockElements,
  /// as numpy's buffers do, which is what makes a zero's sign numpy's.
  template <class T>
  void partial(Extremum<T>& s, const ConstArrayMap<T>& x, std::int64_t first) const {
    if (x.size() == 0) return;
    T m;
    if constexpr (std::is_same_v<T, bool>) {
      // As bytes: any nonzero byte is True to numpy (a C++ bool must be 0 or 1).
      const auto bytes = Eigen::Map<const Eigen::Array<std::uint8_t, Eigen::Dynamic, 1>>(
          reinterpret_cast<const std::uint8_t*>(x.data()), x.size());
      m = kMin ? (bytes != 0).all() : (bytes != 0).any();
    } else if constexpr ((std::is_same_v<T, float> || std::is_same_v<T, double>) && !kSkipNan) {
      // Eigen's NaN-propagating minCoeff does not vectorise (6 instructions an element for
      // float64): the lanes find the extreme, Eigen's loop the NaN where there may be one.
      bool nan = false;
      m = extreme_without_nan<kMin>(x.data(), x.size(), nan);
      if (nan) m = kMin ? x.template minCoeff<Eigen::PropagateNaN>() : x.template maxCoeff<Eigen::PropagateNaN>();
    } else if constexpr (is_floating_v<T>) {
      if constexpr (kSkipNan)  // NaN only when every value is NaN
        m = kMin ? x.template minCoeff<Eigen::PropagateNumbers>() : x.template maxCoeff<Eigen::PropagateNumbers>();
      else
        m = kMin ? x.template minCoeff<Eigen::PropagateNaN>() : x.template maxCoeff<Eigen::PropagateNaN>();
    } else {
      m = kMin ? x.minCoeff() : x.maxCoeff();
    }
    s.value = s.seen ? pick<kMin, kSkipNan>(s.value, m) : m;
    s.seen = true;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Only a block whose extreme is a zero can decide the sign of a zero result; any
      // other block leaves the running result's class as it is.
      if (m == T(0)) {
        numpy_extremum::ZeroMap block;
        if (first == 0) block.to.fill(numpy_extremum::first_block_class(kOp, x.data(), x.size()));
        else block = numpy_extremum::block_map(kOp, x.data(), x.size());
        s.zeros = s.zeros.then(block);
      }
    }
  }
  template <class T>
  void merge(Extremum<T>& left, Extremum<T>&& right) const {
    left.zeros = left.zeros.then(right.zeros);
    if (!right.seen) return;
    left.value = left.seen ? pick<kMin, kSkipNan>(left.value, right.value) : right.value;
    left.seen = true;
  }
  template <class T>
  Scalar result(const Extremum<T>& s) const {
    if (!s.seen)
      throw std::domain_error(std::string("zero-size array to reduction operation ") +
                              (kSkipNan ? (kMin ? "fmin" : "fmax") : (kMin ? "minimum" : "maximum")) +
                              " which has no identity");
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (s.value == T(0)) {
        const auto zero = s.zeros.to[numpy_extremum::kNotZero];
        if (zero != numpy_extremum::kNotZero) return Scalar::of(zero == numpy_extremum::kNegativeZero ? -T(0) : T(0));
      }
    }
    return Scalar::of(s.value);
  }
};

}  // namespace ooc::kernels::detail
