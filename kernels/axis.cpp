// Reductions along one axis, streamed. numpy's order of operations, which the results
// must reproduce, depends on where the axis lies in memory:
//
// * the axis varies fastest (inner == 1): each output element reduces a contiguous run,
//   exactly as a full reduction of that run (blocks of kBlockElements from the run's
//   start): the full-reduction kernel is used per run;
// * otherwise numpy adds (multiplies, compares) whole rows into the output, one row after
//   another, so each output element is a left-to-right fold along the axis, rounded in
//   the output type at every step: a "fold" per element.
//
// Tiles are whole slabs (TilePlan::slabs) when a slab fits a tile: each is reduced on a
// kernel thread and written straight to its own part of the output. A larger slab
// arrives in pieces that are merged (runs) or folded (rows) on the commit stage, in order.

#include "ooc/kernels/axis.hpp"

#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/kernel.hpp"
#include "ooc/kernels/reductions.hpp"
#include "several.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace ooc::kernels {

int normalize_axis(int axis, int ndim) {
  if (axis < -ndim || axis >= ndim)
    throw UsageError("axis " + std::to_string(axis) + " is out of bounds for array of dimension " +
                             std::to_string(ndim));
  return axis < 0 ? axis + ndim : axis;
}

AxisLayout axis_layout(const Shape& shape, Order order, int axis) {
  AxisLayout layout;
  layout.reduce = shape[static_cast<std::size_t>(axis)];
  for (int k = 0; k < static_cast<int>(shape.size()); ++k) {
    if (k == axis) continue;
    // Axes before `axis` in memory order multiply `outer`, after it `inner`.
    const bool before = order == Order::c ? k < axis : k > axis;
    (before ? layout.outer : layout.inner) *= shape[static_cast<std::size_t>(k)];
  }
  return layout;
}

Shape drop_axis(const Shape& shape, int axis) {
  Shape out = shape;
  out.erase(out.begin() + axis);
  return out;
}

namespace {

void store(const Scalar& value, DType dtype, std::byte* at) {
  visit_dtype(dtype, [&]<class O>(std::type_identity<O>) {
    const O v = value.template as<O>();
    std::memcpy(at, &v, sizeof v);
  });
}

// A fold reads its rows from memory on one thread (the commit stage, for a slab larger
// than a tile), in order: asking for the row this many rows ahead keeps more of the
// memory's latency hidden than the hardware's prefetcher alone. Mean over axis 0 of a
// warm 2 GiB (N, 8) float64 file: 0.164-0.173 s against 0.184-0.196 s (32 rows, 2 KiB;
// 16, 64 and 128 rows measured the same or worse).
constexpr std::int64_t kPrefetchRows = 32;

// Asks for the row kPrefetchRows rows after `row` (rows of `inner` elements). The address
// is computed as an integer: near the end of the data it lies past the array, which a
// prefetch may name but C++ pointer arithmetic may not.
template <class T>
inline void prefetch_rows_ahead(const T* row, std::int64_t inner) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(row) +
                                                   sizeof(T) * static_cast<std::uintptr_t>(kPrefetchRows * inner)));
}

// ---- folds: one output element, one row after another --------------------------------
// Each has Input (what the values are converted to), Acc (the per-element accumulator),
// init(), step(acc, x, row) and finish(acc, rows) -> Scalar; or Input and columns(inner,
// slab), its own accumulators of a slab's row (see ElementColumns).

template <class T, bool kSkipNan>
struct SumFold {
  using Input = sum_result_t<T>;
  using Acc = sum_result_t<T>;
  Acc init() const { return Acc(0); }
  void step(Acc& a, Input x, std::int64_t) const {
    if constexpr (kSkipNan && is_floating_v<Input>)  // nansum: NaN counts as 0 (numpy adds the 0)
      x = detail::is_nan(x) ? Input(0) : x;
    a = static_cast<Acc>(a + x);
  }
  Scalar finish(const Acc& a, std::int64_t) const { return Scalar::of(a); }
};

template <class T>
struct ProdFold {
  using Input = sum_result_t<T>;
  using Acc = sum_result_t<T>;
  Acc init() const { return Acc(1); }
  void step(Acc& a, Input x, std::int64_t) const { a = static_cast<Acc>(a * x); }
  Scalar finish(const Acc& a, std::int64_t) const { return Scalar::of(a); }
};

template <class T>
struct MeanFold {
  bool array_result = false;
  using Input = Mean::input_for<T>;
  using Acc = Input;
  Acc init() const { return Acc(0); }
  void step(Acc& a, Input x, std::int64_t) const { a = static_cast<Acc>(a + x); }
  Scalar finish(const Acc& a, std::int64_t rows) const { return detail::mean_value<T>(a, rows, array_result); }
};

// nanmean: the NaN-replaced values folded as nansum, and the count of the others.
// Totals and counts are two arrays (not one of pairs), so the loop over a row vectorises.
template <class T>
struct NanMeanFold {
  using Input = NanMean::input_for<T>;
  struct Columns {
    std::vector<Input> totals;
    std::vector<std::int64_t> counts;
    void add_row(const Input* values, std::int64_t first, std::int64_t n, std::int64_t) {
      Input* total = totals.data() + first;
      std::int64_t* count = counts.data() + first;
      for (std::int64_t k = 0; k < n; ++k) {
        const bool nan = detail::is_nan(values[k]);
        total[k] = static_cast<Input>(total[k] + (nan ? Input(0) : values[k]));
        count[k] += nan ? 0 : 1;
      }
    }
    Scalar finish(std::int64_t column, std::int64_t) const {
      const auto i = static_cast<std::size_t>(column);
      const double mean = static_cast<double>(totals[i]) / static_cast<double>(counts[i]);
      if constexpr (is_floating_v<T>) return detail::half_aware_scalar<T>(mean);
      else return Scalar::of(mean);
    }
  };
  Columns columns(std::int64_t inner, std::int64_t) const {
    return {std::vector<Input>(static_cast<std::size_t>(inner), Input(0)),
            std::vector<std::int64_t>(static_cast<std::size_t>(inner), 0)};
  }
};

