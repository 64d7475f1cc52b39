"""Several statistics in one read: `oocrun reduce sum,mean,std,... ARRAY [--axis K] --json`
and `ooc.reduce(a, ["mean", "std"], axis=..., ddof=...)`.

Every value is bit for bit the one its own single-operation call gives (oocrun reduce OP,
ooc.OP), on every dtype and byte order, C and Fortran order, along no axis or any axis,
with ddof 0 and 1; and numpy's, as each single operation is (var and std of the whole
array within the one-pass tolerance of docs/decisions/2026-11-29-var-std-one-pass.md).
The array is read once, twice where an operation needs two passes (var or std along an
axis, a histogram without a range): oocrun's JSON says how many ("passes"), and the
bytes a direct-I/O run reads (/proc/self/io) agree."""
import itertools
import os
import sys
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import (DTYPES, TempDir, json_value, numpy_or_error, run, run_json, same_bits, same_scalar,  # noqa: E402
                     sample, strict_loads, thin)

sys.path.insert(0, os.path.join(os.environ.get("OOC_BUILD_DIR", "build"), "python"))
try:
    import ooc  # noqa: E402
except ImportError:  # the sanitized tree builds no Python module
    ooc = None

NUMPY = {
    "sum": np.sum, "prod": np.prod, "mean": np.mean, "min": np.min, "max": np.max,
    "argmin": np.argmin, "argmax": np.argmax, "var": np.var, "std": np.std,
    "count_nonzero": lambda a, axis=None: np.count_nonzero(a, axis=axis), "any": np.any, "all": np.all,
    "nansum": np.nansum, "nanmean": np.nanmean, "nanmin": np.nanmin, "nanmax": np.nanmax,
    "norm": lambda a, axis=None: np.linalg.norm(a.ravel() if axis is None else a, axis=axis),
}
OPS = list(NUMPY)
# The whole array's var and std are one pass, and its norm numpy's BLAS: within rounding
# (as tests/interop/test_reductions.py checks them); everything else is numpy's bits.
TOLERANCE = {"var": {"float16": 4e-3, "float32": 1e-5, "float64": 1e-12},
             "std": {"float16": 4e-3, "float32": 1e-5, "float64": 1e-12},
             "norm": {"float16": 4e-3, "float32": 1e-4, "float64": 1e-12}}


def numpy_value(op, a, axis=None, ddof=0):
    kwargs = {"ddof": ddof} if op in ("var", "std") else {}
    if axis is not None:
        kwargs["axis"] = axis
    return numpy_or_error(NUMPY[op], a, **kwargs)


def without_seconds(obj):
    return {k: v for k, v in obj.items() if k != "seconds"}


def object_of(*args):
    """The JSON object oocrun prints, as it prints it (NaN and the infinities as strings)."""
    return strict_loads(run(*args, "--json", "--quiet").stdout)


def array_of(value, dtype):
    """A JSON value (a nested list, non-finite floats as strings) as an array of `dtype`."""
    return np.array(json_value(value), dtype=float if dtype.kind == "f" else dtype).astype(dtype)


def bits_of(value):
    """A numpy scalar or array as (dtype, shape, bytes): equal exactly when the bits are."""
    value = np.asarray(value)
    return value.dtype.str, value.shape, value.tobytes()


def data(dtype, shape, order, seed):
    """Values of `dtype` in `order`; floats stay small enough that numpy's float16 sums
    and squares stay finite (so var and std compare as numbers)."""
    a = sample(dtype, shape, seed=seed)
    if a.dtype.kind == "f" and a.dtype.itemsize == 2:
        a = (a / 64).astype(dtype)
    return np.asarray(a, order=order)


