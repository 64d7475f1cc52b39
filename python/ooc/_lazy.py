"""Lazy expressions: numpy's operators, ufuncs, np.where and np.clip on ooc.Arrays.

    e = np.sin(a) * np.cos(a) + 1      # an ooc.Expression: nothing is read
    e.shape, e.dtype                    # numpy's, from numpy's own type rules
    ooc.sum(e); e.mean(axis=0)          # ooc's eval engine, one fused pass over the files
    np.asarray(e); ooc.copy(e, out="e.npy"); a[a[:, 3] > 2.5]

An expression is eval's text with its names bound to the arrays (ooc.eval, kernels/expr):
reducing it, reading it or writing it runs that engine, tile by tile, piece by piece,
with no whole-array temporary. What eval cannot compute raises TypeError naming it.
"""
import os
import shutil
import sys
import tempfile
import warnings
import weakref

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import _ooc

_SUPPORTED_KINDS = "biuf"
_SUPPORTED_FLOATS = (2, 4, 8)


class _Leaf:
    """An operand: an ooc.Array ("array"), an in-memory array or numpy scalar ("memory",
    written to a temporary .npy when the expression runs) or a Python number ("python",
    written into the text)."""
    __slots__ = ("kind", "value")

    def __init__(self, kind, value):
        self.kind = kind
        self.value = value


class _Call:
    """eval's operator or function `op` ("+", "neg", "sin", "where", ...) over nodes."""
    __slots__ = ("op", "args")

    def __init__(self, op, args):
        self.op = op
        self.args = args


_BINARY_TEXT = {"+": "+", "-": "-", "*": "*", "/": "/", "**": "**", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
                "==": "==", "!=": "!="}

# numpy's ufuncs eval computes, as eval writes them.
_UFUNCS = {
    np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/", np.power: "power",
    np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=", np.equal: "==", np.not_equal: "!=",
    np.negative: "neg", np.positive: "pos", np.absolute: "abs", np.sqrt: "sqrt", np.exp: "exp", np.log: "log",
    np.log1p: "log1p", np.expm1: "expm1", np.sin: "sin", np.cos: "cos", np.tanh: "tanh",
    np.maximum: "maximum", np.minimum: "minimum",
}
# The logical ufuncs, and the bitwise ones on booleans, written with eval's arithmetic on
# booleans (bool * is and, bool + is or).
_LOGICAL = {np.logical_and, np.logical_or, np.logical_xor, np.logical_not}
_BITWISE = {np.bitwise_and: np.logical_and, np.bitwise_or: np.logical_or, np.bitwise_xor: np.logical_xor,
            np.invert: np.logical_not}

# numpy's reductions and what ooc calls them: each runs the expression once (fused), or
# along an axis through ooc's axis reductions of the expression's values.
_REDUCTION_FUNCTIONS = {
    np.sum: "sum", np.prod: "prod", np.mean: "mean", np.amin: "min", np.amax: "max", np.argmin: "argmin",
    np.argmax: "argmax", np.var: "var", np.std: "std", np.count_nonzero: "count_nonzero", np.any: "any",
    np.all: "all", np.nansum: "nansum", np.nanmean: "nanmean", np.nanmin: "nanmin", np.nanmax: "nanmax",
}