template <class T, bool kMin, bool kSkipNan>
struct ExtremumFold {
  using Input = T;
  using Acc = T;
  Acc init() const { return T{}; }
  void step(Acc& a, Input x, std::int64_t row) const {
    if (row == 0) {
      a = x;
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // numpy reduces an outer axis as out = maximum(out, next slice), x86's maxpd: on a
      // tie (-0.0 and 0.0) the later element; float16's loop keeps the earlier one. NaN
      // stays (minimum, maximum) or gives way (fmin, fmax), as detail::pick decides, here
      // as selects without its branches, which vectorise down eight columns held in
      // registers: min over axis 0 of (N, 8) float64 took 16 instructions an element
      // with the branches, row by row, and takes 7 (callgrind).
      const bool keep = kMin ? (kSkipNan ? !(x <= a) : x > a) : (kSkipNan ? !(x >= a) : x < a);
      a = a != a ? (kSkipNan ? x : a) : (keep ? a : x);
    } else {
      a = detail::pick<kMin, kSkipNan>(a, x);
    }
  }
  Scalar finish(const Acc& a, std::int64_t) const { return Scalar::of(a); }
};

template <class T, bool kMin>
struct ArgFold {
  using Input = T;
  struct Acc {
    T value;
    std::int64_t index;
  };
  Acc init() const { return {T{}, -1}; }
  void step(Acc& a, Input x, std::int64_t row) const {
    // The first extreme value along the axis, the first NaN if any.
    if (a.index < 0 || (!detail::is_nan(a.value) && (detail::is_nan(x) || (kMin ? x < a.value : x > a.value))))
      a = {x, row};
  }
  Scalar finish(const Acc& a, std::int64_t) const { return Scalar::of(a.index); }
};

template <class T>
struct CountFold {
  using Input = T;
  using Acc = std::int64_t;
  Acc init() const { return 0; }
  void step(Acc& a, Input x, std::int64_t) const { a += x != Input(0); }
  Scalar finish(const Acc& a, std::int64_t) const { return Scalar::of(a); }
};

template <class T, bool kAll>
struct TruthFold {
  using Input = T;
  using Acc = std::uint8_t;  // a bool that std containers do not pack
  Acc init() const { return kAll; }
  void step(Acc& a, Input x, std::int64_t) const { a = kAll ? (a && x != Input(0)) : (a || x != Input(0)); }
  Scalar finish(const Acc& a, std::int64_t) const { return Scalar::of(a != 0); }
};

template <class T>
struct NormFold {
  using Input = Norm::input_for<T>;
  using Acc = Input;
  Acc init() const { return Acc(0); }
  void step(Acc& a, Input x, std::int64_t) const { a = static_cast<Acc>(a + static_cast<Acc>(x * x)); }
  Scalar finish(const Acc& a, std::int64_t) const { return Scalar::of(detail::round_sqrt<Acc>(a)); }
};

// ---- var and std: numpy's two passes ---------------------------------------------------
// numpy's _var sums the values along the axis (in the input's float type; integers and
// bool as float64), divides by the count, subtracts that mean from every value and
// squares (in the same type), then sums again and divides by max(count - ddof, 0). Each
// sum takes the axis' order of operations (blocks along a contiguous run, a row-by-row
// fold otherwise), so the same two passes over the input give numpy's bits.

template <class T>
using var_work_t = std::conditional_t<is_floating_v<T>, T, double>;

template <class W>
W round_from_double(double value) {
  if constexpr (std::is_same_v<W, half>) {
    half h;
    convert(dtype_of<double>, &value, dtype_of<half>, &h, 1);  // one rounding, as numpy's cast
    return h;
  } else {
    return static_cast<W>(value);
  }
}

// numpy's true_divide of a W array by the count (an intp scalar). Value-based casting
// picks the loop: a count below 2^16 keeps float16/float32 in a float32 division (float16
// rounded after it), a larger one promotes to float64.
template <class W>
W divide_array_by_count(W total, std::int64_t count) {
  if constexpr (std::is_same_v<W, double>) {
    return total / static_cast<double>(count);
  } else {
    if (count < 65536) return static_cast<W>(static_cast<float>(total) / static_cast<float>(count));
    return round_from_double<W>(static_cast<double>(total) / static_cast<double>(count));
  }
}

// The variance from the sum of squared deviations: an array result divides as above; a
// scalar one (a 1-d input) is numpy's `ret.dtype.type(ret / rcount)`, a float64 division
// of two scalars rounded to W. std is the square root in W.
template <class W>
Scalar variance_value(W squares, std::int64_t count, const Var& var, bool array_result) {
  const std::int64_t dof = std::max<std::int64_t>(count - var.ddof, 0);
  W value = array_result ? divide_array_by_count<W>(squares, dof)
                         : round_from_double<W>(static_cast<double>(squares) / static_cast<double>(dof));
  if (var.std) value = detail::round_sqrt<W>(value);
  return Scalar::of(value);
}

// Pass 1 along runs: the sum of each run (numpy's blocks), divided into the mean.
template <class W>
struct VarMeanKernel {
  template <class T> using input_for = W;
  template <class T> using state_for = BlockedSum<sum_accumulator_t<W>, W>;
  using State = BlockedSum<sum_accumulator_t<W>, W>;
  void partial(State& s, const ConstArrayMap<W>& x) const { s.add_block(x); }
  void merge(State& left, State&& right) const { left.append(std::move(right)); }
  template <class T>
  Scalar result(const State& s) const { return Scalar::of(divide_array_by_count<W>(s.total, s.count)); }
};

