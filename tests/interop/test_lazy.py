"""Lazy expressions in Python: numpy's operators, ufuncs, np.where, np.clip, np.maximum and
np.minimum on ooc.Arrays give an ooc.Expression with numpy's shape, dtype and ndim (numpy
1.24's type rules: value-based casting of Python numbers, numpy scalars and 0-d arrays);
reducing it (full or along an axis), np.asarray of it, ooc.copy of it or a mask made of it
runs ooc's eval engine over the files, one fused pass. Values are numpy's bits on the same
data in memory (the transcendental functions within 4 ulp), memory order numpy's; what eval
cannot do is a TypeError naming it, shapes that do not broadcast numpy's ValueError.
Run by ctest (OOC_BUILD_DIR set), or: OOC_BUILD_DIR=build python3 test_lazy.py."""
import gc
import os
import subprocess
import sys
import tempfile
import textwrap
import warnings

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import DTYPES, TRANSCENDENTAL_ULP, run, same_bits, sample, thin, units_apart  # noqa: E402

BUILD = os.environ.get("OOC_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
import ooc  # noqa: E402


def save(directory, name, array):
    path = os.path.join(str(directory), name)
    np.save(path, array)
    return path


def numpy_or_error(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return np.asarray(fn(*args))
        except Exception as e:  # noqa: BLE001 - numpy's exception is the expected answer
            return e


def ooc_or_error(fn, *args):
    try:
        return np.asarray(fn(*args))
    except Exception as e:  # noqa: BLE001
        return e


def same_order(got, expected):
    """numpy's memory order where it tells (two axes longer than 1)."""
    if expected.ndim < 2 or expected.flags.c_contiguous == expected.flags.f_contiguous:
        return True
    return got.flags.f_contiguous == expected.flags.f_contiguous


TRANSCENDENTAL_NAMES = ("sin", "cos", "exp", "log", "tanh", "expm1", "log1p", "pow")


def check(fn, name, ooc_args, numpy_args):
    """fn on ooc operands (lazily) against fn on numpy's, for dtype, shape, order and bits."""
    expected = numpy_or_error(fn, *numpy_args)
    got = ooc_or_error(fn, *ooc_args)
    if isinstance(expected, Exception):
        assert isinstance(got, type(expected)), (name, expected, got)
        assert str(got) == str(expected), (name, str(got), str(expected))
        return
    assert not isinstance(got, Exception), (name, got)
    lazy = fn(*ooc_args)
    if isinstance(lazy, np.ndarray):  # an expression of the in-memory operand alone: numpy's own
        assert not isinstance(ooc_args[-1], ooc.Array), name
        return
    assert isinstance(lazy, ooc.Expression), (name, type(lazy))
    assert (lazy.shape, lazy.dtype, lazy.ndim) == (expected.shape, expected.dtype, expected.ndim), (name, lazy)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (name, got.dtype, expected.dtype)
    # numpy 1.24's deprecated +a of booleans copies into C order; eval keeps a's order
    assert same_order(got, expected) or (name.startswith("+a") and got.dtype == bool), (name, got.flags)
    if any(t in name for t in TRANSCENDENTAL_NAMES):
        assert int(np.max(units_apart(got, expected), initial=0)) <= TRANSCENDENTAL_ULP, name
    else:
        assert same_bits(got, expected), (name, got, expected)


# (name, fn(a, r)): a is (60, 7), r a row (7,).
EXPRESSIONS = [
    ("a + 1", lambda a, r: a + 1), ("a * 2.5", lambda a, r: a * 2.5), ("1 - a", lambda a, r: 1 - a),
    ("a / 3", lambda a, r: a / 3), ("a - r", lambda a, r: a - r), ("r * a", lambda a, r: r * a),
    ("-a", lambda a, r: -a), ("+a", lambda a, r: +a), ("abs(a)", lambda a, r: abs(a)),
    ("a > 0", lambda a, r: a > 0), ("a == r", lambda a, r: a == r), ("a != a", lambda a, r: a != a),
    ("r <= a", lambda a, r: r <= a), ("a >= 0.5", lambda a, r: a >= 0.5), ("a < -1", lambda a, r: a < -1),
    ("sqrt(abs(a))", lambda a, r: np.sqrt(abs(a))), ("a ** 2", lambda a, r: a ** 2), ("a ** 0.5 (pow for integers)", lambda a, r: a ** 0.5),
    ("a ** 1", lambda a, r: a ** 1), ("2 ** r (pow)", lambda a, r: 2 ** abs(r)),
    ("maximum(a, r)", lambda a, r: np.maximum(a, r)), ("minimum(a, 0)", lambda a, r: np.minimum(a, 0)),
    ("maximum(r, a)", lambda a, r: np.maximum(r, a)), ("minimum(a, nan)", lambda a, r: np.minimum(a, np.nan)),
    ("where(a > 0, a, r)", lambda a, r: np.where(a > 0, a, r)), ("where(a > 0, a, 0.5)", lambda a, r: np.where(a > 0, a, 0.5)),
    ("clip(a, -1, 1)", lambda a, r: np.clip(a, -1, 1)), ("clip(a, r, None)", lambda a, r: np.clip(a, r, None)),
    ("a.clip(max=3)", lambda a, r: a.clip(max=3)),
    ("(a > 0) & (r < 0)", lambda a, r: (a > 0) & (r < 0)), ("~(a > 0)", lambda a, r: ~(a > 0)),
    ("(a > 0) | (a < -1)", lambda a, r: (a > 0) | (a < -1)), ("(a > 0) ^ (r > 0)", lambda a, r: (a > 0) ^ (r > 0)),
    ("logical_or(a, r)", lambda a, r: np.logical_or(a, r)), ("logical_not(a)", lambda a, r: np.logical_not(a)),
    ("add(a, r)", lambda a, r: np.add(a, r)), ("multiply(a, 3)", lambda a, r: np.multiply(a, 3)),
    ("a + float32", lambda a, r: a + np.float32(2.5)), ("a * int16", lambda a, r: a * np.int16(3)),
    ("a + 300", lambda a, r: a + 300), ("a + 2**40", lambda a, r: a + 2 ** 40), ("a + nan", lambda a, r: a + np.nan),
    ("a * -0.0", lambda a, r: a * -0.0), ("a - inf", lambda a, r: a - np.inf), ("a + True", lambda a, r: a + True),
    ("a + 2**63", lambda a, r: a + 2 ** 63), ("a > 1e300", lambda a, r: a > 1e300), ("0.1 * a", lambda a, r: 0.1 * a),
    ("sin(a)", lambda a, r: np.sin(a)), ("cos(a - r)", lambda a, r: np.cos(a - r)),
    ("exp(a * 0.001)", lambda a, r: np.exp(a * 0.001)), ("log1p(abs(a))", lambda a, r: np.log1p(abs(a))),
    ("tanh(a) * 2", lambda a, r: np.tanh(a) * 2),
]


@pytest.fixture(scope="module")
def directory():
    with tempfile.TemporaryDirectory(prefix="ooc-lazy-test-") as d:
        yield d


@pytest.mark.parametrize("dtype", thin(DTYPES))
@pytest.mark.parametrize("order", ["C", "F"])
def test_expressions_are_numpy_s(directory, dtype, order):
    data = sample(dtype, (60, 7), seed=1, nan=True)
    data = np.asfortranarray(data) if order == "F" else data
    row = sample(dtype, (7,), seed=2)
    a = ooc.open(save(directory, f"a_{dtype[1:]}{dtype[0] == '>'}{order}.npy", data))
    r = ooc.open(save(directory, f"r_{dtype[1:]}{dtype[0] == '>'}.npy", row))
    a_np, r_np = np.load(a.path), np.load(r.path)
    for name, fn in EXPRESSIONS:
        check(fn, name, (a, r), (a_np, r_np))
        # the row as a numpy array in memory, and the other way round
        check(fn, name + " [row in memory]", (a, r_np), (a_np, r_np))


@pytest.mark.parametrize("dtype", ["|i1", "<u2", ">f4", "<f8", "|b1"])
def test_scalars_and_0d_arrays_count_by_value(directory, dtype):
    data = sample(dtype, (50, 3), seed=3)
    a = ooc.open(save(directory, f"s{dtype[1:]}.npy", data))
    zero_d = ooc.open(save(directory, f"z{dtype[1:]}.npy", np.array(3, dtype=">i8")))
    for name, fn, numpy_fn in [
        ("a * 0-d file", lambda a: a * zero_d, lambda x: x * np.array(3, dtype=">i8")),
        ("0-d file + 1 + a", lambda a: zero_d + 1 + a, lambda x: np.array(3, dtype=">i8") + 1 + x),
        ("a + 0-d ndarray", lambda a: a + np.array(2.5, dtype="<f2"), lambda x: x + np.array(2.5, dtype="<f2")),
        ("a + uint8 scalar", lambda a: a + np.uint8(200), lambda x: x + np.uint8(200)),
        ("a + -129", lambda a: a + -129, lambda x: x + -129),
        ("a + 70000.5", lambda a: a + 70000.5, lambda x: x + 70000.5),
        ("a ** -1", lambda a: a ** -1, lambda x: x ** -1),
        ("a + 2**64", lambda a: a + 2 ** 64, lambda x: x + 2 ** 64),
        ("a + [1, 2, 3]", lambda a: a + [1, 2, 3], lambda x: x + [1, 2, 3]),
    ]:
        expected = numpy_or_error(numpy_fn, data)
        got = ooc_or_error(fn, a)
        if isinstance(expected, Exception):
            assert isinstance(got, type(expected)) and str(got) == str(expected), (name, expected, got)
            continue
        if expected.dtype == object:  # a Python int beyond 64 bits: numpy computes with objects
            assert isinstance(got, TypeError) and "object" in str(got), (name, got)
            continue
        assert not isinstance(got, Exception), (name, got)
        assert got.dtype == expected.dtype and same_bits(got, expected), (name, got.dtype, expected.dtype)


def test_broadcasting_and_numpy_s_broadcast_error(directory):
    data = sample("<f8", (40, 6), seed=4)
    a = ooc.open(save(directory, "b.npy", data))
    col = ooc.open(save(directory, "col.npy", data[:, :1]))
    means = ooc.mean(a, axis=0)  # an np.ndarray
    for got, expected in [(a - means, data - data.mean(axis=0)), (a * col, data * data[:, :1]),
                          (col + means, data[:, :1] + data.mean(axis=0)), (a[:, 2] * a[:, 3], data[:, 2] * data[:, 3])]:
        assert got.shape == expected.shape and same_bits(np.asarray(got), expected)
    for make in (lambda a: a + np.zeros(5), lambda a: a[:3, :4] * a[:5, 0], lambda a: np.where(a > 0, a, np.zeros(5)),
                 lambda a: np.maximum(a[:, 0], a[:7, 1]), lambda a: np.clip(a, np.zeros(4), 1)):
        with pytest.raises(ValueError) as got:
            make(a)
        with pytest.raises(ValueError) as expected:
            make(data)
        assert str(got.value) == str(expected.value)
    with pytest.raises(ValueError, match=r"^operands could not be broadcast together with shapes \(40,6\) \(5,\) $"):
        a + np.zeros(5)
    # two arrays in files, as the issue writes it
    three, four = ooc.open(save(directory, "three.npy", np.arange(3.0))), ooc.open(save(directory, "four.npy", np.arange(4.0)))
    for make in (lambda x, y: x + y, lambda x, y: np.sin(x) * y, lambda x, y: (x > 0) & (y > 0),
                 lambda x, y: np.where(x > 0, x, y)):
        with pytest.raises(ValueError) as expected:
            make(np.arange(3.0), np.arange(4.0))
        with pytest.raises(ValueError, match=r"^operands could not be broadcast together with shapes \(3,\) (\(3,\) )?\(4,\) $") as got:
            make(three, four)
        assert str(got.value) == str(expected.value)


REDUCTIONS = ["sum", "prod", "mean", "min", "max", "argmin", "argmax", "count_nonzero", "any", "all", "nansum",
              "nanmean", "nanmin", "nanmax"]


@pytest.mark.parametrize("dtype", ["<f8", ">f4", "<i2", "|u1", "|b1", "<f2"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_reductions_of_expressions_are_numpy_s(directory, dtype, order):
    data = sample(dtype, (300, 5), seed=5, nan=False)
    data = np.asfortranarray(data) if order == "F" else data
    a = ooc.open(save(directory, f"red{dtype[1:]}{dtype[0] == '>'}{order}.npy", data))
    row = sample(dtype, (5,), seed=6)
    x = np.load(a.path)
    exprs = [(a > row, x > row)] if dtype == "|b1" else [(a * 2 - row, x * 2 - row), (abs(a - 1), abs(x - 1))]
    if dtype[1] == "f":
        exprs.append((np.sin(a) * np.cos(a), None))
    for lazy, values in exprs:
        values = np.asarray(lazy) if values is None else values  # the transcendental's own values
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for op in REDUCTIONS:
                if op in ("prod",) and values.dtype.kind == "b":
                    continue
                got = getattr(ooc, op)(lazy, tile_bytes="4K")
                expected = getattr(np, op)(values)
                assert np.asarray(got).dtype == np.asarray(expected).dtype, (op, got, expected)
                assert same_bits(np.asarray(got), np.asarray(expected)), (op, got, expected)
                for axis in (0, 1, -1):
                    got = getattr(ooc, op)(lazy, axis=axis, tile_bytes="4K")
                    expected = getattr(np, op)(values, axis=axis)
                    assert got.dtype == expected.dtype and same_bits(got, expected), (op, axis)
            for op in ("var", "std"):
                for ddof in (0, 1):
                    got = getattr(ooc, op)(lazy, ddof=ddof)
                    expected = getattr(np, op)(values, ddof=ddof)
                    np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype[1] != "f" or dtype[2] != "2" else 1e-2)
                    got = getattr(ooc, op)(lazy, axis=0, ddof=ddof)
                    assert same_bits(got, getattr(np, op)(values, axis=0, ddof=ddof)), (op, ddof)


def test_numpy_functions_and_methods_reduce_expressions(directory):
    data = sample("<f8", (200, 4), seed=7, nan=True)
    a = ooc.open(save(directory, "m.npy", data))
    e, x = a - 1, data - 1
    assert same_bits(np.asarray(np.sum(e)), np.asarray(np.sum(x))) and same_bits(np.asarray(e.sum()), np.asarray(x.sum()))
    assert same_bits(np.mean(e, axis=0), np.mean(x, axis=0)) and same_bits(e.mean(axis=0), x.mean(axis=0))
    assert same_bits(np.nanmax(e, axis=1), np.nanmax(x, axis=1)) and same_bits(np.var(e, 0, ddof=1), np.var(x, 0, ddof=1))
    assert np.argmax(e) == np.argmax(x) and e.max(axis=1).tobytes() == x.max(axis=1).tobytes()
    np.testing.assert_allclose(np.linalg.norm(np.nan_to_num(x)), np.linalg.norm(np.where(a != a, 0, e)))
    counts, edges = np.histogram(np.where(a != a, 0, e), bins=7)
    expected_counts, expected_edges = np.histogram(np.nan_to_num(x), bins=7)
    assert np.array_equal(counts, expected_counts) and same_bits(edges, expected_edges)
    out = ooc.mean(e, axis=0, out=os.path.join(directory, "means.npy"))
    assert isinstance(out, ooc.Array) and same_bits(np.load(out.path), x.mean(axis=0))
    with pytest.raises(ValueError, match="keepdims"):
        np.sum(e, keepdims=True)
    # the fused full reduction is eval's own: the same bits as ooc.eval's text
    t = np.sin(a) * np.cos(a)
    assert ooc.sum(t).tobytes() == ooc.eval("sum(sin(a) * cos(a))", a=a).tobytes()
    assert t.text == "(sin(a0) * cos(a0))"


def test_copy_and_read_of_an_expression(directory):
    data = np.asfortranarray(sample(">f4", (120, 6), seed=8))
    a = ooc.open(save(directory, "c.npy", data))
    e = np.where(a > 0, a * 2, -1)
    out = ooc.copy(e, out=os.path.join(directory, "e.npy"))
    expected = np.where(data > 0, data * 2, -1)
    written = np.load(out.path)
    assert written.dtype == expected.dtype and written.flags.f_contiguous and same_bits(written, expected)
    assert same_bits(e.read(), expected) and same_bits(np.asarray(e, dtype="f8"), expected.astype("f8"))
    h5py = pytest.importorskip("h5py")
    c_order = ooc.open(save(directory, "cc.npy", np.ascontiguousarray(data)))
    c = ooc.copy(c_order[:, 1] + 1, out=os.path.join(directory, "e.h5") + ":/x", compression="lz4")
    with h5py.File(c.path.split(":/")[0], "r") as f:
        assert same_bits(f["x"][...], data[:, 1] + 1)
    # an expression may be an eval input, an apply input, a map_blocks input
    assert same_bits(ooc.eval("b * 2", b=e), expected * 2)
    ooc.apply("add:1", e, out=os.path.join(directory, "p.npy"))
    assert same_bits(np.load(os.path.join(directory, "p.npy")), expected + 1)


def test_masks_from_expressions(directory):
    data = sample("<f8", (500, 6), seed=9)
    a = ooc.open(save(directory, "k.npy", data))
    try:
        selected = a[a[:, 3] > 0.5]
    except (ValueError, IndexError) as e:
        if "mask" in str(e) or "integer index" in str(e):
            pytest.xfail(f"boolean ooc.Array masks are not there yet: {e}")
        raise
    assert isinstance(selected, ooc.Array) and same_bits(np.asarray(selected), data[data[:, 3] > 0.5])
    both = (a[:, 0] > 0) & (a[:, 1] < 0)
    assert same_bits(np.asarray(a[both, 2]), data[(data[:, 0] > 0) & (data[:, 1] < 0), 2])
    assert same_bits(np.asarray(a[a > 1]), data[data > 1])
    assert same_bits(ooc.sum(a[a[:, 3] > 0.5], axis=0), data[data[:, 3] > 0.5].sum(axis=0))
    # the mask's temporary file lives as long as an array selected by it, then goes
    before = set(os.listdir(tempfile.gettempdir()))
    s = a[a[:, 0] > 0][::2]
    made = {d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("ooc-mask-")}
    assert len(made) == 1
    gc.collect()
    assert same_bits(np.asarray(s), data[data[:, 0] > 0][::2])
    del s, selected
    gc.collect()
    assert not made & set(os.listdir(tempfile.gettempdir()))
    with pytest.raises(IndexError, match="integer \\(or boolean\\) type"):
        a[a[:, 0] * 2.0]
    with pytest.raises(IndexError, match="boolean index did not match"):
        a[a[:10, 0] > 0]


def test_what_eval_cannot_do_is_a_type_error_naming_it(directory):
    data = sample("<f8", (30, 4), seed=10)
    a = ooc.open(save(directory, "u.npy", data))
    e = a + 1
    for make, name in [(lambda: np.fft.fft(e), "numpy.fft.fft"), (lambda: np.cumsum(e), "numpy.cumsum"),
                       (lambda: np.arctan2(e, a), "numpy.arctan2"), (lambda: e // 2, "numpy.floor_divide"),
                       (lambda: e % 2, "numpy.remainder"), (lambda: np.add.reduce(e), "numpy.add.reduce"),
                       (lambda: np.isnan(e), "numpy.isnan"), (lambda: np.sort(e), "numpy.sort"),
                       (lambda: e.astype("f4"), "astype"), (lambda: e[0], "indexed"),
                       (lambda: (a > 0).astype(int) & 1, "astype"),
                       (lambda: np.where(e > 1), "numpy.where(condition)"),
                       (lambda: np.add(e, 1, out=np.empty((30, 4))), "numpy.add")]:
        with pytest.raises(TypeError, match=name.replace("(", r"\(").replace(")", r"\)")):
            make()
    with pytest.raises(TypeError, match="bitwise_and of integers"):
        ooc.open(save(directory, "i.npy", np.arange(6))) & 3
    with pytest.raises(ValueError, match="truth value of an array with more than one element is ambiguous"):
        bool(e)
    with pytest.raises(TypeError):  # numpy's: boolean subtract
        (a > 0) - (a > 1)
    # ooc.Arrays alone, outside what is lazy, are read into memory as before (np.asarray)
    assert same_bits(np.arctan2(a, a), np.arctan2(data, data))
    assert same_bits(np.cumsum(a, axis=0), np.cumsum(data, axis=0))


def test_temporary_operand_files_go_with_the_expression(directory):
    a = ooc.open(save(directory, "t.npy", sample("<f8", (10, 3))))
    before = set(os.listdir(tempfile.gettempdir()))
    e = a - np.arange(3.0) * np.float32(2)
    assert same_bits(np.asarray(e), np.load(a.path) - np.arange(3.0) * np.float32(2))
    made = {d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("ooc-lazy-")}
    assert len(made) == 1
    del e
    gc.collect()
    assert not made & set(os.listdir(tempfile.gettempdir()))
    # a memmap of a whole .npy file (and an h5py.Dataset) is read from its file, not copied
    m = np.load(a.path, mmap_mode="r")
    before = set(os.listdir(tempfile.gettempdir()))
    e = a * m
    assert e.text == "(a0 * a1)" and same_bits(np.asarray(e), np.load(a.path) ** 2)
    assert not {d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("ooc-lazy-")}
    h5py = pytest.importorskip("h5py")
    with h5py.File(os.path.join(directory, "t.h5"), "w") as f:
        f["x"] = np.load(a.path)
    with h5py.File(os.path.join(directory, "t.h5"), "r") as f:
        e = f["x"] - a
        assert e.text == "(a0 - a1)" and same_bits(np.asarray(e), np.zeros((10, 3)))


def test_eval_computes_maximum_and_minimum(directory):
    x = np.array([np.nan, 1.0, -0.0, 0.0, 2.0, -np.inf], dtype="<f8")
    y = np.array([1.0, np.nan, 0.0, -0.0, np.nan, 3.0], dtype="<f8")
    for dtype in ("<f8", ">f4", "<f2", "|i1", "|b1"):
        px, py = save(directory, "mx.npy", x.astype(dtype)), save(directory, "my.npy", y.astype(dtype))
        for f in ("maximum", "minimum"):
            for expr, expected in ((f"{f}(x, y)", getattr(np, f)(np.load(px), np.load(py))),
                                   (f"{f}(y, x)", getattr(np, f)(np.load(py), np.load(px))),
                                   (f"{f}(x, 0.5)", getattr(np, f)(np.load(px), 0.5))):
                got = ooc.eval(expr, x=px, y=py)
                assert got.dtype == expected.dtype and same_bits(got, expected), (dtype, expr)
                run("eval", expr, f"x={px}", f"y={py}", "--json")
                assert np.array_equal(np.signbit(got), np.signbit(expected)), (dtype, expr)


def test_a_lazy_reduction_keeps_memory_bounded(directory):
    """sum(sin(a) * cos(a)), (a - 1).mean(axis=0) and a mask over a 256 MiB file: resident
    memory stays near the tile budget, far below the file (no whole-array temporary)."""
    if os.environ.get("OOC_TEST_SANITIZED") == "1":
        pytest.skip("resident memory is the sanitizer's under ASan")
    path = os.path.join(directory, "big.npy")
    m = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(1 << 22, 8))
    rng = np.random.default_rng(0)
    for i in range(0, m.shape[0], 1 << 19):
        m[i:i + (1 << 19)] = rng.standard_normal((1 << 19, 8))
    del m
    script = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {os.path.join(BUILD, "python")!r})
        import numpy as np, ooc
        a = ooc.open({path!r})
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        ooc.sum(np.sin(a) * np.cos(a)); (a - 1).mean(axis=0); ooc.sum(a[a[:, 3] > 2.5], axis=0)
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
    """)
    grown = int(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)
    os.remove(path)
    assert grown < 128, f"resident memory grew {grown} MiB over a 256 MiB file"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
