// Expressions: a parser that remembers columns, a type checker that follows numpy 1.24
// step by step (Python arithmetic between Python numbers, numpy's scalar promotion between
// scalars, value-based casting between arrays and scalars, ndarray ** scalar fast paths),
// and a blocked evaluator: tiles of the result, pieces of kPieceElements through every
// node, broadcast inputs gathered by strides, never a whole-array temporary.

#include "ooc/kernels/expr.hpp"

#include "mapped_array_access.hpp"
#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/kernel.hpp"
#include "tile_reader.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>

namespace ooc::kernels {

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    const std::int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

namespace {

// ---- tokens ---------------------------------------------------------------------------

enum class Tok { number, name, op, end };

struct Token {
  Tok kind;
  std::string text;
  int column;  // 1-based
};

constexpr std::string_view kFunctions = "sqrt, exp, log, log1p, expm1, sin, cos, tanh, abs, where, clip";
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

[[noreturn]] void fail_at(std::string_view text, int column, const std::string& message) {
  std::string before(text.substr(0, static_cast<std::size_t>(std::max(0, column - 1))));
  while (!before.empty() && before.back() == ' ') before.pop_back();
  const std::string after(text.substr(std::min(text.size(), static_cast<std::size_t>(std::max(0, column - 1)))));
  throw UsageError("eval: " + before + (before.empty() ? "^" : " ^") + after + " " + message + " at column " +
                           std::to_string(column));
}

// The value of a scalar node as a numpy scalar of its dtype (for folding and loops).
PyScalar scalar_of(DType dtype, const void* bytes) {
  return visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    T v;
    std::memcpy(static_cast<void*>(&v), bytes, sizeof v);
    if constexpr (is_floating_v<T>) return PyScalar::of_double(static_cast<double>(v));
    else if constexpr (std::is_same_v<T, bool>) return PyScalar::of_int(v ? 1 : 0);
    else if constexpr (std::is_signed_v<T>) return PyScalar::of_int(v);
    else return PyScalar::of_uint(v);
  });
}

std::array<std::byte, 8> bytes_in(DType dtype, const PyScalar& value) {
  std::array<std::byte, 8> out{};
  visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    const T v = value.template as<T>();
    std::memcpy(out.data(), static_cast<const void*>(&v), sizeof v);
  });
  return out;
}

// ---- parser -------------------------------------------------------------------------------

class Parser {
 public:
  Parser(std::string_view text, const std::vector<Binding>& bindings) : text_(text), bindings_(bindings) {
    tokenize();
  }

  // expression [reduction] -> root; nodes_ holds the tree in creation order (children first).
  int parse(std::optional<std::pair<std::string, int>>& reduction) {
    if (peek().kind == Tok::name && is_reduction(peek().text) && tokens_[pos_ + 1].text == "(") {
      reduction = std::make_pair(peek().text, peek().column);
      pos_ += 2;
      const int root = comparison();
      expect(")");
      expect_end();
      return root;
    }
    const int root = comparison();
    expect_end();
    return root;
  }

  std::vector<Node> nodes_;

 private:
  static bool is_reduction(std::string_view name) {
    for (std::string_view r : {"sum", "prod", "mean", "min", "max", "argmin", "argmax", "var", "std",
                               "count_nonzero", "any", "all", "nansum", "nanmean", "nanmin", "nanmax", "norm"})
      if (r == name) return true;
    return false;
  }