// Pass 2 along runs: the squared deviations from the run's mean, summed as pass 1 sums.
template <class W>
struct VarDeviationKernel {
  const W* means;
  Var var;
  bool array_result;
  struct State : BlockedSum<sum_accumulator_t<W>, W> {
    W mean{};
  };
  template <class T> using input_for = W;
  template <class T> using state_for = State;
  void start_run(State& s, std::int64_t run) const { s.mean = means[run]; }
  void partial(State& s, const ConstArrayMap<W>& x) const {
    W* squares = reinterpret_cast<W*>(
        ooc::detail::scratch(ooc::detail::ScratchSlot::kernel_second, sizeof(W) * static_cast<std::size_t>(x.size())));
    const W* values = x.data();
    const W mean = s.mean;
    for (Eigen::Index i = 0; i < x.size(); ++i) {
      const W deviation = static_cast<W>(values[i] - mean);
      squares[i] = static_cast<W>(deviation * deviation);
    }
    s.add_block(ConstArrayMap<W>(squares, x.size()));
  }
  void merge(State& left, State&& right) const { left.append(std::move(right)); }
  template <class T>
  Scalar result(const State& s) const { return variance_value<W>(s.total, s.count, var, array_result); }
};

// Pass 1 along rows: each column folded row by row in W, then divided into the mean.
template <class T>
struct VarMeanFold {
  using Input = var_work_t<T>;
  using Acc = Input;
  Acc init() const { return Acc(0); }
  void step(Acc& a, Input x, std::int64_t) const { a = static_cast<Acc>(a + x); }
  Scalar finish(const Acc& a, std::int64_t rows) const { return Scalar::of(divide_array_by_count<Input>(a, rows)); }
};

// Pass 2 along rows: each column's squared deviations from its mean, folded as in pass 1.
template <class T>
struct VarDeviationFold {
  using Input = var_work_t<T>;
  const Input* means;
  Var var;
  struct Acc {
    Input mean;
    Input squares;
  };
  Acc init() const { return {Input(0), Input(0)}; }
  Acc init_at(std::int64_t output_index) const { return {means[output_index], Input(0)}; }
  void step(Acc& a, Input x, std::int64_t) const {
    const Input deviation = static_cast<Input>(x - a.mean);
    a.squares = static_cast<Input>(a.squares + static_cast<Input>(deviation * deviation));
  }
  Scalar finish(const Acc& a, std::int64_t rows) const { return variance_value<Input>(a.squares, rows, var, true); }
};

// ---- the engine -------------------------------------------------------------------------

// Where the engine's loops hand each output element: an Output, or (several reductions)
// a store that puts each of several results into its own Output.
struct Output {
  DType dtype;
  std::byte* data;
  void put(std::int64_t index, const Scalar& value) const {
    store(value, dtype, data + index * dtype.itemsize());
  }
  void operator()(std::int64_t index, const Scalar& value) const { put(index, value); }
};

bool whole_slabs(const Tile& tile, std::int64_t slab) { return tile.begin % slab == 0 && tile.size() % slab == 0; }

// Where element `at` of `tile` is, as the run's streams deliver the tile (mapped, read
// directly or read from a chunked dataset).
const std::byte* tile_values(const ooc::detail::Streams& streams, const MappedArray& in, const Tile& tile,
                             std::int64_t at) {
  return streams.input(in, tile) + static_cast<std::size_t>(at - tile.begin) * static_cast<std::size_t>(in.dtype().itemsize());
}

// The whole runs [begin, end) of `tile`, each reduced by `kernel` as a full reduction of
// its values (blocks from the run's start), into out(run index, result).
template <class T, class Kernel, class Store>
void reduce_whole_runs(const ooc::detail::Streams& streams, const MappedArray& in, const Tile& tile, std::int64_t begin,
                       std::int64_t end, std::int64_t run, const Kernel& kernel, const Store& out) {
  using State = ooc::detail::kernel_state_t<Kernel, T>;
  using Input = ooc::detail::kernel_input_t<Kernel, T>;
  // Short runs are many: the states are reset by assignment, which keeps their storage.
  const State identity = ooc::detail::kernel_identity<T>(kernel);
  State state = identity, total = identity;
  for (std::int64_t at = begin; at < end; at += run) {
    state = identity;
    // A kernel may need to know which run a state reduces (var's second pass: its mean).
    if constexpr (requires { kernel.start_run(state, at / run); }) kernel.start_run(state, at / run);
    ooc::detail::visit_values_as<Input>(tile_values(streams, in, tile, at), in.dtype(), Tile{tile.index, at, at + run},
                                        [&](const Tile& piece, const ConstArrayMap<Input>& x) {
      ooc::detail::kernel_partial(kernel, state, piece.begin - at, x);
    });
    if constexpr (!ooc::detail::kernel_in_order<Kernel, T>()) {  // as a full reduction: merged into a fresh state
      total = identity;
      kernel.merge(total, std::move(state));
      out(at / run, ooc::detail::kernel_result<T>(kernel, total));
    } else {
      out(at / run, ooc::detail::kernel_result<T>(kernel, state));
    }
  }
}

