#pragma once
/// Running kernels over arrays: ooc::transform (elementwise), ooc::reduce (reductions)
/// and ooc::for_each_tile, each streamed tile by tile through the pipeline.
///
/// The kernel contracts:
///
/// * An elementwise kernel is a callable taking an Eigen array expression
///   (ConstArrayMap<C>) and returning an array expression of the same length, e.g.
///   `[](const auto& x) { return x * 2 + 1; }`. C, the compute type, is the output's
///   element type: input values are converted to C first, as numpy converts a ufunc's
///   inputs to its loop type. It must be elementwise: element i of the result may depend
///   only on element i of the input.
///
/// * A reduction kernel is a class with
///     - `State`, the partial result (or `template <class T> using state_for = ...` when it
///       depends on the element type T);
///     - `void partial(State&, const ConstArrayMap<T>& values) const`, called for the
///       consecutive blocks (kBlockElements or fewer) of one tile, in order;
///     - `void merge(State& left, State&& right) const`, associative: `right` holds the
///       elements just after `left`'s;
///     - `R result(const State&) const` (or `template <class T> R result(...)`), the
///       answer, of one type R for every element type.
///   Optional: `State identity() const` (default: `State{}`), `template <class T> using
///   input_for = U` to see the values converted to U, `template <class T> static
///   constexpr bool accepts = ...` to refuse some element types with an error,
///   `partial(State&, values, std::int64_t first)` to be told the memory-order index of
///   values[0], and `template <class T> static constexpr bool in_order = true` for a
///   reduction that is not associative (a float product taken numpy's way, one multiply
///   after another): its `partial` is then called on the running state itself, block
///   after block in array order, on the commit stage, and `merge` is never called.
///   Each tile starts from the identity; the commit stage merges tile states into the
///   running state strictly in tile order, so a result does not depend on the thread count.
///   To run under MPI (ooc::mpi::reduce) the State must also travel between processes:
///   be trivially copyable, or have `save(StateWriter&) const` and `load(StateReader&)`
///   (ooc/state_bytes.hpp). merge() need not be associative even then: ranks merge in
///   exactly the single-process order.
///
/// * Over several inputs (ooc::inputs(a, b, ...), all of one shape and memory order), an
///   elementwise kernel takes one block per input, `[](const auto& x, const auto& y) {
///   return x * y; }`, and a reduction's partial does too: `partial(State&, const
///   ConstArrayMap<U>& x, const ConstArrayMap<U>& y)`, the blocks holding the same
///   elements of each input. A reduction is instantiated for numpy's result_type of the
///   inputs' dtypes.

#include "ooc/dtype.hpp"
#include "ooc/error.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/tile_plan.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <exception>
#include <tuple>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace ooc {

namespace detail {

/// True if `p` may be read as a T (an Eigen map of T needs T's alignment).
template <class T> bool is_aligned_for(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

/// The per-thread buffers that may be in use at once, by who uses them.
enum class ScratchSlot : int {
  converted_input = 0,   ///< visit_values_as: input 0's block converted to the compute type
  transform_result = 1,  ///< transform: a block's result before conversion to out's dtype
  kernel = 2,            ///< free for a kernel (ufunc blocks, eval's converted inputs)
  kernel_second = 3,     ///< a second one for kernels (NaN-cleaned values, squares, deviations)
  more_inputs = 4,       ///< visit_values_as: input i > 0 of several uses more_inputs + i
};

/// A per-thread buffer of at least `bytes` bytes for `slot` (for more_inputs, the one of
/// input `input`).
std::byte* scratch(ScratchSlot slot, std::size_t bytes, int input = 0);

/// The tiles a run over `array` processes: the array's plan for options.tile_bytes, or
/// the part of it that options.tiles names. Throws UsageError if `array` does not map
/// every element of them.
TilePlan plan_run(const MappedArray& array, const PipelineOptions& options);
/// Throws UsageError if `array` does not map every element the tiles of `plan` cover.
void check_mapped(const MappedArray& array, const TilePlan& plan);

template <std::size_t N>
using ArrayRefs = std::array<const MappedArray*, N>;

/// One tile of N inputs: where each input's elements of the tile start (in the mapping or
/// in a direct reader's buffer) and each input's dtype.
template <std::size_t N>
struct TileSources {
  std::array<const std::byte*, N> data;
  std::array<DType, N> dtypes;
};

/// The sources of `tile` for `arrays`, as `streams` delivers them.
template <std::size_t N>
TileSources<N> tile_sources(Streams& streams, const ArrayRefs<N>& arrays, const Tile& tile) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return TileSources<N>{{streams.input(*arrays[I], tile)...}, {arrays[I]->dtype()...}};
  }(std::make_index_sequence<N>{});
}