  void tokenize() {
    std::size_t i = 0;
    while (i < text_.size()) {
      const char c = text_[i];
      const int column = static_cast<int>(i) + 1;
      if (c == ' ' || c == '\t') {
        ++i;
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        std::size_t j = i;
        while (j < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[j])) || text_[j] == '.')) ++j;
        if (j < text_.size() && (text_[j] == 'e' || text_[j] == 'E')) {
          std::size_t k = j + 1;
          if (k < text_.size() && (text_[k] == '+' || text_[k] == '-')) ++k;
          if (k < text_.size() && std::isdigit(static_cast<unsigned char>(text_[k]))) {
            j = k;
            while (j < text_.size() && std::isdigit(static_cast<unsigned char>(text_[j]))) ++j;
          }
        }
        tokens_.push_back({Tok::number, std::string(text_.substr(i, j - i)), column});
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '_')) ++j;
        tokens_.push_back({Tok::name, std::string(text_.substr(i, j - i)), column});
        i = j;
      } else {
        static constexpr std::string_view kTwo[] = {"**", "<=", ">=", "==", "!="};
        static constexpr std::string_view kOne = "+-*/()<>,";
        std::string op;
        for (std::string_view two : kTwo)
          if (text_.substr(i, 2) == two) op = std::string(two);
        if (op.empty() && kOne.find(c) != std::string_view::npos) op = std::string(1, c);
        if (op.empty()) fail_at(text_, column, "unexpected character '" + std::string(1, c) + "'");
        tokens_.push_back({Tok::op, op, column});
        i += op.size();
      }
    }
    tokens_.push_back({Tok::end, "", static_cast<int>(text_.size()) + 1});
  }

  const Token& peek() const { return tokens_[pos_]; }
  bool accept(std::string_view op) {
    if (peek().kind == Tok::op && peek().text == op) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(std::string_view op) {
    if (!accept(op)) fail_at(text_, peek().column, "expected '" + std::string(op) + "'");
  }
  void expect_end() {
    if (peek().kind != Tok::end) fail_at(text_, peek().column, "unexpected '" + peek().text + "' after the expression");
  }

  int add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int>(nodes_.size()) - 1;
  }
  int ufunc(Ufunc f, int column, std::vector<int> args) {
    Node n;
    n.kind = Node::Kind::ufunc;
    n.ufunc = f;
    n.column = column;
    n.args = std::move(args);
    return add(std::move(n));
  }

  int comparison() {
    const int left = arith();
    static const std::pair<std::string_view, Ufunc> kComparisons[] = {
        {"<", Ufunc::less}, {"<=", Ufunc::less_equal}, {">", Ufunc::greater}, {">=", Ufunc::greater_equal},
        {"==", Ufunc::equal}, {"!=", Ufunc::not_equal}};
    for (const auto& [op, f] : kComparisons) {
      if (peek().kind != Tok::op || peek().text != op) continue;
      const int column = peek().column;
      ++pos_;
      const int right = arith();
      for (const auto& [again, unused] : kComparisons)
        if (peek().kind == Tok::op && peek().text == again)
          fail_at(text_, peek().column, "chained comparisons are not supported (numpy arrays have no truth value)");
      return ufunc(f, column, {left, right});
    }
    return left;
  }

  // One left-associative level of the grammar: next (op next)*.
  int left_associative(std::initializer_list<std::pair<std::string_view, Ufunc>> ops, int (Parser::*next)()) {
    int left = (this->*next)();
    while (peek().kind == Tok::op) {
      const auto op = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == peek().text; });
      if (op == ops.end()) break;
      const int column = peek().column;
      ++pos_;
      const int right = (this->*next)();
      left = ufunc(op->second, column, {left, right});
    }
    return left;
  }
  int arith() { return left_associative({{"+", Ufunc::add}, {"-", Ufunc::subtract}}, &Parser::term); }
  int term() { return left_associative({{"*", Ufunc::multiply}, {"/", Ufunc::divide}}, &Parser::factor); }

  int factor() {
    if (peek().kind == Tok::op && (peek().text == "-" || peek().text == "+")) {
      const bool minus = peek().text == "-";
      const int column = peek().column;
      ++pos_;
      const int operand = factor();
      if (!minus) return operand;  // unary plus: the value itself
      return ufunc(Ufunc::negative, column, {operand});
    }
    return power();
  }

  int power() {
    const int base = primary();
    if (peek().kind == Tok::op && peek().text == "**") {
      const int column = peek().column;
      ++pos_;
      return ufunc(Ufunc::power, column, {base, factor()});
    }
    return base;
  }

  int primary() {
    const Token t = peek();
    if (t.kind == Tok::number) {
      ++pos_;
      Node n;
      n.kind = Node::Kind::constant;
      n.column = t.column;
      n.python = true;
      try {
        n.value = PyScalar::parse(t.text);
      } catch (const UsageError& e) {
        fail_at(text_, t.column, "bad number: " + e.problem());
      }
      return add(std::move(n));
    }
    if (t.kind == Tok::name) {
      ++pos_;
      if (accept("(")) return call(t);
      for (const Binding& b : bindings_) {
        if (b.name != t.text) continue;
        Node n;
        n.kind = Node::Kind::input;
        n.column = t.column;
        n.array = b.array;
        n.name = b.name;
        return add(std::move(n));
      }
      std::string known;
      for (const Binding& b : bindings_) known += (known.empty() ? "" : ", ") + b.name;
      fail_at(text_, t.column, "unknown name '" + t.text + "' (bound: " + (known.empty() ? "none" : known) + ")");
    }
    if (accept("(")) {
      const int inner = comparison();
      expect(")");
      return inner;
    }
    fail_at(text_, t.column, "expected an operand");
  }

  int call(const Token& name) {
    std::vector<int> args;
    if (!accept(")")) {
      do args.push_back(comparison());
      while (accept(","));
      expect(")");
    }
    auto arity = [&](std::size_t n) {
      if (args.size() != n)
        fail_at(text_, name.column, name.text + "() takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") +
                                        ", not " + std::to_string(args.size()));
    };
    static const std::pair<std::string_view, Ufunc> kUnary[] = {
        {"sqrt", Ufunc::sqrt}, {"exp", Ufunc::exp}, {"log", Ufunc::log},   {"log1p", Ufunc::log1p},
        {"expm1", Ufunc::expm1}, {"sin", Ufunc::sin}, {"cos", Ufunc::cos}, {"tanh", Ufunc::tanh},
        {"abs", Ufunc::absolute}};
    for (const auto& [fname, f] : kUnary) {
      if (fname != name.text) continue;
      arity(1);
      return ufunc(f, name.column, args);
    }
    if (name.text == "clip") {
      arity(3);
      return ufunc(Ufunc::clip, name.column, args);
    }
    if (name.text == "where") {
      arity(3);
      Node n;
      n.kind = Node::Kind::where;
      n.column = name.column;
      n.args = args;
      return add(std::move(n));
    }
    if (is_reduction(name.text))
      fail_at(text_, name.column, name.text + "() must be the outermost call (a reduction makes one value)");
    fail_at(text_, name.column, "unknown function '" + name.text + "' (known: " + std::string(kFunctions) +
                                    "; outermost: " + std::string(kReductions) + ")");
  }

  std::string_view text_;
  const std::vector<Binding>& bindings_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
};