// The axis varies fastest: each output element is the full reduction of one run. A tile
// of whole runs goes to whole_runs(streams, tile); a run larger than a tile arrives in
// pieces, reduced to states merged on the commit stage, in order.
template <class T, class Kernel, class Store, class WholeRuns>
void reduce_runs(const MappedArray& in, const AxisLayout& layout, const Kernel& kernel, const Store& out,
                 const PipelineOptions& options, WholeRuns&& whole_runs) {
  using State = ooc::detail::kernel_state_t<Kernel, T>;
  using Input = ooc::detail::kernel_input_t<Kernel, T>;
  constexpr bool in_order = ooc::detail::kernel_in_order<Kernel, T>();
  const std::int64_t run = layout.reduce;
  const TilePlan plan = TilePlan::slabs(layout.outer, run, in.dtype().itemsize(), options.tile_bytes);
  ooc::detail::Streams streams(plan, options);
  streams.add_input(in);
  auto fold_into = [&](State& state, const Tile& tile, std::int64_t begin, std::int64_t end, std::int64_t run_begin) {
    ooc::detail::visit_values_as<Input>(tile_values(streams, in, tile, begin), in.dtype(), Tile{tile.index, begin, end},
                                        [&](const Tile& piece, const ConstArrayMap<Input>& x) {
      ooc::detail::kernel_partial(kernel, state, piece.begin - run_begin, x);
    });
  };
  auto start = [&](State& state, std::int64_t run_index) {
    if constexpr (requires { kernel.start_run(state, run_index); }) kernel.start_run(state, run_index);
  };
  State running = ooc::detail::kernel_identity<T>(kernel);
  run_pipeline(
      plan, streams, options,
      [&](const Tile& tile) -> std::optional<State> {
        if (whole_slabs(tile, run)) {
          whole_runs(streams, tile);
          return std::nullopt;
        }
        if (in_order) return std::nullopt;
        State state = ooc::detail::kernel_identity<T>(kernel);
        start(state, tile.begin / run);
        fold_into(state, tile, tile.begin, tile.end, tile.begin / run * run);
        return state;
      },
      [&](const Tile& tile, std::optional<State>&& state) {
        if (whole_slabs(tile, run)) return;
        const std::int64_t run_begin = tile.begin / run * run;
        if (tile.begin == run_begin) {
          running = ooc::detail::kernel_identity<T>(kernel);
          start(running, tile.begin / run);
        }
        if constexpr (in_order) fold_into(running, tile, tile.begin, tile.end, run_begin);
        else kernel.merge(running, std::move(*state));
        if (tile.end == run_begin + run) out(tile.begin / run, ooc::detail::kernel_result<T>(kernel, running));
      });
}

template <class T, class Kernel, class Store>
void reduce_runs(const MappedArray& in, const AxisLayout& layout, const Kernel& kernel, const Store& out,
                 const PipelineOptions& options) {
  reduce_runs<T>(in, layout, kernel, out, options, [&](const ooc::detail::Streams& streams, const Tile& tile) {
    reduce_whole_runs<T>(streams, in, tile, tile.begin, tile.end, layout.reduce, kernel, out);
  });
}

// The accumulators of one slab's row: one per column (inner element), each folded by the
// fold's per-element step. A fold may bring its own Columns instead (nanmean keeps its
// totals and counts in two arrays, so that the loop over a row vectorises).
template <class Fold>
struct ElementColumns {
  using Input = typename Fold::Input;
  using Acc = typename Fold::Acc;
  const Fold* fold;
  std::unique_ptr<Acc[]> acc;  // not a vector: vector<bool> has no data()

  ElementColumns(const Fold& f, std::int64_t inner, std::int64_t slab_index)
      : fold(&f), acc(std::make_unique<Acc[]>(static_cast<std::size_t>(inner))) {
    // A fold may start each output element from its own value (var's second pass: the mean).
    if constexpr (requires { f.init_at(slab_index); })
      for (std::int64_t i = 0; i < inner; ++i) acc[static_cast<std::size_t>(i)] = f.init_at(slab_index * inner + i);
    else
      std::fill(acc.get(), acc.get() + inner, f.init());
  }
  // Columns first .. first + n of row `row`.
  void add_row(const Input* values, std::int64_t first, std::int64_t n, std::int64_t row) {
    Acc* a = acc.get() + first;
    for (std::int64_t k = 0; k < n; ++k) fold->step(a[k], values[k], row);
  }
  // `rows` whole rows of `inner` columns from row `row`. Eight columns at a time down the
  // rows, their accumulators held in registers (the rows are in cache: a block is
  // kBlockElements); each column still adds its rows in order, so the bits are numpy's.
  // Row by row instead, the accumulators went through memory and each short row paid a
  // loop's setup.
  void add_rows(const Input* values, std::int64_t inner, std::int64_t rows, std::int64_t row) {
    constexpr std::int64_t kChunk = 8;
    std::int64_t first = 0;
    for (; first + kChunk <= inner; first += kChunk) {
      Acc local[kChunk];
      std::copy(acc.get() + first, acc.get() + first + kChunk, local);
      const Input* at = values + first;
      for (std::int64_t r = 0; r < rows; ++r, at += inner) {
        prefetch_rows_ahead(at, inner);
        for (std::int64_t k = 0; k < kChunk; ++k) fold->step(local[k], at[k], row + r);
      }
      std::copy(local, local + kChunk, acc.get() + first);
    }
    if (first < inner)
      for (std::int64_t r = 0; r < rows; ++r) add_row(values + r * inner + first, first, inner - first, row + r);
  }
  Scalar finish(std::int64_t column, std::int64_t rows) const {
    return fold->finish(acc[static_cast<std::size_t>(column)], rows);
  }
};

template <class Fold>
auto make_columns(const Fold& fold, std::int64_t inner, std::int64_t slab_index) {
  if constexpr (requires { fold.columns(inner, slab_index); }) return fold.columns(inner, slab_index);
  else return ElementColumns<Fold>(fold, inner, slab_index);
}

