#pragma once
/// INTERNAL: not part of ooc's API, and may change in any release. Installed only
/// because the templates of <ooc/kernel.hpp> expand in the user's code and need it:
/// how a tile's blocks reach a kernel (converted or mapped in place), the per-thread
/// scratch buffers, the reduction contract's member-by-member checks and the loop that
/// reduces tiles to states.

#include "ooc/array_map.hpp"
#include "ooc/dtype.hpp"
#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/tile_plan.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <tuple>
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
  more_inputs = 4,       ///< visit_values_as: input i > 0 of several (index i)
  member_input = 5,      ///< several kernels together: the block converted to a member's
                         ///< input type (index: element_type_index of that type)
};

/// A per-thread buffer of at least `bytes` bytes for `slot`, the one numbered `index`
/// where a slot has several (more_inputs, member_input).
std::byte* scratch(ScratchSlot slot, std::size_t bytes, int index = 0);

/// The tiles a run over `array` processes: the array's plan for options.tile_bytes, or
/// the part of it that options.tiles names. Throws UsageError if `array` does not map
/// every element of them.
TilePlan plan_run(const MappedArray& array, const PipelineOptions& options);
/// The same for a run writing `out`, whose writer (a compressed output's) may ask for
/// smaller tiles (TileWriter::tile_bytes_cap).
TilePlan plan_run(const MappedArray& array, const PipelineOptions& options, const MappedArray& out);
/// `tile_bytes` (of elements of `itemsize` bytes) cut to what the writer of `out` asks a
/// tile to hold at most, counted in the same elements.
std::uint64_t tile_bytes_writing(const MappedArray& out, int itemsize, std::uint64_t tile_bytes);
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

/// Checks that every input maps the tiles of `plan` and adds it to `streams`' inputs
/// (except `out`, one of them written in place, which is an output).
template <std::size_t N>
void add_inputs(Streams& streams, const ArrayRefs<N>& in, const TilePlan& plan, const MappedArray* out = nullptr) {
  for (std::size_t i = 0; i < N; ++i) {
    check_mapped(*in[i], plan);
    if (in[i] != out) streams.add_input(*in[i]);
  }
}

template <class K, class State, class... Values>
void kernel_partial(const K& kernel, State& state, std::int64_t first, const Values&... x) {
  if constexpr (requires { kernel.partial(state, x..., first); }) kernel.partial(state, x..., first);
  else kernel.partial(state, x...);
}

/// T's place among the twelve element types (a member_input scratch buffer each).
template <class T>
constexpr int element_type_index() {
  using Types = std::tuple<bool, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t,
                           std::uint32_t, std::uint64_t, half, float, double>;
  return []<std::size_t... I>(std::index_sequence<I...>) {
    int index = -1;
    ((std::is_same_v<T, std::tuple_element_t<I, Types>> ? (index = static_cast<int>(I)) : 0), ...);
    return index;
  }(std::make_index_sequence<std::tuple_size_v<Types>>{});
}

/// One block of T values as the members of several kernels reduced together see it: each
/// member takes it as its own input type (kernel_input_t), as its own run would have
/// converted it, and a type several members take is converted once per block.
template <class T>
class MemberInputs {
 public:
  MemberInputs(const T* values, std::int64_t count) : values_(values), count_(count) {}

  template <class U>
  ConstArrayMap<U> as() {
    if constexpr (std::is_same_v<U, T>) {
      return ConstArrayMap<U>(values_, count_);
    } else {
      constexpr int index = element_type_index<U>();
      if (converted_[index] == nullptr) {
        U* to = reinterpret_cast<U*>(scratch(ScratchSlot::member_input, sizeof(U) * static_cast<std::size_t>(count_), index));
        convert(dtype_of<T>, values_, dtype_of<U>, to, count_);
        converted_[index] = to;
      }
      return ConstArrayMap<U>(static_cast<const U*>(converted_[index]), count_);
    }
  }

 private:
  const T* values_;
  std::int64_t count_;
  std::array<const void*, 12> converted_{};
};

/// One member of several kernels reduced together takes a block (whose first element has
/// memory-order index `first`). When they run in order (a member is an in-order
/// reduction, a float product), `state` is the running state: a member that is not in
/// order reduces the block to a state of its own and merges it at once, which adds the
/// same block results in the same order as its own run's tile merges do.
template <class T, class K>
void member_partial(const K& kernel, kernel_state_t<K, T>& state, MemberInputs<T>& inputs, std::int64_t first,
                    bool together_in_order) {
  const auto x = inputs.template as<kernel_input_t<K, T>>();
  if constexpr (!kernel_in_order<K, T>()) {
    if (together_in_order) {
      kernel_state_t<K, T> block = kernel_identity<T>(kernel);
      kernel_partial(kernel, block, first, x);
      kernel.merge(state, std::move(block));
      return;
    }
  }
  kernel_partial(kernel, state, first, x);
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

}  // namespace ooc