/// Calls f(block, values...) for the consecutive blocks of `tile` of each source, with
/// each source's values as ConstArrayMap<C>: mapped in place when they are native C and
/// aligned for it (a hand-made header can put the data at any offset, and numpy reads
/// such files too), else converted into a per-thread buffer, as numpy's ufunc buffering
/// does. Bools are always converted: any nonzero byte is True to numpy, and a C++ bool
/// holding 2 is undefined behaviour, so kernels see them as 0 and 1.
template <class C, std::size_t N, class F>
void visit_values_as(const TileSources<N>& sources, const Tile& tile, F&& f) {
  std::array<C*, N> buffers{};
  for (std::size_t i = 0; i < N; ++i)
    if (std::is_same_v<C, bool> || sources.dtypes[i] != dtype_of<C> || !is_aligned_for<C>(sources.data[i]))
      buffers[i] = reinterpret_cast<C*>(i == 0 ? scratch(ScratchSlot::converted_input, sizeof(C) * kBlockElements)
                                              : scratch(ScratchSlot::more_inputs, sizeof(C) * kBlockElements,
                                                        static_cast<int>(i)));
  for (std::int64_t at = tile.begin; at < tile.end; at += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, tile.end - at);
    auto values = [&](std::size_t i) {
      const std::byte* src =
          sources.data[i] + static_cast<std::size_t>(at - tile.begin) * static_cast<std::size_t>(sources.dtypes[i].itemsize());
      if (buffers[i] == nullptr) return ConstArrayMap<C>(reinterpret_cast<const C*>(src), n);
      convert(sources.dtypes[i], src, dtype_of<C>, buffers[i], n);
      return ConstArrayMap<C>(buffers[i], n);
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      f(Tile{tile.index, at, at + n}, values(I)...);
    }(std::make_index_sequence<N>{});
  }
}

/// visit_values_as for one input whose elements of `tile`, of dtype `dtype`, start at `data`.
template <class C, class F>
void visit_values_as(const std::byte* data, DType dtype, const Tile& tile, F&& f) {
  visit_values_as<C>(TileSources<1>{{data}, {dtype}}, tile, std::forward<F>(f));
}

/// Rethrows the current exception as an ooc::Error naming `path` unless it already is one.
[[noreturn]] void rethrow_naming(const std::string& path);
/// The exception rethrow_naming(path) would throw, caught.
std::exception_ptr current_exception_naming(const std::string& path);

template <class K, class T>
concept has_typed_state = requires { typename K::template state_for<T>; };
template <class K, class T> struct kernel_state { using type = typename K::State; };
template <class K, class T> requires has_typed_state<K, T>
struct kernel_state<K, T> { using type = typename K::template state_for<T>; };
template <class K, class T> using kernel_state_t = typename kernel_state<K, T>::type;

template <class K, class T> struct kernel_input { using type = T; };
template <class K, class T> requires requires { typename K::template input_for<T>; }
struct kernel_input<K, T> { using type = typename K::template input_for<T>; };
template <class K, class T> using kernel_input_t = typename kernel_input<K, T>::type;

template <class K, class T>
constexpr bool kernel_in_order() {
  if constexpr (requires { K::template in_order<T>; }) return K::template in_order<T>;
  else return false;
}

template <class K, class T>
constexpr bool kernel_accepts() {
  if constexpr (requires { K::template accepts<T>; }) return K::template accepts<T>;
  else return true;
}