// The axis does not vary fastest: each output element folds its rows one after another.
template <class T, class Fold, class Store>
void fold_rows(const MappedArray& in, const AxisLayout& layout, const Fold& fold, const Store& out,
               const PipelineOptions& options) {
  using Input = typename Fold::Input;
  using Columns = decltype(make_columns(fold, 0, 0));
  const std::int64_t inner = layout.inner;
  const std::int64_t slab = layout.reduce * inner;
  const TilePlan plan = TilePlan::slabs(layout.outer, slab, in.dtype().itemsize(), options.tile_bytes);
  // A slab larger than a tile is folded on the commit stage: one thread, in order. Mapped
  // afresh, its pages would fault in there, one fault per 16 pages (mean over axis 0 of
  // 1 GiB of (N, 8) float64: 16,895 faults, 78 ms of system time beside 210 ms of user
  // time); populated by the kernel threads instead (MADV_POPULATE_READ, one call per tile,
  // in parallel: 942 faults), the commit stage only reads.
  PipelineOptions fold_options = options;
  if (!plan.empty() && !whole_slabs(plan[0], slab)) fold_options.populate = true;
  ooc::detail::Streams streams(plan, fold_options);
  streams.add_input(in);
  auto fold_into = [&](Columns& columns, const Tile& tile, std::int64_t begin, std::int64_t end,
                       std::int64_t slab_begin) {
    ooc::detail::visit_values_as<Input>(tile_values(streams, in, tile, begin), in.dtype(), Tile{tile.index, begin, end},
                                        [&](const Tile& piece, const ConstArrayMap<Input>& x) {
      const Input* values = x.data();
      const std::int64_t at = piece.begin - slab_begin;
      std::int64_t left = x.size();
      std::int64_t row = at / inner, i = at % inner;  // one division per block, not per row
      if (i > 0) {  // the rest of a row begun in the block before
        const std::int64_t n = std::min(left, inner - i);
        columns.add_row(values, i, n, row);
        values += n;
        left -= n;
        ++row;
      }
      // Whole rows: the columns of a row are independent, so the loops over columns
      // vectorise (numpy's order along each column is kept: row after row).
      if (const std::int64_t rows = left / inner; rows > 0) {
        if constexpr (requires { columns.add_rows(values, inner, rows, row); }) {
          columns.add_rows(values, inner, rows, row);
        } else {
          for (std::int64_t r = 0; r < rows; ++r) {
            prefetch_rows_ahead(values + r * inner, inner);
            columns.add_row(values + r * inner, 0, inner, row + r);
          }
        }
        values += rows * inner;
        left -= rows * inner;
        row += rows;
      }
      if (left > 0) columns.add_row(values, 0, left, row);  // a row the next block ends
    });
  };
  auto finish = [&](const Columns& columns, std::int64_t slab_index) {
    for (std::int64_t i = 0; i < inner; ++i) out(slab_index * inner + i, columns.finish(i, layout.reduce));
  };
  std::optional<Columns> running;
  struct Done {};
  run_pipeline(
      plan, streams, fold_options,
      [&](const Tile& tile) {
        if (whole_slabs(tile, slab)) {
          for (std::int64_t begin = tile.begin; begin < tile.end; begin += slab) {
            Columns columns = make_columns(fold, inner, begin / slab);
            fold_into(columns, tile, begin, begin + slab, begin);
            finish(columns, begin / slab);
          }
        }
        return Done{};
      },
      [&](const Tile& tile, Done&&) {
        if (whole_slabs(tile, slab)) return;
        const std::int64_t slab_begin = tile.begin / slab * slab;
        if (tile.begin == slab_begin) running.emplace(make_columns(fold, inner, tile.begin / slab));
        fold_into(*running, tile, tile.begin, tile.end, slab_begin);
        if (tile.end == slab_begin + slab) finish(*running, tile.begin / slab);
      });
}

template <class Kernel, class MakeFold>
void reduce_along(const MappedArray& in, const AxisLayout& layout, const Kernel& kernel, MakeFold&& make_fold,
                  const Output& out, const PipelineOptions& options) {
  visit_dtype(in.dtype(), [&]<class T>(std::type_identity<T>) {
    if (layout.reduce == 0) {  // nothing along the axis: every element is the empty reduction
      const Scalar empty = ooc::detail::kernel_result<T>(kernel, ooc::detail::kernel_identity<T>(kernel));
      for (std::int64_t i = 0; i < layout.outer * layout.inner; ++i) out.put(i, empty);
    } else if (layout.inner == 1) {
      reduce_runs<T>(in, layout, kernel, out, options);
    } else {
      fold_rows<T>(in, layout, make_fold.template operator()<T>(), out, options);
    }
  });
}

// numpy's two passes (see VarMeanKernel): the means go to a buffer of the output's size,
// then the squared deviations from them are summed into the output.
void var_along(const MappedArray& in, const AxisLayout& layout, const Var& var, bool array_result, const Output& out,
               const PipelineOptions& options) {
  if (layout.reduce == 0) {
    // The empty reduction: NaN, as numpy's (through the one-pass kernel's empty state).
    return reduce_along(in, layout, var, []<class T>() { return VarMeanFold<T>{}; }, out, options);
  }
  visit_dtype(in.dtype(), [&]<class T>(std::type_identity<T>) {
    using W = var_work_t<T>;
    std::vector<W> means(static_cast<std::size_t>(layout.outer * layout.inner));
    const Output mean_out{dtype_of<W>, reinterpret_cast<std::byte*>(means.data())};
    if (layout.inner == 1) {
      reduce_runs<T>(in, layout, VarMeanKernel<W>{}, mean_out, options);
      reduce_runs<T>(in, layout, VarDeviationKernel<W>{means.data(), var, array_result}, out, options);
    } else {
      fold_rows<T>(in, layout, VarMeanFold<T>{}, mean_out, options);
      fold_rows<T>(in, layout, VarDeviationFold<T>{means.data(), var}, out, options);
    }
  });
}

