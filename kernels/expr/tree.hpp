#pragma once
// The expression tree of eval, shared by its parser (parser.cpp), its type checker, which
// follows numpy 1.24 step by step (types.cpp), and its blocked evaluator (evaluator.cpp).

#include "../layer.hpp"

#include "ooc/error.hpp"
#include "ooc/kernels/expr.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ooc::kernels {
namespace expr_detail {

// ---- tokens ---------------------------------------------------------------------------

enum class Tok { number, name, op, end };

struct Token {
  Tok kind;
  std::string text;
  int column;  // 1-based
};

constexpr std::string_view kFunctions =
    "sqrt, exp, log, log1p, expm1, sin, cos, tanh, abs, where, clip, maximum, minimum, power";
constexpr std::string_view kReductions =
    "sum, prod, mean, min, max, argmin, argmax, var, std, count_nonzero, any, all, nansum, nanmean, nanmin, "
    "nanmax, norm";

// ---- the expression tree --------------------------------------------------------------

struct Node {
  enum class Kind { input, constant, ufunc, where, ones, copy };
  Kind kind = Kind::constant;
  int column = 0;
  std::vector<int> args;
  Ufunc ufunc = Ufunc::add;
  std::optional<DType> forced_loop;  // the ** fast paths compute in the array's own dtype
  bool power_operator = false;       // `**`, whose fast paths numpy's ndarray takes; power() has none
  const MappedArray* array = nullptr;
  std::string name;

  // After checking.
  DType dtype{ooc::Kind::floating, 8};
  Shape shape;
  DType loop{ooc::Kind::floating, 8};
  // Constants (0-d inputs, Python numbers, anything computed from them only).
  bool python = false;   // a Python number: int, float (bool results are numpy bools)
  bool ndarray = false;  // a 0-d ndarray (np.load'ed, np.where's), not a numpy scalar
  PyScalar value;
  // For a node computing on arrays: its constant arguments, in its loop dtype.
  std::vector<std::array<std::byte, 8>> constant_args;

  bool is_constant() const { return kind == Kind::constant; }
};


[[noreturn]] void fail_at(std::string_view text, int column, const std::string& message);
// The value of a scalar node as a numpy scalar of its dtype, and back to its bytes.
PyScalar scalar_of(DType dtype, const void* bytes);
std::array<std::byte, 8> bytes_in(DType dtype, const PyScalar& value);

// Python arithmetic between Python numbers (types.cpp).
std::optional<PyScalar> python_int(__int128 v);
__int128 wide(const PyScalar& s);
int python_compare(const PyScalar& a, const PyScalar& b);
double python_true_divide(__int128 a, __int128 b);

/// Parses `text` (an expression, optionally inside one reduction) into `nodes`, children
/// first; returns the root. Throws UsageError pointing at the column.
int parse(std::string_view text, const std::vector<Binding>& bindings, std::vector<Node>& nodes,
          std::optional<std::pair<std::string, int>>& reduction);

}  // namespace expr_detail

// ---- the checked expression ---------------------------------------------------------------

struct Expression::Impl {
  std::string text;
  std::vector<expr_detail::Node> nodes;
  int root = 0;
  std::optional<ReduceOp> reduction;
  Shape shape;
  Order order = Order::c;
  DType dtype{Kind::floating, 8};
  std::int64_t size = 1;
  // Output axes in memory order, fastest first, and each input's stride along them.
  std::vector<std::int64_t> memory_extent;
  std::vector<std::vector<std::int64_t>> input_strides;  // per node (inputs only)
  std::vector<bool> input_direct;                        // input laid out as the result
  // Inputs read tile by tile (selections, chunked datasets): a broadcast one is read
  // whole once (it is smaller than the result); one laid out as the result is read
  // piece by piece, under the lock if its reader is not thread-safe.
  std::vector<std::vector<std::byte>> input_loaded;
  mutable std::mutex reader_lock;

  [[noreturn]] void fail(const expr_detail::Node& n, const std::string& message) const { expr_detail::fail_at(text, n.column, message); }

  Operand operand(const expr_detail::Node& n) const {
    if (!n.is_constant()) return Operand::array(n.dtype);
    return n.python ? Operand::python(n.value) : Operand::numpy_scalar(n.dtype, n.value);
  }

  void check();
  void check_ufunc(expr_detail::Node& n);
  void type_ufunc(expr_detail::Node& n);
  void fold_python(expr_detail::Node& n);
  void fold_numpy(expr_detail::Node& n);
  void rewrite_power(expr_detail::Node& n);
  void plan_layout();

  // Evaluation.
  template <class Emit>
  void evaluate_range(std::int64_t begin, std::int64_t end, Emit&& emit) const;
  void gather(const expr_detail::Node& n, std::size_t index, std::int64_t begin, std::int64_t count, std::byte* out) const;
  void load_whole(std::size_t index);
};

}  // namespace ooc::kernels