def _probe_call(fn, probes):
    """numpy's own answer for the dtype (and, between scalars, the value): fn on one
    element per array operand and the scalars as they are. Its errors are numpy's."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*probes)


def _as_probe(result):
    """A probe for a result: arrays count by dtype only, scalars (0-d) by value too."""
    if isinstance(result, np.ndarray) and result.ndim > 0:
        return np.zeros(1, result.dtype)
    return result


def _shape_text(shape):
    return "(" + ",".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _broadcast(fn, operands):
    """numpy's broadcast shape of the operands, or numpy's own error: fn is called on
    stand-ins of their shapes that hold no memory (it raises before computing anything)."""
    shape = ()
    for op in operands:
        a, b = shape, op.shape
        n = max(len(a), len(b))
        a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
        if any(x != y and x != 1 and y != 1 for x, y in zip(a, b)):
            stand_ins = [as_strided(np.zeros(1, o.probe.dtype), o.shape, (0,) * len(o.shape)) if o.shape else o.probe
                         for o in operands]
            _probe_call(fn, stand_ins)
            raise ValueError("operands could not be broadcast together with shapes "
                             + " ".join(_shape_text(o.shape) for o in operands) + " ")
        shape = tuple(y if x == 1 else x for x, y in zip(a, b))
    return shape


class _Operand:
    """A node with what numpy would know of its value: shape, and a probe (one element
    of the dtype for an array, the value itself for a scalar)."""
    __slots__ = ("node", "shape", "probe")

    def __init__(self, node, shape, probe):
        self.node = node
        self.shape = shape
        self.probe = probe


def _operand(x, array_type):
    """x as an operand, or None for what numpy would not take as a number or array."""
    if isinstance(x, Expression):
        return _Operand(x._node, x.shape, x._probe)
    if isinstance(x, array_type):
        probe = np.asarray(x) if x.ndim == 0 else np.zeros(1, x.dtype)  # a 0-d array counts by value
        return _Operand(_Leaf("array", x), x.shape, probe)
    if isinstance(x, np.memmap) or _is_h5py_dataset(x):  # read from its file, as an ooc.Array
        try:
            return _operand(_open(x), array_type)
        except ValueError:  # a memmap of part of a file: its values, as any array in memory
            pass
    if isinstance(x, bool):  # numpy's bool scalar to numpy
        return _operand(np.bool_(x), array_type)
    if isinstance(x, int):  # beyond 64 bits numpy makes it an object: _make refuses that dtype
        return _Operand(_Leaf("python", x), (), x)
    if isinstance(x, float):
        if np.isfinite(x):
            return _Operand(_Leaf("python", x), (), x)
        # inf and NaN have no literal in eval's text: a 0-d float64, which numpy's type
        # rules treat as they treat the Python float, keeps the bits (a NaN's sign too).
        return _Operand(_Leaf("memory", np.asarray(x)), (), x)
    if isinstance(x, (np.ndarray, np.generic, list, tuple)):
        value = np.asarray(x)
        _check_dtype(value.dtype, "an operand")
        probe = x if isinstance(x, np.generic) else value if value.ndim == 0 else np.zeros(1, value.dtype)
        return _Operand(_Leaf("memory", value), value.shape, probe)
    return None


def _is_h5py_dataset(x):
    h5py = sys.modules.get("h5py")
    return h5py is not None and isinstance(x, h5py.Dataset)


def _supported(dtype):
    return dtype.kind in _SUPPORTED_KINDS and (dtype.kind != "f" or dtype.itemsize in _SUPPORTED_FLOATS)


def _check_dtype(dtype, what):
    if not _supported(dtype):
        raise TypeError(f"ooc: {what} of dtype {dtype} is not supported in a lazy expression "
                        "(bool, int8-64, uint8-64, float16, float32, float64)")


def _function_name(fn):
    module = getattr(fn, "__module__", None) or "numpy"
    return f"{module}.{fn.__name__}"


def _refuse(what, hint=""):
    raise TypeError(f"ooc: {what} is not supported on a lazy expression: eval computes + - * / ** and comparisons, "
                    "abs sqrt exp log log1p expm1 sin cos tanh, where, clip, maximum, minimum, and & | ^ ~ on booleans"
                    + (f" ({hint})" if hint else "")
                    + "; call np.asarray() on it first to compute it in memory")


def _make(fn, op, operands, probe=None):
    """The expression op(*operands) with numpy's dtype and shape for fn(*operands) (or
    for probe(*operands), where numpy's operator differs from its ufunc)."""
    shape = _broadcast(fn, operands)
    result = _probe_call(probe or fn, [o.probe for o in operands])
    dtype = np.asarray(result).dtype
    if not _supported(dtype):
        raise TypeError(f"ooc: {_function_name(fn)} gives dtype {dtype}, which ooc does not compute")
    return Expression._of(_Call(op, [o.node for o in operands]), shape, _as_probe(result) if shape else result)