template <class T, class K>
kernel_state_t<K, T> kernel_identity(const K& k) {
  if constexpr (requires { k.template identity<T>(); }) return k.template identity<T>();
  else if constexpr (requires { k.identity(); }) return k.identity();
  else return kernel_state_t<K, T>{};
}

template <class T, class K>
decltype(auto) kernel_result(const K& k, const kernel_state_t<K, T>& state) {
  if constexpr (requires { k.template result<T>(state); }) return k.template result<T>(state);
  else return k.result(state);
}

template <std::size_t, class T> using repeat_t = T;

// The reduction kernel contract (top of this file), checked member by member so that a
// kernel that breaks it fails with one static_assert naming the member (reduce() calls
// explain_reduction_contract), not pages of template errors.
template <class K, class T>
concept has_state = requires { typename K::State; } || has_typed_state<K, T>;

template <class K, class T, std::size_t... I>
constexpr bool partial_fits(std::index_sequence<I...>) {
  using State = kernel_state_t<K, T>;
  using Input = kernel_input_t<K, T>;
  return requires(const K& k, State& s, repeat_t<I, const ConstArrayMap<Input>&>... x) { k.partial(s, x...); } ||
         requires(const K& k, State& s, repeat_t<I, const ConstArrayMap<Input>&>... x, std::int64_t first) {
           k.partial(s, x..., first);
         };
}

template <class K, class T>
constexpr bool merge_fits() {
  using State = kernel_state_t<K, T>;
  return kernel_in_order<K, T>() || requires(const K& k, State& left, State&& right) { k.merge(left, std::move(right)); };
}

template <class K, class T>
constexpr bool result_fits() {
  using State = kernel_state_t<K, T>;
  return requires(const K& k, const State& s) { k.template result<T>(s); } ||
         requires(const K& k, const State& s) { k.result(s); };
}

template <class K, class T, std::size_t N>
constexpr bool reduction_fits() {
  if constexpr (!has_state<K, T>) return false;
  else return partial_fits<K, T>(std::make_index_sequence<N>{}) && merge_fits<K, T>() && result_fits<K, T>();
}

template <class K, class T, std::size_t N>
void explain_reduction_contract() {
  static_assert(has_state<K, T>,
                "ooc::reduce: the kernel needs `using State = ...;` (or `template <class T> using state_for = "
                "...;`), its partial result (contract: ooc/kernel.hpp)");
  if constexpr (has_state<K, T>) {
    static_assert(partial_fits<K, T>(std::make_index_sequence<N>{}),
                  "ooc::reduce: the kernel needs `void partial(State&, const ooc::ConstArrayMap<T>& block) const`: "
                  "a const member taking the state and one block per input, of the element type T (or of "
                  "input_for<T>) (contract: ooc/kernel.hpp)");
    static_assert(merge_fits<K, T>(),
                  "ooc::reduce: the kernel needs `void merge(State& left, State&& right) const` (contract: "
                  "ooc/kernel.hpp)");
    static_assert(result_fits<K, T>(),
                  "ooc::reduce: the kernel needs `R result(const State&) const` (or `template <class T> R "
                  "result(const State&) const`) (contract: ooc/kernel.hpp)");
  }
}

/// What reduce() returns for a kernel that breaks the contract (it then fails to compile
/// with explain_reduction_contract's message).
struct NotAReductionKernel {};

template <class K, class T>
struct kernel_result_type {
  using type = NotAReductionKernel;
};
template <class K, class T>
  requires(has_state<K, T> && result_fits<K, T>())
struct kernel_result_type<K, T> {
  using type = std::decay_t<decltype(kernel_result<T>(std::declval<const K&>(), std::declval<const kernel_state_t<K, T>&>()))>;
};

template <class K, class... Ts> struct first_accepted_result;
template <class K, class T, class... Ts> struct first_accepted_result<K, T, Ts...> {
  using type = typename std::conditional_t<kernel_accepts<K, T>(), kernel_result_type<K, T>,
                                           first_accepted_result<K, Ts...>>::type;
};
template <class K> struct first_accepted_result<K> { using type = void; };

