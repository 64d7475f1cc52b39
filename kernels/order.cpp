// Quantiles, percentiles and medians without sorting: a radix select over the values'
// ordered bit patterns (keys), read through the public streaming API (ooc::for_each_block),
// so selections, masks and every source read as any input does.
//
// Each value becomes an unsigned key of its width whose order is numpy's sort order (NaN
// last). A round reads the array once: a histogram round counts, per group of keys
// sharing a known prefix (one group per wanted rank and slice), the next D bits; a collect
// round gathers the keys of the groups, once they fit the memory budget, to sort them. The
// ranks of every q and of every slice (the columns of axis=0) share the rounds. A slice
// that fits a tile (a short axis: row medians) is selected inside its tile in one read.

#include "layer.hpp"
#include "core/mapped_array_access.hpp"
#include "order_keys.hpp"
#include "ooc/blocks.hpp"
#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/order.hpp"
#include "ooc/tile_plan.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace ooc {

QuantileMethod parse_quantile_method(std::string_view name) {
  if (name == "linear") return QuantileMethod::linear;
  if (name == "lower") return QuantileMethod::lower;
  if (name == "higher") return QuantileMethod::higher;
  if (name == "nearest") return QuantileMethod::nearest;
  if (name == "midpoint") return QuantileMethod::midpoint;
  // numpy's words for a name it does not know at all; ooc names the ones it has.
  throw Error(std::string(), "'" + std::string(name) +
                                 "' is not a valid method. Use one of: linear, lower, higher, nearest, midpoint",
              ErrorKind::value);
}

const char* quantile_method_name(QuantileMethod method) {
  switch (method) {
    case QuantileMethod::linear: return "linear";
    case QuantileMethod::lower: return "lower";
    case QuantileMethod::higher: return "higher";
    case QuantileMethod::nearest: return "nearest";
    case QuantileMethod::midpoint: return "midpoint";
  }
  return "linear";
}

namespace {

// Each tile's pages mapped by one MADV_POPULATE_READ on the kernel thread rather than a
// fault each: the selects read the array several times, and a fault costs most in a VM.
PipelineOptions populated(PipelineOptions options) {
  options.populate = true;
  return options;
}

bool interpolates(const QuantileSpec& spec) {
  return !spec.median && (spec.method == QuantileMethod::linear || spec.method == QuantileMethod::midpoint);
}

}  // namespace

DType quantile_dtype(DType input, const QuantileSpec& spec) {
  const DType native = input.native();
  if (spec.median) return native.kind() == Kind::floating ? native : dtype_of<double>;
  if (interpolates(spec)) {
    if (native.kind() == Kind::boolean)
      throw UsageError("numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, the `^` "
                       "operator, or the logical_xor function instead.");
    return dtype_of<double>;
  }
  return native;
}

namespace {

using namespace order_keys;


// ---- what each slice's values give ---------------------------------------------------


template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, half>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}

// numpy's subtract(b, a) in T: integers wrap, float16 rounds as numpy's does.
template <class T>
T difference(T b, T a) {
  if constexpr (std::is_same_v<T, half>) return half(static_cast<float>(b) - static_cast<float>(a));
  else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(b) - static_cast<U>(a)));
  } else return b - a;
}

// numpy 1.24's _lerp(a, b, t) as its ufuncs compute it, in float64.
template <class T>
double lerp(T a, T b, double t) {
  const double diff = as_double(difference(b, a));
  if (t >= 0.5) return as_double(b) - diff * (1 - t);
  return as_double(a) + diff * t;
}

// Where q falls in n sorted values: the ranks read and the weight between them.
struct Position {
  std::int64_t previous = 0, next = 0;
  double gamma = 0;
};

Position position(std::int64_t n, double q, QuantileMethod method) {
  const double index = static_cast<double>(n - 1) * q;  // numpy's (n - 1) * quantiles
  Position p;
  switch (method) {
    case QuantileMethod::lower: p.previous = p.next = static_cast<std::int64_t>(std::floor(index)); return p;
    case QuantileMethod::higher: p.previous = p.next = static_cast<std::int64_t>(std::ceil(index)); return p;
    case QuantileMethod::nearest: p.previous = p.next = static_cast<std::int64_t>(std::nearbyint(index)); return p;
    case QuantileMethod::linear:
    case QuantileMethod::midpoint: break;
  }
  const double virtual_index =
      method == QuantileMethod::midpoint ? 0.5 * (std::floor(index) + std::ceil(index)) : index;
  // numpy's _get_indexes: at or past the last value both neighbours are the last, and
  // linear's gamma is then taken from the index -1 that numpy stores there.
  const bool past_end = virtual_index >= static_cast<double>(n - 1);
  const double floor_index = past_end ? -1.0 : std::floor(virtual_index);
  p.previous = past_end ? n - 1 : static_cast<std::int64_t>(floor_index);
  p.next = past_end ? n - 1 : p.previous + 1;
  if (method == QuantileMethod::midpoint) p.gamma = std::fmod(virtual_index, 1.0) == 0 ? 0.0 : 0.5;
  else p.gamma = virtual_index - floor_index;
  return p;
}