def _logical(fn, operands):
    """np.logical_* (and & | ^ ~ on booleans) in eval's arithmetic: x != 0 is the truth of
    any number, and between booleans * is and, + is or, != is xor, == 0 is not."""
    truths = []
    for o in operands:
        if np.asarray(o.probe).dtype.kind != "b":
            o = _Operand(_Call("!=", [o.node, _Leaf("python", 0)]), o.shape, _as_probe(np.not_equal(o.probe, 0)))
        truths.append(o)
    if fn is np.logical_not:
        return _make(np.logical_not, "==", [truths[0], _Operand(_Leaf("python", 0), (), 0)],
                     probe=lambda x, zero: np.logical_not(x))
    op = {np.logical_and: "*", np.logical_or: "+", np.logical_xor: "!="}[fn]
    return _make(fn, op, truths)


def power_operator(inputs, array_type):
    """x ** y: an ndarray's `**` takes numpy's fast paths (a ** 2 of booleans is int8,
    a ** 0.5 is np.sqrt), which np.power does not; eval's `**` takes the same."""
    operands = [_operand(x, array_type) for x in inputs]
    if any(o is None for o in operands):
        return NotImplemented
    return _make(np.power, "**", operands, probe=lambda x, y: x ** y)


def ufunc(fn, inputs, array_type):
    """numpy's fn(*inputs) as an expression; TypeError where eval cannot compute it."""
    operands = [_operand(x, array_type) for x in inputs]
    if any(o is None for o in operands):
        return NotImplemented
    if fn in _BITWISE:
        if not all(np.asarray(o.probe).dtype.kind == "b" for o in operands):
            _probe_call(fn, [o.probe for o in operands])  # numpy's own TypeError for floats
            _refuse(f"{_function_name(fn)} of integers", "ooc computes & | ^ ~ on booleans")
        fn = _BITWISE[fn]
    if fn in _LOGICAL:
        return _logical(fn, operands)
    op = _UFUNCS.get(fn)
    if op is None:
        _refuse(_function_name(fn))
    return _make(fn, op, operands)


def where(inputs, array_type):
    if len(inputs) != 3:
        _refuse("numpy.where(condition) (np.nonzero)", "np.where(c, x, y) is computed")
    operands = [_operand(x, array_type) for x in inputs]
    if any(o is None for o in operands):
        _refuse("numpy.where of these operands")
    return _make(np.where, "where", operands)


def clip(a, a_min, a_max, array_type):
    if a_min is None and a_max is None:
        raise ValueError("One of max or min must be given")
    # numpy clips with one bound as np.maximum or np.minimum (numpy 1.24's np.clip)
    if a_min is None:
        return ufunc(np.minimum, (a, a_max), array_type)
    if a_max is None:
        return ufunc(np.maximum, (a, a_min), array_type)
    operands = [_operand(x, array_type) for x in (a, a_min, a_max)]
    if any(o is None for o in operands):
        _refuse("numpy.clip of these operands")
    return _make(np.clip, "clip", operands)


# ---- the text eval reads --------------------------------------------------------------

def _number_text(value):
    if isinstance(value, int):
        return str(value) if value >= 0 else f"(-{-value})"
    text = repr(abs(value))
    return text if not np.signbit(value) else f"(-{text})"


