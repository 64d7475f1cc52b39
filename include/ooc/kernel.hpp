#pragma once
/// Running kernels over arrays: ooc::transform (elementwise), ooc::reduce (reductions)
/// and ooc::for_each_tile, each streamed tile by tile through the pipeline.
///
/// The kernel contracts:
///
/// * An elementwise kernel is a callable taking an Eigen array expression
///   (ConstArrayMap<C>) and returning an array expression of the same length, e.g.
///   `ooc::transform<ooc::Floating>(in, out, [](const auto& x) { return x * 2 + 1; });`
///   (for float and double; a kernel for every dtype must also compile for bool and
///   float16, whose Eigen arrays take no int constants). C, the compute type, is the output's
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
///
/// * Several reduction kernels over one read of an array: `auto [s, m] =
///   ooc::reduce(a, ooc::kernels::Sum{}, ooc::kernels::Mean{})` (or ooc::together(...),
///   itself a kernel): each sees every block as its own run would, so each result is its
///   own ooc::reduce's, bit for bit. Any kernel of this contract works there unchanged.

#include "ooc/array_map.hpp"
#include "ooc/dtype.hpp"
#include "ooc/error.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/internal/kernel.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/state_bytes.hpp"
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

/// Several input arrays of one shape and memory order, for a kernel that reads them side
/// by side: ooc::transform(ooc::inputs(a, b), out, fn) and ooc::reduce(ooc::inputs(a, b), k).
template <std::size_t N>
struct Inputs {
  std::array<const MappedArray*, N> arrays;
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
  const TilePlan plan = detail::plan_run(in[0], options, out);
  detail::check_mapped(out, plan);
  detail::Streams streams(plan, options);
  detail::add_inputs(streams, in.arrays, plan, &out);
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
        detail::add_inputs(streams, in.arrays, plan);
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

/// Several reduction kernels over one read of the array: every block of every tile goes to
/// each of them, converted to the kernel's own input type as its own run converts it, and
/// each merges its states in tile order as its own run does, so each result is the one
/// its own ooc::reduce gives, bit for bit. A reduction kernel itself, whose result is the
/// std::tuple of theirs (ooc::mpi::reduce takes it where their states travel); made by
/// ooc::together(k...), or implicitly by ooc::reduce(a, k1, k2, ...).
template <class... Kernels>
struct Together {
  std::tuple<Kernels...> kernels;

  template <class T> using input_for = T;  // each kernel converts from the array's own type
  template <class T> static constexpr bool accepts = (detail::kernel_accepts<Kernels, T>() && ...);
  // With a float product (taken in order, on the commit stage) the others run there too.
  template <class T> static constexpr bool in_order = (detail::kernel_in_order<Kernels, T>() || ...);

  template <class T>
  struct State {
    std::tuple<detail::kernel_state_t<Kernels, T>...> states;
    void save(StateWriter& out) const {
      std::apply([&](const auto&... state) { (save_state(state, out), ...); }, states);
    }
    void load(StateReader& in) {
      std::apply([&](auto&... state) { (load_state(state, in), ...); }, states);
    }
  };
  template <class T> using state_for = State<T>;

  template <class T>
  State<T> identity() const {
    return each_index([&]<std::size_t... I>() { return State<T>{{detail::kernel_identity<T>(std::get<I>(kernels))...}}; });
  }
  template <class T>
  void partial(State<T>& s, const ConstArrayMap<T>& x, std::int64_t first) const {
    detail::MemberInputs<T> inputs(x.data(), x.size());
    each_index([&]<std::size_t... I>() {
      (detail::member_partial<T>(std::get<I>(kernels), std::get<I>(s.states), inputs, first, in_order<T>), ...);
    });
  }
  template <class T>
  void merge(State<T>& left, State<T>&& right) const {
    each_index([&]<std::size_t... I>() {
      (std::get<I>(kernels).merge(std::get<I>(left.states), std::move(std::get<I>(right.states))), ...);
    });
  }
  /// The kernels' results in their order (a braced list: the first that throws, as an
  /// empty array's min does, is the error).
  template <class T>
  auto result(const State<T>& s) const {
    return each_index([&]<std::size_t... I>() {
      return std::tuple<std::decay_t<decltype(detail::kernel_result<T>(std::get<I>(kernels), std::get<I>(s.states)))>...>{
          detail::kernel_result<T>(std::get<I>(kernels), std::get<I>(s.states))...};
    });
  }

 private:
  template <class F>
  static decltype(auto) each_index(F&& f) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
      return f.template operator()<I...>();
    }(std::index_sequence_for<Kernels...>{});
  }
};

/// The kernels, to be reduced together over one read: ooc::reduce(a, ooc::together(
/// ooc::kernels::Sum{}, ooc::kernels::Max{}), options) gives std::tuple<Scalar, Scalar>.
template <class... Kernels>
Together<Kernels...> together(const Kernels&... kernels) {
  return Together<Kernels...>{{kernels...}};
}

template <class First, class... More>
using last_of_t = std::tuple_element_t<sizeof...(More), std::tuple<First, More...>>;

/// Several reduction kernels over one read of `in` (see Together), the options last where
/// there are any: `auto [total, peak] = ooc::reduce(a, ooc::kernels::Sum{},
/// ooc::kernels::Max{});`, `ooc::reduce(a, Sum{}, Mean{}, Var{.std = true}, options)`.
template <class First, class Second, class... More>
  requires(!std::is_same_v<Second, PipelineOptions> || sizeof...(More) > 0)
auto reduce(const MappedArray& in, const First& first, const Second& second, const More&... more) {
  if constexpr (std::is_same_v<last_of_t<Second, More...>, PipelineOptions>) {
    const auto arguments = std::forward_as_tuple(first, second, more...);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return reduce(in, together(std::get<I>(arguments)...), std::get<sizeof...(More) + 1>(arguments));
    }(std::make_index_sequence<sizeof...(More) + 1>{});
  } else {
    return reduce(in, together(first, second, more...));
  }
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