template <class K, class... Ts> struct first_accepted { using type = void; };
template <class K, class T, class... Ts> struct first_accepted<K, T, Ts...> {
  using type = typename std::conditional_t<kernel_accepts<K, T>(), std::type_identity<T>, first_accepted<K, Ts...>>::type;
};
/// The element type reduce() checks a kernel's contract with first (double, if accepted).
template <class K>
using first_accepted_t = typename first_accepted<K, double, float, half, std::int64_t, std::int32_t, std::int16_t,
                                                 std::int8_t, std::uint64_t, std::uint32_t, std::uint16_t,
                                                 std::uint8_t, bool>::type;

/// What ooc::reduce(array, K) returns.
template <class K>
using reduce_result_t = typename first_accepted_result<K, double, float, half, std::int64_t, std::int32_t,
                                                       std::int16_t, std::int8_t, std::uint64_t, std::uint32_t,
                                                       std::uint16_t, std::uint8_t, bool>::type;

void check_transform_arrays(const MappedArray& in, MappedArray& out);

/// True if an elementwise kernel fn can be called with N blocks of C.
template <class Fn, class C, std::size_t... I>
constexpr bool callable_with_blocks(std::index_sequence<I...>) {
  return std::is_invocable_v<Fn&, repeat_t<I, const ConstArrayMap<C>&>...>;
}
/// The inputs of a kernel over several arrays must have one shape and order.
void check_same_layout(const MappedArray& first, const MappedArray& other);

}  // namespace detail

/// Several input arrays of one shape and memory order, for a kernel that reads them side
/// by side: ooc::transform(ooc::inputs(a, b), out, fn) and ooc::reduce(ooc::inputs(a, b), k).
template <std::size_t N>
struct Inputs {
  detail::ArrayRefs<N> arrays;
  const MappedArray& operator[](std::size_t i) const { return *arrays[i]; }
};

/// The arrays, for a kernel that takes one value block of each (they must outlive the call).
template <class... Arrays>
  requires(std::is_same_v<Arrays, MappedArray> && ...)
Inputs<sizeof...(Arrays)> inputs(const Arrays&... arrays) {
  return Inputs<sizeof...(Arrays)>{{&arrays...}};
}
/// Inputs of a temporary would point at an array gone at the end of the statement: keep
/// each MappedArray in a variable, as for values().
template <class... Arrays>
  requires((std::is_same_v<std::remove_cvref_t<Arrays>, MappedArray> && ...) &&
           !(std::is_lvalue_reference_v<Arrays> && ...))
Inputs<sizeof...(Arrays)> inputs(Arrays&&... arrays) = delete;

namespace detail {

/// Checks that every input maps the tiles of `plan` and adds it to `streams`' inputs
/// (except `out`, one of them written in place, which is an output).
template <std::size_t N>
void add_inputs(Streams& streams, const Inputs<N>& in, const TilePlan& plan, const MappedArray* out = nullptr) {
  for (std::size_t i = 0; i < N; ++i) {
    check_mapped(in[i], plan);
    if (&in[i] != out) streams.add_input(in[i]);
  }
}

}  // namespace detail

