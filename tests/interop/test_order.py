"""Order statistics: ooc.quantile/percentile/median and their nan forms, and `oocrun reduce
median|quantile:Q[,Q...]|... ARRAY [--axis K] [--method M] --json`, against numpy 1.24 on
every dtype and byte order, C and Fortran order, along no axis or one, with duplicates,
NaNs, +-0.0 and +-inf. Results equal numpy's in dtype, shape and value bit for bit, except
that -0.0 and 0.0 count as equal (which of the two numpy's unstable partition puts at a
rank is its implementation's accident; docs/decisions/2026-12-04-order-statistics.md)."""
import os
import sys
import tempfile
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import DTYPES, loads, run, sweep, thin  # noqa: E402

sys.path.insert(0, os.path.join(os.environ.get("OOC_BUILD_DIR", "build"), "python"))
try:
    import ooc  # noqa: E402
except ImportError:  # the sanitized tree builds no Python module
    ooc = None

def tempdir():
    return tempfile.TemporaryDirectory(prefix="ooc-order-")


METHODS = ["linear", "lower", "higher", "nearest", "midpoint"]
FUNCTIONS = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian"]
# (shape, axis) pairs: every element, each axis, a negative axis.
LAYOUTS = [((), None), ((1,), None), ((37,), None), ((37,), 0), ((7, 5), None), ((7, 5), 0), ((7, 5), 1),
           ((6, 4, 5), 1), ((6, 4, 5), -1), ((6, 4, 5), 0), ((40, 3), 0)]


def order_sample(dtype, shape, seed=0, nan=True):
    """Values with many duplicates and, for floats, +-0.0, +-inf and (nan=True) NaN in some
    slices only, so that plain forms give both NaN and numbers."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        extremes = np.array([info.min, info.max, 0, 1], dtype=dt.newbyteorder("="))
        flat = np.where(rng.random(n) < 0.2, rng.choice(extremes, n),
                        rng.integers(info.min, info.max, n, dtype=dt.newbyteorder("="), endpoint=True))
        flat = np.where(rng.random(n) < 0.3, flat[rng.integers(0, max(n, 1), n)] if n else flat, flat)
    else:
        special = np.array([0.0, -0.0, np.inf, -np.inf, 1.5, -2.25], dtype=dt.newbyteorder("="))
        scale = 100.0 if dt.itemsize == 2 else 1e6
        normal = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, scale], n)).astype(dt.newbyteorder("="))
        flat = np.where(rng.random(n) < 0.25, rng.choice(special, n), normal)
        if nan and n > 3:
            flat[rng.integers(0, n, max(1, n // 15))] = np.nan
    return flat.astype(dt).reshape(shape)


def same_values(got, expected):
    """dtype, shape and every value numpy's: bit for bit, NaN equal to NaN, -0.0 to 0.0."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return False
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, expected))
    uint = f"u{got.itemsize}"
    return bool(np.all((got.view(uint) == expected.view(uint)) | (np.isnan(got) & np.isnan(expected))
                       | ((got == 0) & (expected == 0))))


def numpy_result(function, a, q, axis, method):
    """numpy's value (warnings silenced), or the exception it raised."""
    f = getattr(np, function)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            if function.endswith("median"):
                return np.asarray(f(a, axis=axis))
            return np.asarray(f(a, q, axis=axis, method=method))
        except (ValueError, TypeError, IndexError) as e:
            return e


def q_for(function, kind):
    """q of a case: a scalar, a list, in percent for percentile."""
    fractions = {"scalar": 0.37, "list": [0.0, 0.01, 0.25, 0.5, 0.5, 0.9, 0.99, 1.0]}[kind]
    if "percentile" in function:
        return np.multiply(fractions, 100).tolist() if kind == "list" else 37.0
    return fractions


def valid_layout(dtype, order, layout, *rest):
    return order == "C" or len(layout[0]) > 1