// The ranks a slice of n values (NaNs left out, in the nan forms) needs.
void needed_ranks(std::int64_t n, const QuantileSpec& spec, std::vector<std::int64_t>& ranks) {
  ranks.clear();
  if (n == 0) return;
  if (spec.median) {
    ranks.push_back((n - 1) / 2);
    ranks.push_back(n / 2);
  } else {
    for (double q : spec.q) {
      const Position p = position(n, q, spec.method);
      ranks.push_back(p.previous);
      ranks.push_back(p.next);
    }
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
}

// How the slices' results are finished, where the result goes.
struct Finish {
  const QuantileSpec& spec;
  Kind kind;
  DType out_dtype;
  std::int64_t slices;      // values per q in the result
  std::byte* out;           // (q count or 1) x slices values of out_dtype, C order
  bool masked_median;       // nanmedian along an axis shorter than 600: numpy's np.ma.median
  std::atomic<std::int64_t>* all_nan;
  std::atomic<std::int64_t>* empty;
  std::atomic<bool>* first_all_nan;  // the slice at C index 0 had only NaNs
  std::atomic<bool>* nan_propagated;  // a plain form's slice held a NaN

  template <class R>
  void put(std::size_t q_index, std::int64_t c_index, R value) const {
    std::memcpy(out + (static_cast<std::int64_t>(q_index) * slices + c_index) * static_cast<std::int64_t>(sizeof(R)),
                &value, sizeof(R));
  }

  template <class R>
  static R nan_of() {
    if constexpr (std::is_same_v<R, half>) return half(std::numeric_limits<float>::quiet_NaN());
    else if constexpr (std::is_floating_point_v<R>) return std::numeric_limits<R>::quiet_NaN();
    else return R{};
  }

  // np.mean of the middle value(s) a, b (a == b for an odd count), in numpy's types.
  template <class T>
  auto median_of(T a, T b) const {
    if constexpr (std::is_same_v<T, half>) {
      if (masked_median) return half(static_cast<float>(half(static_cast<float>(a) + static_cast<float>(b))) / 2.0f);
      return half((static_cast<float>(a) + static_cast<float>(b)) / 2.0f);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(static_cast<T>(a + b) / T(2));
    } else {
      return (static_cast<double>(a) + static_cast<double>(b)) / 2.0;
    }
  }

  // The results of slice c_index (C order in the reduced shape), from its value count,
  // its NaN count and key_at(rank) for the ranks needed_ranks gave.
  template <class T, class KeyAt>
  void slice(std::int64_t c_index, std::int64_t count, std::int64_t nans, KeyAt&& key_at) const {
    const std::int64_t n = spec.skip_nan ? count - nans : count;
    const bool nan_result = n == 0 || (!spec.skip_nan && nans > 0);
    if (!spec.skip_nan && nans > 0) *nan_propagated = true;
    if (n == 0) {
      if (count > 0) all_nan->fetch_add(1, std::memory_order_relaxed);
      else empty->fetch_add(1, std::memory_order_relaxed);
      if (c_index == 0 && count > 0) *first_all_nan = true;
    }
    auto value = [&](std::int64_t rank) { return value_of_key<T>(static_cast<Bits<T>>(key_at(rank)), kind); };
    if (spec.median) {
      using R = decltype(median_of(T{}, T{}));
      if (nan_result) return put(0, c_index, nan_of<R>());
      const T a = value((n - 1) / 2);
      const T b = n % 2 == 1 ? a : value(n / 2);
      // An odd count is the mean of one value (np.median), or np.ma.median's (a + a) / 2.
      if (n % 2 == 1 && !masked_median) {
        if constexpr (std::is_floating_point_v<R> || std::is_same_v<R, half>) return put(0, c_index, static_cast<R>(a));
        else return put(0, c_index, static_cast<double>(a));
      }
      return put(0, c_index, median_of(a, b));
    }
    for (std::size_t j = 0; j < spec.q.size(); ++j) {
      if (interpolates(spec)) {
        if (nan_result) {
          put(j, c_index, std::numeric_limits<double>::quiet_NaN());
          continue;
        }
        if constexpr (!std::is_same_v<T, bool>) {
          const Position p = position(n, spec.q[j], spec.method);
          put(j, c_index, lerp(value(p.previous), value(p.next), p.gamma));
        }
      } else {
        if (nan_result) {
          put(j, c_index, nan_of<T>());
          continue;
        }
        put(j, c_index, value(position(n, spec.q[j], spec.method).previous));
      }
    }
  }
};

// ---- the rounds of the radix select --------------------------------------------------

template <class U>
struct Target {
  std::int64_t slice, rank;  // the rank-th smallest key of the slice (NaNs last)
  U prefix = 0;              // its top `known` bits
  int known = 0;
  std::int64_t rank_in = 0;  // its rank among the keys with that prefix
  std::int64_t count = 0;    // keys of the slice with that prefix
  U key = 0;
  bool done = false;
};

template <class U>
struct Group {
  std::int64_t slice;
  U prefix;
  std::int64_t count;
  bool operator<(const Group& o) const { return slice != o.slice ? slice < o.slice : prefix < o.prefix; }
};

// A guess, from a sample of the array, at the keys around some wanted ranks: the first
// round also counts the keys below `lo` and keeps those in [lo, hi]; a rank that falls among
// the kept ones is then found without another read of the array.
template <class U>
struct Window {
  U lo, hi;
  std::int64_t expected = 0;  // keys the sample says it holds
  std::int64_t below = 0;
  std::vector<U> keys;
};

constexpr std::size_t kMaxWindows = 8;

constexpr int kBits(int bytes) { return 8 * bytes; }

template <class U>
class Select {
 public:
  static constexpr int W = kBits(sizeof(U));

  Select(const MappedArray& in, const Geometry& g, const PipelineOptions& options, std::uint64_t budget)
      : in_(in), g_(g), options_(options), budget_(budget),
        threads_(static_cast<std::int64_t>(detail::resolve_threads(options.threads))),
        read_{in.dtype().kind(), !in.dtype().is_native()},
        plan_(TilePlan::for_array(in, options.tile_bytes)) {}

  int passes() const { return passes_; }

  // Finds, for every slice, its NaN count and the keys at the ranks `ranks_for(slice,
  // count, nans, ranks)` names; then calls done(slice, nans, key_at).
  template <class RanksFor, class Done>
  void run(RanksFor&& ranks_for, Done&& done) {
    const std::int64_t slices = g_.slices();
    nans_.assign(static_cast<std::size_t>(slices), 0);
    // Round 0: one group per slice, every key in it.
    std::vector<Group<U>> groups;
    groups.reserve(static_cast<std::size_t>(slices));
    for (std::int64_t s = 0; s < slices; ++s) groups.push_back({s, 0, g_.length});
    std::vector<Target<U>> targets;
    std::vector<std::int64_t> ranks;
    auto make_targets = [&] {
      for (std::int64_t s = 0; s < slices; ++s) {
        ranks_for(s, g_.length, nans_[static_cast<std::size_t>(s)], ranks);
        for (std::int64_t r : ranks) targets.push_back({s, r, 0, 0, r, g_.length});
      }
    };
    // With guessed windows, a first round of its own, which may find every rank.
    std::vector<Window<U>> windows = guess_windows(ranks_for);
    const bool counted = !windows.empty();  // the NaNs counted and the targets made
    if (counted) {
      window_round(windows);
      make_targets();
      settle(targets, windows);
    }
    int known = 0;
    for (bool first = true;; first = false) {
      if (counted && std::all_of(targets.begin(), targets.end(), [](const auto& t) { return t.done; })) break;
      std::uint64_t keys = 0;
      for (const auto& group : groups) keys += static_cast<std::uint64_t>(group.count);
      if (keys * sizeof(U) <= budget_ || known == W) {
        auto collected = collect(groups, known, first, first && !counted);
        if (first && !counted) make_targets();
        for (auto& t : targets) {
          if (t.done) continue;
          const std::size_t at = find_group(groups, t.slice, t.prefix);
          t.key = collected[at][static_cast<std::size_t>(t.rank_in)];
          t.done = true;
        }
        break;
      }
      const int step = digits(groups.size(), known);
      const auto counts = histogram(groups, known, step, first, first && !counted);
      if (first && !counted) make_targets();
      const std::size_t buckets = std::size_t{1} << step;
      for (auto& t : targets) {
        if (t.done) continue;
        const std::size_t at = find_group(groups, t.slice, t.prefix);
        const std::uint64_t* h = counts.data() + at * buckets;
        std::int64_t below = 0;
        std::size_t bucket = 0;
        while (below + static_cast<std::int64_t>(h[bucket]) <= t.rank_in) below += static_cast<std::int64_t>(h[bucket++]);
        t.prefix = static_cast<U>(known == 0 ? bucket : (static_cast<std::uint64_t>(t.prefix) << step) | bucket);
        t.known = known + step;
        t.rank_in -= below;
        t.count = static_cast<std::int64_t>(h[bucket]);
        if (t.known == W) {
          t.key = t.prefix;
          t.done = true;
        }
      }
      known += step;
      groups.clear();
      for (const auto& t : targets)
        if (!t.done) groups.push_back({t.slice, t.prefix, t.count});
      std::sort(groups.begin(), groups.end());
      groups.erase(std::unique(groups.begin(), groups.end(),
                               [](const auto& a, const auto& b) { return a.slice == b.slice && a.prefix == b.prefix; }),
                   groups.end());
      if (groups.empty()) break;
    }
    // The targets are in slice order, each slice's ranks ascending.
    std::size_t t = 0;
    for (std::int64_t s = 0; s < slices; ++s) {
      const std::size_t first = t;
      while (t < targets.size() && targets[t].slice == s) ++t;
      const std::size_t last = t;
      done(s, nans_[static_cast<std::size_t>(s)], [&](std::int64_t rank) {
        for (std::size_t i = first; i < last; ++i)
          if (targets[i].rank == rank) return targets[i].key;
        throw std::logic_error("order: a rank was not selected");
      });
    }
  }

 private:
  // Windows around the ranks of a single slice, from 131,072 keys read 16 at a time from
  // 8,192 places spread over a mapped array: each window spans its rank's sample position
  // +- 5 standard deviations of a sample quantile (and 8 keys), so that a rank falls
  // outside only on data whose stretches differ wildly, which then costs the usual rounds.
  // None where the array is small, not mapped (a selection, a chunked source), where the
  // windows would keep more than a quarter of the memory budget, or for keys of 16 bits or
  // fewer (the first histogram is exact).
  template <class RanksFor>
  std::vector<Window<U>> guess_windows(RanksFor&& ranks_for) const {
    std::vector<Window<U>> windows;
    constexpr std::int64_t kPages = 8192, kPerPage = 16;
    const std::int64_t n = g_.length;
    if (W <= 16 || g_.slices() != 1 || !in_.mapped() || in_.bytes().size() < in_.nbytes() ||
        static_cast<std::uint64_t>(n) * sizeof(U) <= budget_ || n < 4 * kPages * kPerPage)
      return windows;
    // The sample positions a rank's window spans: +-5 standard deviations of a sample
    // quantile, and 8. Checked against the budget before any read (without NaNs, and
    // without the sample's repeated values, which can only widen the windows).
    const std::int64_t size = kPages * kPerPage;
    auto span = [&](std::int64_t rank) {
      const double f = static_cast<double>(rank) / static_cast<double>(n);
      const auto at = static_cast<std::int64_t>(f * static_cast<double>(size));
      const auto margin = static_cast<std::int64_t>(5 * std::sqrt(static_cast<double>(size) * f * (1 - f))) + 8;
      return std::pair{std::max<std::int64_t>(0, at - margin), std::min(size - 1, at + margin)};
    };
    auto too_large = [&](std::int64_t kept) {
      return static_cast<double>(kept) / static_cast<double>(size) * static_cast<double>(n) * sizeof(U) > budget_ / 4;
    };
    std::vector<std::int64_t> ranks;
    ranks_for(0, n, 0, ranks);
    std::int64_t kept = 0, kept_to = -1;  // sample positions the windows span, and the last one
    for (std::int64_t rank : ranks) {
      const auto [from, to] = span(rank);
      kept += std::max<std::int64_t>(0, to - std::max(from, kept_to + 1) + 1);
      kept_to = std::max(kept_to, to);
    }
    if (too_large(kept)) return windows;
    // Read with pread, not through the mapping: a page fault costs ~50 us in a VM, 4,096
    // of them 0.2 s, a read a few us.
    std::vector<U> sample;
    sample.reserve(kPages * kPerPage);
    const int fd = detail::MappedArrayAccess::fd(in_);
    const std::byte* mapped = in_.bytes().data();
    std::array<std::byte, kPerPage * sizeof(U)> buffer;
    read_.visit([&](const auto& read) {
      for (std::int64_t page = 0; page < kPages; ++page) {
        const std::int64_t first = page * (n / kPages), count = kPerPage;
        const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(U);
        const std::byte* from = mapped + first * static_cast<std::int64_t>(sizeof(U));
        if (fd >= 0 && ::pread(fd, buffer.data(), bytes,
                               static_cast<off_t>(in_.info().data_offset + static_cast<std::uint64_t>(first) * sizeof(U))) ==
                           static_cast<ssize_t>(bytes))
          from = buffer.data();
        for (std::int64_t j = 0; j < count; ++j) sample.push_back(read(from, j));
      }
    });
    std::sort(sample.begin(), sample.end());
    const auto sample_nans = std::count_if(sample.begin(), sample.end(), [&](U key) { return is_nan_key(key, read_.kind); });
    ranks_for(0, n, static_cast<std::int64_t>(static_cast<double>(sample_nans) / static_cast<double>(size) * static_cast<double>(n)), ranks);
    kept = 0, kept_to = -1;
    for (std::int64_t rank : ranks) {
      auto [from, to] = span(rank);
      const U lo = from == 0 ? U(0) : sample[static_cast<std::size_t>(from)];
      const U hi = to == size - 1 ? std::numeric_limits<U>::max() : sample[static_cast<std::size_t>(to)];
      // The window holds every key equal to its ends: the sample's too, for its size.
      from = std::lower_bound(sample.begin(), sample.end(), lo) - sample.begin();
      to = std::upper_bound(sample.begin(), sample.end(), hi) - sample.begin() - 1;
      if (!windows.empty() && lo <= windows.back().hi) windows.back().hi = std::max(windows.back().hi, hi);
      else windows.push_back({lo, hi, 0, 0, {}});
      const std::int64_t spanned = std::max<std::int64_t>(0, to - std::max(from, kept_to + 1) + 1);
      windows.back().expected += static_cast<std::int64_t>(static_cast<double>(spanned) / static_cast<double>(size) * static_cast<double>(n));
      kept += spanned;
      kept_to = std::max(kept_to, to);
    }
    if (too_large(kept) || windows.size() > kMaxWindows) windows.clear();
    return windows;
  }

  // Finds the targets whose ranks fell among a window's keys.
  static void settle(std::vector<Target<U>>& targets, std::vector<Window<U>>& windows) {
    for (auto& t : targets)
      for (Window<U>& w : windows)
        if (!t.done && t.rank >= w.below && t.rank - w.below < static_cast<std::int64_t>(w.keys.size())) {
          const auto nth = w.keys.begin() + (t.rank - w.below);
          std::nth_element(w.keys.begin(), nth, w.keys.end());
          t.key = *nth;
          t.done = true;
        }
    windows.clear();
  }

  // Bits a histogram round takes: up to 16, fewer where many groups would make the
  // counts of one thread larger than 16 MiB.
  static int digits(std::size_t groups, int known) {
    int step = std::min(16, W - known);
    while (step > 1 && (groups << step) * sizeof(std::uint64_t) > (std::size_t{16} << 20)) --step;
    return step;
  }

  static std::size_t find_group(const std::vector<Group<U>>& groups, std::int64_t slice, U prefix) {
    const Group<U> probe{slice, prefix, 0};
    return static_cast<std::size_t>(std::lower_bound(groups.begin(), groups.end(), probe) - groups.begin());
  }

  // Calls each(group index, key) for every key of the tile that falls in a group.
  template <class Each>
  void scan(const Block& block, const std::vector<Group<U>>& groups, int known, bool first, Each&& each) const {
    const std::byte* bytes = block.inputs[0];
    const std::int64_t n = block.tile.size();
    read_.visit([&](const auto& read) {
      if (g_.slices() == 1) {
        if (first) {
          for (std::int64_t j = 0; j < n; ++j) each(0, read(bytes, j));
          return;
        }
        if (!group_of_prefix_.empty()) {  // a prefix of at most 16 bits: its group by lookup
          const std::int32_t* group_of = group_of_prefix_.data();
          for (std::int64_t j = 0; j < n; ++j) {
            const U key = read(bytes, j);
            const std::int32_t k = group_of[static_cast<std::size_t>(key >> (W - known))];
            if (k >= 0) each(static_cast<std::size_t>(k), key);
          }
          return;
        }
        for (std::int64_t j = 0; j < n; ++j) {
          const U key = read(bytes, j);
          const U prefix = static_cast<U>(key >> (W - known));
          const std::size_t k = find_group(groups, 0, prefix);
          if (k < groups.size() && groups[k].prefix == prefix) each(k, key);
        }
        return;
      }
      SliceWalk walk(g_, block.tile.begin);
      for (std::int64_t j = 0; j < n; ++j, walk.next()) {
        const U key = read(bytes, j);
        const std::int64_t slice = walk.slice();
        if (first) {
          each(static_cast<std::size_t>(slice), key);
          continue;
        }
        const U prefix = static_cast<U>(key >> (W - known));
        const std::size_t k = find_group(groups, slice, prefix);
        if (k < groups.size() && groups[k].slice == slice && groups[k].prefix == prefix) each(k, key);
      }
    });
  }

  // Before a round over every element's key (one slice), a table from each prefix of
  // `known` <= 16 bits to its group (-1: none), so a key finds its group in one load.
  void index_prefixes(const std::vector<Group<U>>& groups, int known) {
    group_of_prefix_.clear();
    if (g_.slices() != 1 || known == 0 || known > 16) return;
    group_of_prefix_.assign(std::size_t{1} << known, -1);
    for (std::size_t k = 0; k < groups.size(); ++k)
      group_of_prefix_[static_cast<std::size_t>(groups[k].prefix)] = static_cast<std::int32_t>(k);
  }

  template <class Local, class Fill>
  void stream(tbb::enumerable_thread_specific<Local>& locals, Fill&& fill) {
    const MappedArray* inputs[] = {&in_};
    for_each_block(std::span<const MappedArray* const>(inputs), nullptr, plan_, options_,
                   [&](const Block& block) {
                     fill(locals.local(), block);
                     return char{};
                   },
                   [](const Tile&, char) {});
    ++passes_;
  }

  std::vector<std::uint64_t> histogram(const std::vector<Group<U>>& groups, int known, int step, bool first,
                                       bool count_nans) {
    index_prefixes(groups, known);
    struct Local {
      std::vector<std::uint64_t> counts;
      std::vector<std::int64_t> nans;
    };
    const std::size_t size = groups.size() << step;
    const Kind kind = read_.kind;
    tbb::enumerable_thread_specific<Local> locals([&] {
      return Local{std::vector<std::uint64_t>(size), std::vector<std::int64_t>(count_nans ? nans_.size() : 0)};
    });
    const int shift = W - known - step;
    const U mask = static_cast<U>((std::uint64_t{1} << step) - 1);
    stream(locals, [&](Local& local, const Block& block) {
      std::uint64_t* counts = local.counts.data();
      std::int64_t* nans = local.nans.data();
      scan(block, groups, known, first, [&](std::size_t k, U key) {
        ++counts[(k << step) + static_cast<std::size_t>((key >> shift) & mask)];
        if (count_nans && is_nan_key(key, kind)) ++nans[k];
      });
    });
    std::vector<std::uint64_t> counts(size);
    for (const Local& local : locals) {
      for (std::size_t i = 0; i < size; ++i) counts[i] += local.counts[i];
      for (std::size_t i = 0; i < local.nans.size(); ++i) nans_[i] += local.nans[i];
    }
    return counts;
  }

  // The round of the guessed windows (a single slice): the NaNs, and per window the keys
  // under it and those in it.
  void window_round(std::vector<Window<U>>& windows) {
    struct Local {
      std::int64_t nans = 0;
      std::vector<std::int64_t> below;
      std::vector<std::vector<U>> kept;
      std::vector<char> overflow;
    };
    const std::size_t count = windows.size();
    const Kind kind = read_.kind;
    tbb::enumerable_thread_specific<Local> locals([&] {
      return Local{0, std::vector<std::int64_t>(count), std::vector<std::vector<U>>(count), std::vector<char>(count)};
    });
    stream(locals, [&](Local& local, const Block& block) {
      const std::byte* bytes = block.inputs[0];
      const std::int64_t n = block.tile.size();
      const bool floating = kind == Kind::floating;
      // "In the window" is one unsigned comparison, true rarely: a branch on key < lo
      // would mispredict half the time.
      // A thread keeps at most twice the keys the sample promised it, so that values
      // repeated far more often than the sample saw cannot take the memory: past that the
      // window is given up (its ranks take the usual rounds).
      std::array<U, kMaxWindows> lo{}, width{};
      std::array<std::int64_t, kMaxWindows> below{};
      std::array<std::size_t, kMaxWindows> cap{};
      for (std::size_t w = 0; w < count; ++w) {
        lo[w] = windows[w].lo;
        width[w] = U(windows[w].hi - windows[w].lo);
        cap[w] = static_cast<std::size_t>(2 * windows[w].expected / threads_ + 4096);
        if (local.kept[w].capacity() == 0) local.kept[w].reserve(cap[w] / 2);
      }
      std::int64_t nans = 0;
      // A few hundred keys at a time into a buffer, then each window's count over them
      // in registers: counting into below[w] per key carried every key through a store
      // and a load of the same address (a median's read took 2x its sum's).
      constexpr std::int64_t kChunk = 512;
      std::array<U, kChunk> keys;
      read_.visit([&](const auto& read) {
        for (std::int64_t start = 0; start < n; start += kChunk) {
          const std::int64_t m = std::min(kChunk, n - start);
          if (start + 2 * kChunk <= n) {
            constexpr std::int64_t line = 64 / sizeof(U);
            for (std::int64_t j = 0; j < kChunk; j += line) {
              __builtin_prefetch(bytes + (start + kChunk + j) * static_cast<std::int64_t>(sizeof(U)));
              for (std::int64_t i = j; i < j + line; ++i) keys[i] = read(bytes, start + i);
            }
          } else {
            for (std::int64_t j = 0; j < m; ++j) keys[j] = read(bytes, start + j);
          }
          if (floating)
            for (std::int64_t j = 0; j < m; ++j) nans += keys[j] == std::numeric_limits<U>::max();
          for (std::size_t w = 0; w < count; ++w) {
            const U low = lo[w], span = width[w];
            std::int64_t under = 0;
            bool inside = false;
            for (std::int64_t j = 0; j < m; ++j) {
              under += keys[j] < low;
              inside |= U(keys[j] - low) <= span;
            }
            below[w] += under;
            if (!inside) continue;
            for (std::int64_t j = 0; j < m; ++j) {
              if (U(keys[j] - low) > span) continue;
              if (local.kept[w].size() < cap[w]) local.kept[w].push_back(keys[j]);
              else local.overflow[w] = true;
            }
          }
        }
      });
      local.nans += nans;
      for (std::size_t w = 0; w < count; ++w) local.below[w] += below[w];
    });
    std::vector<char> overflow(count);
    for (const Local& local : locals)
      for (std::size_t w = 0; w < count; ++w) overflow[w] |= local.overflow[w];
    for (Local& local : locals) {
      nans_[0] += local.nans;
      for (std::size_t w = 0; w < count; ++w) {
        if (overflow[w]) {
          std::vector<U>().swap(local.kept[w]);
          windows[w].below = -1;  // given up: no rank falls in it
          continue;
        }
        windows[w].below += local.below[w];
        windows[w].keys.insert(windows[w].keys.end(), local.kept[w].begin(), local.kept[w].end());
        std::vector<U>().swap(local.kept[w]);
      }
    }
  }

  std::vector<std::vector<U>> collect(const std::vector<Group<U>>& groups, int known, bool first, bool count_nans) {
    index_prefixes(groups, known);
    using Local = std::vector<std::vector<U>>;
    tbb::enumerable_thread_specific<Local> locals([&] { return Local(groups.size()); });
    stream(locals, [&](Local& local, const Block& block) {
      scan(block, groups, known, first, [&](std::size_t k, U key) { local[k].push_back(key); });
    });
    std::vector<std::vector<U>> keys(groups.size());
    for (std::size_t k = 0; k < groups.size(); ++k) {
      for (Local& local : locals) {
        keys[k].insert(keys[k].end(), local[k].begin(), local[k].end());
        std::vector<U>().swap(local[k]);
      }
      std::sort(keys[k].begin(), keys[k].end());
      if (count_nans)
        nans_[k] = std::count_if(keys[k].begin(), keys[k].end(), [&](U key) { return is_nan_key(key, read_.kind); });
    }
    return keys;
  }

  const MappedArray& in_;
  const Geometry& g_;
  const PipelineOptions& options_;
  std::uint64_t budget_;
  std::int64_t threads_;
  KeyReader<U> read_;
  TilePlan plan_;
  std::vector<std::int64_t> nans_;
  std::vector<std::int32_t> group_of_prefix_;
  int passes_ = 0;
};

// Slices that fit a tile (a short axis): each tile holds whole slabs of `length * inner`
// elements, and every slice of it is sorted and finished where it lies, in one read.
template <class T>
int select_in_tiles(const MappedArray& in, const Geometry& g, const PipelineOptions& options, const Finish& finish,
                    const std::vector<std::int64_t>& c_index) {
  using U = Bits<T>;
  const KeyReader<U> read{in.dtype().kind(), !in.dtype().is_native()};
  const std::int64_t slab = g.length * g.inner;
  const TilePlan plan = TilePlan::slabs(g.outer, slab, in.dtype().itemsize(), options.tile_bytes);
  const MappedArray* inputs[] = {&in};
  tbb::enumerable_thread_specific<std::vector<U>> buffers;
  for_each_block(std::span<const MappedArray* const>(inputs), nullptr, plan, options,
                 [&](const Block& block) {
                   std::vector<U>& keys = buffers.local();
                   keys.resize(static_cast<std::size_t>(g.length));
                   const std::int64_t first_slab = block.tile.begin / slab;
                   const std::int64_t slabs = block.tile.size() / slab;
                   for (std::int64_t o = 0; o < slabs; ++o) {
                     const std::byte* base = block.inputs[0] + o * slab * in.dtype().itemsize();
                     for (std::int64_t i = 0; i < g.inner; ++i) {
                       read.visit([&](const auto& key_at) {
                         for (std::int64_t l = 0; l < g.length; ++l) keys[static_cast<std::size_t>(l)] = key_at(base, l * g.inner + i);
                       });
                       std::sort(keys.begin(), keys.end());
                       const std::int64_t nans =
                           std::count_if(keys.begin(), keys.end(), [&](U k) { return is_nan_key(k, read.kind); });
                       const std::int64_t s = (first_slab + o) * g.inner + i;
                       finish.slice<T>(c_index[static_cast<std::size_t>(s)], g.length, nans,
                                       [&](std::int64_t rank) { return keys[static_cast<std::size_t>(rank)]; });
                     }
                   }
                   return char{};
                 },
                 [](const Tile&, char) {});
  return 1;
}

// The C-order index, in the reduced shape, of each slice numbered in memory order.
std::vector<std::int64_t> c_indices(const Shape& reduced, Order order, std::int64_t slices) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(slices));
  if (order == Order::c || reduced.size() < 2) {
    for (std::int64_t s = 0; s < slices; ++s) index[static_cast<std::size_t>(s)] = s;
    return index;
  }
  const Shape c_strides = element_strides(reduced, Order::c);
  for (std::int64_t s = 0; s < slices; ++s) {
    std::int64_t rest = s, c = 0;
    for (std::size_t d = 0; d < reduced.size(); ++d) {  // Fortran order: the first axis fastest
      c += (rest % reduced[d]) * c_strides[d];
      rest /= reduced[d];
    }
    index[static_cast<std::size_t>(s)] = c;
  }
  return index;
}

}  // namespace

