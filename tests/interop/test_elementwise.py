"""oocrun apply OP: every elementwise operation gives numpy 1.24's dtype and values, for
every dtype and byte order, NaNs, infinities, signed zeros, integer wrap-around, Fortran
order, 0-d and empty arrays, and arrays spanning many tiles.

Values are compared bit for bit, except the transcendental functions and power, where
numpy computes with SIMD code of its own that differs between CPUs: there the result must
be within 4 units in the last place of numpy's on every SIMD path numpy can take here
(NPY_DISABLE_CPU_FEATURES set and unset), the bound README states."""
import itertools
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import (TRANSCENDENTAL, TRANSCENDENTAL_ULP, TYPES, TempDir, byte_order_applies, numpy_in,  # noqa: E402
                     numpy_simd_paths, run, sample, sweep, thin, units_apart, with_byte_order)

def ulp_tolerance(op, dtype):
    """How far ooc may be from numpy, in units in the last place: numpy computes exp, log,
    log1p, expm1, sin, cos, tanh and power with SIMD code of its own that differs from CPU to CPU
    (README: within 4 ulp of whichever path numpy takes); everything else is exact."""
    return TRANSCENDENTAL_ULP if op.split(":")[0] in TRANSCENDENTAL else 0


def numpy_ops():
    return {
        "add-one": lambda a: a + 1, "add:-7": lambda a: a + -7, "add:2.5": lambda a: a + 2.5,
        "sub:3": lambda a: a - 3, "sub:300": lambda a: a - 300, "mul:-2": lambda a: a * -2,
        "scale:0.5": lambda a: a * 0.5, "div:3": lambda a: a / 3, "div:2.5": lambda a: a / 2.5,
        "div:0": lambda a: a / 0, "pow:2": lambda a: np.power(a, 2), "pow:3": lambda a: np.power(a, 3),
        "pow:0": lambda a: np.power(a, 0), "pow:0.5": lambda a: np.power(a, 0.5),
        "pow:-1": lambda a: np.power(a, -1), "neg": np.negative, "abs": np.absolute, "sqrt": np.sqrt,
        "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
        "clip:-5:300": lambda a: np.clip(a, -5, 300), "clip:0.5:2": lambda a: np.clip(a, 0.5, 2),
        "clip:3:1": lambda a: np.clip(a, 3, 1), "clip:-1:1": lambda a: np.clip(a, -1, 1),
        "clip:-0.5:0.5": lambda a: np.clip(a, -0.5, 0.5), "clip:nan:0": lambda a: np.clip(a, np.nan, 0),
        "clip:0:nan": lambda a: np.clip(a, 0, np.nan),  # no bound on native arrays, NaN on byte-swapped ones
        "cast:int8": lambda a: a.astype("i1"), "cast:int16": lambda a: a.astype("i2"),
        "cast:uint16": lambda a: a.astype("u2"),
        "cast:int64": lambda a: a.astype("i8"), "cast:float16": lambda a: a.astype("f2"),
        "cast:float32": lambda a: a.astype("f4"), "cast:bool": lambda a: a.astype("?"),
        "cast:f8": lambda a: a.astype("f8"),
        # numpy's other names and one-letter codes (b is int8, not bool)
        "cast:float": lambda a: a.astype("float"), "cast:int": lambda a: a.astype("int"),
        "cast:b": lambda a: a.astype("b"), "cast:H": lambda a: a.astype("H"),
        # a byte order asked for is kept, as astype keeps it; on a code as on a descr
        "cast:>f4": lambda a: a.astype(">f4"), "cast:>i2": lambda a: a.astype(">i2"),
        "cast:<u8": lambda a: a.astype("<u8"), "cast:>d": lambda a: a.astype(">d"),
        "cast:=H": lambda a: a.astype("=H"), "cast:>e": lambda a: a.astype(">e"),
        "cast:|f": lambda a: a.astype("|f"), "cast:>?": lambda a: a.astype(">?"),
    }


def special_values(dtype, n, seed):
    """sample() plus the values that test the edges: NaN, infinities, signed zeros for
    floats; the extremes for integers (so negation and abs wrap)."""
    a = sample(dtype, (n,), seed=seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a[: 7] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0]
        a[7:200] = np.linspace(-3, 3, 193).astype(dt)  # where clip, sqrt, log and casts change
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a[:4] = [info.min, info.max, 0, 1]
        a[4:200] = np.arange(-98, 98).astype(dt) if dt.kind == "i" else np.arange(196).astype(dt)
    return a


class ElementwiseTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def expect(self, op, a):
        """numpy's result, or the exception numpy raises."""
        with np.errstate(all="ignore"):
            try:
                if op not in numpy_ops() and op.startswith("pow:"):  # np.power with a Python number
                    text = op[len("pow:"):]
                    return np.asarray(np.power(a, float(text) if "." in text else int(text)))
                return np.asarray(numpy_ops()[op](a))
            except (TypeError, ValueError) as e:
                return e

    def check(self, op, a, *extra):
        src = self.tmp.save("in.npy", a)
        out = self.tmp.file("out.npy")
        expected = self.expect(op, a)
        proc = run("apply", op, src, "-o", out, "--quiet", *extra, check=False)
        with self.subTest(op=op, dtype=a.dtype.str, shape=a.shape, order="F" if np.isfortran(a) else "C"):
            if isinstance(expected, Exception):
                self.assertEqual(proc.returncode, 2, f"numpy refuses: {expected}")
                self.assertFalse(os.path.exists(out))
                return
            self.assertEqual(proc.returncode, 0, proc.stderr)
            got = np.load(out)
            if op.startswith("cast:"):  # astype's own byte order, big-endian included
                self.assertEqual(got.dtype.str, expected.dtype.str)
            else:  # numpy's ufuncs give native results whatever the input's order
                self.assertEqual(got.dtype.str, expected.dtype.newbyteorder("=").str)
            self.assertEqual(got.shape, expected.shape)
            tolerance = ulp_tolerance(op, expected.dtype)
            distance = units_apart(got, expected)
            worst = int(distance.max()) if distance.size else 0
            self.assertLessEqual(worst, tolerance,
                                 f"{op} on {a.dtype.str}: {worst} ulp from numpy (allowed {tolerance})")
            if tolerance == 0 and expected.dtype.kind == "f":  # bit for bit, NaN signs included
                same = got.view(f"u{got.itemsize}") == expected.astype(got.dtype).view(f"u{got.itemsize}")
                self.assertTrue(np.all(same | (np.isnan(got) & np.isnan(expected))))
        if os.path.exists(out):
            os.remove(out)

    def test_every_operation_on_every_dtype_matches_numpy(self):
        # Every op on every type; each byte order with every op and every type (the byte
        # order is the loader's, the same for every op).
        arrays = {}
        for kind, order, op in sweep(TYPES, "<>", numpy_ops(), valid=byte_order_applies):
            dtype = with_byte_order(kind, order)
            a = arrays.setdefault(dtype, special_values(dtype, 20000, seed=11))
            self.check(op, a, "--tile-bytes", "16K")

    def test_transcendental_functions_are_within_4_ulp_of_numpy_on_every_simd_path(self):
        # numpy 1.24 switches float64 exp/log/log1p/sin/cos/power and float32 log1p/power to
        # SVML on AVX-512, and has float32 exp/log/sin/cos/tanh and float64 tanh of its own
        # on AVX2: each path is a fresh numpy with NPY_DISABLE_CPU_FEATURES.
        ops = ["exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "pow:0.5", "pow:3", "pow:-1", "pow:2.5", "pow:-1.5"]
        for dtype in ["<f8", ">f8", "<f4", ">f4", "<f2"]:
            a = special_values(dtype, 20000, seed=17)
            a[200:400] = np.geomspace(1e-30, 1e30, 200).astype(dtype)  # far from 1, where SVML's error grows
            src = self.tmp.save("t.npy", a)
            got = {}
            for op in ops:
                out = self.tmp.file(f"t-{op}.npy")
                run("apply", op, src, "-o", out, "--quiet")
                got[op] = np.load(out)
            code = ("result = np.stack([np.exp(a), np.log(a), np.log1p(a), np.expm1(a), np.sin(a), np.cos(a), np.tanh(a), "
                    "np.power(a, 0.5), np.power(a, 3), np.power(a, -1), np.power(a, 2.5), np.power(a, -1.5)])")
            for path, environment in numpy_simd_paths():
                expected = numpy_in(environment, code, a=a)
                for op, want in zip(ops, expected):
                    with self.subTest(dtype=dtype, op=op, numpy=path):
                        self.assertEqual(got[op].dtype, want.dtype.newbyteorder("="))
                        worst = int(units_apart(got[op], want).max())
                        self.assertLessEqual(worst, TRANSCENDENTAL_ULP, f"{op} on {dtype}: {worst} ulp from numpy")

    def test_odd_shapes_and_fortran_order(self):
        for shape, order in thin(itertools.product([(), (0,), (3, 0), (7, 5), (2, 3, 4)], "CF")):
            a = np.asarray(sample("<f4", shape, seed=5), order=order)
            for op in ["neg", "sqrt", "pow:2", "clip:-0.5:0.5", "cast:int16", "div:3"]:
                self.check(op, a)

    def test_many_tiles_and_threads_give_the_same_file(self):
        a = special_values(">f8", 200001, seed=3)
        for threads in (1, 2, 7):
            self.check("log1p", a, "--tile-bytes", "8K", "--threads", threads)
            self.check("clip:-1:1", a, "--tile-bytes", "8K", "--threads", threads)

    def test_float16_functions_match_numpy_for_every_float16_value(self):
        every = np.arange(65536, dtype=np.uint16).view(np.float16)
        for op in ["sqrt", "exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "pow:3", "div:3", "abs"]:
            self.check(op, every)

    def test_power_takes_numpys_loop_not_result_type(self):
        # np.power searches its loops in order: uint8 ** 256 is int16 (uint8 + 256 is uint16).
        constants = ["2", "255", "256", "65535", "65536", "-1", str(2**32), str(2**63 - 1), str(2**63), "2.5", "-1.5"]
        for dtype, constant in thin(itertools.product(["|b1", "|u1", ">u2", "<u4", "<u8", "|i1", "<i2"], constants)):
            self.check(f"pow:{constant}", special_values(dtype, 300, seed=13))

    def test_integers_to_a_negative_power_are_refused_as_numpy_refuses_them(self):
        proc = run("apply", "pow:-2", self.tmp.save("i.npy", np.arange(5, dtype="i4")), "-o",
                   self.tmp.file("o.npy"), check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("Integers to negative integer powers are not allowed", proc.stderr)

    def test_boolean_negative_and_subtract_are_refused_as_numpy_refuses_them(self):
        src = self.tmp.save("b.npy", np.array([True, False]))
        for op in ["neg"]:
            proc = run("apply", op, src, "-o", self.tmp.file("o.npy"), check=False)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("boolean negative", proc.stderr)

    def test_in_place_works_where_numpys_out_argument_does(self):
        a = special_values("<f4", 30000, seed=2)
        path = self.tmp.save("a.npy", a)
        run("apply", "sqrt", path, "--in-place", "--tile-bytes", "8K", "--quiet")
        with np.errstate(all="ignore"):
            expected = np.sqrt(a)
        np.testing.assert_array_equal(np.load(path), expected)
        path = self.tmp.save("i.npy", np.arange(10, dtype="i2"))
        proc = run("apply", "sqrt", path, "--in-place", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("same_kind", proc.stderr)
        run("apply", "cast:int8", self.tmp.save("f.npy", np.array([1.7, -2.7, 300.0])), "--in-place", "--quiet")
        np.testing.assert_array_equal(np.load(self.tmp.file("f.npy")), np.array([1.7, -2.7, 300.0]).astype("i1"))

    def test_cast_in_place_is_numpys_assignment_of_astype_for_every_dtype_pair(self):
        """cast:T --in-place is numpy's `a[...] = a.astype(T)`, which numpy does for every
        pair of these dtypes (assignment casts unsafely). Once `cast:int8 --in-place` on a
        bool array was refused by the same_kind rule of `a += C`."""
        targets = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                   "float16", "float32", "float64", ">f4", ">i2"]
        rng = np.random.default_rng(7)
        arrays = {}
        for kind, order, target in sweep(TYPES, "<>", targets, valid=byte_order_applies):
            source = with_byte_order(kind, order)
            dt = np.dtype(source)
            if source not in arrays:
                if dt.kind == "f":  # in every target's range, so no cast is C's undefined behaviour
                    arrays[source] = (rng.integers(0, 100, 300) + rng.choice([0.0, 0.25, 0.5, 0.75], 300)).astype(dt)
                else:
                    arrays[source] = sample(dt, (300,), seed=5)
            a = arrays[source]
            with self.subTest(source=source, target=target):
                expected = a.copy()
                with np.errstate(all="ignore"):
                    expected[...] = a.astype(target)  # numpy accepts this for every pair
                path = self.tmp.save("c.npy", a)
                proc = run("apply", f"cast:{target}", path, "--in-place", "--quiet", check=False)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                got = np.load(path)
                self.assertEqual(got.dtype.str, dt.str)
                self.assertEqual(got.tobytes(), expected.tobytes())

    def test_casts_of_floats_out_of_an_integer_range_are_numpys(self):
        # numpy's values on x86-64 for NaN, infinities and out-of-range floats (C leaves
        # them undefined; ooc spells out what the hardware gives, so UBSan stays quiet).
        values = np.array([4.8e6, -4.8e6, 3e9, -3e9, 1e19, -1e19, 2e19, np.nan, np.inf, -np.inf, 300.7, -129.5,
                           255.9, 1.8e19, 9.3e18, -0.9, 2147483647.9, -2147483648.9, 9.2e18, -9.2e18])
        with np.errstate(all="ignore"):
            for source in ("<f8", ">f4", "<f2"):
                a = values.astype(source)
                path = self.tmp.save(f"v{source[1:]}.npy", a)
                for target in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
                    with self.subTest(source=source, target=target):
                        out = self.tmp.file("c.npy")
                        run("apply", f"cast:{target}", path, "-o", out, "--quiet")
                        np.testing.assert_array_equal(np.load(out), a.astype(target))

    def test_bad_operation_names_are_usage_errors(self):
        src = self.tmp.save("a.npy", np.arange(3.0))
        for op, message in [("frob", "unknown operation"), ("sqrt:2", "takes no constant"),
                            ("clip:1", "two constants"), ("cast:float128", "float128"), ("pow", "needs a constant")]:
            proc = run("apply", op, src, "-o", self.tmp.file("o.npy"), check=False)
            self.assertEqual(proc.returncode, 2, op)
            self.assertIn(message, proc.stderr)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