// ---- Python arithmetic between Python numbers --------------------------------------------

std::optional<PyScalar> python_int(__int128 v) {
  if (v < static_cast<__int128>(std::numeric_limits<std::int64_t>::min()) ||
      v > static_cast<__int128>(std::numeric_limits<std::uint64_t>::max()))
    return std::nullopt;
  return v < 0 ? PyScalar::of_int(static_cast<std::int64_t>(v)) : PyScalar::of_uint(static_cast<std::uint64_t>(v));
}

__int128 wide(const PyScalar& s) { return s.as_int128(); }

// Python's comparison of two numbers: exact between ints and between an int and a float
// (9007199254740993 > 9007199254740992.0); -2, 0 or 2 for less, equal or greater, and
// 1 when a NaN makes them unordered.
int python_compare(const PyScalar& a, const PyScalar& b) {
  auto sign = [](auto x, auto y) { return x < y ? -2 : x > y ? 2 : 0; };
  if (a.is_integer && b.is_integer) return sign(wide(a), wide(b));
  if (!a.is_integer && !b.is_integer) {
    if (std::isnan(a.float_value) || std::isnan(b.float_value)) return 1;
    return sign(a.float_value, b.float_value);
  }
  const bool int_first = a.is_integer;
  const __int128 i = wide(int_first ? a : b);
  const double f = int_first ? b.float_value : a.float_value;
  int order;  // of i against f
  if (std::isnan(f)) return 1;
  if (f >= 0x1p126) order = -2;
  else if (f <= -0x1p126) order = 2;
  else {
    const double whole = std::floor(f);
    const auto w = static_cast<__int128>(whole);
    order = i < w ? -2 : i > w ? 2 : (whole == f ? 0 : -2);
  }
  return int_first ? order : -order;
}

// Python's int / int: the exact quotient rounded once to the nearest double.
double python_true_divide(__int128 a, __int128 b) {
  const bool negative = (a < 0) != (b < 0);
  const auto x = static_cast<unsigned __int128>(a < 0 ? -a : a), y = static_cast<unsigned __int128>(b < 0 ? -b : b);
  if (x == 0) return negative ? -0.0 : 0.0;
  auto bits = [](unsigned __int128 v) {
    int n = 0;
    while (v != 0) v >>= 1, ++n;
    return n;
  };
  // Scale the numerator so the quotient has 55 or 56 bits, two below double's 53 plus a
  // sticky bit for the remainder: the conversion to double then rounds as Python does.
  const int shift = std::max(0, 55 + bits(y) - bits(x));
  unsigned __int128 q = (x << shift) / y;
  if ((x << shift) % y != 0) q |= 1;
  const double magnitude = std::ldexp(static_cast<double>(q), -shift);
  return negative ? -magnitude : magnitude;
}

}  // namespace

// ---- the checked expression ---------------------------------------------------------------

struct Expression::Impl {
  std::string text;
  std::vector<Node> nodes;
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

  [[noreturn]] void fail(const Node& n, const std::string& message) const { fail_at(text, n.column, message); }

  Operand operand(const Node& n) const {
    if (!n.is_constant()) return Operand::array(n.dtype);
    return n.python ? Operand::python(n.value) : Operand::numpy_scalar(n.dtype, n.value);
  }

  void check();
  void check_ufunc(Node& n);
  void type_ufunc(Node& n);
  void fold_python(Node& n);
  void fold_numpy(Node& n);
  void rewrite_power(Node& n);
  void plan_layout();

  // Evaluation.
  template <class Emit>
  void evaluate_range(std::int64_t begin, std::int64_t end, Emit&& emit) const;
  void gather(const Node& n, std::size_t index, std::int64_t begin, std::int64_t count, std::byte* out) const;
  void load_whole(std::size_t index);
};

