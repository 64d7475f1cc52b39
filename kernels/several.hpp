// Several reductions chosen at run time (by ReduceOp's names), reduced over one read of
// the array: ooc::reduce_together (reductions.cpp) and ooc::reduce_axis_together
// (axis.cpp). The compile-time form is ooc::Together (ooc/kernel.hpp); both hand each
// block to every member through detail::member_partial, so a member's bits are its own
// run's.
#pragma once

#include "layer.hpp"

#include "ooc/kernel.hpp"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace ooc::kernels::several {

/// One reduction kernel among Kernels, chosen at run time: a member of Several, whose
/// answer is an R (constructed from the kernel's result).
template <class R, class... Kernels>
class OneOf {
 public:
  template <class K>
  explicit OneOf(K kernel) : kernel_(std::in_place_type<K>, std::move(kernel)) {}

  template <class T>
  using State = std::variant<ooc::detail::kernel_state_t<Kernels, T>...>;

  /// f(kernel) with the kernel held, as its own type.
  template <class F>
  decltype(auto) visit(F&& f) const {
    return with_index([&]<std::size_t I>(std::integral_constant<std::size_t, I>) -> decltype(auto) {
      return f(std::get<I>(kernel_));
    });
  }
  template <class T>
  bool in_order() const {
    return with_index([]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      return ooc::detail::kernel_in_order<std::variant_alternative_t<I, std::variant<Kernels...>>, T>();
    });
  }
  template <class T>
  State<T> identity() const {
    return with_index([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      return State<T>(std::in_place_index<I>, ooc::detail::kernel_identity<T>(std::get<I>(kernel_)));
    });
  }
  template <class T>
  void partial(State<T>& state, ooc::detail::MemberInputs<T>& inputs, std::int64_t first, bool together_in_order) const {
    with_index([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      ooc::detail::member_partial<T>(std::get<I>(kernel_), std::get<I>(state), inputs, first, together_in_order);
    });
  }
  template <class T>
  void merge(State<T>& left, State<T>&& right) const {
    with_index([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      std::get<I>(kernel_).merge(std::get<I>(left), std::move(std::get<I>(right)));
    });
  }
  /// Var's second pass along runs needs to know which run a state reduces (its mean).
  template <class T>
  void start_run(State<T>& state, std::int64_t run) const {
    with_index([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      const auto& kernel = std::get<I>(kernel_);
      if constexpr (requires { kernel.start_run(std::get<I>(state), run); }) kernel.start_run(std::get<I>(state), run);
    });
  }
  template <class T>
  R result(const State<T>& state) const {
    return with_index([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      return R(ooc::detail::kernel_result<T>(std::get<I>(kernel_), std::get<I>(state)));
    });
  }

 private:
  // f(std::integral_constant<size_t, I>{}) for the index I of the kernel held.
  template <std::size_t I = 0, class F>
  decltype(auto) with_index(F&& f) const {
    if constexpr (I + 1 == sizeof...(Kernels)) {
      return f(std::integral_constant<std::size_t, I>{});
    } else {
      if (kernel_.index() == I) return f(std::integral_constant<std::size_t, I>{});
      return with_index<I + 1>(std::forward<F>(f));
    }
  }

  std::variant<Kernels...> kernel_;
};

/// What a member of several answers: its result, or the error its own run would raise
/// there (an empty array's min), kept so that the caller can raise the first in order.
template <class R>
using Outcome = std::variant<R, std::exception_ptr>;

/// The members reduced together over an array of T: a reduction kernel (for T alone)
/// whose result is each member's outcome, in order. kInOrder when a member must see the
/// blocks in order (a float product): then they all run on the commit stage.
template <class T, class Member, bool kInOrder>
struct Several {
  using R = decltype(std::declval<const Member&>().template result<T>(
      std::declval<const typename Member::template State<T>&>()));
  const std::vector<Member>* members;
  std::string path;  // what an error names

  using State = std::vector<typename Member::template State<T>>;
  template <class U> using input_for = T;
  template <class U> static constexpr bool accepts = std::is_same_v<U, T>;
  template <class U> static constexpr bool in_order = kInOrder;

  State identity() const {
    State state;
    state.reserve(members->size());
    for (const Member& m : *members) state.push_back(m.template identity<T>());
    return state;
  }
  void partial(State& s, const ConstArrayMap<T>& x, std::int64_t first) const {
    ooc::detail::MemberInputs<T> inputs(x.data(), x.size());
    for (std::size_t i = 0; i < members->size(); ++i) (*members)[i].template partial<T>(s[i], inputs, first, kInOrder);
  }
  void merge(State& left, State&& right) const {
    for (std::size_t i = 0; i < members->size(); ++i) (*members)[i].template merge<T>(left[i], std::move(right[i]));
  }
  void start_run(State& s, std::int64_t run) const {
    for (std::size_t i = 0; i < members->size(); ++i) (*members)[i].template start_run<T>(s[i], run);
  }
  std::vector<Outcome<R>> result(const State& s) const {
    std::vector<Outcome<R>> outcomes;
    outcomes.reserve(members->size());
    for (std::size_t i = 0; i < members->size(); ++i) {
      try {
        outcomes.emplace_back(std::in_place_index<0>, (*members)[i].template result<T>(s[i]));
      } catch (...) {
        outcomes.emplace_back(std::in_place_index<1>, ooc::detail::current_exception_naming(path));
      }
    }
    return outcomes;
  }
};

/// Whether any member must see the blocks in order, for arrays of T.
template <class T, class Member>
bool any_in_order(const std::vector<Member>& members) {
  for (const Member& m : members)
    if (m.template in_order<T>()) return true;
  return false;
}

/// The reduction of `in` (whose element type is T) by all the members together: their
/// outcomes, in order. Errors of the run itself (I/O, a histogram's overflow) are thrown.
template <class T, class Member>
auto reduce_all(const MappedArray& in, const std::vector<Member>& members, const PipelineOptions& options) {
  if constexpr (is_floating_v<T>)  // only a float product is taken in order
    if (any_in_order<T>(members)) return reduce(in, Several<T, Member, true>{&members, in.path()}, options);
  return reduce(in, Several<T, Member, false>{&members, in.path()}, options);
}

/// The value of an outcome, or its error raised.
template <class R>
R value_of(Outcome<R>&& outcome) {
  if (outcome.index() == 1) std::rethrow_exception(std::get<1>(outcome));
  return std::move(std::get<0>(outcome));
}

/// Counts the runs of the pipeline that `options` (returned, changed) is given to: each
/// run over the input that completes is one read of it.
inline PipelineOptions counting_reads(const PipelineOptions& options, int& reads) {
  PipelineOptions counted = options;
  counted.on_progress = [&reads, report = options.on_progress](const Progress& p) {
    if (report) report(p);
    if (p.tiles_done == p.tiles) ++reads;
  };
  return counted;
}

}  // namespace ooc::kernels::several