/// out = fn(a, b, ...) elementwise over several inputs, computing in C: each input is
/// converted to C, fn gets one ConstArrayMap<C> block per input and returns an array
/// expression, converted to out's dtype (and byte order). `out` may be one of the inputs
/// if it was mapped read-write.
template <class C, std::size_t N, class Fn>
void transform_as(const Inputs<N>& in, MappedArray& out, Fn&& fn, const PipelineOptions& options = {}) {
  static_assert(detail::callable_with_blocks<Fn, C>(std::make_index_sequence<N>{}),
                "ooc::transform: the kernel must take one block, const ConstArrayMap<C>&, per input "
                "(write `[](const auto& x) {...}`, or `[](const auto& x, const auto& y) {...}` for "
                "ooc::inputs(a, b)) and return an Eigen array expression");
  for (std::size_t i = 1; i < N; ++i) detail::check_same_layout(in[0], in[i]);  // the inputs first: a
  detail::check_transform_arrays(in[0], out);  // mismatch among them is not the output's
  const TilePlan plan = detail::plan_run(in[0], options);
  detail::check_mapped(out, plan);
  detail::Streams streams(plan, options);
  detail::add_inputs(streams, in, plan, &out);
  streams.add_output(out);
  out.writable_bytes();  // throws for a read-only output
  const DType out_dtype = out.dtype();
  const bool out_native = out_dtype == dtype_of<C>;
  const std::size_t out_item = static_cast<std::size_t>(out_dtype.itemsize());
  struct Done {};
  try {
    run_pipeline(
        plan, streams, options,
        [&](const Tile& tile) {
          std::byte* out_tile = streams.output(out, tile);
          const bool out_direct = out_native && detail::is_aligned_for<C>(out_tile);
          detail::visit_values_as<C>(detail::tile_sources(streams, in.arrays, tile), tile, [&](const Tile& piece, const auto&... x) {
            std::byte* dst = out_tile + static_cast<std::size_t>(piece.begin - tile.begin) * out_item;
            if (out_direct) {
              ArrayMap<C>(reinterpret_cast<C*>(dst), piece.size()) = fn(x...).template cast<C>();
            } else {
              C* result = reinterpret_cast<C*>(detail::scratch(detail::ScratchSlot::transform_result, sizeof(C) * kBlockElements));
              ArrayMap<C>(result, piece.size()) = fn(x...).template cast<C>();
              convert(dtype_of<C>, result, out_dtype, dst, piece.size());
            }
          });
          return Done{};
        },
        [](const Tile&, Done&&) {});
  } catch (...) {
    detail::rethrow_naming(in[0].path());
  }
}

/// out = fn(in) elementwise, computing in C: the input is converted to C, fn's result is
/// converted to out's dtype (and byte order). `out` may be `in` itself (in place) if it
/// was mapped read-write.
template <class C, class Fn>
void transform_as(const MappedArray& in, MappedArray& out, Fn&& fn, const PipelineOptions& options = {}) {
  transform_as<C>(inputs(in), out, std::forward<Fn>(fn), options);
}

/// The element types a generic elementwise kernel is compiled for, the first template
/// argument of ooc::transform: `ooc::transform<ooc::Floating>(in, out, fn)` compiles fn
/// for float and double only, and an `out` of another dtype is a UsageError naming it.
template <class... Ts>
struct ElementTypes {
  template <class T> static constexpr bool contains = (std::is_same_v<T, Ts> || ...);
  using First = std::tuple_element_t<0, std::tuple<Ts...>>;
  /// "float32, float64": what the error for another dtype lists.
  static std::string names() {
    std::string text;
    ((text += (text.empty() ? "" : ", ") + dtype_of<Ts>.name()), ...);
    return text;
  }
};
/// Every dtype ooc reads (the default: the kernel must compile for bool and float16 too).
using AllTypes = ElementTypes<bool, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                              std::uint16_t, std::uint32_t, std::uint64_t, half, float, double>;
/// float32 and float64: what Eigen's math functions (log1p, exp, sin, ...) take.
using Floating = ElementTypes<float, double>;
/// The integer dtypes, signed and unsigned.
using Integers = ElementTypes<std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t,
                              std::uint32_t, std::uint64_t>;
/// Integers and Floating: arithmetic without bool's and float16's restrictions.
using Numeric = ElementTypes<std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t,
                             std::uint32_t, std::uint64_t, float, double>;

/// out = fn(in...) elementwise, computing in out's element type. out's dtype is known only
/// at run time, so fn is compiled for every type of `Accepted` (by default every dtype):
/// write it generically (e.g. `x + T(1)` with `using T = typename
/// std::decay_t<decltype(x)>::Scalar`), or narrow the types (`transform<ooc::Floating>`:
/// an `out` of another dtype is then a UsageError), or name the compute type with
/// transform_as<C>.
template <class Accepted = AllTypes, std::size_t N, class Fn>
void transform(const Inputs<N>& in, MappedArray& out, Fn&& fn, const PipelineOptions& options = {}) {
  using First = typename Accepted::First;
  if constexpr (!detail::callable_with_blocks<Fn, First>(std::make_index_sequence<N>{})) {
    transform_as<First>(in, out, std::forward<Fn>(fn), options);  // its static_assert says why, once
  } else visit_dtype(out.dtype(), [&]<class C>(std::type_identity<C>) {
    if constexpr (Accepted::template contains<C>)
      transform_as<C>(in, out, std::forward<Fn>(fn), options);
    else
      throw UsageError(out.path(), "this kernel computes in " + Accepted::names() + ", not " + out.dtype().name() +
                                       " (the output's dtype)");
  });
}

