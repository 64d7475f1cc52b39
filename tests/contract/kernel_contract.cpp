// Kernels that break ooc's kernel contract (ooc/kernel.hpp). Each CONTRACT_CASE must fail
// to compile with the one static_assert that names the broken member; ctest builds each
// case as its own target and looks for that message in the compiler's output.
#include <ooc/ooc.hpp>

#include <cstdint>

namespace {

#if CONTRACT_CASE == 1  // no merge
struct Kernel {
  using State = std::int64_t;
  template <class T> void partial(State& s, const ooc::ConstArrayMap<T>& x) const { s += x.size(); }
  std::int64_t result(const State& s) const { return s; }
};
#elif CONTRACT_CASE == 2  // partial not const
struct Kernel {
  using State = std::int64_t;
  template <class T> void partial(State& s, const ooc::ConstArrayMap<T>& x) { s += x.size(); }
  void merge(State& left, State&& right) const { left += right; }
  std::int64_t result(const State& s) const { return s; }
};
#elif CONTRACT_CASE == 3  // partial takes a plain pointer, not a block
struct Kernel {
  using State = std::int64_t;
  void partial(State& s, const double* x) const { s += x != nullptr; }
  void merge(State& left, State&& right) const { left += right; }
  std::int64_t result(const State& s) const { return s; }
};
#elif CONTRACT_CASE == 4  // no State
struct Kernel {
  template <class T> void partial(std::int64_t& s, const ooc::ConstArrayMap<T>& x) const { s += x.size(); }
  void merge(std::int64_t& left, std::int64_t&& right) const { left += right; }
  std::int64_t result(const std::int64_t& s) const { return s; }
};
#endif

}  // namespace

#if CONTRACT_CASE == 5  // an elementwise kernel taking two blocks, given one input
void run(const ooc::MappedArray& in, ooc::MappedArray& out) {
  ooc::transform(in, out, [](const auto& x, const auto& y) { return x + y; });
}
#else
auto run(const ooc::MappedArray& in) { return ooc::reduce(in, Kernel{}); }
#endif
