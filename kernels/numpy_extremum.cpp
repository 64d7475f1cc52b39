#include "ooc/internal/numpy_extremum.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

namespace ooc::kernels::numpy_extremum {

namespace {

/// A feature numpy was told to leave alone (numpy reads the same variable at import and
/// turns off exactly the features it names).
bool disabled_for_numpy(const std::string& feature) {
  const char* list = std::getenv("NPY_DISABLE_CPU_FEATURES");
  if (list == nullptr) return false;
  std::string text(list);
  std::replace(text.begin(), text.end(), ',', ' ');
  std::replace(text.begin(), text.end(), '\t', ' ');
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::toupper(c); });
    if (word == feature) return true;
  }
  return false;
}

int detect_simd_bytes() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool skx = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("avx512vl");
  if (skx && !disabled_for_numpy("AVX512_SKX")) return 64;
  if (__builtin_cpu_supports("avx2") && !disabled_for_numpy("AVX2")) return 32;
#endif
  return 16;
}

bool is_max(Op op) { return op == Op::maximum || op == Op::fmax; }
bool skips_nan(Op op) { return op == Op::fmin || op == Op::fmax; }

/// x86 maxpd/minpd: the first operand if it is strictly greater (smaller), else the second
/// (on a tie, and when either is NaN).
template <class T>
T x86_pick(bool max, T a, T b) {
  return (max ? a > b : a < b) ? a : b;
}

/// numpy's lane operation: npyv_maxn (a NaN first operand wins) or npyv_maxp (a NaN second
/// operand loses), around x86_pick.
template <class T>
T lane_op(Op op, T a, T b) {
  if (skips_nan(op)) return std::isnan(b) ? a : x86_pick(is_max(op), a, b);
  return std::isnan(a) ? a : x86_pick(is_max(op), a, b);
}

/// numpy's one-element step of the tail: scalar_max_d (SSE, as the lanes) for
/// maximum/minimum, C's fmax/fmin (NaN skipped, the first kept on a tie) for the others.
template <class T>
T tail_op(Op op, T a, T b) {
  if (!skips_nan(op)) return lane_op(op, a, b);
  if (std::isnan(b)) return a;
  if (std::isnan(a)) return b;
  return (is_max(op) ? b > a : b < a) ? b : a;
}

/// The lanes reduced to one value: GCC's _mm512_reduce_max/min (halves compared as
/// (high, low) twice, then the remaining 128 bits by shuffles) for 512-bit vectors,
/// numpy's own (low, high) halving for 256 and 128 bits. NaN rules as npyv_reduce_maxn /
/// npyv_reduce_maxp.
template <class T>
T reduce_lanes(Op op, T* lanes, int n) {
  const bool max = is_max(op);
  if (!skips_nan(op)) {
    for (int j = 0; j < n; ++j)
      if (std::isnan(lanes[j])) return std::numeric_limits<T>::quiet_NaN();
  } else {
    bool any = false;
    for (int j = 0; j < n; ++j) any = any || !std::isnan(lanes[j]);
    if (!any) return lanes[0];
    const T fill = max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    for (int j = 0; j < n; ++j)
      if (std::isnan(lanes[j])) lanes[j] = fill;
  }
  if (n * static_cast<int>(sizeof(T)) == 64) {
    for (int round = 0; round < 2; ++round) {
      n /= 2;
      for (int j = 0; j < n; ++j) lanes[j] = x86_pick(max, lanes[n + j], lanes[j]);
    }
    while (n > 1) {  // op(v, v rotated by half), keeping the low half
      const int half = n / 2;
      T rotated[16];
      for (int j = 0; j < n; ++j) rotated[j] = lanes[(j + half) % n];
      for (int j = 0; j < half; ++j) lanes[j] = x86_pick(max, lanes[j], rotated[j]);
      n = half;
    }
    return lanes[0];
  }
  while (n > 1) {
    n /= 2;
    for (int j = 0; j < n; ++j) lanes[j] = x86_pick(max, lanes[j], lanes[n + j]);
  }
  return lanes[0];
}

/// One call of numpy's simd_reduce_c loop on a block whose extreme is a zero (no element
/// beats 0; NaN only where NaN is skipped): the result after `values` with `running` as the
/// result before them. Every compare keeps its later operand on a tie and the zeros are
/// the only candidates, so each lane ends with the last zero it saw (numpy's 8-vector tree
/// and the per-vector steps alike), or with `running` if it saw none: a scan from the end
/// finds that, usually within a few vectors. The lane tree and the tail are then numpy's.
template <class T>
T numpy_loop(Op op, T running, const T* values, std::int64_t n) {
  if (n < 1) return running;
  const int lanes = simd_bytes() / static_cast<int>(sizeof(T));
  const std::int64_t vector_end = n / lanes * lanes;
  T acc[16];
  std::fill(acc, acc + lanes, running);
  bool seen[16] = {};
  int missing = lanes;
  for (std::int64_t i = vector_end - 1; i >= 0 && missing > 0; --i) {
    const int lane = static_cast<int>(i % lanes);
    if (!seen[lane] && values[i] == T(0)) {
      acc[lane] = values[i];
      seen[lane] = true;
      --missing;
    }
  }
  T r = reduce_lanes(op, acc, lanes);
  for (std::int64_t i = vector_end; i < n; ++i) r = tail_op(op, r, values[i]);
  return r;
}

template <class T>
ZeroClass class_of(T value) {
  if (value != T(0)) return kNotZero;  // NaN included
  return std::signbit(value) ? kNegativeZero : kPositiveZero;
}

}  // namespace

int simd_bytes() {
  static const int bytes = detect_simd_bytes();
  return bytes;
}

template <class T>
ZeroMap block_map(Op op, const T* values, std::int64_t n) {
  const T not_zero = is_max(op) ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  const T entering[3] = {not_zero, T(0), -T(0)};
  ZeroMap map;
  for (int c = 0; c < 3; ++c) map.to[c] = class_of(numpy_loop(op, entering[c], values, n));
  return map;
}

template <class T>
ZeroClass first_block_class(Op op, const T* values, std::int64_t n) {
  // Element 0 is the running result; in a block whose extreme is a zero, one that is not
  // a zero is beaten by every zero, as the identity is.
  return block_map(op, values + 1, n - 1).to[class_of(values[0])];
}

template ZeroMap block_map<float>(Op, const float*, std::int64_t);
template ZeroMap block_map<double>(Op, const double*, std::int64_t);
template ZeroClass first_block_class<float>(Op, const float*, std::int64_t);
template ZeroClass first_block_class<double>(Op, const double*, std::int64_t);

}  // namespace ooc::kernels::numpy_extremum
