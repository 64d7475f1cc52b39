"""oocrun reduce OP ARRAY --axis K: reductions along any axis of C- and Fortran-order
arrays give numpy 1.24's values (bit for bit: numpy's flat blocks along a contiguous
axis, its row-by-row adds along any other), dtypes and shapes; results print as nested
lists or go to a .npy with -o; thread counts and tile sizes do not change a bit.

var and std are numpy's two passes (the mean, then the squared deviations from it, each
summed in the input's float type in numpy's order along the axis), bit for bit too."""
import itertools
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import TempDir, numpy_or_error, run, run_json, same_bits, sample, sweep, thin  # noqa: E402

REDUCTIONS = {
    "sum": np.sum, "prod": np.prod, "mean": np.mean, "min": np.min, "max": np.max,
    "argmin": np.argmin, "argmax": np.argmax, "var": np.var, "std": np.std,
    "count_nonzero": lambda a, axis: np.count_nonzero(a, axis=axis), "any": np.any, "all": np.all,
    "nansum": np.nansum, "nanmean": np.nanmean, "nanmin": np.nanmin, "nanmax": np.nanmax,
    "norm": lambda a, axis: np.linalg.norm(a, axis=axis),
}
INTEGER_OPS = ["sum", "prod", "mean", "min", "argmax", "count_nonzero", "all", "norm", "var"]


SHAPES = [(3001, 8), (8, 3001), (6, 7, 250)]
# Which axis of the memory layout is reduced: numpy sums the contiguous one in flat
# blocks, the outer one row by row (and the middle one of a 3-d array slab by slab).
ROLES = ["contiguous", "outer", "middle"]


def axis_of(ndim, order, role):
    if role == "middle":
        return 1
    return ndim - 1 if (role == "contiguous") == (order == "C") else 0


def layout_cases(dtypes, ops):
    """(dtype, shape, order, axis, op) for sweep: every op on every dtype along each kind
    of axis (contiguous, outer, middle: a different loop of numpy's), and each of those
    with every shape and order."""
    return [(dtype, shape, order, axis_of(len(shape), order, role), op)
            for (dtype, role), shape, order, op in sweep(
                [(dtype, role) for dtype in dtypes for role in ROLES], SHAPES, "CF", ops,
                valid=lambda dtype_role, shape, order, op: dtype_role[1] != "middle" or len(shape) == 3)]


def numpy_axis(op, a, axis):
    return numpy_or_error(REDUCTIONS[op], a, axis=axis)


class AxisTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, a, ops, *extra, axes=None):
        path = self.tmp.save("a.npy", a)
        out = self.tmp.file("out.npy")
        for axis, op in itertools.product(range(a.ndim) if axes is None else axes, ops):
            expected = numpy_axis(op, a, axis)
            proc = run("reduce", op, path, "--axis", axis, "-o", out, "--quiet", *extra, check=False)
            with self.subTest(op=op, axis=axis, dtype=a.dtype.str, shape=a.shape,
                              order="F" if np.isfortran(a) else "C"):
                if isinstance(expected, Exception):
                    self.assertEqual(proc.returncode, 1, f"numpy says {expected}")
                    self.assertIn(str(expected).split(" ")[0], proc.stderr)
                    continue
                self.assertEqual(proc.returncode, 0, proc.stderr)
                got = np.load(out)
                self.assertEqual(got.dtype, expected.dtype)
                self.assertEqual(got.shape, expected.shape)
                self.assertTrue(same_bits(got, expected), f"{op} along {axis}")
            if os.path.exists(out):
                os.remove(out)

    def test_float_reductions_along_every_axis_match_numpy_bit_for_bit(self):
        for dtype, shape, order, axis, op in layout_cases(["<f8", ">f4", "<f2"], REDUCTIONS):
            a = np.asarray(sample(dtype, shape, seed=2, nan=True), order=order)
            if dtype == "<f2":
                a = (a / 100).astype(dtype)  # keep numpy's float16 var from overflowing
            self.check(a, [op], "--tile-bytes", "4K", axes=[axis])

    def test_a_zero_min_or_max_along_an_axis_has_numpys_sign(self):
        # numpy reduces an outer axis slice by slice (out = maximum(out, slice): the later of
        # -0.0 and 0.0 on a tie for float32/64, the earlier for float16) and the contiguous
        # axis with its SIMD loop (tests/interop/test_reductions.py).
        rng = np.random.default_rng(8)
        for k in thin(range(30)):
            shape = tuple(int(x) for x in rng.choice([1, 2, 3, 9, 17, 40], size=int(rng.integers(2, 4))))
            dtype = ["<f8", ">f4", "<f4", ">f8", "<f2"][k % 5]
            a = rng.choice([0.0, -0.0, -1.0, 1.0, np.nan], size=shape, p=[0.4, 0.4, 0.08, 0.08, 0.04]).astype(dtype)
            a = np.asarray(a, order="CF"[k % 2])
            for axis in range(a.ndim):  # two of the four along each axis, in turn
                self.check(a, [["min", "nanmax"], ["max", "nanmin"]][(k + axis) % 2], axes=[axis])

    def test_integer_and_bool_reductions_along_every_axis(self):
        for dtype, shape, order, axis, op in layout_cases(["<i4", "|b1", ">u2"], INTEGER_OPS):
            a = np.asarray(sample(dtype, shape, seed=4), order=order)
            self.check(a, [op], "--tile-bytes", "4K", axes=[axis])

    def test_size_one_and_empty_axes_and_one_dimension(self):
        # Each shape with each op along every axis, each order with each op.
        for shape, order, op in sweep([(5, 1, 7), (1, 900), (3, 0, 4), (0, 3), (9,)], "CF",
                                      ["sum", "mean", "min", "argmax", "var", "prod"]):
            self.check(np.asarray(sample("<f4", shape, seed=6), order=order), [op])

    def test_a_slab_larger_than_a_tile_is_merged_in_order(self):
        # Rows of 20000 float64 (160 KB) in 8 KB tiles: each row arrives in 20 pieces.
        for order in "CF":
            a = np.asarray(sample(">f8", (5, 20000) if order == "C" else (20000, 5), seed=9), order=order)
            axis = 1 if order == "C" else 0
            for op in ["sum", "mean", "prod", "argmin", "nanmax", "var", "norm"]:
                expected = numpy_axis(op, a, axis)
                got = run_json("reduce", op, self.tmp.save("r.npy", a), "--axis", axis, "--tile-bytes", "8K",
                               "--threads", "3")
                got = np.array(got["value"]).astype(expected.dtype)
                self.assertTrue(same_bits(got, expected), op)
            # Columns folded row by row across tiles: tall C array along axis 0.
            tall = np.ascontiguousarray(a.T) if order == "F" else np.asfortranarray(a.T)
            self.check(tall, ["sum", "mean", "max", "argmax"], "--tile-bytes", "8K", "--threads", "2")

    def test_var_along_rows_of_offset_or_overflowing_values(self):
        # Columns folded row by row (axis 0 of a C array): values with a large offset
        # and finite values whose squares overflow (numpy's inf) give numpy's bits.
        rng = np.random.default_rng(12)
        offset = np.ascontiguousarray(1e8 + rng.random((3001, 4)))
        counts = np.array([[65535, 7], [65534, 8], [65534, 9]], dtype=">u2")
        top = np.finfo("<f8").max
        huge = np.array([[top, top, -top, top], [-top, -top, 1.0, top], [0.0, top, top, -top]])
        for a in (offset, counts, huge):
            path = self.tmp.save("v.npy", a)
            for op in ("var", "std"):
                with self.subTest(op=op, dtype=a.dtype.str):
                    got = np.array(run_json("reduce", op, path, "--axis", 0, "--tile-bytes", "4K")["value"])
                    with np.errstate(all="ignore"):
                        expected = REDUCTIONS[op](a, axis=0)
                    self.assertTrue(same_bits(got.astype(expected.dtype), expected), f"{got} != {expected}")

    def test_var_and_std_are_numpys_two_passes_bit_for_bit(self):
        # Every float dtype and byte order, integers and bool (as float64), 1..40 columns
        # in C and Fortran order, 3-d arrays, NaN and infinities, ddof, and tiles that cut
        # rows and runs in odd places (the two passes then each merge pieces in order).
        rng = np.random.default_rng(19)
        dtypes = ["<f8", ">f8", "<f4", ">f4", "<f2", ">f2", "<i8", ">u2", "|b1"]
        cases = []
        for k, dtype in enumerate(dtypes):
            for columns in (1, 2, 3, 7, 8, 9, 17, 40):
                cases.append((dtype, (int(rng.integers(1, 700)), columns), "CF"[(k + columns) % 2]))
            cases.append((dtype, (6, 7, 250), "CF"[k % 2]))
            cases.append((dtype, (5, 3001), "CF"[(k + 1) % 2]))
        for case, (dtype, shape, order) in thin(enumerate(cases)):
            a = sample(dtype, shape, seed=case)
            if a.dtype.kind == "f":
                if a.dtype.itemsize == 2:
                    a = (a / 50).astype(dtype)  # numpy's float16 squares mostly finite
                special = rng.random(a.shape) < 0.01
                a[special] = rng.choice([np.nan, np.inf, -np.inf], int(special.sum()))
            a = np.asarray(a, order=order)
            path = self.tmp.save("v.npy", a)
            out = self.tmp.file("vo.npy")
            # std is the square root of var's result: var or std along each axis, in turn.
            for axis in range(a.ndim):
                op = ("var", "std")[(case + axis) % 2]
                ddof = int(rng.integers(0, 3))
                tile = str(int(rng.choice([64, 200, 1000, 4096, 1 << 20])))
                run("reduce", op, path, "--axis", axis, "--ddof", ddof, "--tile-bytes", tile, "-o", out, "--quiet")
                expected = numpy_axis(op, a, axis) if ddof == 0 else numpy_or_error(
                    REDUCTIONS[op], a, axis=axis, ddof=ddof)
                got = np.load(out)
                with self.subTest(op=op, axis=axis, dtype=dtype, shape=shape, order=order, ddof=ddof, tile=tile):
                    self.assertEqual(got.dtype, expected.dtype)
                    self.assertTrue(same_bits(got, expected), f"{got} != {expected}")

    def test_var_divides_by_a_large_count_as_numpy_does(self):
        # numpy divides a float16/float32 sum by a count of 2^16 or more in float64 (value-
        # based casting), a smaller one in float32: both sides of that line, both passes.
        for dtype, rows in thin(itertools.product(["<f4", "<f2"], [65535, 65536, 70001])):
            a = (sample("<f8", (rows, 2), seed=rows) / 100).astype(dtype)
            for order, axis in (("C", 0), ("F", 0), ("C", 1)):
                b = np.asarray(a if axis == 0 else a.T, order=order)
                path = self.tmp.save("n.npy", b)
                for op in ("var", "std", "mean"):
                    out = self.tmp.file("no.npy")
                    run("reduce", op, path, "--axis", axis, "-o", out, "--quiet")
                    expected = numpy_axis(op, b, axis)
                    with self.subTest(op=op, dtype=dtype, rows=rows, order=order, axis=axis):
                        self.assertTrue(same_bits(np.load(out), expected))

    def test_threads_and_tile_sizes_do_not_change_a_bit(self):
        a = np.asfortranarray(sample("<f4", (4001, 3, 5), seed=1, nan=True))
        path = self.tmp.save("t.npy", a)
        for op, axis in [("sum", 0), ("mean", 1), ("var", 2), ("nansum", 1), ("prod", 2)]:
            outputs = set()
            for threads, tile in [("1", "1K"), ("2", "4K"), ("7", "64K"), ("7", "16M")]:
                out = self.tmp.file(f"o{threads}{tile}.npy")
                run("reduce", op, path, "--axis", axis, "-o", out, "--threads", threads, "--tile-bytes", tile, "--quiet")
                with open(out, "rb") as f:
                    outputs.add(f.read())
            self.assertEqual(len(outputs), 1, f"{op} along {axis}")

    def test_json_prints_small_results_as_nested_lists_in_c_order(self):
        a = np.asfortranarray(np.arange(24, dtype="<i2").reshape(2, 3, 4))
        path = self.tmp.save("j.npy", a)
        got = run_json("reduce", "sum", path, "--axis", "1")
        self.assertEqual(got["value"], np.sum(a, axis=1).tolist())
        self.assertEqual(got["shape"], [2, 4])
        self.assertEqual(got["dtype"], "int64")
        self.assertEqual(got["axis"], 1)
        self.assertEqual(run_json("reduce", "max", path, "--axis", "-1")["value"], np.max(a, axis=-1).tolist())
        text = run("reduce", "mean", self.tmp.save("v.npy", np.array([[1.0, 2.0], [3.0, 5.0]])), "--axis", "0",
                   "--quiet").stdout
        self.assertEqual(json.loads(text), [2.0, 3.5])
        out = self.tmp.file("o.npy")
        got = run_json("reduce", "sum", path, "--axis", "0", "-o", out)
        self.assertEqual(got["output"], out)
        np.testing.assert_array_equal(np.load(out), np.sum(a, axis=0))

    def test_bad_axis_requests_are_usage_errors(self):
        path = self.tmp.save("a.npy", np.zeros((3, 4)))
        zero_d = self.tmp.save("z.npy", np.float64(1.0))
        big = self.tmp.save("big.npy", np.zeros((1100000, 2), dtype="u1"))
        for args, message in [(["sum", path, "--axis", "2"], "axis 2 is out of bounds for array of dimension 2"),
                              (["sum", path, "--axis", "-3"], "axis -3 is out of bounds"),
                              (["sum", zero_d, "--axis", "0"], "dimension 0"),
                              (["histogram", path, "--axis", "0"], "histogram takes no --axis"),
                              (["sum", path, "-o", self.tmp.file("x.npy")], "needs --axis"),
                              (["sum", big, "--axis", "1"], "write it to a file with -o")]:
            proc = run("reduce", *args, check=False)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(message, proc.stderr)
        self.assertFalse(os.path.exists(self.tmp.file("x.npy")))


if __name__ == "__main__":
    unittest.main()