void Expression::Impl::fold_python(Node& n) {
  const PyScalar a = nodes[static_cast<std::size_t>(n.args[0])].value;
  const bool unary = n.args.size() == 1;
  const PyScalar b = unary ? PyScalar{} : nodes[static_cast<std::size_t>(n.args[1])].value;
  const bool ints = a.is_integer && (unary || b.is_integer);
  std::optional<PyScalar> result;
  bool is_bool = false;
  bool truth = false;
  switch (n.ufunc) {
    case Ufunc::negative:
      result = a.is_integer ? python_int(-wide(a)) : PyScalar::of_double(-a.float_value);
      break;
    case Ufunc::add: result = ints ? python_int(wide(a) + wide(b)) : PyScalar::of_double(a.as_double() + b.as_double()); break;
    case Ufunc::subtract: result = ints ? python_int(wide(a) - wide(b)) : PyScalar::of_double(a.as_double() - b.as_double()); break;
    case Ufunc::multiply: {
      if (ints) {
        const __int128 x = wide(a), y = wide(b);
        __int128 p;
        if (__builtin_mul_overflow(x, y, &p)) fail(n, "integer constant is too large for numpy");
        result = python_int(p);
      } else {
        result = PyScalar::of_double(a.as_double() * b.as_double());
      }
      break;
    }
    case Ufunc::divide:
      if (b.as_double() == 0) fail(n, "division by zero");
      result = PyScalar::of_double(ints ? python_true_divide(wide(a), wide(b)) : a.as_double() / b.as_double());
      break;
    case Ufunc::power:
      if (ints && !b.negative) {
        __int128 p = 1, x = wide(a);
        std::uint64_t e = b.uint_value;
        bool overflow = false;
        while (e > 0 && !overflow) {
          if (e & 1) overflow = __builtin_mul_overflow(p, x, &p);
          e >>= 1;
          if (e > 0 && !overflow) overflow = __builtin_mul_overflow(x, x, &x);
        }
        if (!overflow) result = python_int(p);
      } else {
        if (a.as_double() == 0 && b.as_double() < 0) fail(n, "0.0 cannot be raised to a negative power");
        if (a.as_double() < 0 && std::floor(b.as_double()) != b.as_double())
          fail(n, "a negative number to a fractional power is complex in Python");
        result = PyScalar::of_double(std::pow(a.as_double(), b.as_double()));
      }
      break;
    case Ufunc::less: is_bool = true; truth = python_compare(a, b) == -2; break;
    case Ufunc::less_equal: is_bool = true; truth = python_compare(a, b) == -2 || python_compare(a, b) == 0; break;
    case Ufunc::greater: is_bool = true; truth = python_compare(a, b) == 2; break;
    case Ufunc::greater_equal: is_bool = true; truth = python_compare(a, b) == 2 || python_compare(a, b) == 0; break;
    case Ufunc::equal: is_bool = true; truth = python_compare(a, b) == 0; break;
    case Ufunc::not_equal: is_bool = true; truth = python_compare(a, b) != 0; break;
    default: return fold_numpy(n);  // functions of Python numbers are numpy's
  }
  n.kind = Node::Kind::constant;
  if (is_bool) {  // a Python bool is numpy's bool scalar to numpy
    n.python = false;
    n.dtype = DType(Kind::boolean, 1);
    n.value = PyScalar::of_int(truth ? 1 : 0);
    return;
  }
  if (!result) fail(n, "integer constant is too large for numpy");
  n.python = true;
  n.value = *result;
  n.dtype = result->default_dtype();
}

// numpy's loop and result dtypes for the ufunc node n, from its arguments' operands.
void Expression::Impl::type_ufunc(Node& n) {
  std::vector<Operand> operands;
  for (int a : n.args) operands.push_back(operand(nodes[static_cast<std::size_t>(a)]));
  try {
    n.loop = n.forced_loop ? *n.forced_loop : loop_dtype(n.ufunc, operands);
  } catch (const UsageError& e) {
    fail(n, e.problem());
  }
  n.dtype = output_dtype(n.ufunc, n.loop);
}

// Every argument a scalar: numpy computes a scalar, promoting without value-based casting.
void Expression::Impl::fold_numpy(Node& n) {
  type_ufunc(n);
  std::vector<std::array<std::byte, 8>> values;
  std::vector<LoopInput> inputs;
  for (int a : n.args) values.push_back(bytes_in(n.loop, nodes[static_cast<std::size_t>(a)].value));
  for (const auto& v : values) inputs.push_back({v.data(), false});
  std::array<std::byte, 8> out{};
  try {
    run_loop(n.ufunc, n.loop, inputs, out.data(), 1);
  } catch (const std::domain_error& e) {
    fail(n, e.what());
  }
  n.kind = Node::Kind::constant;
  n.python = false;
  n.ndarray = false;
  n.value = scalar_of(n.dtype, out.data());
}

// numpy's `ndarray ** scalar` (fast_scalar_power): a float array to 1, -1, 0, 0.5 or 2
// is a copy, reciprocal, ones, sqrt or square in its own dtype; any other array squared
// is square (of float64 when the exponent is a float and the array integers).
void Expression::Impl::rewrite_power(Node& n) {
  const Node& base = nodes[static_cast<std::size_t>(n.args[0])];
  Node& exponent = nodes[static_cast<std::size_t>(n.args[1])];
  const bool base_is_ndarray = !base.is_constant() || base.ndarray;
  if (!base_is_ndarray || !exponent.is_constant() || exponent.dtype.kind() == Kind::boolean) return;
  const double e = exponent.value.as_double();
  const DType t = base.dtype;
  if (t.kind() == Kind::floating) {
    if (e == 1.0) {
      n.kind = Node::Kind::copy;
      n.args = {n.args[0]};
    } else if (e == -1.0) {  // 1 / x: the exponent's node becomes the 1
      n.ufunc = Ufunc::divide;
      exponent.python = false;
      exponent.ndarray = false;
      exponent.dtype = t;
      exponent.value = PyScalar::of_int(1);
      n.args = {n.args[1], n.args[0]};
      n.forced_loop = t;
    } else if (e == 0.0) {
      n.kind = Node::Kind::ones;
      n.args = {n.args[0]};
    } else if (e == 0.5) {
      n.ufunc = Ufunc::sqrt;
      n.args = {n.args[0]};
      n.forced_loop = t;
    } else if (e == 2.0) {
      n.ufunc = Ufunc::multiply;
      n.args = {n.args[0], n.args[0]};
      n.forced_loop = t;
    }
  } else if (e == 2.0) {
    n.ufunc = Ufunc::multiply;
    n.args = {n.args[0], n.args[0]};
    const bool float_exponent = !exponent.value.is_integer;
    if (float_exponent && t.kind() != Kind::boolean) n.forced_loop = DType(Kind::floating, 8);
    else n.forced_loop = t.kind() == Kind::boolean ? DType(Kind::signed_int, 1) : t;  // np.square(bool) is int8
  }
}