// Calls f(kernel, make_fold) with `op`'s full-reduction kernel (for the runs of an axis
// that varies fastest) and the maker of its fold (for rows along any other axis). Not for
// var and std (two passes: var_along) nor histogram.
template <class F>
void with_axis_reduction(const ReduceOp& op, bool array_result, F&& f) {
  using Code = ReduceOp::Code;
  switch (op.code()) {
    case Code::sum: return f(Sum{}, []<class T>() { return SumFold<T, false>{}; });
    case Code::nansum: return f(NanSum{}, []<class T>() { return SumFold<T, true>{}; });
    case Code::prod: return f(Prod{}, []<class T>() { return ProdFold<T>{}; });
    case Code::mean: return f(Mean{array_result}, [&]<class T>() { return MeanFold<T>{array_result}; });
    case Code::nanmean: return f(NanMean{}, []<class T>() { return NanMeanFold<T>{}; });
    case Code::min: return f(Min{}, []<class T>() { return ExtremumFold<T, true, false>{}; });
    case Code::max: return f(Max{}, []<class T>() { return ExtremumFold<T, false, false>{}; });
    case Code::nanmin: return f(NanMin{}, []<class T>() { return ExtremumFold<T, true, true>{}; });
    case Code::nanmax: return f(NanMax{}, []<class T>() { return ExtremumFold<T, false, true>{}; });
    case Code::argmin: return f(ArgMin{}, []<class T>() { return ArgFold<T, true>{}; });
    case Code::argmax: return f(ArgMax{}, []<class T>() { return ArgFold<T, false>{}; });
    case Code::count_nonzero: return f(CountNonzero{}, []<class T>() { return CountFold<T>{}; });
    case Code::any: return f(Any{}, []<class T>() { return TruthFold<T, false>{}; });
    case Code::all: return f(All{}, []<class T>() { return TruthFold<T, true>{}; });
    case Code::norm: return f(Norm{}, []<class T>() { return NormFold<T>{}; });
    default: throw std::logic_error("no one-pass axis reduction for " + op.name());
  }
}

// ---- several reductions along one axis ----------------------------------------------------
// Every reduction sees every block of one read: the runs of a contiguous axis go through
// a several::Several of their kernels, the rows of any other axis through SeveralFolds.
// var and std take their means in that read and their squared deviations in a second.

// f(std::integral_constant<size_t, I>{}) for the index I of the alternative `v` holds.
template <std::size_t I = 0, class Variant, class F>
void with_alternative(const Variant& v, F&& f) {
  if constexpr (I < std::variant_size_v<Variant>) {
    if (v.index() == I) return f(std::integral_constant<std::size_t, I>{});
    with_alternative<I + 1>(v, std::forward<F>(f));
  }
}

// A reduction of a run (a contiguous axis), whichever it is.
template <class T>
using RunKernel = several::OneOf<Scalar, Sum, NanSum, Prod, Mean, NanMean, Min, Max, NanMin, NanMax, ArgMin, ArgMax,
                                 CountNonzero, Any, All, Norm, VarMeanKernel<var_work_t<T>>,
                                 VarDeviationKernel<var_work_t<T>>>;

// A fold of rows, whichever it is.
template <class T>
using AnyFold = std::variant<SumFold<T, false>, SumFold<T, true>, ProdFold<T>, MeanFold<T>, NanMeanFold<T>,
                             ExtremumFold<T, true, false>, ExtremumFold<T, false, false>, ExtremumFold<T, true, true>,
                             ExtremumFold<T, false, true>, ArgFold<T, true>, ArgFold<T, false>, CountFold<T>,
                             TruthFold<T, false>, TruthFold<T, true>, NormFold<T>, VarMeanFold<T>, VarDeviationFold<T>>;

template <class Folds> struct columns_of;
template <class... Folds> struct columns_of<std::variant<Folds...>> {
  using type = std::variant<decltype(make_columns(std::declval<const Folds&>(), std::int64_t{}, std::int64_t{}))...>;
};

// Several folds as one, for fold_rows: a slab's columns hold each fold's accumulators,
// and each row goes to every fold, converted to the fold's own input type.
template <class T>
struct SeveralFolds {
  using Input = T;
  using AnyColumns = typename columns_of<AnyFold<T>>::type;
  std::vector<AnyFold<T>> folds;

  struct Columns {
    const SeveralFolds* several;
    std::vector<AnyColumns> members;

    // f(fold, columns, its input) for every fold, with `values` (n of them) converted.
    template <class F>
    void each(const T* values, std::int64_t n, F&& f) {
      ooc::detail::MemberInputs<T> inputs(values, n);
      for (std::size_t m = 0; m < members.size(); ++m)
        with_alternative(members[m], [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
          using Fold = std::variant_alternative_t<I, AnyFold<T>>;
          f(std::get<I>(several->folds[m]), std::get<I>(members[m]), inputs.template as<typename Fold::Input>().data());
        });
    }
    void add_row(const T* values, std::int64_t first, std::int64_t n, std::int64_t row) {
      each(values, n, [&](const auto&, auto& columns, const auto* x) { columns.add_row(x, first, n, row); });
    }
    void add_rows(const T* values, std::int64_t inner, std::int64_t rows, std::int64_t row) {
      each(values, inner * rows, [&](const auto&, auto& columns, const auto* x) {
        if constexpr (requires { columns.add_rows(x, inner, rows, row); }) {
          columns.add_rows(x, inner, rows, row);
        } else {
          for (std::int64_t r = 0; r < rows; ++r) {
            prefetch_rows_ahead(x + r * inner, inner);
            columns.add_row(x + r * inner, 0, inner, row + r);
          }
        }
      });
    }
    std::vector<Scalar> finish(std::int64_t column, std::int64_t rows) const {
      std::vector<Scalar> values;
      values.reserve(members.size());
      for (const AnyColumns& member : members)
        std::visit([&](const auto& columns) { values.push_back(columns.finish(column, rows)); }, member);
      return values;
    }
  };

  Columns columns(std::int64_t inner, std::int64_t slab_index) const {
    Columns c{this, {}};
    c.members.reserve(folds.size());
    for (const AnyFold<T>& fold : folds)
      with_alternative(fold, [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        c.members.emplace_back(std::in_place_index<I>, make_columns(std::get<I>(fold), inner, slab_index));
      });
    return c;
  }
};