class _Binding:
    """eval's text for an expression, its names and the arrays they stand for: ooc.Arrays,
    and in-memory operands written to .npy files in a temporary directory, removed with
    the expression (weakref.finalize)."""

    def __init__(self, owner, node):
        self.names, self.sources = [], []
        self._named = {}
        self._directory = None
        self._owner = owner  # for the finalizer only: the expression holds this binding
        self.text = self._text(node, self._name)
        self._owner = None
        # What errors call the expression: its text with the arrays' own names.
        self.label = self._text(node, self._label)

    def _name(self, leaf):
        key = id(leaf.value)
        if key not in self._named:
            prefix = "a" if leaf.kind == "array" else "m"
            name = f"{prefix}{len(self.names)}"
            if leaf.kind == "array":
                source = leaf.value._source
            else:
                if self._directory is None:
                    self._directory = tempfile.mkdtemp(prefix="ooc-lazy-")
                    weakref.finalize(self._owner, shutil.rmtree, self._directory, True)
                path = os.path.join(self._directory, name + ".npy")
                np.save(path, leaf.value)
                source = _ooc.Source(path, [])
            self._named[key] = (name, leaf.value)  # the value is kept: its id stays its own
            self.names.append(name)
            self.sources.append(source)
        return self._named[key][0]

    @staticmethod
    def _label(leaf):
        if leaf.kind == "array":
            return leaf.value.path + "".join(f"[{text}]" for text in leaf.value.selections)
        value = leaf.value
        return repr(value.item()) if value.ndim == 0 else f"<array of shape {value.shape}>"

    def _text(self, node, leaf_text):
        if isinstance(node, _Leaf):
            return _number_text(node.value) if node.kind == "python" else leaf_text(node)
        args = [self._text(a, leaf_text) for a in node.args]
        if node.op in _BINARY_TEXT:
            return f"({args[0]} {node.op} {args[1]})"
        if node.op == "neg":
            return f"(-{args[0]})"
        if node.op == "pos":
            return f"(+{args[0]})"
        return f"{node.op}({', '.join(args)})"


# ---- the expression -------------------------------------------------------------------

class Shaped:
    """numpy's attributes that follow from `shape` and `dtype`, for ooc.Array and Expression."""

    __slots__ = ()

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize


class Expression(Shaped):
    """A lazy expression over ooc.Arrays (and numbers, numpy arrays): numpy's shape, dtype
    and ndim, nothing computed until it is reduced, read (np.asarray), written
    (ooc.copy) or used as a mask (a[e]), each one fused pass of ooc's eval engine."""

    __slots__ = ("_node", "shape", "dtype", "_probe", "_binding", "__weakref__")

    @classmethod
    def _of(cls, node, shape, probe):
        e = cls.__new__(cls)
        e._node = node
        e.shape = tuple(int(n) for n in shape)
        e.dtype = np.asarray(probe).dtype
        e._probe = probe
        e._binding = None
        return e

    def __init__(self, *args, **kwargs):
        raise TypeError("ooc.Expression is made by numpy's operators and functions on ooc.Arrays (np.sin(a) * 2)")


    @property
    def text(self):
        """eval's text for the expression ("(sin(a0) * cos(a0))")."""
        return self._bound().text

    def _bound(self):
        if self._binding is None:
            self._binding = _Binding(self, self._node)
        return self._binding

    @property
    def _source(self):
        binding = self._bound()
        return _ooc.Source.of_expression(binding.text, binding.names, binding.sources, binding.label)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        return f"ooc.Expression({self.text!r}, shape={self.shape}, dtype={self.dtype})"

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return bool(np.asarray(self).reshape(()))

    def __getitem__(self, key):
        raise TypeError("ooc: a lazy expression cannot be indexed; index the ooc.Arrays in it "
                        "(np.sin(a[:, 3]), not np.sin(a)[:, 3])")

    def __iter__(self):
        raise TypeError("ooc: a lazy expression cannot be iterated; reduce it, or np.asarray() it")

    def read(self, **options):
        """The values, in a numpy array of numpy's dtype and memory order (eval). MemoryError
        when they do not fit in the memory available."""
        binding = self._bound()
        call, progress = _common(options)
        return _ooc.eval(binding.text, binding.names, binding.sources, None, False, call, progress)

    def __array__(self, dtype=None, copy=None):  # copy=: numpy 2 passes it; the result is always new
        values = self.read()
        return values if dtype is None else values.astype(dtype, copy=False)

    def astype(self, dtype, *args, **kwargs):
        _refuse("astype", "eval has no casts")


