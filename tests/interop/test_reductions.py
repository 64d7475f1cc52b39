"""oocrun reduce OP: every full reduction gives numpy 1.24's value and dtype, for every
dtype and byte order, NaNs, empty and 0-d arrays, Fortran order and arrays spanning many
tiles, bit-identical for any thread count.

Bit for bit except var, std (one pass, numpy takes two) and norm (numpy calls BLAS dot):
those are within the relative tolerance docs/decisions/2026-11-29-var-std-one-pass.md and
docs/decisions/2026-11-30-norm.md state (TOLERANCE below)."""
import itertools
import os
import sys
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import (TYPES, TempDir, byte_order_applies, numpy_in, numpy_or_error, numpy_simd_paths, run,  # noqa: E402
                     run_json, same_scalar, sample, sweep, thin, with_byte_order)

REDUCTIONS = {
    "sum": np.sum, "prod": np.prod, "mean": np.mean, "min": np.min, "max": np.max,
    "argmin": np.argmin, "argmax": np.argmax, "var": np.var, "std": np.std,
    "count_nonzero": np.count_nonzero, "any": np.any, "all": np.all, "nansum": np.nansum,
    "nanmean": np.nanmean, "nanmin": np.nanmin, "nanmax": np.nanmax, "norm": np.linalg.norm,
}
# Relative tolerance by result dtype for the reductions that are not bit-exact.
TOLERANCE = {"var": {"float16": 4e-3, "float32": 1e-5, "float64": 1e-12},
             "std": {"float16": 4e-3, "float32": 1e-5, "float64": 1e-12},
             "norm": {"float16": 4e-3, "float32": 1e-4, "float64": 1e-12}}
SHAPES = [(), (0,), (1,), (7,), (3, 0), (5, 6), (2, 3, 4)]


def thin_count(n):
    """n cases, or every fifth of them under ASan (ooctest.thin)."""
    return len(thin(range(n)))


def numpy_reduce(op, a, **kwargs):
    return numpy_or_error(REDUCTIONS[op], a, **kwargs)


class ReduceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, path, a, ops=REDUCTIONS, *extra):
        results = {}
        for op in ops:
            expected = numpy_reduce(op, a)
            with self.subTest(op=op, dtype=a.dtype.str, shape=a.shape, extra=extra):
                if isinstance(expected, Exception):
                    proc = run("reduce", op, path, "--json", *extra, check=False)
                    self.assertEqual(proc.returncode, 1, f"numpy says {expected}")
                    self.assertIn(str(expected).split(" ")[0], proc.stderr)
                    continue
                got = run_json("reduce", op, path, *extra)
                results[op] = got["value"]
                self.assertEqual(got["dtype"], expected.dtype.name)
                if op in TOLERANCE and not np.isnan(expected):
                    rtol = TOLERANCE[op][expected.dtype.name]
                    np.testing.assert_allclose(float(got["value"]), float(expected), rtol=rtol, atol=0)
                else:
                    self.assertTrue(same_scalar(got["value"], expected), f"ooc {got['value']!r} numpy {expected!r}")
                if expected.dtype.kind in "iu":
                    self.assertIsInstance(got["value"], int)
        return results

    def test_every_reduction_on_every_dtype_spanning_many_tiles(self):
        # Every reduction on every type; each byte order with every reduction and type.
        for kind, order, op in sweep(TYPES, "<>", REDUCTIONS, valid=byte_order_applies):
            a = sample(with_byte_order(kind, order), (20011,), seed=3)
            self.check(self.tmp.save("a.npy", a), a, [op], "--tile-bytes", "8K")

    def test_a_zero_min_or_max_has_the_sign_numpy_lands_on(self):
        # -0.0 == 0.0: which one np.min/np.max/np.nanmin/np.nanmax return follows numpy's
        # loop (lanes, its 8192-element buffers), and so the SIMD width numpy picks on this
        # CPU; oocrun follows NPY_DISABLE_CPU_FEATURES as numpy does. Any tile size and
        # thread count gives the same. numpy's 128-bit (SSE-only) float64 fmin/fmax loop is
        # not modelled (README): those paths are left out here.
        rng = np.random.default_rng(21)
        ops = {"min": "np.min", "max": "np.max", "nanmin": "np.nanmin", "nanmax": "np.nanmax"}
        for path, environment in numpy_simd_paths():
            if "AVX2" in environment.get("NPY_DISABLE_CPU_FEATURES", ""):
                continue
            arrays = {}
            for k in range(thin_count(36)):
                dtype = ["<f8", ">f8", "<f4", ">f4", "<f2"][k % 5]
                n = int(rng.choice([2, 3, 9, 17, 20, 65, 129, 200, 1000, 8192, 8193, 9000, 9001, 20000, 70001]))
                pattern = k % 4
                if pattern == 0:
                    a = np.array([-0.0, 0.0] * n)[:n] if rng.random() < 0.5 else np.array([0.0, -0.0] * n)[:n]
                else:
                    a = rng.choice([0.0, -0.0], n)
                if pattern >= 2:  # values that lose to a zero in one direction, or NaN
                    where = rng.random(n) < rng.choice([0.01, 0.3, 0.9])
                    a[where] = rng.choice([-1.0, 1.0, np.nan, -np.inf] if pattern == 3 else [-2.0, 2.0], where.sum())
                a = a.astype(dtype)
                if k % 7 == 6 and n % 5 == 0:
                    a = np.asfortranarray(a.reshape(5, n // 5))
                arrays[f"a{k}"] = a
            code = "result = [%s]" % ", ".join(
                "[" + ", ".join(f"np.asarray({fn}({name}), dtype='f8')" for fn in ops.values()) + "]" for name in arrays)
            expected = numpy_in(environment, code, **arrays)
            for k, ((name, a), want) in enumerate(zip(arrays.items(), expected)):
                src = self.tmp.save(f"{name}.npy", a)
                tile = str(rng.choice(["8K", "16K", "64K", "1M"]))
                threads = str(rng.choice([1, 2, 3]))
                # min and nanmin, or max and nanmax, in turn (each pair meets every dtype and pattern)
                for op, value in list(zip(ops, want))[(k + k // 4) % 2::2]:
                    with self.subTest(numpy=path, op=op, dtype=a.dtype.str, n=a.size, order="F" if np.isfortran(a) else "C"):
                        got = run_json("reduce", op, src, "--tile-bytes", tile, "--threads", threads,
                                       environment=environment)
                        got_value = np.float64(float(got["value"]))
                        self.assertEqual(np.signbit(got_value), np.signbit(value),
                                         f"ooc {got['value']!r} numpy {value!r} (tile {tile}, threads {threads})")
                        self.assertTrue(got_value == value or (np.isnan(got_value) and np.isnan(value)))

    def test_nan_is_propagated_or_skipped_as_numpy_does(self):
        for dtype in thin(["<f2", "<f4", ">f8"]):
            a = sample(dtype, (30000,), seed=1, nan=True)
            a[25000] = np.nan
            self.check(self.tmp.save("nan.npy", a), a, REDUCTIONS, "--tile-bytes", "8K")
            every_nan = np.full(100, np.nan, dtype=dtype)
            self.check(self.tmp.save("all.npy", every_nan), every_nan)

    def test_empty_0d_and_fortran_arrays(self):
        # Fortran order only where it differs from C (two dimensions or more).
        for dtype, shape, order, op in sweep(["<f8", ">i4", "|b1", "<f2"], SHAPES, "CF", REDUCTIONS,
                                             valid=lambda dtype, shape, order, op: order == "C" or len(shape) > 1):
            a = np.asarray(sample(dtype, shape, seed=len(shape)), order=order)
            self.check(self.tmp.save("a.npy", a), a, [op])

    def test_argmin_of_a_fortran_array_is_the_first_in_c_order(self):
        a = np.asfortranarray(np.zeros((300, 50), dtype="<i2"))
        a[7, 3] = a[2, 9] = -1  # in memory (Fortran) order [7, 3] comes first, in C order [2, 9]
        a[5, 1] = a[1, 40] = 9
        path = self.tmp.save("f.npy", a)
        self.assertEqual(run_json("reduce", "argmin", path, "--tile-bytes", "1K")["value"], int(np.argmin(a)))
        self.assertEqual(run_json("reduce", "argmax", path, "--tile-bytes", "1K")["value"], int(np.argmax(a)))
        b = np.asfortranarray(sample("<f4", (400, 30), seed=2))
        b[b > 1] = 1.0
        b[10, 20] = b[350, 2] = np.nan
        self.check(self.tmp.save("nan.npy", b), b, ["argmin", "argmax"], "--tile-bytes", "4K")

    def test_results_are_bit_identical_for_any_thread_count(self):
        for dtype in thin(["<f4", ">f8", "<f2", "<i8"]):
            a = sample(dtype, (100003,), seed=7)
            path = self.tmp.save("t.npy", a)
            reference = self.check(path, a, REDUCTIONS, "--tile-bytes", "8K", "--threads", "1")
            for k, (op, value) in enumerate(reference.items()):  # against 2 threads or 7, in turn
                threads = ("2", "7")[k % 2]
                got = run_json("reduce", op, path, "--tile-bytes", "8K", "--threads", threads)["value"]
                self.assertEqual(repr(got), repr(value), f"{op} on {dtype} with {threads} threads")

    def test_prod_multiplies_in_order_and_integers_wrap(self):
        near_one = (1 + sample("<f8", (50000,), seed=4) * 1e-9).astype("<f4")
        self.check(self.tmp.save("p.npy", near_one), near_one, ["prod"], "--tile-bytes", "4K", "--threads", "2")
        halves = np.full(20000, 1.0001, dtype="<f2")
        self.check(self.tmp.save("h.npy", halves), halves, ["prod"], "--tile-bytes", "1K")
        big = np.full(70, 3, dtype="<i8")
        self.check(self.tmp.save("w.npy", big), big, ["prod", "sum"])

    def test_ddof_divides_by_n_minus_ddof(self):
        a = sample("<f8", (10001,), seed=8)
        path = self.tmp.save("d.npy", a)
        for ddof in (0, 1, 5):
            for op in ("var", "std"):
                got = run_json("reduce", op, path, "--ddof", ddof, "--tile-bytes", "8K")["value"]
                np.testing.assert_allclose(got, REDUCTIONS[op](a, ddof=ddof), rtol=1e-12)
        two = self.tmp.save("two.npy", np.array([1.0, 2.0]))
        self.assertEqual(run_json("reduce", "var", two, "--ddof", 2)["value"], np.inf)
        proc = run("reduce", "var", two, "--ddof", "-1", check=False)
        self.assertEqual(proc.returncode, 2)

    def test_var_keeps_its_digits_on_values_with_a_large_offset(self):
        # Timestamps, or readings with a bias: the blocks' means share most of their
        # digits, and merging them lost 7e-11 of the variance at 1e8 (numpy: 1e-15).
        rng = np.random.default_rng(11)
        for offset in (1e6, 1e8):
            a = offset + rng.random(20011)
            path = self.tmp.save("o.npy", a)
            for op in ("var", "std"):
                for threads in ("1", "3"):
                    got = run_json("reduce", op, path, "--tile-bytes", "8K", "--threads", threads)["value"]
                    np.testing.assert_allclose(got, REDUCTIONS[op](a), rtol=1e-12, err_msg=f"{op} at {offset}")

    def test_unknown_reductions_are_usage_errors(self):
        proc = run("reduce", "mode", self.tmp.save("a.npy", np.arange(3.0)), check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("unknown reduction 'mode'", proc.stderr)


class HistogramTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, a, bins, value_range, *extra):
        path = self.tmp.save("h.npy", a)
        args = ["reduce", "histogram", path, "--bins", bins, *extra]
        if value_range is not None:
            args += ["--range", f"{value_range[0]}:{value_range[1]}"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                counts, edges = np.histogram(a, bins, range=value_range)
            except ValueError as e:  # NaN in the data and no range
                proc = run(*args, check=False)
                self.assertEqual(proc.returncode, 1, f"numpy says {e}")
                self.assertIn(str(e), proc.stderr)
                return
            except IndexError as e:  # numpy's own arithmetic overflowed: an error, not counts
                proc = run(*args, check=False)
                self.assertEqual(proc.returncode, 1, f"numpy says {e}; ooc: {proc.stdout}")
                self.assertIn(f"{path}: histogram: (x - lo) * bins / (hi - lo) overflows", proc.stderr)
                self.assertEqual(proc.stderr.count("\n"), 1)
                return
        got = run_json(*args)
        with self.subTest(dtype=a.dtype.str, bins=bins, range=value_range):
            self.assertEqual(got["counts"], counts.tolist())
            self.assertEqual(got["dtype"], edges.dtype.name)
            np.testing.assert_array_equal(np.array(got["edges"]).astype(edges.dtype), edges)

    def test_counts_and_edges_match_numpy_to_the_last_bin(self):
        for dtype, (bins, value_range) in thin(itertools.product(
                ["<f8", ">f4", "<f2", "<i4", "|u1", "|b1"],
                [(10, None), (7, (-1, 1)), (5000, (-3.0, 3.0)), (3, (0, 0)), (100, (0.1, 0.7)),
                 (1000, (-100000, 100000)), (13, (-1e-4, 1e-4))])):
            a = sample(dtype, (30011,), seed=5, nan=True)
            self.check(a, bins, value_range, "--tile-bytes", "8K", "--threads", "3")

    def test_values_on_the_edges_land_where_numpy_puts_them(self):
        edges = np.linspace(-1, 1, 201)
        a = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
        for dtype in ["<f8", "<f4", "<f2"]:
            self.check(a.astype(dtype), 200, (-1, 1))
        self.check(np.array([], dtype="<f4"), 4, None)

    def test_64_bit_integers_are_kept_or_dropped_by_exact_comparison_with_integer_bounds(self):
        # numpy compares int64/uint64 data with Python-int bounds in the array's type, not
        # float64, where 1700000000000000001 would equal 1700000000000000000.
        ns = 1_700_000_000_000_000_000
        t = np.array([ns + 1, ns, ns - 1, ns - 10**17, ns - 10**17 - 1, 2**63 - 1, -2**63], dtype="<i8")
        for value_range in [(ns - 10**17, ns), (ns - 10**17 + 1, ns - 1), (-5, 2**63 - 1), (-5, 2**63),
                            (-2**63, ns), (ns - 10**17, ns + 0.0), (float(ns - 10**17), ns)]:
            for dtype in ("<i8", ">i8"):
                self.check(t.astype(dtype), 2, value_range)
        u = np.array([2**63, 5, 2**64 - 1, 2**64 - 2, 0, 2**53 + 1], dtype="<u8")
        for value_range in [(0, 2**63 - 1), (5, 2**64 - 1), (0, 2**64 - 2), (6, 2**53 + 1), (-1, 2**53), (0, 2**53)]:
            for dtype in ("<u8", ">u8"):
                self.check(u.astype(dtype), 3, value_range)
        self.check(t, 4, None)  # the data's own min and max: all kept
        # bounds apart as ints but equal as doubles: numpy divides by the exact difference
        close = np.array([ns, ns + 100], dtype="<i8")
        self.check(close, 10, None)
        self.check(close, 4, (ns, ns + 100))
        proc = run("reduce", "histogram", self.tmp.save("c.npy", close), "--range", f"{ns + 1}:{ns}", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("max must be larger than min", proc.stderr)

    def test_where_numpys_arithmetic_overflows_it_fails_and_so_does_ooc(self):
        x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
        for a, bins, value_range in [(x.astype("<f2"), 100000, (-2.5, 2.5)), (x.astype("<f2"), 70000, (-2.5, 2.5)),
                                     (np.array([-1, 0.5, 30000, -30000, 39999, 40000], "<f2"), 3, (-40000.0, 40000.0)),
                                     (np.array([1.0, -3e38, 3e38], "<f4"), 3, (-3e38, 3e38)),
                                     (np.array([1.0, -1e308, 1e308]), 3, (-1e308, 1e308)),
                                     # hi - lo overflows but no value's offset does: all in bin 0, NaN edges
                                     (np.array([1.0, 0.0, -5.0, 1e307]), 3, (-1e308, 1e308)),
                                     (x.astype("<f2"), 5000, (-2.5, 2.5))]:  # and one numpy answers
            self.check(a, bins, value_range)

    def test_bad_histograms_are_refused_as_numpy_refuses_them(self):
        path = self.tmp.save("a.npy", np.array([1.0, np.nan]))
        for args, code, message in [(["--bins", "0"], 2, "must be positive"),
                                    (["--range", "2:1"], 2, "max must be larger than min"),
                                    (["--range", "0:inf"], 2, "not finite"),
                                    (["--range", "0"], 2, "LO:HI"),
                                    ([], 1, "autodetected range of [nan, nan] is not finite")]:
            proc = run("reduce", "histogram", path, *args, check=False)
            self.assertEqual(proc.returncode, code, proc.stderr)
            self.assertIn(message, proc.stderr)


if __name__ == "__main__":
    unittest.main()