template <class Accepted = AllTypes, class Fn>
void transform(const MappedArray& in, MappedArray& out, Fn&& fn, const PipelineOptions& options = {}) {
  transform<Accepted>(inputs(in), out, std::forward<Fn>(fn), options);
}

namespace detail {

template <class K, class State, class... Values>
void kernel_partial(const K& kernel, State& state, std::int64_t first, const Values&... x) {
  if constexpr (requires { kernel.partial(state, x..., first); }) kernel.partial(state, x..., first);
  else kernel.partial(state, x...);
}

/// The core of ooc::reduce, for any source of values: visit(tile, f) must call
/// f(piece, ConstArrayMap<Input>...) for the consecutive blocks of `tile` (one map per
/// input), where Input is the kernel's input type for element type T. Each tile is
/// reduced to a state of its own, from the kernel's identity, and the states go to
/// commit(tile, State&&) in tile order. An in-order kernel (a float product) has no
/// tile states: its partial runs on the commit stage on `running` itself, and commit
/// gets an empty state after each tile.
template <class T, class Kernel, class Visit, class Commit>
void reduce_tile_states(const Kernel& kernel, const TilePlan& plan, Streams& streams, const PipelineOptions& options,
                        kernel_state_t<Kernel, T>& running, Visit&& visit, Commit&& commit) {
  using State = kernel_state_t<Kernel, T>;
  constexpr bool in_order = kernel_in_order<Kernel, T>();
  auto fold_into = [&](State& state) {
    return [&](const Tile& piece, const auto&... x) { kernel_partial(kernel, state, piece.begin, x...); };
  };
  run_pipeline(
      plan, streams, options,
      [&](const Tile& tile) {
        State state = kernel_identity<T>(kernel);
        if constexpr (!in_order) visit(tile, fold_into(state));
        return state;
      },
      [&](const Tile& tile, State&& state) {
        if constexpr (in_order) visit(tile, fold_into(running));
        commit(tile, std::move(state));
      });
}

/// reduce_tile_states merging every tile state into the running state; returns the
/// kernel's result.
template <class T, class Kernel, class Visit>
decltype(auto) reduce_tiles(const Kernel& kernel, const TilePlan& plan, Streams& streams,
                            const PipelineOptions& options, Visit&& visit) {
  using State = kernel_state_t<Kernel, T>;
  State total = kernel_identity<T>(kernel);
  reduce_tile_states<T>(kernel, plan, streams, options, total, std::forward<Visit>(visit), [&](const Tile&, State&& state) {
    if constexpr (!kernel_in_order<Kernel, T>()) kernel.merge(total, std::move(state));
  });
  return kernel_result<T>(kernel, total);
}

}  // namespace detail

/// The step under reduce(): reduces each tile of `plan` over `in` (whose element type is
/// T) to a state of its own, starting from the kernel's identity, and hands the states to
/// commit(tile, State&&) in tile order. reduce() merges them; an MPI rank keeps them to
/// merge once the states of the tiles before its own arrive. Not for in-order kernels,
/// which have no tile states.
template <class T, class Kernel, class Commit>
void reduce_tiles(const MappedArray& in, const Kernel& kernel, const TilePlan& plan,
                  const PipelineOptions& options, Commit&& commit) {
  static_assert(detail::kernel_accepts<Kernel, T>(), "the kernel does not accept this element type");
  static_assert(!detail::kernel_in_order<Kernel, T>(), "an in-order reduction has no tile states");
  using State = detail::kernel_state_t<Kernel, T>;
  using Input = detail::kernel_input_t<Kernel, T>;
  if (in.dtype().native() != dtype_of<T>)
    throw UsageError(in.path(), "array holds " + in.dtype().name() + ", not " + dtype_of<T>.name());
  detail::check_mapped(in, plan);
  detail::Streams streams(plan, options);
  streams.add_input(in);
  State unused = detail::kernel_identity<T>(kernel);
  detail::reduce_tile_states<T>(
      kernel, plan, streams, options, unused,
      [&](const Tile& tile, auto&& f) { detail::visit_values_as<Input>(streams.input(in, tile), in.dtype(), tile, f); },
      std::forward<Commit>(commit));
}