QuantileResult quantile(const MappedArray& in, const QuantileSpec& spec, std::optional<int> axis,
                        const PipelineOptions& caller_options) {
  const PipelineOptions options = populated(caller_options);
  try {
    for (double q : spec.q)
      if (!(q >= 0.0 && q <= 1.0)) throw Error(std::string(), "Quantiles must be in the range [0, 1]", ErrorKind::value);
    if (!spec.median && spec.q.empty()) throw UsageError("no quantile asked for");
    QuantileResult result;
    result.dtype = quantile_dtype(in.dtype(), spec);
    const Shape& shape = in.shape();
    Geometry g;
    Shape reduced;
    if (!axis) {
      g.length = in.size();
    } else {
      const int ndim = in.ndim();
      const int k = *axis < 0 ? *axis + ndim : *axis;
      if (k < 0 || k >= ndim)
        throw Error(std::string(), "axis " + std::to_string(*axis) + " is out of bounds for array of dimension " +
                                       std::to_string(ndim), ErrorKind::value, "axis");
      reduced = shape;
      reduced.erase(reduced.begin() + k);
      // Memory order: C keeps the axes as they are, Fortran reverses them.
      const int m = in.order() == Order::c ? k : ndim - 1 - k;
      Shape dims = shape;
      if (in.order() == Order::fortran) std::reverse(dims.begin(), dims.end());
      g.length = dims[static_cast<std::size_t>(m)];
      for (int d = 0; d < m; ++d) g.outer *= dims[static_cast<std::size_t>(d)];
      for (int d = m + 1; d < ndim; ++d) g.inner *= dims[static_cast<std::size_t>(d)];
    }
    const std::int64_t slices = g.slices();
    if (!spec.median) result.shape.push_back(static_cast<std::int64_t>(spec.q.size()));
    result.shape.insert(result.shape.end(), reduced.begin(), reduced.end());
    const std::int64_t outputs = (spec.median ? 1 : static_cast<std::int64_t>(spec.q.size())) * slices;
    result.bytes.resize(static_cast<std::size_t>(outputs * result.dtype.itemsize()));
    if (slices == 0) return result;
    if (g.length == 0 && !spec.median && !spec.skip_nan) {
      const std::string numpy_text = interpolates(spec) ? "cannot do a non-empty take from an empty axes."
                                                        : "index -1 is out of bounds for axis 0 with size 0";
      throw IndexError(in.path(), "quantile of an empty axis: " + numpy_text, numpy_text);
    }
    std::atomic<std::int64_t> all_nan{0}, empty{0};
    std::atomic<bool> first_all_nan{false}, nan_propagated{false};
    const bool masked_median = spec.median && spec.skip_nan && axis && in.ndim() > 1 && g.length < 600;
    const Finish finish{spec, in.dtype().kind(), result.dtype, slices, result.bytes.data(), masked_median, &all_nan, &empty,
                        &first_all_nan, &nan_propagated};
    const std::vector<std::int64_t> c_index = c_indices(reduced, in.order(), slices);
    const std::uint64_t slab_bytes =
        static_cast<std::uint64_t>(g.length * g.inner) * static_cast<std::uint64_t>(in.dtype().itemsize());
    visit_dtype(in.dtype().native(), [&]<class T>(std::type_identity<T>) {
      if (g.length == 0) {
        for (std::int64_t s = 0; s < slices; ++s)
          finish.slice<T>(c_index[static_cast<std::size_t>(s)], 0, 0, [](std::int64_t) { return Bits<T>{}; });
        result.passes = 0;
      } else if (axis && slices > 1 && slab_bytes <= options.tile_bytes) {
        result.passes = select_in_tiles<T>(in, g, options, finish, c_index);
      } else {
        Select<Bits<T>> select(in, g, options, spec.memory_budget);
        select.run(
            [&](std::int64_t, std::int64_t count, std::int64_t nans, std::vector<std::int64_t>& ranks) {
              const std::int64_t n = spec.skip_nan ? count - nans : count;
              if (!spec.skip_nan && nans > 0) ranks.clear();  // NaN, whatever the ranks
              else needed_ranks(n, spec, ranks);
            },
            [&](std::int64_t s, std::int64_t nans, auto&& key_at) {
              finish.slice<T>(c_index[static_cast<std::size_t>(s)], g.length, nans, key_at);
            });
        result.passes = select.passes();
      }
    });
    result.all_nan_slices = all_nan;
    result.empty_slices = empty;
    if (interpolates(spec) && in.dtype().kind() == Kind::floating && outputs > 0) {
      // numpy's NaN results that keep the input's dtype: a 0-d quantile of values with NaN
      // (arr.dtype.type(np.nan)); a nan form's all-NaN slice, which np.full(..., dtype=arr.dtype)
      // gives, along one axis in the dtype of all (np.apply_along_axis takes the first
      // slice's result's).
      const bool zero_d = spec.scalar_q && reduced.empty();
      const bool one_d = !axis || in.ndim() == 1;
      const bool input_dtype = spec.skip_nan ? (one_d ? all_nan > 0 : bool(first_all_nan))
                                             : zero_d && bool(nan_propagated);
      if (input_dtype) {
        const DType native = in.dtype().native();
        std::vector<std::byte> values(static_cast<std::size_t>(outputs * native.itemsize()));
        convert(dtype_of<double>, result.bytes.data(), native, values.data(), outputs);
        result.bytes = std::move(values);
        result.dtype = native;
      }
    }
    return result;
  } catch (const Error&) {
    order_keys::rethrow_naming_array(in.path());
  }
}

