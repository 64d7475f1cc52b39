// eval's type checker: numpy 1.24's rules step by step (Python arithmetic between Python
// numbers, numpy's scalar promotion between scalars, value-based casting between arrays
// and scalars, ndarray ** scalar fast paths), constants folded as numpy folds them.

#include "tree.hpp"

#include "core/mapped_array_access.hpp"
#include "os/tile_reader.hpp"

namespace ooc::kernels {
namespace expr_detail {

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

}  // namespace expr_detail

using namespace expr_detail;

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
  if (n.ufunc == Ufunc::power && n.args.size() == 2 && n.power_operator) rewrite_power(n);
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
    // Python's arithmetic between Python numbers, but np.power(2, 3) is numpy's
    if (all_python && (n.ufunc != Ufunc::power || n.power_operator)) fold_python(n);
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

}  // namespace ooc::kernels