void Expression::Impl::check_ufunc(Node& n) {
  if (n.ufunc == Ufunc::power && n.args.size() == 2) rewrite_power(n);
  if (n.ufunc == Ufunc::clip && n.args.size() == 3) {
    // np.clip reads a 0-d NaN bound as no bound, the Python float -inf or inf (numpy
    // 1.17's deprecated behaviour), unless `a` is a byte-swapped array; apply's clip does
    // the same. Each bound is its own node: it is changed in place.
    const Node& a = nodes[static_cast<std::size_t>(n.args[0])];
    const bool swapped = a.array != nullptr && a.array->dtype().itemsize() > 1 && !a.array->dtype().is_native();
    for (std::size_t k = 1; k < 3 && !swapped; ++k) {
      Node& bound = nodes[static_cast<std::size_t>(n.args[k])];
      if (!bound.is_constant() || bound.value.is_integer || !std::isnan(bound.value.float_value)) continue;
      bound.python = true;
      bound.ndarray = false;
      bound.dtype = DType(Kind::floating, 8);
      bound.value = PyScalar::of_double(k == 1 ? -INFINITY : INFINITY);
    }
  }
  if (n.kind == Node::Kind::copy) {
    const Node& x = nodes[static_cast<std::size_t>(n.args[0])];
    n.dtype = x.dtype;
    n.shape = x.shape;
    if (x.is_constant()) {  // a 0-d array to the power 1: that array's value
      n.kind = Node::Kind::constant;
      n.ndarray = x.ndarray;
      n.python = x.python;
      n.value = x.value;
    }
    return;
  }
  if (n.kind == Node::Kind::ones) {
    const Node& x = nodes[static_cast<std::size_t>(n.args[0])];
    n.dtype = x.dtype;
    n.shape = x.shape;
    if (x.is_constant()) {  // ones_like of a 0-d array: a 0-d array of 1
      n.kind = Node::Kind::constant;
      n.ndarray = true;
      n.value = PyScalar::of_int(1);
    }
    return;
  }
  const bool all_constant = std::all_of(n.args.begin(), n.args.end(),
                                        [&](int a) { return nodes[static_cast<std::size_t>(a)].is_constant(); });
  const bool all_python = std::all_of(n.args.begin(), n.args.end(),
                                      [&](int a) { return nodes[static_cast<std::size_t>(a)].python; });
  if (all_constant) {
    if (all_python) fold_python(n);
    else fold_numpy(n);
    return;
  }
  type_ufunc(n);
  for (int a : n.args) {
    const Node& arg = nodes[static_cast<std::size_t>(a)];
    if (arg.is_constant()) n.constant_args.push_back(bytes_in(n.loop, arg.value));
  }
}

void Expression::Impl::check() {
  for (Node& n : nodes) {
    // Shapes broadcast as numpy's do, checked where numpy would raise.
    if (n.kind != Node::Kind::input && n.kind != Node::Kind::constant) {
      std::optional<Shape> shape = Shape{};
      std::string shapes;
      for (int a : n.args) {
        const Node& arg = nodes[static_cast<std::size_t>(a)];
        shapes += (shapes.empty() ? "" : " ") + shape_repr(arg.shape);
        if (shape) shape = broadcast_shapes(*shape, arg.shape);
      }
      if (!shape) fail(n, "operands could not be broadcast together with shapes " + shapes);
      n.shape = *shape;
    }
    switch (n.kind) {
      case Node::Kind::input: {
        const MappedArray& a = *n.array;
        n.dtype = a.dtype().native();
        if (a.ndim() == 0) {  // a 0-d array: a scalar to numpy, and its value counts
          n.kind = Node::Kind::constant;
          n.ndarray = true;
          std::array<std::byte, 8> native{};
          ooc::detail::AlignedBuffer one;
          const std::byte* value = a.mapped() ? a.bytes().data() : ooc::detail::MappedArrayAccess::reader(a)->read(0, 1, one);
          convert(a.dtype(), value, n.dtype, native.data(), 1);
          n.value = scalar_of(n.dtype, native.data());
        } else {
          n.shape = a.shape();
        }
        break;
      }
      case Node::Kind::constant:
        if (n.python) n.dtype = n.value.default_dtype();
        break;
      case Node::Kind::where: {
        const Node& x = nodes[static_cast<std::size_t>(n.args[1])];
        const Node& y = nodes[static_cast<std::size_t>(n.args[2])];
        const Operand xy[] = {operand(x), operand(y)};
        n.dtype = result_type(xy);
        n.loop = n.dtype;
        const Node& c = nodes[static_cast<std::size_t>(n.args[0])];
        if (c.is_constant() && x.is_constant() && y.is_constant()) {
          const bool pick_x = c.value.as<bool>();
          n.value = (pick_x ? x : y).value;
          n.kind = Node::Kind::constant;
          n.ndarray = true;  // np.where returns an array, 0-d here
          n.python = false;
        } else {
          for (int a : n.args) {
            const Node& arg = nodes[static_cast<std::size_t>(a)];
            if (arg.is_constant())
              n.constant_args.push_back(bytes_in(a == n.args[0] ? DType(Kind::boolean, 1) : n.loop, arg.value));
          }
        }
        break;
      }
      case Node::Kind::ufunc:
        check_ufunc(n);
        break;
      default:
        break;
    }
  }
}