// Puts each of several results of an output element into its own output.
struct SeveralOutputs {
  std::vector<Output> outputs;
  void operator()(std::int64_t index, const std::vector<Scalar>& values) const {
    for (std::size_t k = 0; k < outputs.size(); ++k) outputs[k].put(index, values[k]);
  }
  void operator()(std::int64_t index, std::vector<several::Outcome<Scalar>>&& outcomes) const {
    for (std::size_t k = 0; k < outputs.size(); ++k) outputs[k].put(index, several::value_of(std::move(outcomes[k])));
  }
};

// The runs of `in` (its element type T) reduced by all the kernels at once.
template <class T>
void reduce_runs_together(const MappedArray& in, const AxisLayout& layout, const std::vector<RunKernel<T>>& kernels,
                          const SeveralOutputs& out, const PipelineOptions& options) {
  // Tiles of whole runs: a block's worth of runs at a time through each kernel's own loop
  // (the values stay in cache; one kernel per run at a time would pay a dispatch, a
  // state and a result per run and kernel: 6x the time of one reduction alone on runs
  // of 8). Runs larger than a tile: all kernels' states in one, merged in order.
  const std::int64_t run = layout.reduce;
  auto whole_runs = [&](const ooc::detail::Streams& streams, const Tile& tile) {
    const std::int64_t chunk = std::max<std::int64_t>(1, kBlockElements / run) * run;
    for (std::int64_t at = tile.begin; at < tile.end; at += chunk)
      for (std::size_t k = 0; k < kernels.size(); ++k)
        kernels[k].visit([&](const auto& kernel) {
          reduce_whole_runs<T>(streams, in, tile, at, std::min(tile.end, at + chunk), run, kernel, out.outputs[k]);
        });
  };
  if constexpr (is_floating_v<T>)  // only a float product is taken in order
    if (several::any_in_order<T>(kernels))
      return reduce_runs<T>(in, layout, several::Several<T, RunKernel<T>, true>{&kernels, in.path()}, out, options,
                            whole_runs);
  reduce_runs<T>(in, layout, several::Several<T, RunKernel<T>, false>{&kernels, in.path()}, out, options, whole_runs);
}

// The reductions `ops` along the axis of `layout`, into `outputs`: one read, and a second
// for the squared deviations where var or std is among them. (The second read's kernels
// are var's alone, never in order: in order, a VarDeviationKernel would start each block
// from the identity, without its run's mean.)
template <class T>
void reduce_along_together(const MappedArray& in, const AxisLayout& layout, std::span<const ReduceOp> ops,
                           bool array_result, const std::vector<Output>& outputs, const PipelineOptions& options) {
  using W = var_work_t<T>;
  using Code = ReduceOp::Code;
  const bool runs = layout.inner == 1;
  const std::int64_t count = layout.outer * layout.inner;
  auto is_var = [](const ReduceOp& op) { return op.code() == Code::var || op.code() == Code::std; };
  // For float32 and float64 the sum, the mean and var's first pass add the same values in
  // the same order into the same type (the same block sums of a run; the same row-by-row
  // fold): one sum serves them all, and the mean and var's means are divided from its
  // totals as their own runs divide theirs.
  constexpr bool kSharedSum = std::is_same_v<T, float> || std::is_same_v<T, double>;
  auto shares_sum = [&](const ReduceOp& op) {
    return kSharedSum && (op.code() == Code::sum || op.code() == Code::mean || is_var(op));
  };
  std::vector<T> hidden_sums;
  T* sums = nullptr;
  std::vector<std::vector<W>> means(ops.size());
  SeveralOutputs first_out, second_out;
  std::vector<RunKernel<T>> first_runs, second_runs;
  SeveralFolds<T> first_folds, second_folds;
  auto add_first = [&](const ReduceOp& op, const Output& out) {
    first_out.outputs.push_back(out);
    with_axis_reduction(op, array_result, [&](const auto& kernel, const auto& make_fold) {
      if (runs) first_runs.emplace_back(kernel);
      else first_folds.folds.emplace_back(make_fold.template operator()<T>());
    });
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (shares_sum(ops[i])) {
      if constexpr (kSharedSum) {
        if (sums == nullptr) {
          const auto named = std::find_if(ops.begin(), ops.end(), [](const ReduceOp& op) { return op.code() == Code::sum; });
          if (named == ops.end()) hidden_sums.resize(static_cast<std::size_t>(count));
          sums = named == ops.end() ? hidden_sums.data()
                                    : reinterpret_cast<T*>(outputs[static_cast<std::size_t>(named - ops.begin())].data);
          add_first(ReduceOp::parse("sum"), Output{dtype_of<T>, reinterpret_cast<std::byte*>(sums)});
        }
      }
    } else if (!is_var(ops[i])) {
      add_first(ops[i], outputs[i]);
    }
    if (is_var(ops[i])) {
      means[i].resize(static_cast<std::size_t>(count));
      const Var var{ops[i].params().ddof, ops[i].code() == Code::std};
      if (!kSharedSum) {
        first_out.outputs.push_back(Output{dtype_of<W>, reinterpret_cast<std::byte*>(means[i].data())});
        if (runs) first_runs.emplace_back(VarMeanKernel<W>{});
        else first_folds.folds.emplace_back(VarMeanFold<T>{});
      }
      second_out.outputs.push_back(outputs[i]);
      if (runs) second_runs.emplace_back(VarDeviationKernel<W>{means[i].data(), var, array_result});
      else second_folds.folds.emplace_back(VarDeviationFold<T>{means[i].data(), var});
    }
  }
  if (runs) reduce_runs_together<T>(in, layout, first_runs, first_out, options);
  else fold_rows<T>(in, layout, first_folds, first_out, options);
  if constexpr (kSharedSum) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].code() == Code::mean)
        for (std::int64_t j = 0; j < count; ++j) outputs[i].put(j, detail::mean_value<T>(sums[j], layout.reduce, array_result));
      if (is_var(ops[i]))
        for (std::int64_t j = 0; j < count; ++j)
          means[i][static_cast<std::size_t>(j)] = divide_array_by_count<W>(sums[j], layout.reduce);
    }
  }
  if (runs && !second_runs.empty()) reduce_runs_together<T>(in, layout, second_runs, second_out, options);
  if (!runs && !second_folds.folds.empty()) fold_rows<T>(in, layout, second_folds, second_out, options);
}

}  // namespace

