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

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

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

// ---- folds: one output element, one row after another --------------------------------
// Each has Input (what the values are converted to), Acc (the per-element accumulator),
// init(), step(acc, x, row) and finish(acc, rows) -> Scalar.

template <class T>
struct SumFold {
  bool skip_nan = false;  // nansum: NaN counts as 0 (numpy adds the 0)
  using Input = sum_result_t<T>;
  using Acc = sum_result_t<T>;
  Acc init() const { return Acc(0); }
  void step(Acc& a, Input x, std::int64_t) const {
    if constexpr (is_floating_v<Input>)
      if (skip_nan && detail::is_nan(x)) x = Input(0);
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

template <class T>
struct NanMeanFold {
  using Input = NanMean::input_for<T>;
  struct Acc {
    Input total;
    std::int64_t count;
  };
  Acc init() const { return {Input(0), 0}; }
  void step(Acc& a, Input x, std::int64_t) const {
    const bool nan = detail::is_nan(x);
    a.total = static_cast<Input>(a.total + (nan ? Input(0) : x));
    a.count += nan ? 0 : 1;
  }
  Scalar finish(const Acc& a, std::int64_t) const {
    const double mean = static_cast<double>(a.total) / static_cast<double>(a.count);
    if constexpr (is_floating_v<T>) return detail::half_aware_scalar<T>(mean);
    else return Scalar::of(mean);
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
      // tie (-0.0 and 0.0) the later element; float16's loop keeps the earlier one.
      a = (x == a) ? x : detail::pick<kMin, kSkipNan>(a, x);
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
struct VarFold {
  Var var;
  using Input = double;
  struct Acc {
    double shift;  // the first row's value: Welford's update runs on x - shift
    double mean;
    double m2;
    bool finite;   // every value so far finite
  };
  Acc init() const { return {0, 0, 0, true}; }
  // Welford's update of the values less the first one: on data with a large offset
  // (1e12 + U(0, 1)) the deviations of the values themselves from their running mean
  // lose digits the shifted ones keep.
  void step(Acc& a, Input x, std::int64_t row) const {
    if (row == 0) a.shift = x;
    a.finite = a.finite && std::isfinite(x);
    const double y = x - a.shift;
    const double delta = y - a.mean;
    a.mean += delta / static_cast<double>(row + 1);
    a.m2 += delta * (y - a.mean);
  }
  Scalar finish(const Acc& a, std::int64_t rows) const {
    double m2 = a.m2;
    // Finite values whose differences overflow: numpy's squared deviations are infinite
    // (where the update met inf - inf, or -inf, here).
    if (a.finite && !(m2 >= 0 && m2 < INFINITY)) m2 = INFINITY;
    return var.template result<T>(Moments{rows, a.shift + a.mean, m2});
  }
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

// ---- the engine -------------------------------------------------------------------------

struct Output {
  DType dtype;
  std::byte* data;
  void put(std::int64_t index, const Scalar& value) const {
    store(value, dtype, data + index * dtype.itemsize());
  }
};

bool whole_slabs(const Tile& tile, std::int64_t slab) { return tile.begin % slab == 0 && tile.size() % slab == 0; }

// Where element `at` of `tile` is, as the run's streams deliver the tile (mapped, read
// directly or read from a chunked dataset).
const std::byte* tile_values(const ooc::detail::Streams& streams, const MappedArray& in, const Tile& tile,
                             std::int64_t at) {
  return streams.input(in, tile) + static_cast<std::size_t>(at - tile.begin) * static_cast<std::size_t>(in.dtype().itemsize());
}

// The axis varies fastest: each output element is the full reduction of one run.
template <class T, class Kernel>
void reduce_runs(const MappedArray& in, const AxisLayout& layout, const Kernel& kernel, const Output& out,
                 const PipelineOptions& options) {
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
  State running = ooc::detail::kernel_identity<T>(kernel);
  run_pipeline(
      plan, streams, options,
      [&](const Tile& tile) -> std::optional<State> {
        if (whole_slabs(tile, run)) {
          // Short runs are many: the states are reset by assignment, which keeps their storage.
          const State identity = ooc::detail::kernel_identity<T>(kernel);
          State state = identity, total = identity;
          for (std::int64_t begin = tile.begin; begin < tile.end; begin += run) {
            state = identity;
            fold_into(state, tile, begin, begin + run, begin);
            if constexpr (!in_order) {  // as a full reduction: the run's state merged into a fresh one
              total = identity;
              kernel.merge(total, std::move(state));
              out.put(begin / run, ooc::detail::kernel_result<T>(kernel, total));
            } else {
              out.put(begin / run, ooc::detail::kernel_result<T>(kernel, state));
            }
          }
          return std::nullopt;
        }
        if (in_order) return std::nullopt;
        State state = ooc::detail::kernel_identity<T>(kernel);
        fold_into(state, tile, tile.begin, tile.end, tile.begin / run * run);
        return state;
      },
      [&](const Tile& tile, std::optional<State>&& state) {
        if (whole_slabs(tile, run)) return;
        const std::int64_t run_begin = tile.begin / run * run;
        if (tile.begin == run_begin) running = ooc::detail::kernel_identity<T>(kernel);
        if constexpr (in_order) fold_into(running, tile, tile.begin, tile.end, run_begin);
        else kernel.merge(running, std::move(*state));
        if (tile.end == run_begin + run) out.put(tile.begin / run, ooc::detail::kernel_result<T>(kernel, running));
      });
}

// The axis does not vary fastest: each output element folds its rows one after another.
template <class T, class Fold>
void fold_rows(const MappedArray& in, const AxisLayout& layout, const Fold& fold, const Output& out,
               const PipelineOptions& options) {
  using Input = typename Fold::Input;
  using Acc = typename Fold::Acc;
  const std::int64_t inner = layout.inner;
  const std::int64_t slab = layout.reduce * inner;
  const TilePlan plan = TilePlan::slabs(layout.outer, slab, in.dtype().itemsize(), options.tile_bytes);
  ooc::detail::Streams streams(plan, options);
  streams.add_input(in);
  auto fold_into = [&](Acc* acc, const Tile& tile, std::int64_t begin, std::int64_t end, std::int64_t slab_begin) {
    ooc::detail::visit_values_as<Input>(tile_values(streams, in, tile, begin), in.dtype(), Tile{tile.index, begin, end},
                                        [&](const Tile& piece, const ConstArrayMap<Input>& x) {
      const Input* values = x.data();
      const std::int64_t at = piece.begin - slab_begin;
      std::int64_t left = x.size();
      std::int64_t row = at / inner, i = at % inner;  // one division per block, not per row
      if (i > 0) {  // the rest of a row begun in the block before
        const std::int64_t n = std::min(left, inner - i);
        for (std::int64_t k = 0; k < n; ++k) fold.step(acc[i + k], values[k], row);
        values += n;
        left -= n;
        ++row;
      }
      // Whole rows: the columns of a row are independent, so the inner loop vectorises
      // (numpy's order along each column is kept: row after row).
      for (; left >= inner; left -= inner, values += inner, ++row)
        for (std::int64_t k = 0; k < inner; ++k) fold.step(acc[k], values[k], row);
      for (std::int64_t k = 0; k < left; ++k) fold.step(acc[k], values[k], row);  // a row the next block ends
    });
  };
  auto finish = [&](const Acc* acc, std::int64_t slab_index) {
    for (std::int64_t i = 0; i < inner; ++i) out.put(slab_index * inner + i, fold.finish(acc[i], layout.reduce));
  };
  auto fresh = [&] {
    auto acc = std::make_unique<Acc[]>(static_cast<std::size_t>(inner));
    std::fill(acc.get(), acc.get() + inner, fold.init());
    return acc;
  };
  std::unique_ptr<Acc[]> running;
  struct Done {};
  run_pipeline(
      plan, streams, options,
      [&](const Tile& tile) {
        if (whole_slabs(tile, slab)) {
          for (std::int64_t begin = tile.begin; begin < tile.end; begin += slab) {
            const auto acc = fresh();
            fold_into(acc.get(), tile, begin, begin + slab, begin);
            finish(acc.get(), begin / slab);
          }
        }
        return Done{};
      },
      [&](const Tile& tile, Done&&) {
        if (whole_slabs(tile, slab)) return;
        const std::int64_t slab_begin = tile.begin / slab * slab;
        if (tile.begin == slab_begin) running = fresh();
        fold_into(running.get(), tile, tile.begin, tile.end, slab_begin);
        if (tile.end == slab_begin + slab) finish(running.get(), tile.begin / slab);
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
  if (code_ == Code::histogram) throw UsageError(in.path(), "histogram takes no --axis (numpy's has none)");
  const int k = normalize_axis(axis, in.ndim());
  const AxisLayout layout = axis_layout(in.shape(), in.order(), k);
  const Output output{result_dtype(in.dtype()), out.data()};
  if (static_cast<std::uint64_t>(out.size()) !=
      static_cast<std::uint64_t>(layout.outer * layout.inner * output.dtype.itemsize()))
    throw UsageError(in.path(), "the output buffer does not fit the reduced shape");
  const bool array_result = in.ndim() >= 2;  // a 1-d array reduces to a scalar, divided as one
  try {
    switch (code_) {
      case Code::sum: return reduce_along(in, layout, Sum{}, []<class T>() { return SumFold<T>{}; }, output, options);
      case Code::nansum:
        return reduce_along(in, layout, NanSum{}, []<class T>() { return SumFold<T>{true}; }, output, options);
      case Code::prod: return reduce_along(in, layout, Prod{}, []<class T>() { return ProdFold<T>{}; }, output, options);
      case Code::mean:
        return reduce_along(in, layout, Mean{array_result}, [&]<class T>() { return MeanFold<T>{array_result}; },
                            output, options);
      case Code::nanmean:
        return reduce_along(in, layout, NanMean{}, []<class T>() { return NanMeanFold<T>{}; }, output, options);
      case Code::min:
        return reduce_along(in, layout, Min{}, []<class T>() { return ExtremumFold<T, true, false>{}; }, output, options);
      case Code::max:
        return reduce_along(in, layout, Max{}, []<class T>() { return ExtremumFold<T, false, false>{}; }, output, options);
      case Code::nanmin:
        return reduce_along(in, layout, NanMin{}, []<class T>() { return ExtremumFold<T, true, true>{}; }, output, options);
      case Code::nanmax:
        return reduce_along(in, layout, NanMax{}, []<class T>() { return ExtremumFold<T, false, true>{}; }, output, options);
      case Code::argmin:
        return reduce_along(in, layout, ArgMin{}, []<class T>() { return ArgFold<T, true>{}; }, output, options);
      case Code::argmax:
        return reduce_along(in, layout, ArgMax{}, []<class T>() { return ArgFold<T, false>{}; }, output, options);
      case Code::var: case Code::std: {
        const Var var{params_.ddof, code_ == Code::std};
        return reduce_along(in, layout, var, [&]<class T>() { return VarFold<T>{var}; }, output, options);
      }
      case Code::count_nonzero:
        return reduce_along(in, layout, CountNonzero{}, []<class T>() { return CountFold<T>{}; }, output, options);
      case Code::any:
        return reduce_along(in, layout, Any{}, []<class T>() { return TruthFold<T, false>{}; }, output, options);
      case Code::all:
        return reduce_along(in, layout, All{}, []<class T>() { return TruthFold<T, true>{}; }, output, options);
      case Code::norm: return reduce_along(in, layout, Norm{}, []<class T>() { return NormFold<T>{}; }, output, options);
      case Code::histogram: default: break;
    }
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

}  // namespace ooc