void Expression::Impl::plan_layout() {
  const Node& r = nodes[static_cast<std::size_t>(root)];
  shape = r.shape;
  dtype = r.dtype;
  size = element_count(shape).value_or(0);
  // numpy's result is Fortran-ordered when every input that has a say (two or more axes
  // longer than 1) is Fortran-ordered, and C-ordered otherwise.
  bool any_c = false, any_f = false;
  for (const Node& n : nodes) {
    if (n.kind != Node::Kind::input) continue;
    const auto long_axes = std::count_if(n.shape.begin(), n.shape.end(), [](std::int64_t d) { return d > 1; });
    if (long_axes < 2) continue;
    (n.array->order() == Order::fortran ? any_f : any_c) = true;
  }
  order = any_f && !any_c ? Order::fortran : Order::c;
  // Output axes in memory order, fastest first.
  const std::size_t ndim = shape.size();
  std::vector<std::size_t> axes(ndim);
  for (std::size_t k = 0; k < ndim; ++k) axes[k] = order == Order::c ? ndim - 1 - k : k;
  for (std::size_t axis : axes) memory_extent.push_back(shape[axis]);
  input_strides.assign(nodes.size(), {});
  input_direct.assign(nodes.size(), false);
  input_loaded.assign(nodes.size(), {});
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.kind != Node::Kind::input) continue;
    // The input's own element strides, then aligned with the result's trailing axes.
    const Shape& s = n.shape;
    const Shape own = element_strides(s, n.array->order());
    std::vector<std::int64_t> strides;
    bool direct = true;
    std::int64_t expected = 1;
    for (std::size_t axis : axes) {
      const std::size_t offset = ndim - s.size();  // s aligns with the last axes
      std::int64_t stride = 0;
      if (axis >= offset && s[axis - offset] != 1) stride = own[axis - offset];
      if (shape[axis] != 1) {
        if (stride != expected) direct = false;
        expected *= shape[axis];
      }
      strides.push_back(stride);
    }
    input_strides[i] = std::move(strides);
    input_direct[i] = direct && element_count(s).value_or(0) == size;
    if (!n.array->mapped() && !input_direct[i]) load_whole(i);
  }
}

void Expression::Impl::load_whole(std::size_t index) {
  constexpr std::uint64_t kMaxLoadedBytes = std::uint64_t{256} << 20;
  const MappedArray& a = *nodes[index].array;
  if (a.nbytes() > kMaxLoadedBytes)
    throw UsageError(a.path(), "eval: an input that is broadcast and read tile by tile (a selection or a chunked "
                               "dataset) must be under 256 MiB; write it to a .npy first");
  std::vector<std::byte>& bytes = input_loaded[index];
  bytes.resize(static_cast<std::size_t>(a.nbytes()));
  if (bytes.empty()) return;
  ooc::detail::AlignedBuffer buffer;
  const std::byte* data = ooc::detail::MappedArrayAccess::reader(a)->read(0, a.size(), buffer);
  std::memcpy(bytes.data(), data, bytes.size());
}

// Values of input node n for result positions [begin, begin + count) in memory order,
// converted to the input's native dtype.
void Expression::Impl::gather(const Node& n, std::size_t index, std::int64_t begin, std::int64_t count,
                              std::byte* out) const {
  const MappedArray& a = *n.array;
  const DType from = a.dtype();
  const std::size_t item = static_cast<std::size_t>(from.itemsize());
  if (!a.mapped() && input_direct[index]) {
    ooc::detail::TileReader& reader = *ooc::detail::MappedArrayAccess::reader(a);
    thread_local ooc::detail::AlignedBuffer buffer;
    std::unique_lock<std::mutex> lock(reader_lock, std::defer_lock);
    if (!reader.concurrent()) lock.lock();
    convert(from, reader.read(begin, begin + count, buffer), n.dtype, out, count);
    return;
  }
  const std::byte* base = a.mapped() ? a.bytes().data() : input_loaded[index].data();
  if (input_direct[index]) {
    convert(from, base + static_cast<std::size_t>(begin) * item, n.dtype, out, count);
    return;
  }
  const std::vector<std::int64_t>& strides = input_strides[index];
  const std::size_t ndim = memory_extent.size();
  std::array<std::int64_t, 64> at{};
  std::int64_t rest = begin;
  for (std::size_t k = 0; k < ndim; ++k) {
    at[k] = rest % memory_extent[k];
    rest /= memory_extent[k];
  }
  // The file's bytes of each wanted element, then one conversion for the piece.
  std::byte* raw = out + static_cast<std::size_t>(kPieceElements) * 8;
  std::int64_t done = 0;
  while (done < count) {
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < ndim; ++k) offset += at[k] * strides[k];
    const std::int64_t run = std::min(count - done, memory_extent[0] - at[0]);
    const std::int64_t step = strides[0];
    const std::byte* src = base + static_cast<std::size_t>(offset) * item;
    std::byte* dst = raw + static_cast<std::size_t>(done) * item;
    if (step == 1) {
      std::memcpy(dst, src, static_cast<std::size_t>(run) * item);
    } else {
      for (std::int64_t j = 0; j < run; ++j)
        std::memcpy(dst + static_cast<std::size_t>(j) * item, src + static_cast<std::size_t>(j * step) * item, item);
    }
    done += run;
    at[0] += run;
    for (std::size_t k = 0; k + 1 < ndim && at[k] == memory_extent[k]; ++k) {
      at[k] = 0;
      ++at[k + 1];
    }
  }
  convert(from, raw, n.dtype, out, count);
}