/// Reduces several inputs side by side with a reduction kernel whose partial takes one
/// block of each (`partial(State&, const ConstArrayMap<U>& a, const ConstArrayMap<U>& b)`),
/// over every element (or those of options.tiles). T, the element type the kernel is
/// instantiated for, is numpy's result_type of the inputs' dtypes (int8 and float32 give
/// float32); every input is converted to the kernel's input_for<T>.
template <std::size_t N, class Kernel>
detail::reduce_result_t<Kernel> reduce(const Inputs<N>& in, const Kernel& kernel, const PipelineOptions& options = {}) {
  using Result = detail::reduce_result_t<Kernel>;
  static_assert(!std::is_void_v<Result>, "the kernel accepts no element type");
  if constexpr (!std::is_void_v<Result> && !detail::reduction_fits<Kernel, detail::first_accepted_t<Kernel>, N>()) {
    // One message for the kernel, not one per element type.
    detail::explain_reduction_contract<Kernel, detail::first_accepted_t<Kernel>, N>();
    throw std::logic_error("unreachable: the kernel breaks the reduction contract");
  } else try {
    DType common = in[0].dtype().native();
    for (std::size_t i = 1; i < N; ++i) {
      detail::check_same_layout(in[0], in[i]);
      common = promote_types(common, in[i].dtype());
    }
    return visit_dtype(common, [&]<class T>(std::type_identity<T>) -> Result {
      if constexpr (!detail::kernel_accepts<Kernel, T>()) {
        throw UsageError(in[0].path(), "this reduction does not accept " + common.name());
      } else if constexpr (!detail::reduction_fits<Kernel, T, N>()) {
        detail::explain_reduction_contract<Kernel, T, N>();
        throw std::logic_error("unreachable: the kernel breaks the reduction contract");
      } else {
        using Input = detail::kernel_input_t<Kernel, T>;
        const TilePlan plan = detail::plan_run(in[0], options);
        detail::Streams streams(plan, options);
        detail::add_inputs(streams, in, plan);
        return detail::reduce_tiles<T>(kernel, plan, streams, options, [&](const Tile& tile, auto&& f) {
          detail::visit_values_as<Input>(detail::tile_sources(streams, in.arrays, tile), tile, f);
        });
      }
    });
  } catch (...) {
    detail::rethrow_naming(in[0].path());
  }
}

/// Reduces every element of `in` (or those of options.tiles) with a reduction kernel
/// (see the contract above).
template <class Kernel>
detail::reduce_result_t<Kernel> reduce(const MappedArray& in, const Kernel& kernel,
                                       const PipelineOptions& options = {}) {
  return reduce(inputs(in), kernel, options);
}

/// Calls fn(piece, values) for every tile of `in`, in parallel and in no fixed order;
/// values is a ConstArrayMap of the array's element type in native byte order (a tile
/// of a byte-swapped array arrives as several converted pieces).
template <class Fn>
void for_each_tile(const MappedArray& in, Fn&& fn, const PipelineOptions& options = {}) {
  const TilePlan plan = detail::plan_run(in, options);
  detail::Streams streams(plan, options);
  streams.add_input(in);
  struct Done {};
  try {
    visit_dtype(in.dtype(), [&]<class T>(std::type_identity<T>) {
      run_pipeline(
          plan, streams, options,
          [&](const Tile& tile) {
            detail::visit_values_as<T>(streams.input(in, tile), in.dtype(), tile, fn);
            return Done{};
          },
          [](const Tile&, Done&&) {});
    });
  } catch (...) {
    detail::rethrow_naming(in.path());
  }
}

}  // namespace ooc
