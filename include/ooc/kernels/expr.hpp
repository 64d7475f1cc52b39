#pragma once
/// Expressions over named arrays, evaluated as numpy evaluates the same Python text with
/// the names bound to np.load'ed arrays and the functions to numpy's: numbers, names,
/// + - * / **, unary minus, parentheses, comparisons, where(c, x, y), clip(x, lo, hi),
/// maximum(x, y), minimum(x, y), power(x, y) (np.power: none of `**`'s fast paths), the
/// functions sqrt exp log log1p expm1 sin cos tanh abs,
/// and one outermost reduction (sum(a*b)).
/// Inputs broadcast by numpy's rules; every step has numpy's result dtype (value-based
/// casting of Python numbers and 0-d arrays included). Evaluation is blocked: each tile is
/// computed in pieces of kPieceElements, so no whole-array temporary is ever made.

#include "ooc/dtype.hpp"
#include "ooc/kernels/elementwise.hpp"
#include "ooc/kernels/reductions.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/scalar.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ooc::kernels {

/// Elements evaluated at once through the whole expression: each node's values for a
/// piece are a few KiB, so a piece stays in the L1/L2 cache from the inputs to the result.
inline constexpr std::int64_t kPieceElements = 1024;

/// A name and the array it stands for.
struct Binding {
  std::string name;
  const MappedArray* array;
};

/// A parsed and type-checked expression. It refers to the bound arrays, which must
/// outlive it.
class Expression {
 public:
  /// Parses `text` and checks it against the bound arrays. Throws ooc::UsageError for a
  /// bad expression, an unknown name or function, shapes that do not broadcast, or an
  /// operation numpy refuses; the message points at the column:
  /// "eval: 2*a + ^ expected an operand at column 7".
  static Expression compile(std::string_view text, const std::vector<Binding>& bindings);

  Expression(Expression&&) noexcept;
  Expression& operator=(Expression&&) noexcept;
  ~Expression();

  /// The result's dtype, shape and memory order (numpy's: Fortran when every input that
  /// decides is Fortran). For a reduction: those of the array it reduces.
  DType dtype() const;
  const Shape& shape() const;
  Order order() const;
  /// The outermost reduction, if the expression has one.
  const std::optional<ReduceOp>& reduction() const;

  /// Evaluates the expression into `out` (shape(), order() and dtype(), any byte order).
  void evaluate(MappedArray& out, const PipelineOptions& options = {}) const;
  /// Evaluates into memory: shape().size() values of dtype() in order(). For small results.
  std::vector<std::byte> evaluate(const PipelineOptions& options = {}) const;
  /// The outermost reduction of the expression's values.
  Scalar reduce(const PipelineOptions& options = {}) const;

  struct Impl;

 private:
  explicit Expression(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;

  friend MappedArray map_expression(std::string_view text, const std::vector<std::string>& names,
                                    std::vector<MappedArray> arrays, std::string path);
};

/// The values of the expression `text` over `arrays` (bound to `names`, in order) as a
/// read-only array of the expression's dtype (native), shape and memory order, computed
/// when a run reads it: a reduction (along an axis too), a copy, a histogram of it
/// evaluates the expression tile by tile, piece by piece, as evaluate() does, with no
/// whole-array temporary. The array owns `arrays`; `path` is what errors call it (`text`
/// when empty). Throws what Expression::compile throws, and UsageError for an outermost
/// reduction or no array.
MappedArray map_expression(std::string_view text, const std::vector<std::string>& names,
                           std::vector<MappedArray> arrays, std::string path = {});

/// numpy's broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace ooc::kernels