// Calls emit(position, values) for consecutive pieces of [begin, end): the result's
// values (dtype, native) for those positions, valid until the next call.
template <class Emit>
void Expression::Impl::evaluate_range(std::int64_t begin, std::int64_t end, Emit&& emit) const {
  constexpr std::size_t kSlot = static_cast<std::size_t>(kPieceElements) * 8;
  // One buffer per node for its values, three more per node for arguments converted to
  // its loop dtype: a few hundred KiB per thread at most.
  thread_local std::vector<std::byte> storage;
  thread_local std::vector<const std::byte*> result;
  storage.resize(nodes.size() * 4 * kSlot);
  result.assign(nodes.size(), nullptr);
  const Node& r = nodes[static_cast<std::size_t>(root)];
  for (std::int64_t at = begin; at < end; at += kPieceElements) {
    const std::int64_t n = std::min(kPieceElements, end - at);
    if (r.is_constant()) {  // the whole result is one value, broadcast
      std::byte* out = storage.data();
      const auto value = bytes_in(dtype, r.value);
      for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(out + i * dtype.itemsize(), value.data(), static_cast<std::size_t>(dtype.itemsize()));
      emit(at, static_cast<const std::byte*>(out), n);
      continue;
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const Node& node = nodes[i];
      std::byte* out = storage.data() + i * 4 * kSlot;
      switch (node.kind) {
        case Node::Kind::constant:
          break;
        case Node::Kind::input:
          gather(node, i, at, n, out);
          result[i] = out;
          break;
        case Node::Kind::copy:
          result[i] = result[static_cast<std::size_t>(node.args[0])];
          break;
        case Node::Kind::ones: {
          const auto one = bytes_in(node.dtype, PyScalar::of_int(1));
          for (std::int64_t j = 0; j < n; ++j)
            std::memcpy(out + j * node.dtype.itemsize(), one.data(), static_cast<std::size_t>(node.dtype.itemsize()));
          result[i] = out;
          break;
        }
        case Node::Kind::ufunc:
        case Node::Kind::where: {
          // Arguments in the loop dtype (a where's condition in bool): constants repeated,
          // arrays converted when their dtype differs.
          std::array<LoopInput, 3> inputs;
          std::size_t next_constant = 0;
          for (std::size_t k = 0; k < node.args.size(); ++k) {
            const Node& arg = nodes[static_cast<std::size_t>(node.args[k])];
            const DType want = node.kind == Node::Kind::where && k == 0 ? DType(Kind::boolean, 1) : node.loop;
            if (arg.is_constant()) {
              inputs[k] = {node.constant_args[next_constant++].data(), true};
            } else if (arg.dtype == want) {
              inputs[k] = {result[static_cast<std::size_t>(node.args[k])], false};
            } else {
              std::byte* converted = out + (k + 1) * kSlot;
              convert(arg.dtype, result[static_cast<std::size_t>(node.args[k])], want, converted, n);
              inputs[k] = {converted, false};
            }
          }
          if (node.kind == Node::Kind::ufunc) {
            try {
              run_loop(node.ufunc, node.loop, std::span<const LoopInput>(inputs.data(), node.args.size()), out, n);
            } catch (const std::domain_error& e) {
              throw Error("eval: " + std::string(e.what()));
            }
          } else {
            const std::size_t item = static_cast<std::size_t>(node.dtype.itemsize());
            const bool* c = static_cast<const bool*>(inputs[0].data);
            for (std::int64_t j = 0; j < n; ++j) {
              const LoopInput& pick = c[inputs[0].repeated ? 0 : j] ? inputs[1] : inputs[2];
              std::memcpy(out + static_cast<std::size_t>(j) * item,
                          static_cast<const std::byte*>(pick.data) + (pick.repeated ? 0 : static_cast<std::size_t>(j) * item),
                          item);
            }
          }
          result[i] = out;
          break;
        }
      }
    }
    emit(at, result[static_cast<std::size_t>(root)], n);
  }
}

Expression Expression::compile(std::string_view text, const std::vector<Binding>& bindings) {
  auto impl = std::make_unique<Impl>();
  impl->text = std::string(text);
  Parser parser(impl->text, bindings);
  std::optional<std::pair<std::string, int>> reduction;
  impl->root = parser.parse(reduction);
  impl->nodes = std::move(parser.nodes_);
  impl->check();
  if (reduction) {
    try {
      impl->reduction = ReduceOp::parse(reduction->first);
    } catch (const UsageError& e) {
      fail_at(impl->text, reduction->second, e.problem());
    }
  }
  impl->plan_layout();
  return Expression(std::move(impl));
}