def reduce_fused(expression, op, call, progress):
    """A full reduction as eval's outermost one: op(text), one pass."""
    binding = expression._bound()
    return _ooc.eval(f"{op}({binding.text})", binding.names, binding.sources, None, False, call, progress)


_common = _open = None  # ooc._common and ooc.open, set by install()


def install(array_type, common, open_array):
    """Gives ooc.Array and Expression numpy's operators and protocols."""
    global _common, _open
    _common, _open = common, open_array

    def binary(fn, reflected=False):
        def method(self, other):
            inputs = (other, self) if reflected else (self, other)
            return power_operator(inputs, array_type) if fn is np.power else ufunc(fn, inputs, array_type)
        return method

    def unary(fn):
        def method(self):
            return ufunc(fn, (self,), array_type)
        return method

    def positive(self):
        try:
            return ufunc(np.positive, (self,), array_type)
        except TypeError:
            if self.dtype.kind != "b":
                raise
            # numpy 1.24's +a of booleans: a copy, with this warning
            warnings.warn("Applying '+' to a non-numerical array is ill-defined. Returning a copy, but in the future "
                          "this will error.", DeprecationWarning, stacklevel=2)
            operand = _operand(self, array_type)
            return Expression._of(_Call("pos", [operand.node]), operand.shape, operand.probe)

    def array_ufunc(self, fn, method, *inputs, **kwargs):
        lazy = any(isinstance(x, Expression) for x in inputs + tuple(kwargs.get("out", ()) or ()))
        if method == "__call__" and not kwargs:
            if fn in _UFUNCS or fn in _LOGICAL or fn in _BITWISE:
                return ufunc(fn, inputs, array_type)
            if lazy:
                _refuse(_function_name(fn))
        elif lazy:
            _refuse(f"{_function_name(fn)}" + (f".{method}" if method != "__call__" else "") +
                    (f" with {', '.join(sorted(kwargs))}=" if kwargs else ""))
        # ooc.Arrays alone: numpy's own ufunc on their values, read into memory as before.
        return getattr(fn, method)(*_read_arrays(inputs, array_type), **_read_arrays(kwargs, array_type))

    # An expression's alone: numpy's functions on an ooc.Array keep reading it through
    # __array__ as before (np.sum calls its sum method, np.clip its clip method), and dask
    # takes an ooc.Array for an array it converts chunk by chunk.
    def array_function(self, func, types, args, kwargs):
        if func is np.where:
            return where(args, array_type) if not kwargs else _refuse("numpy.where with keywords")
        if func is np.clip:
            return _clip_call(args, kwargs, array_type)
        name = _REDUCTION_FUNCTIONS.get(func)
        if name is not None:
            return _reduction_call(func, name, args, kwargs)
        if func is np.histogram:
            return _histogram_call(args, kwargs)
        if func is np.linalg.norm:
            return _norm_call(args, kwargs)
        _refuse(_function_name(func))

    def clip_method(self, min=None, max=None, out=None, **kwargs):
        if out is not None or kwargs:  # np.clip then computes it from the values (np.asarray)
            raise TypeError("ooc: clip computes into a new lazy expression (no out= or other keywords)")
        return clip(self, min, max, array_type)

    names = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide, "pow": np.power,
             "floordiv": np.floor_divide, "mod": np.remainder, "and": np.bitwise_and, "or": np.bitwise_or,
             "xor": np.bitwise_xor, "lshift": np.left_shift, "rshift": np.right_shift}
    for cls in (array_type, Expression):
        for name, fn in names.items():
            setattr(cls, f"__{name}__", binary(fn))
            setattr(cls, f"__r{name}__", binary(fn, reflected=True))
        for name, fn in {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                         "eq": np.equal, "ne": np.not_equal}.items():
            setattr(cls, f"__{name}__", binary(fn))
        cls.__neg__ = unary(np.negative)
        cls.__pos__ = positive
        cls.__abs__ = unary(np.absolute)
        cls.__invert__ = unary(np.invert)
        cls.__hash__ = None  # == is elementwise, as numpy's
        cls.clip = clip_method
    Expression.__array_ufunc__ = array_ufunc
    array_type.__array_ufunc__ = _OnTheTypeOnly(array_ufunc)
    Expression.__array_function__ = array_function