def read_bytes():
    """Bytes this process has read through read()/pread() (direct I/O reads are counted)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


class CommandLineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def test_each_result_is_its_own_runs_object_and_numpys_value_on_every_dtype(self):
        names = ",".join(OPS + ["histogram"])
        for case, (dtype, (shape, order)) in enumerate(thin(itertools.product(
                DTYPES, [((20011,), "C"), ((301, 7), "F")]))):
            a = data(dtype, shape, order, seed=case)
            path = self.tmp.save("a.npy", a)
            extra = ["--ddof", "1", "--bins", "7", "--tile-bytes", "8K"]
            together = object_of("reduce", names, path, *extra)
            self.assertEqual(list(together["results"]), OPS + ["histogram"])
            self.assertEqual(together["passes"], 2)  # the histogram's range first, then its counts
            for op, got in together["results"].items():
                with self.subTest(op=op, dtype=dtype, shape=shape, order=order):
                    if order == "C":  # each single run once per dtype (ooc.reduce's test compares all cases)
                        alone = object_of("reduce", op, path, *extra)
                        self.assertEqual(without_seconds(got), without_seconds(alone))
                    if op == "histogram":
                        counts, edges = np.histogram(a, bins=7)
                        self.assertEqual(got["counts"], counts.tolist())
                        self.assertTrue(same_bits(array_of(got["edges"], edges.dtype), edges))
                        continue
                    expected = numpy_value(op, a, ddof=1)
                    self.assertEqual(got["dtype"], expected.dtype.name)
                    if op in TOLERANCE:
                        np.testing.assert_allclose(float(json_value(got["value"])), float(expected),
                                                   rtol=TOLERANCE[op][expected.dtype.name], atol=0)
                    else:
                        self.assertTrue(same_scalar(got["value"], expected), f"{got['value']!r} != {expected!r}")

    def test_along_every_axis_each_result_is_its_own_run_and_numpys_bits(self):
        ops = ["sum", "mean", "std", "var", "min", "max", "argmax", "nanmean", "prod"]
        cases = itertools.product(["<f8", ">f8", "<f4", ">f2", "<i4", ">u8", "|b1"],
                                  [((301, 9), "C"), ((301, 9), "F"), ((6, 7, 25), "C")], [0, 1])
        for case, (dtype, (shape, order), ddof) in enumerate(thin(cases)):
            a = data(dtype, shape, order, seed=case)
            path = self.tmp.save("a.npy", a)
            for axis in [0, 1, -1]:
                together = object_of("reduce", ",".join(ops), path, "--axis", axis, "--ddof", ddof,
                                     "--tile-bytes", "4K")
                self.assertEqual(together["passes"], 2)  # var and std: the means, then the deviations
                for op in ops:
                    with self.subTest(op=op, dtype=dtype, shape=shape, order=order, axis=axis, ddof=ddof):
                        got = together["results"][op]
                        if ddof == 1 and case % 3 == 0:  # the single runs, on a third of the cases
                            alone = object_of("reduce", op, path, "--axis", axis, "--ddof", ddof, "--tile-bytes", "4K")
                            self.assertEqual(without_seconds(got), without_seconds(alone))
                        expected = numpy_value(op, a, axis=axis, ddof=ddof)
                        self.assertEqual(got["dtype"], expected.dtype.name)
                        self.assertEqual(tuple(got["shape"]), expected.shape)
                        self.assertTrue(same_bits(array_of(got["value"], expected.dtype), expected), op)

    def test_the_array_is_read_once_unless_an_operation_needs_two_passes(self):
        a = data("<f8", (5000, 8), "C", seed=1)
        path = self.tmp.save("a.npy", a)
        for args, passes in [(["sum,mean,std,min,max"], 1),
                             (["sum,mean,std,min,max,histogram"], 2),
                             (["sum,histogram", "--range", "-3:3"], 1),
                             (["histogram,max", "--bins", "3"], 2),
                             (["sum,mean,min,max", "--axis", "0"], 1),
                             (["sum,mean,std,min,max", "--axis", "0"], 2),
                             (["mean,var", "--axis", "1"], 2),
                             (["sum,max", "--axis", "-1"], 1)]:
            with self.subTest(args=args):
                self.assertEqual(run_json("reduce", args[0], path, *args[1:], "--tile-bytes", "64K")["passes"], passes)
        self.assertEqual(run_json("reduce", "sum,mean", self.tmp.save("e.npy", np.zeros((0, 3))))["passes"], 0)

    def test_without_json_one_line_per_operation(self):
        a = np.array([[1.0, 2.0], [3.0, 5.0]])
        path = self.tmp.save("a.npy", a)
        lines = run("reduce", "sum,max,histogram", path, "--bins", "2", "--quiet").stdout.splitlines()
        self.assertEqual(lines, ["sum: 11.0", "max: 5.0", "histogram: [2, 2] [1.0, 3.0, 5.0]"])
        lines = run("reduce", "mean,argmax", path, "--axis", "0", "--quiet").stdout.splitlines()
        self.assertEqual(lines, ["mean: [2.0, 3.5]", "argmax: [1, 1]"])
        proc = run("reduce", "sum,mean", path)
        self.assertRegex(proc.stderr, r"^oocrun: sum,mean of .*a\.npy: .*, 1 read\n$")

    def test_an_empty_array_warns_per_operation_and_fails_at_the_first_failing_one(self):
        path = self.tmp.save("e.npy", np.zeros(0))
        got = run_json("reduce", "sum,mean,std", path)["results"]
        self.assertEqual(got["sum"]["value"], 0.0)
        self.assertEqual(got["mean"]["warning"], "mean of an empty array is nan")
        self.assertNotIn("warning", got["sum"])
        proc = run("reduce", "sum,argmax,min", path, check=False)
        self.assertEqual((proc.returncode, proc.stdout), (1, ""))
        self.assertEqual(proc.stderr, f"oocrun: {path}: attempt to get argmax of an empty sequence\n")

    def test_bad_lists_and_outputs_are_usage_errors_and_leave_nothing(self):
        path = self.tmp.save("a.npy", np.arange(12.0).reshape(3, 4))
        out = self.tmp.file("out.npy")
        for args, message in [(["sum,mean", path, "--axis", "0", "-o", out], "reduce -o takes one operation"),
                              (["sum,mean", path, "-o", out], "reduce -o takes one operation"),
                              (["sum,sum", path], "'sum' is named twice"),
                              (["sum,mode", path], "unknown reduction 'mode'"),
                              (["sum,median", path], "median is computed alone"),
                              (["sum,", path], "unknown reduction ''"),
                              (["sum,histogram", path, "--axis", "0"], "histogram takes no --axis"),
                              (["sum,mean", path, "--axis", "2"], "axis 2 is out of bounds for array of dimension 2")]:
            with self.subTest(args=args):
                proc = run("reduce", *args, check=False)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertEqual(proc.stderr.count("\n"), 1)
                self.assertEqual(proc.stdout, "")
                self.assertEqual(sorted(os.listdir(self.tmp.path)), ["a.npy"])

    def test_the_json_is_strict_and_nan_is_a_string(self):
        path = self.tmp.save("a.npy", np.array([1.0, np.nan, 3.0]))
        text = run("reduce", "sum,nanmax,mean", path, "--json", "--quiet").stdout
        got = strict_loads(text)["results"]
        self.assertEqual((got["sum"]["value"], got["nanmax"]["value"], got["mean"]["value"]), ("NaN", 3.0, "NaN"))


@unittest.skipIf(ooc is None, "the Python module is not built here")
class PythonTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def test_each_value_is_its_own_calls_bits_and_numpys(self):
        ops = ["sum", "mean", "std", "var", "min", "max", "argmin", "nansum", "norm", "prod", "any"]
        cases = itertools.product(DTYPES, "CF", [None, 0, 1, -1], [0, 1])
        for case, (dtype, order, axis, ddof) in enumerate(thin(cases)):
            a = data(dtype, (157, 6), order, seed=case)
            array = ooc.open(self.tmp.save("a.npy", a))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                together = ooc.reduce(array, ops, axis=axis, ddof=ddof, tile_bytes="4K")
            self.assertEqual(list(together), ops)
            for op in ops:
                with self.subTest(op=op, dtype=dtype, order=order, axis=axis, ddof=ddof):
                    kwargs = {"ddof": ddof} if op in ("var", "std") else {}
                    alone = getattr(ooc, op)(array, axis=axis, tile_bytes="4K", **kwargs)
                    self.assertEqual(type(together[op]), type(alone))
                    self.assertEqual(bits_of(together[op]), bits_of(alone))
                    expected = numpy_value(op, a, axis=axis, ddof=ddof)
                    got = np.asarray(together[op])
                    self.assertEqual(got.dtype, expected.dtype)
                    if axis is None and op in TOLERANCE:
                        np.testing.assert_allclose(got, expected, rtol=TOLERANCE[op][expected.dtype.name], atol=0)
                    else:
                        self.assertTrue(same_bits(got, expected), f"{got} != {expected}")

    def test_histograms_and_strings_of_names(self):
        a = data("<f4", (1000,), "C", seed=3)
        array = ooc.open(self.tmp.save("a.npy", a))
        got = ooc.reduce(array, "histogram,mean", bins=5)
        counts, edges = ooc.histogram(array, bins=5)
        self.assertTrue(np.array_equal(got["histogram"][0], counts) and same_bits(got["histogram"][1], edges))
        self.assertEqual(bits_of(got["mean"]), bits_of(ooc.mean(array)))
        ranged = ooc.reduce(array, ["histogram"], range=(-1, 1))["histogram"]
        self.assertTrue(np.array_equal(ranged[0], np.histogram(a, range=(-1, 1))[0]))

    def test_bad_calls_raise_numpys_exceptions(self):
        array = ooc.open(self.tmp.save("a.npy", np.arange(6.0).reshape(2, 3)))
        with self.assertRaisesRegex(ValueError, "named twice"):
            ooc.reduce(array, ["sum", "sum"])
        with self.assertRaisesRegex(ValueError, "unknown reduction 'median'"):
            ooc.reduce(array, ["sum", "median"])
        with self.assertRaisesRegex(ValueError, "histogram takes no axis"):
            ooc.reduce(array, ["sum", "histogram"], axis=0)
        with self.assertRaisesRegex(ValueError, "axis 2 is out of bounds for array of dimension 2"):
            ooc.reduce(array, ["sum"], axis=2)
        empty = ooc.open(self.tmp.save("e.npy", np.zeros(0)))
        with self.assertRaisesRegex(ValueError, "attempt to get argmax of an empty sequence"):
            ooc.reduce(empty, ["sum", "argmax", "min"])
        with self.assertWarnsRegex(RuntimeWarning, "mean of an empty array is nan"):
            self.assertTrue(np.isnan(ooc.reduce(empty, ["mean"])["mean"]))

    def test_the_bytes_read_are_one_read_of_the_array_or_two(self):
        # Direct I/O reads every tile with pread, which /proc/self/io counts.
        a = data("<f8", (1 << 17, 8), "C", seed=5)
        array = ooc.open(self.tmp.save("big.npy", a))
        direct = {"io": "direct", "tile_bytes": "1M"}
        for name, call, reads in [
                ("five statistics", lambda: ooc.reduce(array, ["sum", "mean", "std", "min", "max"], **direct), 1),
                ("and a histogram", lambda: ooc.reduce(array, ["sum", "mean", "std", "histogram"], **direct), 2),
                ("a histogram with a range", lambda: ooc.reduce(array, ["sum", "histogram"], range=(-1, 1), **direct), 1),
                ("a histogram alone", lambda: ooc.histogram(array, **direct), 2),
                ("along axis 0", lambda: ooc.reduce(array, ["sum", "mean", "min", "max"], axis=0, **direct), 1),
                ("std along axis 0", lambda: ooc.reduce(array, ["sum", "mean", "std", "max"], axis=0, **direct), 2),
                ("along axis 1", lambda: ooc.reduce(array, ["mean", "max"], axis=1, **direct), 1)]:
            with self.subTest(name):
                before = read_bytes()
                call()
                got = (read_bytes() - before) / a.nbytes
                self.assertGreaterEqual(got, reads)
                self.assertLess(got, reads + 0.1)


if __name__ == "__main__":
    unittest.main()