DType ReduceOp::result_dtype(DType input) const {
  const DType in = input.native();
  const DType f8(Kind::floating, 8);
  const DType float_result = in.kind() == Kind::floating && in.itemsize() < 8 ? in : f8;
  switch (code_) {
    case Code::sum: case Code::nansum: case Code::prod:
      return visit_dtype(in, []<class T>(std::type_identity<T>) { return dtype_of<sum_result_t<T>>; });
    case Code::mean: case Code::nanmean: case Code::var: case Code::std: case Code::norm:
      return float_result;
    case Code::min: case Code::max: case Code::nanmin: case Code::nanmax:
      return in;
    case Code::argmin: case Code::argmax: case Code::count_nonzero:
      return DType(Kind::signed_int, 8);
    case Code::any: case Code::all:
      return DType(Kind::boolean, 1);
    case Code::histogram: default:
      throw UsageError("histogram has no single result dtype");
  }
}

void ReduceOp::run_axis(const MappedArray& in, int axis, std::span<std::byte> out,
                        const PipelineOptions& options) const {
  if (code_ == Code::histogram) throw UsageError(in.path(), "histogram takes no axis (numpy's has none)", "axis");
  const int k = normalize_axis(axis, in.ndim());
  const AxisLayout layout = axis_layout(in.shape(), in.order(), k);
  const Output output{result_dtype(in.dtype()), out.data()};
  if (static_cast<std::uint64_t>(out.size()) !=
      static_cast<std::uint64_t>(layout.outer * layout.inner * output.dtype.itemsize()))
    throw UsageError(in.path(), "the output buffer does not fit the reduced shape");
  const bool array_result = in.ndim() >= 2;  // a 1-d array reduces to a scalar, divided as one
  try {
    if (code_ == Code::var || code_ == Code::std)
      return var_along(in, layout, Var{params_.ddof, code_ == Code::std}, array_result, output, options);
    with_axis_reduction(*this, array_result, [&](const auto& kernel, const auto& make_fold) {
      reduce_along(in, layout, kernel, make_fold, output, options);
    });
  } catch (...) {
    ooc::detail::rethrow_naming(in.path());
  }
}

}  // namespace ooc::kernels

namespace ooc {

ReducedArray reduce_axis(const MappedArray& in, int axis, const kernels::ReduceOp& op, const PipelineOptions& options) {
  int k = 0;
  try {
    k = kernels::normalize_axis(axis, in.ndim());
  } catch (const UsageError& e) {
    throw UsageError(in.path(), e.problem());
  }
  ReducedArray result;
  result.dtype = op.result_dtype(in.dtype());
  result.order = in.order();
  for (int i = 0; i < in.ndim(); ++i)
    if (i != k) result.shape.push_back(in.shape()[static_cast<std::size_t>(i)]);
  std::int64_t count = 1;
  for (std::int64_t extent : result.shape) count *= extent;
  result.bytes.resize(static_cast<std::size_t>(count) * static_cast<std::size_t>(result.dtype.itemsize()));
  op.run_axis(in, k, result.bytes, options);
  return result;
}

AxisReductions reduce_axis_together(const MappedArray& in, int axis, std::span<const kernels::ReduceOp> ops,
                                    const PipelineOptions& options) {
  if (ops.empty()) throw UsageError(in.path(), "no reduction to take");
  for (const kernels::ReduceOp& op : ops)
    if (op.code() == kernels::ReduceOp::Code::histogram)
      throw UsageError(in.path(), "histogram takes no axis (numpy's has none)", "axis");
  int k = 0;
  try {
    k = kernels::normalize_axis(axis, in.ndim());
  } catch (const UsageError& e) {
    throw UsageError(in.path(), e.problem());
  }
  const kernels::AxisLayout layout = kernels::axis_layout(in.shape(), in.order(), k);
  AxisReductions answer;
  std::vector<kernels::Output> outputs;
  for (const kernels::ReduceOp& op : ops) {
    ReducedArray& result = answer.arrays.emplace_back();
    result.dtype = op.result_dtype(in.dtype());
    result.order = in.order();
    result.shape = kernels::drop_axis(in.shape(), k);
    result.bytes.resize(static_cast<std::size_t>(layout.outer * layout.inner) * static_cast<std::size_t>(result.dtype.itemsize()));
  }
  for (ReducedArray& result : answer.arrays) outputs.push_back(kernels::Output{result.dtype, result.bytes.data()});
  if (layout.reduce == 0) {  // every element is the empty reduction: nothing to read
    for (std::size_t i = 0; i < ops.size(); ++i) ops[i].run_axis(in, k, answer.arrays[i].bytes, options);
    return answer;
  }
  const PipelineOptions counted = kernels::several::counting_reads(options, answer.passes);
  const bool array_result = in.ndim() >= 2;  // a 1-d array reduces to a scalar, divided as one
  try {
    visit_dtype(in.dtype(), [&]<class T>(std::type_identity<T>) {
      kernels::reduce_along_together<T>(in, layout, ops, array_result, outputs, counted);
    });
  } catch (...) {
    ooc::detail::rethrow_naming(in.path());
  }
  return answer;
}

}  // namespace ooc