class _OnTheTypeOnly:
    """An attribute that numpy's protocol lookup finds on the type while an instance does
    not show it. dask takes an object with __array_ufunc__ for an array of its own kind
    and would hand out ooc.Arrays as computed chunks instead of converting them with
    np.asarray, as it does for an ooc.Array (dask.array.from_array(ooc.open(p)))."""

    def __init__(self, function):
        self._function = function

    def __get__(self, instance, owner):
        if instance is not None:
            raise AttributeError("__array_ufunc__")
        return self._function


def _read_arrays(value, array_type):
    """`value` with every ooc.Array in it (in lists, tuples, dicts) read into memory."""
    if isinstance(value, array_type):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_read_arrays(v, array_type) for v in value)
    if isinstance(value, dict):
        return {k: _read_arrays(v, array_type) for k, v in value.items()}
    return value


def _bind(func, args, kwargs):
    import inspect
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{func.__name__}(): {e}") from None
    return bound.arguments


def _reduction_call(func, name, args, kwargs):
    import ooc
    given = _bind(func, args, kwargs)
    a = given.pop("a")
    extra = set(given) - {"axis", "dtype", "out", "keepdims", "ddof"}
    if extra:
        raise TypeError(f"ooc.{name}: numpy's {', '.join(sorted(extra))}= is not supported")
    return getattr(ooc, name)(a, **given)


def _norm_call(args, kwargs):
    import ooc
    given = _bind(np.linalg.norm, args, kwargs)
    if given.get("ord") is not None or given.get("axis") is not None or given.get("keepdims"):
        raise TypeError("ooc.norm: numpy.linalg.norm with ord=, axis= or keepdims= is not supported "
                        "(ooc computes the 2-norm of the flattened array)")
    return ooc.norm(given["x"])


def _histogram_call(args, kwargs):
    import ooc
    given = _bind(np.histogram, args, kwargs)
    if given.get("weights") is not None or given.get("density"):
        raise TypeError("ooc.histogram: weights= and density= are not supported")
    return ooc.histogram(given["a"], given.get("bins", 10), given.get("range"))


def _clip_call(args, kwargs, array_type):
    given = _bind(np.clip, args, kwargs)
    extra = {k for k, v in given.items() if k not in ("a", "a_min", "a_max") and v}
    if extra:
        _refuse("numpy.clip with " + ", ".join(sorted(extra)) + "=")
    return clip(given["a"], given["a_min"], given["a_max"], array_type)


def mask_key(key, array_type):
    """`key` with each lazy expression in it computed into a temporary boolean .npy (one
    pass of eval, memory bounded by the tile size) and opened as an ooc.Array mask; and the
    finalizers that remove those files (they live as long as the arrays indexed by them)."""
    items = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(item, Expression) for item in items):
        return key, ()
    masks, keep = [], []
    for item in items:
        if not isinstance(item, Expression):
            masks.append(item)
            continue
        if item.dtype.kind != "b":
            raise IndexError("arrays used as indices must be of integer (or boolean) type"
                             if item.dtype.kind == "f" else
                             "ooc: a lazy expression indexes as a boolean mask only; this one is "
                             f"{item.dtype}")
        directory = tempfile.mkdtemp(prefix="ooc-mask-")
        path = os.path.join(directory, "mask.npy")
        try:
            call, progress = _common({})
            _ooc.copy(item._source, path, False, None, None, False, call, progress)
        except BaseException:
            shutil.rmtree(directory, True)
            raise
        keep.append(_Remover(directory))
        masks.append(array_type(path))
    return (tuple(masks) if isinstance(key, tuple) else masks[0]), tuple(keep)


class _Remover:
    """Removes a temporary directory when the last array that reads from it is gone."""
    __slots__ = ("_finalizer", "__weakref__")

    def __init__(self, directory):
        self._finalizer = weakref.finalize(self, shutil.rmtree, directory, True)