@unittest.skipIf(ooc is None, "the Python module is not built")
class PythonSweep(unittest.TestCase):
    def check(self, a, path, function, q, axis, method, **options):
        expected = numpy_result(function, a, q, axis, method)
        f = getattr(ooc, function)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args = () if function.endswith("median") else (q,)
            kwargs = {} if function.endswith("median") else {"method": method}
            if isinstance(expected, Exception):
                with self.assertRaises(type(expected)) as caught:
                    f(path, *args, axis=axis, **kwargs, **options)
                self.assertEqual(str(caught.exception), str(expected))
                return
            got = f(path, *args, axis=axis, **kwargs, **options)
        self.assertTrue(same_values(got, expected),
                        f"{function} q={q} axis={axis} method={method} of {a.dtype.str} {a.shape}:\n"
                        f"ooc   {got!r}\nnumpy {expected!r}")
        if np.ndim(expected) == 0:
            self.assertIsInstance(got, np.generic)

    def test_sweep(self):
        """Every dtype and byte order with every function, method, layout and order (pairs)."""
        cases = sweep(DTYPES, ["C", "F"], LAYOUTS, FUNCTIONS, METHODS, ["scalar", "list"], valid=valid_layout)
        with tempdir() as tmp:
            for i, (dtype, order, (shape, axis), function, method, qkind) in enumerate(cases):
                a = np.asarray(order_sample(dtype, shape, seed=i), order=order)
                path = os.path.join(tmp, f"a{i}.npy")
                np.save(path, a)
                with self.subTest(dtype=dtype, order=order, shape=shape, axis=axis, function=function, method=method):
                    self.check(a, path, function, q_for(function, qkind), axis, method)

    def test_every_dtype_and_method_whole_array(self):
        """Every dtype and method over every element, with duplicates, NaN, +-0 and +-inf."""
        with tempdir() as tmp:
            for i, dtype in enumerate(DTYPES):
                for nan in (False, True):
                    a = order_sample(dtype, (301,), seed=100 + i, nan=nan)
                    path = os.path.join(tmp, f"w{i}{nan}.npy")
                    np.save(path, a)
                    for function in FUNCTIONS:
                        for method in METHODS if not function.endswith("median") else ["linear"]:
                            with self.subTest(dtype=dtype, nan=nan, function=function, method=method):
                                self.check(a, path, function, q_for(function, "list"), None, method)

    def test_many_passes_and_tiles(self):
        """A budget of a few bytes makes every bucket too large to collect: the select narrows
        the keys 16 bits a read until each rank's key is known; tiles of one block each are
        merged; columns of axis=0 share the rounds. Same values as numpy's."""
        with tempdir() as tmp:
            for i, dtype in enumerate(["<f8", ">f4", "<i8", ">u4", "<f2", "|i1"]):
                a = order_sample(dtype, (20011, 3), seed=7 + i)
                path = os.path.join(tmp, f"m{i}.npy")
                np.save(path, a)
                for axis in (None, 0):
                    for function in ("quantile", "nanquantile", "median", "nanmedian"):
                        for budget in (64, None):
                            with self.subTest(dtype=dtype, axis=axis, function=function, budget=budget):
                                self.check(a, path, function, [0.001, 0.5, 0.999], axis, "linear",
                                           memory_budget=budget, tile_bytes="64K")

    def test_passes(self):
        """Reads: 4 for float64 values that never fit the budget (equal ones: 16 bits a read),
        1 where all of them fit, 2 where the bucket of the median does (a histogram, then the
        bucket collected); 1 for int16 values (the histogram of 16 bits is exact)."""
        with tempdir() as tmp:
            path = os.path.join(tmp, "p.npy")
            np.save(path, np.full(50000, 1.5))
            source = ooc.open(path)._source
            call = ooc._common({})[0]
            self.assertEqual(ooc._ooc.quantile(source, [0.5], False, "linear", False, False, None, 8, call, None)[3], 4)
            self.assertEqual(ooc._ooc.quantile(source, [0.5], False, "linear", False, False, None, 0, call, None)[3], 1)
            np.save(path, np.arange(500000, dtype="<f8")[::-1])
            self.assertEqual(ooc._ooc.quantile(source, [0.5], False, "linear", False, False, None, 2 ** 20, call, None)[3], 2)
            np.save(path, order_sample("<i2", (50000,)))
            self.assertEqual(ooc._ooc.quantile(source, [0.5], False, "linear", False, False, None, 8, call, None)[3], 1)

    def test_guessed_windows(self):
        """A mapped array of at least 2**19 values that does not fit the budget: a sample of
        8,192 pages guesses a window of keys around each wanted rank, and one read that keeps
        the keys in the windows finds every rank (1 read). Where the sample misleads (the
        sampled stretches hold other values than the rest), the usual rounds follow and give
        the same values. Keys of 8 and 4 bytes, both byte orders, NaNs; keys of 2 bytes or 1
        are found by the first, exact histogram, in 1 read too."""
        n = 1 << 20
        with tempdir() as tmp:
            path = os.path.join(tmp, "g.npy")
            call = ooc._common({})[0]
            cases = [("<f8", False), (">f8", True), ("<f4", True), (">i4", False), ("<u8", False), ("<i2", False),
                     ("<f2", True), ("|u1", False)]
            for i, (dtype, nan) in enumerate(cases):
                a = order_sample(dtype, (n,), seed=40 + i, nan=nan)
                np.save(path, a)
                source = ooc.open(path)._source
                budget = a.nbytes // 2
                for function in ("quantile", "nanquantile", "median", "nanmedian"):
                    for method in ("linear", "nearest") if function.endswith("quantile") else ["linear"]:
                        with self.subTest(dtype=dtype, function=function, method=method):
                            self.check(a, path, function, [0.001, 0.5, 0.999], None, method, memory_budget=budget)
                with self.subTest(dtype=dtype, reads=True):
                    self.assertEqual(
                        ooc._ooc.quantile(source, [0.5], False, "linear", False, False, None, budget, call, None)[3], 1)
            def fall_back(values, q):
                """More than one read for the median (the windows missed or were given up),
                and numpy's values all the same."""
                np.save(path, values)
                got = ooc._ooc.quantile(ooc.open(path)._source, [0.5], False, "linear", False, False, None,
                                        2 ** 20, call, None)
                self.assertGreater(got[3], 1)
                self.assertTrue(same_values(ooc.quantile(path, q, memory_budget=2 ** 20), np.quantile(values, q)))

            # Misleading pages: the stretches the sample reads (16 values at every 128th) hold
            # the largest values; the median lies far below the windows they suggest.
            a = np.random.default_rng(5).standard_normal(n)
            stretches = (np.arange(8192)[:, None] * (n // 8192) + np.arange(16)).ravel()
            a[stretches] = 1e9 + np.arange(stretches.size)
            fall_back(a, [0.1, 0.5, 0.9])
            self.assertTrue(same_values(ooc.median(path, memory_budget=2 ** 20), np.median(a)))
            self.assertEqual(loads(run("reduce", "median", path, "--json").stdout)["value"], float(np.median(a)))
            # A value the sample barely saw fills the window: a thread keeps at most twice
            # what the sample promised, then gives the window up; the rounds find the median.
            b = np.zeros(n)
            b[stretches] = np.random.default_rng(6).standard_normal(stretches.size)
            fall_back(b, [0.01, 0.5, 0.99])

    def test_selections_and_masks(self):
        a = order_sample("<f8", (50, 6), seed=3)
        with tempdir() as tmp:
            path = os.path.join(tmp, "s.npy")
            np.save(path, a)
            x = ooc.open(path)
            self.assertTrue(same_values(ooc.median(x[::3, 1:4], axis=0), np.median(a[::3, 1:4], axis=0)))
            self.assertTrue(same_values(ooc.nanquantile(x[5:40], [0.2, 0.8]), np.nanquantile(a[5:40], [0.2, 0.8])))

    def test_numpy_shapes_keepdims_out(self):
        a = order_sample("<f4", (6, 4, 5), seed=4)
        with tempdir() as tmp:
            path = os.path.join(tmp, "k.npy")
            np.save(path, a)
            q = [[0.1, 0.2], [0.5, 0.9]]
            self.assertTrue(same_values(ooc.quantile(path, q, axis=1), np.quantile(a, q, axis=1)))
            self.assertTrue(same_values(ooc.quantile(path, 0.3, axis=2, keepdims=True),
                                        np.quantile(a, 0.3, axis=2, keepdims=True)))
            self.assertTrue(same_values(ooc.nanmedian(path, keepdims=True), np.nanmedian(a, keepdims=True)))
            out = np.empty((4, 5))
            self.assertIs(ooc.median(path, axis=0, out=out), out)
            self.assertTrue(same_values(out, np.median(a, axis=0).astype(out.dtype)))

    def test_numpy_quirks(self):
        """What numpy 1.24's formulas give at the edges, which ooc keeps: int8 differences wrap,
        inf - inf is NaN, np.ma.median's float16 sums overflow (nanmedian along a short axis)."""
        with tempdir() as tmp:
            cases = [(np.array([-128, 127], "i1"), "quantile", 0.5, None),
                     (np.array([np.inf, np.inf]), "quantile", 0.5, None),
                     (np.array([1.0, np.inf]), "quantile", 1.0, None),
                     (np.array([[65504, 65504], [65504, 65504]], "f2"), "nanmedian", None, 0),
                     (np.array([[65504, 65504], [65504, 65504]], "f2"), "median", None, 0),
                     (np.array([[1.7e308], [1.7e308], [1.7e308]]), "nanmedian", None, 0)]
            for i, (a, function, q, axis) in enumerate(cases):
                path = os.path.join(tmp, f"q{i}.npy")
                np.save(path, a)
                with self.subTest(a=a, function=function):
                    self.check(a, path, function, q, axis, "linear")

    def test_warnings(self):
        with tempdir() as tmp:
            path = os.path.join(tmp, "n.npy")
            np.save(path, np.array([[1.0, np.nan], [2.0, np.nan]]))
            for f in (ooc.nanmedian, lambda p, axis: ooc.nanquantile(p, 0.5, axis=axis)):
                for axis in (None, 0):
                    np.save(path, np.array([[1.0, np.nan], [2.0, np.nan]]) if axis == 0 else np.full(3, np.nan))
                    with self.assertWarnsRegex(RuntimeWarning, "All-NaN slice encountered"):
                        f(path, axis=axis)
            np.save(path, np.zeros(0))
            with self.assertWarnsRegex(RuntimeWarning, "Mean of empty slice"):
                self.assertTrue(np.isnan(ooc.median(path)))

    def test_bad_input(self):
        with tempdir() as tmp:
            path = os.path.join(tmp, "b.npy")
            np.save(path, np.arange(5.0))
            for call, expected in [(lambda: ooc.quantile(path, 1.5), "Quantiles must be in the range [0, 1]"),
                                   (lambda: ooc.quantile(path, [0.5, -0.1]), "Quantiles must be in the range [0, 1]"),
                                   (lambda: ooc.percentile(path, 101), "Percentiles must be in the range [0, 100]"),
                                   (lambda: ooc.nanquantile(path, np.nan), "Quantiles must be in the range [0, 1]")]:
                with self.assertRaises(ValueError) as caught:
                    call()
                self.assertEqual(str(caught.exception), expected)
            with self.assertRaises(ValueError) as caught:
                ooc.quantile(path, 0.5, method="foo")
            self.assertEqual(str(caught.exception), str(numpy_result("quantile", np.arange(5.0), 0.5, None, "foo")))
            with self.assertRaises(ValueError):
                ooc.quantile(path, 0.5, method="hazen")  # numpy's, not ooc's: refused, not guessed
            with self.assertRaises(np.AxisError):
                ooc.median(path, axis=1)
            np.save(path, np.zeros((0, 3)))
            for function, method in [("quantile", "linear"), ("quantile", "lower"), ("nanquantile", "linear"),
                                     ("median", "linear"), ("nanmedian", "linear")]:
                for axis in (None, 0, 1):
                    self.check(np.zeros((0, 3)), path, function, 0.5, axis, method)
            np.save(path, np.array([True, False]))
            self.check(np.array([True, False]), path, "quantile", 0.5, None, "linear")
            with self.assertRaises(FileNotFoundError):
                ooc.median(os.path.join(tmp, "missing.npy"))


@unittest.skipIf(ooc is None, "the Python module is not built")
class Unique(unittest.TestCase):
    def test_every_dtype(self):
        """np.unique's values (dtype, byte order and all) and counts on every dtype, with many
        duplicates, NaNs (collapsed into one, or not with equal_nan=False), +-0.0, +-inf,
        over tiles of one block each; a selection as the input."""
        with tempdir() as tmp:
            for i, dtype in enumerate(DTYPES):
                for n in (0, 1, 20011):
                    a = order_sample(dtype, (n,), seed=i)
                    if a.dtype.kind in "iu" and n:
                        a = a[np.random.default_rng(i).integers(0, min(50, n), n)]  # few distinct values
                    path = os.path.join(tmp, f"u{i}.npy")
                    np.save(path, a)
                    with self.subTest(dtype=dtype, n=n):
                        values, counts = ooc.unique(path, return_counts=True, tile_bytes="64K")
                        expected, expected_counts = np.unique(a, return_counts=True)
                        self.assertTrue(same_values(values, expected), f"{values} vs {expected}")
                        self.assertTrue(np.array_equal(counts, expected_counts))
                        self.assertTrue(same_values(ooc.unique(path), np.unique(a)))
                        if a.dtype.kind == "f":
                            self.assertTrue(same_values(ooc.unique(path, equal_nan=False), np.unique(a, equal_nan=False)))
            a = order_sample("<f8", (300, 4), seed=1)
            np.save(path, a)
            self.assertTrue(same_values(ooc.unique(ooc.open(path)[::7, 1:3]), np.unique(a[::7, 1:3])))

    def test_too_many_distinct_values(self):
        with tempdir() as tmp:
            path = os.path.join(tmp, "d.npy")
            np.save(path, np.arange(200000, dtype="<i8"))
            with self.assertRaises(MemoryError) as caught:
                ooc.unique(path, memory_budget=1 << 16)
            self.assertIn("do not fit the memory budget", str(caught.exception))
            # out= takes any number of them: sorted first (test_sort.UniqueBeyondTheTables)
            out = ooc.unique(path, out=os.path.join(tmp, "o.npy"), memory_budget=1 << 20)
            self.assertTrue(np.array_equal(np.load(os.path.join(tmp, "o.npy")), np.arange(200000)))
            self.assertEqual(out.shape, (200000,))

    def test_command_line(self):
        with tempdir() as tmp:
            path = os.path.join(tmp, "c.npy")
            a = np.array([3, 1, 3, 2, 1, 3], dtype=">i4")
            np.save(path, a)
            self.assertEqual(run("unique", path, "--quiet").stdout, "[1, 2, 3]\n")
            self.assertEqual(run("unique", path, "--counts", "--quiet").stdout, "[1, 2, 3]\n[2, 1, 3]\n")
            obj = loads(run("unique", path, "--counts", "--json").stdout)
            self.assertEqual((obj["values"], obj["counts"], obj["distinct"], obj["dtype"], obj["passes"]),
                             ([1, 2, 3], [2, 1, 3], 3, "int32", 1))
            out = os.path.join(tmp, "o.npy")
            run("unique", path, "-o", out, "--quiet")
            self.assertTrue(np.array_equal(np.load(out), np.unique(a)))
            f = order_sample("<f4", (5000,))
            np.save(path, f)
            obj = loads(run("unique", path, "--counts", "--json").stdout)
            self.assertTrue(same_values(np.array(obj["values"], dtype=np.float64).astype("f4"), np.unique(f)))
            self.assertEqual(obj["counts"], np.unique(f, return_counts=True)[1].tolist())
            proc = run("unique", os.path.join(tmp, "missing.npy"), check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1)
            proc = run("unique", path, "-o", os.path.join(tmp, "x.txt"), check=False)
            self.assertEqual(proc.returncode, 2)


class CommandLine(unittest.TestCase):
    def test_json_values(self):
        """oocrun's values are numpy's, on a sample of dtypes, layouts and ops."""
        ops = [("median", "median", None), ("nanmedian", "nanmedian", None), ("quantile:0.25", "quantile", 0.25),
               ("quantile:0.01,0.5,0.99", "quantile", [0.01, 0.5, 0.99]), ("percentile:90", "percentile", 90.0),
               ("nanquantile:0.1,0.9", "nanquantile", [0.1, 0.9]), ("nanpercentile:50", "nanpercentile", 50.0)]
        cases = thin(sweep(DTYPES, ops, [((23,), None), ((9, 4), 0), ((9, 4), -1)], ["linear", "nearest", "midpoint"]))
        with tempdir() as tmp:
            for i, (dtype, (op, function, q), (shape, axis), method) in enumerate(cases):
                a = order_sample(dtype, shape, seed=i)
                path = os.path.join(tmp, f"c{i}.npy")
                np.save(path, a)
                expected = numpy_result(function, a, q, axis, method)
                args = ["reduce", op, path, "--method", method, "--json", "--quiet"]
                if axis is not None:
                    args += ["--axis", axis]
                with self.subTest(dtype=dtype, op=op, axis=axis, method=method):
                    proc = run(*args, check=False)
                    if isinstance(expected, Exception):
                        self.assertNotEqual(proc.returncode, 0)
                        continue
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    obj = loads(proc.stdout)
                    self.assertEqual(obj["dtype"], expected.dtype.name)
                    self.assertEqual(obj["shape"], list(expected.shape))
                    got = np.array(obj["value"], dtype=np.float64).astype(expected.dtype) \
                        if expected.dtype.kind != "b" else np.array(obj["value"], dtype=bool)
                    self.assertTrue(same_values(got.reshape(expected.shape), expected), f"{obj['value']} vs {expected}")

    def test_text_and_warning(self):
        with tempdir() as tmp:
            path = os.path.join(tmp, "t.npy")
            np.save(path, np.array([3.0, 1.0, 2.0, 10.0]))
            self.assertEqual(run("reduce", "median", path, "--quiet").stdout, "2.5\n")
            self.assertEqual(run("reduce", "quantile:0,1", path, "--quiet").stdout, "[1.0, 10.0]\n")
            np.save(path, np.full(3, np.nan))
            proc = run("reduce", "nanmedian", path)
            self.assertIn("warning: All-NaN slice encountered", proc.stderr)
            self.assertEqual(loads(run("reduce", "nanmedian", path, "--json").stdout)["warning"],
                             "All-NaN slice encountered")

    def test_bad_input(self):
        with tempdir() as tmp:
            path = os.path.join(tmp, "b.npy")
            np.save(path, np.arange(5.0))
            for args, code, words in [
                    (["quantile:1.5"], 2, "Quantiles must be in the range [0, 1]"),
                    (["percentile:-1"], 2, "Percentiles must be in the range [0, 100]"),
                    (["quantile:0.5", "--method", "foo"], 2, "'foo' is not a valid method"),
                    (["quantile"], 2, "quantile needs its quantiles"),
                    (["quantile:0.1,mean"], 2, "computed alone"),
                    (["mean,median"], 2, "computed alone"),
                    (["quantile:abc"], 2, "not a number"),
                    (["median", "--axis", "3"], 1, "axis 3 is out of bounds"),
                    (["median", "-o", os.path.join(tmp, "o.npy"), "--axis", "0"], 2, "-o does not take median")]:
                with self.subTest(args=args):
                    proc = run("reduce", args[0], path, *args[1:], check=False)
                    self.assertEqual(proc.returncode, code, proc.stderr)
                    self.assertIn(words, proc.stderr)
                    self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
            np.save(path, np.zeros(0))
            proc = run("reduce", "quantile:0.5", path, check=False)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("cannot do a non-empty take from an empty axes.", proc.stderr)
            self.assertIn("Mean of empty slice", run("reduce", "median", path).stderr)
            proc = run("reduce", "median", os.path.join(tmp, "missing.npy"), check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("missing.npy", proc.stderr)
            self.assertEqual(os.listdir(tmp), ["b.npy"])


if __name__ == "__main__":
    unittest.main()