namespace {

// ---- unique: counts per distinct key, a table per thread ------------------------------

struct TooManyDistinct : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Open addressing, linear probing: keys and counts side by side, grown at half full.
template <class U>
class CountTable {
 public:
  explicit CountTable(std::size_t limit) : limit_(limit) { resize(1024); }

  void add(U key, std::int64_t n) {
    std::size_t at = slot(key);
    while (used_[at] && keys_[at] != key) at = (at + 1) & mask_;
    if (!used_[at]) {
      if (++size_ > limit_) throw TooManyDistinct("too many distinct values");
      used_[at] = 1;
      keys_[at] = key;
      if (size_ * 2 > keys_.size()) {
        counts_[at] += n;
        resize(keys_.size() * 2);
        return;
      }
    }
    counts_[at] += n;
  }
  template <class F>
  void each(F&& f) const {
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (used_[i]) f(keys_[i], counts_[i]);
  }
  std::size_t size() const { return size_; }

 private:
  std::size_t slot(U key) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void resize(std::size_t capacity) {
    std::vector<U> keys(capacity);
    std::vector<std::int64_t> counts(capacity);
    std::vector<std::uint8_t> used(capacity);
    keys.swap(keys_);
    counts.swap(counts_);
    used.swap(used_);
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (used[i]) {
        std::size_t at = slot(keys[i]);
        while (used_[at]) at = (at + 1) & mask_;
        used_[at] = 1;
        keys_[at] = keys[i];
        counts_[at] = counts[i];
        ++size_;
      }
  }