Expression::Expression(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Expression::Expression(Expression&&) noexcept = default;
Expression& Expression::operator=(Expression&&) noexcept = default;
Expression::~Expression() = default;

DType Expression::dtype() const { return impl_->dtype; }
const Shape& Expression::shape() const { return impl_->shape; }
Order Expression::order() const { return impl_->order; }
const std::optional<ReduceOp>& Expression::reduction() const { return impl_->reduction; }

namespace {

// Streams over the result's tiles; the bound arrays laid out as the result are prefetched
// and released with them.
struct Run {
  TilePlan plan;
  ooc::detail::Streams streams;
  Run(const Expression::Impl& impl, const PipelineOptions& options)
      : plan(TilePlan::contiguous(impl.size, impl.dtype.itemsize(), options.tile_bytes)), streams(plan, options) {
    for (std::size_t i = 0; i < impl.nodes.size(); ++i)
      if (impl.nodes[i].kind == Node::Kind::input && impl.input_direct[i] && impl.nodes[i].array->mapped())
        streams.add_input(*impl.nodes[i].array);
  }
};

}  // namespace

void Expression::evaluate(MappedArray& out, const PipelineOptions& options) const {
  const Impl& impl = *impl_;
  if (out.shape() != impl.shape || (out.order() != impl.order && impl.shape.size() > 1))
    throw UsageError(out.path(), "the output's shape or order is not the expression's");
  Run run(impl, options);
  run.streams.add_output(out);
  const DType to = out.dtype();
  const std::size_t item = static_cast<std::size_t>(to.itemsize());
  struct Done {};
  run_pipeline(
      run.plan, run.streams, options,
      [&](const Tile& tile) {
        // The tile's place in the output: in the mapping, or in the buffer that direct
        // output writes to the file at commit.
        std::byte* first = run.streams.output(out, tile);
        impl.evaluate_range(tile.begin, tile.end, [&](std::int64_t at, const std::byte* values, std::int64_t n) {
          convert(impl.dtype, values, to, first + static_cast<std::size_t>(at - tile.begin) * item, n);
        });
        return Done{};
      },
      [](const Tile&, Done&&) {});
}

std::vector<std::byte> Expression::evaluate(const PipelineOptions& options) const {
  const Impl& impl = *impl_;
  std::vector<std::byte> out(static_cast<std::size_t>(impl.size) * static_cast<std::size_t>(impl.dtype.itemsize()));
  Run run(impl, options);
  const std::size_t item = static_cast<std::size_t>(impl.dtype.itemsize());
  struct Done {};
  run_pipeline(
      run.plan, run.streams, options,
      [&](const Tile& tile) {
        impl.evaluate_range(tile.begin, tile.end, [&](std::int64_t at, const std::byte* values, std::int64_t n) {
          std::memcpy(out.data() + static_cast<std::size_t>(at) * item, values, static_cast<std::size_t>(n) * item);
        });
        return Done{};
      },
      [](const Tile&, Done&&) {});
  return out;
}

Scalar Expression::reduce(const PipelineOptions& options) const {
  const Impl& impl = *impl_;
  if (!impl.reduction) throw UsageError("eval: the expression has no outermost reduction");
  Run run(impl, options);
  return impl.reduction->with_kernel(impl.shape, impl.order, [&](const auto& kernel) -> Scalar {
    using Kernel = std::decay_t<decltype(kernel)>;
    return visit_dtype(impl.dtype, [&]<class T>(std::type_identity<T>) -> Scalar {
      using Input = ooc::detail::kernel_input_t<Kernel, T>;
      // The kernel sees the result in blocks of kBlockElements on the same grid as a
      // file's, so sum(a*b) takes exactly numpy's steps over the temporary a*b.
      return ooc::detail::reduce_tiles<T>(kernel, run.plan, run.streams, options, [&](const Tile& tile, auto&& f) {
        thread_local std::vector<std::byte> block;
        block.resize(static_cast<std::size_t>(kBlockElements) * sizeof(T));
        Input* converted = reinterpret_cast<Input*>(ooc::detail::scratch(ooc::detail::ScratchSlot::kernel, sizeof(Input) * kBlockElements));
        for (std::int64_t at = tile.begin; at < tile.end; at += kBlockElements) {
          const std::int64_t n = std::min(kBlockElements, tile.end - at);
          impl.evaluate_range(at, at + n, [&](std::int64_t p, const std::byte* values, std::int64_t m) {
            std::memcpy(block.data() + static_cast<std::size_t>(p - at) * sizeof(T), values,
                        static_cast<std::size_t>(m) * sizeof(T));
          });
          const Input* values = reinterpret_cast<const Input*>(block.data());
          if constexpr (!std::is_same_v<Input, T>) {
            convert(dtype_of<T>, block.data(), dtype_of<Input>, converted, n);
            values = converted;
          }
          f(Tile{tile.index, at, at + n}, ConstArrayMap<Input>(values, n));
        }
      });
    });
  });
}

}  // namespace ooc::kernels