  std::vector<U> keys_;
  std::vector<std::int64_t> counts_;
  std::vector<std::uint8_t> used_;
  std::size_t mask_ = 0, size_ = 0, limit_;
  int shift_ = 64;
};

template <class T>
UniqueResult unique_of(const MappedArray& in, std::uint64_t memory_budget, const PipelineOptions& options) {
  using U = Bits<T>;
  const KeyReader<U> read{in.dtype().kind(), !in.dtype().is_native()};
  const TilePlan plan = TilePlan::for_array(in, options.tile_bytes);
  const MappedArray* inputs[] = {&in};
  std::vector<std::pair<U, std::int64_t>> merged;
  if constexpr (sizeof(U) <= 2) {
    // Every key has its counter: a table of 256 or 65536 counts per thread.
    using Counts = std::vector<std::int64_t>;
    tbb::enumerable_thread_specific<Counts> locals([] { return Counts(std::size_t{1} << (8 * sizeof(U))); });
    for_each_block(std::span<const MappedArray* const>(inputs), nullptr, plan, options,
                   [&](const Block& block) {
                     std::int64_t* counts = locals.local().data();
                     read.visit([&](const auto& key_at) {
                       for (std::int64_t j = 0; j < block.tile.size(); ++j) ++counts[key_at(block.inputs[0], j)];
                     });
                     return char{};
                   },
                   [](const Tile&, char) {});
    Counts total(std::size_t{1} << (8 * sizeof(U)));
    for (const Counts& local : locals)
      for (std::size_t k = 0; k < total.size(); ++k) total[k] += local[k];
    for (std::size_t k = 0; k < total.size(); ++k)
      if (total[k] > 0) merged.emplace_back(static_cast<U>(k), total[k]);
  } else {
    // Each thread's table may hold this many keys; the merged table as many.
    const std::size_t entry = sizeof(U) + sizeof(std::int64_t) + 1;
    const std::size_t threads = static_cast<std::size_t>(std::max(1, options.threads > 0 ? options.threads
                                                                        : tbb::this_task_arena::max_concurrency()));
    const std::size_t limit = std::max<std::size_t>(1024, memory_budget / (entry * 4 * (threads + 1)));
    tbb::enumerable_thread_specific<CountTable<U>> locals([&] { return CountTable<U>(limit); });
    try {
      for_each_block(std::span<const MappedArray* const>(inputs), nullptr, plan, options,
                     [&](const Block& block) {
                       CountTable<U>& table = locals.local();
                       read.visit([&](const auto& key_at) {
                         for (std::int64_t j = 0; j < block.tile.size(); ++j) table.add(key_at(block.inputs[0], j), 1);
                       });
                       return char{};
                     },
                     [](const Tile&, char) {});
      CountTable<U> total(limit);
      for (const CountTable<U>& local : locals) local.each([&](U key, std::int64_t n) { total.add(key, n); });
      merged.reserve(total.size());
      total.each([&](U key, std::int64_t n) { merged.emplace_back(key, n); });
    } catch (const TooManyDistinct&) {
      throw Error(in.path(), "unique: more than " + std::to_string(limit) + " distinct values do not fit the memory budget of " +
                                 std::to_string(memory_budget) + " bytes (a sort-based unique is not built yet)",
                  ErrorKind::out_of_memory);
    }
    std::sort(merged.begin(), merged.end());
  }
  // -0.0 and 0.0 are neighbours in key order and one value to np.unique: the first stays.
  if (in.dtype().kind() == Kind::floating) {
    const U negative_zero = U(~kSign<U>), positive_zero = kSign<U>;
    for (std::size_t i = 0; i + 1 < merged.size(); ++i)
      if (merged[i].first == negative_zero && merged[i + 1].first == positive_zero) {
        merged[i].second += merged[i + 1].second;
        merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        break;
      }
  }
  UniqueResult result;
  result.dtype = in.dtype().native();
  result.values.resize(merged.size() * sizeof(T));
  result.counts.reserve(merged.size());
  for (std::size_t i = 0; i < merged.size(); ++i) {
    const T value = value_of_key<T>(merged[i].first, in.dtype().kind());
    std::memcpy(result.values.data() + i * sizeof(T), &value, sizeof(T));
    result.counts.push_back(merged[i].second);
  }
  result.passes = 1;
  return result;
}

}  // namespace

UniqueResult unique(const MappedArray& in, std::uint64_t memory_budget, const PipelineOptions& caller_options) {
  const PipelineOptions options = populated(caller_options);
  try {
    return visit_dtype(in.dtype().native(),
                       [&]<class T>(std::type_identity<T>) { return unique_of<T>(in, memory_budget, options); });
  } catch (const Error&) {
    order_keys::rethrow_naming_array(in.path());
  }
}

}  // namespace ooc
