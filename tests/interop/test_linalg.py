"""ooc.gram / ooc.cov / ooc.corrcoef and `oocrun linalg`: numpy's values (within
1e-12 of the largest entry for float64 results), dtypes, shapes and warnings, for every
dtype and byte order, C and Fortran order, tall and wide arrays, data with a mean of 1e8,
and the same bits for any thread count and tile size."""
import json
import os
import sys
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.environ.get("OOC_BUILD_DIR", "build"), "python"))
import ooc  # noqa: E402
from ooctest import TYPES, TempDir, byte_order_applies, loads, run, sweep, with_byte_order  # noqa: E402

OPS = ("gram", "cov", "corrcoef")


def numpy_op(op, x, rowvar):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op == "gram":
            return x.T @ x
        return getattr(np, op)(x, rowvar=rowvar)


def data(dtype, shape, seed):
    """Values of `dtype`: integers over the whole range (so grams wrap), floats N(0, 1)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype.newbyteorder("="), endpoint=True).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def assert_close(test, got, want, tolerance, what):
    got, want = np.asarray(got), np.asarray(want)
    test.assertEqual(got.shape, want.shape, what)
    test.assertEqual(got.dtype, want.dtype.newbyteorder("="), what)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=what)
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)], err_msg=what)
    if finite.any():
        scale = np.abs(w[finite]).max() or 1.0
        error = np.abs(g[finite] - w[finite]).max() / scale
        test.assertLessEqual(error, tolerance, what)


# Relative to the largest entry: float64 results meet the issue's 1e-12. float32 and float16
# grams are computed in float64 and rounded once; numpy's accumulate in their own type.
GRAM_TOLERANCE = {"f2": 2e-2, "f4": 1e-5, "f8": 1e-12}


class LinalgTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def save(self, name, array):
        path = self.tmp.file(name)
        np.save(path, array)
        return path

    def test_every_dtype_byte_order_memory_order_and_op_against_numpy(self):
        cases = sweep(TYPES, "<>", "CF", OPS, (False, True), valid=byte_order_applies)
        for i, (kind, byte_order, order, op, rowvar) in enumerate(cases):
            dtype = with_byte_order(kind, byte_order)
            shape = (300, 4) if not rowvar else (4, 300)
            x = np.asarray(data(dtype, shape, i), dtype=dtype, order=order)
            path = self.save(f"x{i}.npy", x)
            want = numpy_op(op, x, rowvar)
            tolerance = GRAM_TOLERANCE.get(kind, 0) if op == "gram" else 1e-12
            what = f"{op} of {dtype} {order} rowvar={rowvar}"
            if op == "gram" and rowvar:
                continue  # gram has no rowvar
            if i % 2:  # the CLI for half the cases, Python for the others
                args = ["linalg", op, path] + (["--rowvar"] if rowvar else [])
                result = loads(run(*args, "--json", "--quiet").stdout)
                got = np.array(result["value"], dtype=result["dtype"]).reshape(result["shape"])
                self.assertEqual(result["op"], op)
            else:
                got = ooc.gram(path) if op == "gram" else getattr(ooc, op)(path, rowvar=rowvar)
            assert_close(self, got, want, tolerance, what)

    def test_a_mean_of_1e8_keeps_its_digits_tall_and_wide_c_and_f(self):
        rng = np.random.default_rng(7)
        n, m = 150_000, 6
        x = 1e8 + rng.normal(size=(n, m)) + np.arange(m) * rng.normal(size=(n, 1))
        for order in "CF":
            tall = self.save(f"tall{order}.npy", np.asarray(x, order=order))
            wide = self.save(f"wide{order}.npy", np.asarray(x.T, order=order))
            for op in ("cov", "corrcoef"):
                want = numpy_op(op, x, False)
                assert_close(self, getattr(ooc, op)(tall, rowvar=False), want, 1e-12, f"{op} tall {order}")
                assert_close(self, getattr(ooc, op)(wide), want, 1e-12, f"{op} wide {order}")
            assert_close(self, ooc.gram(tall), x.T @ x, 1e-12, f"gram {order}")
        naive = (x.T @ x - n * np.outer(x.mean(0), x.mean(0))) / (n - 1)  # what the issue calls a bug
        self.assertGreater(np.abs(naive - np.cov(x, rowvar=False)).max(), 1e-6)

    def test_same_bits_for_any_thread_count_and_tile_size(self):
        rng = np.random.default_rng(3)
        x = 1e5 + rng.normal(size=(40_000, 5))
        for order in "CF":
            path = self.save(f"x{order}.npy", np.asarray(x, order=order))
            for op in OPS:
                call = (lambda **o: ooc.gram(path, **o)) if op == "gram" else \
                    (lambda **o: getattr(ooc, op)(path, rowvar=False, **o))
                first = call(threads=1, tile_bytes="64K")
                for options in ({"threads": 3, "tile_bytes": "64K"}, {"threads": 3, "tile_bytes": "1M"},
                                {"threads": 1, "tile_bytes": "16M"}):
                    self.assertEqual(call(**options).tobytes(), first.tobytes(), f"{op} {order} {options}")

    def test_ill_conditioned_and_ddof_bias(self):
        rng = np.random.default_rng(11)
        base = rng.normal(size=(5000, 1))
        x = np.hstack([base, base + 1e-7 * rng.normal(size=(5000, 1)), rng.normal(size=(5000, 2)) * 1e6])
        path = self.save("ill.npy", x)
        for kwargs in ({}, {"bias": True}, {"ddof": 0}, {"ddof": 3}, {"bias": True, "ddof": 2}):
            assert_close(self, ooc.cov(path, rowvar=False, **kwargs), np.cov(x, rowvar=False, **kwargs), 1e-12,
                         str(kwargs))
        result = loads(run("linalg", "cov", path, "--ddof", "3", "--json", "--quiet").stdout)
        assert_close(self, np.array(result["value"]), np.cov(x, rowvar=False, ddof=3), 1e-12, "CLI --ddof")
        result = loads(run("linalg", "cov", path, "--bias", "--json", "--quiet").stdout)
        assert_close(self, np.array(result["value"]), np.cov(x, rowvar=False, bias=True), 1e-12, "CLI --bias")

    def test_shapes_numpy_squeezes_and_empty_arrays(self):
        for shape, rowvar in [((0, 3), False), ((3, 0), False), ((0, 3), True), ((3, 0), True), ((5,), True),
                              ((5,), False), ((1, 5), False), ((5, 1), False), ((1,), True), ((0,), True)]:
            x = data("f8", shape, 1)
            path = self.save("s.npy", x)
            for op in ("cov", "corrcoef"):
                with warnings.catch_warnings(record=True) as numpy_said:
                    warnings.simplefilter("always")
                    want = getattr(np, op)(x, rowvar=rowvar)
                with warnings.catch_warnings(record=True) as ooc_said:
                    warnings.simplefilter("always")
                    got = getattr(ooc, op)(path, rowvar=rowvar)
                what = f"{op} {shape} rowvar={rowvar}"
                self.assertEqual(type(got), type(want), what)
                assert_close(self, got, want, 1e-12, what)
                self.assertEqual(bool(numpy_said), bool(ooc_said), what)
                self.assertTrue(all(w.category is RuntimeWarning for w in ooc_said), what)
        for shape in [(0, 3), (4, 0), (6,)]:
            x = data("f8", shape, 2)
            got = ooc.gram(self.save("g.npy", x))
            self.assertEqual(type(got), type(x.T @ x))
            assert_close(self, got, x.T @ x, 1e-12, f"gram {shape}")

    def test_constant_column_nan_and_inf_propagate_as_numpy(self):
        rng = np.random.default_rng(5)
        x = rng.normal(size=(1000, 4))
        x[:, 1] = 3.0
        path = self.save("k.npy", x)
        with self.assertWarnsRegex(RuntimeWarning, "invalid value encountered in divide"):
            got = ooc.corrcoef(path, rowvar=False)
        assert_close(self, got, numpy_op("corrcoef", x, False), 1e-12, "constant column")
        proc = run("linalg", "corrcoef", path)
        self.assertIn("warning: invalid value encountered in divide", proc.stderr)
        # Without the constant column: numpy's BLAS skips its zeros (0 * nan is 0 there).
        x[:, 1] = rng.normal(size=1000)
        for value, at in ((np.nan, (500, 2)), (np.inf, (0, 0)), (-np.inf, (999, 3)), (np.nan, (0, 1))):
            y = x.copy()
            y[at] = value
            path = self.save("n.npy", y)
            for op in OPS:
                got = ooc.gram(path) if op == "gram" else getattr(ooc, op)(path, rowvar=False)
                assert_close(self, got, numpy_op(op, y, False), 1e-12, f"{op} with {value} at {at}")

    def test_bad_input_one_line_and_numpy_errors(self):
        cube = self.save("cube.npy", np.zeros((2, 2, 2)))
        with self.assertRaisesRegex(ValueError, "m has more than 2 dimensions"):
            ooc.cov(cube)
        with self.assertRaisesRegex(ValueError, "ddof must be integer"):
            ooc.cov(self.save("x.npy", np.zeros((3, 2))), ddof=1.5)
        proc = run("linalg", "cov", cube, check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.count("\n"), 1, proc.stderr)
        self.assertIn("cube.npy", proc.stderr)
        proc = run("linalg", "gram", self.tmp.file("missing.npy"), check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.count("\n"), 1, proc.stderr)
        self.assertEqual(run("linalg", "svdd", cube, check=False).returncode, 2)
        self.assertEqual(run("linalg", "gram", cube, "--ddof", "1", check=False).returncode, 2)
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["cube.npy", "x.npy"])  # nothing written

    def test_json_members(self):
        path = self.save("j.npy", np.arange(12, dtype=np.int16).reshape(6, 2))
        result = json.loads(run("linalg", "gram", path, "--json").stdout)
        self.assertEqual(result["dtype"], "int16")
        self.assertEqual(result["shape"], [2, 2])
        x = np.arange(12, dtype=np.int16).reshape(6, 2)
        self.assertEqual(result["value"], (x.T @ x).tolist())

    def test_matmul_every_dtype_order_and_shape_against_numpy(self):
        cases = sweep(TYPES, "<>", "CF", ("f8", "f4", "i1", "b1", "u8"), ((500, 3), (3,)), valid=byte_order_applies)
        for i, (kind, byte_order, order, w_kind, w_shape) in enumerate(cases):
            dtype = with_byte_order(kind, byte_order)
            x = np.asarray(data(dtype, (500, 3) if i % 3 else (3,), i), dtype=dtype, order=order)
            w = data(w_kind, (3, 2) if len(w_shape) == 2 else (3,), i + 1)
            path = self.save(f"x{i}.npy", x)
            want = x @ w
            what = f"{dtype} {order} @ {w_kind}{w.shape}"
            tolerance = {"f": 1e-5 if want.dtype.itemsize < 8 else 1e-12}.get(want.dtype.kind, 0)
            if want.dtype == np.float16:
                tolerance = 2e-2
            if i % 2:
                w_path = self.save(f"w{i}.npy", w)
                out = self.tmp.file(f"o{i}.npy")
                run("matmul", path, w_path, "-o", out, "--quiet")
                got = np.load(out)
                os.remove(out)
            else:
                got = ooc.matmul(path, w)
            assert_close(self, got, want, tolerance, what)

    def test_matmul_operator_out_threads_and_errors(self):
        rng = np.random.default_rng(9)
        x = rng.normal(size=(30_000, 4))
        w = rng.normal(size=(4, 3))
        path = self.save("x.npy", np.asfortranarray(x))
        got = ooc.open(path) @ w
        np.testing.assert_allclose(got, x @ w, rtol=1e-12, atol=1e-12)
        self.assertEqual(ooc.matmul(path, w, threads=3, tile_bytes="64K").tobytes(),
                         ooc.matmul(path, w, threads=1, tile_bytes="16M").tobytes())
        result = ooc.matmul(path, w, out=self.tmp.file("o.h5:/p"))
        self.assertIsInstance(result, ooc.Array)
        np.testing.assert_array_equal(np.asarray(result), got)
        with self.assertRaisesRegex(ValueError, "size 5 is different from 4"):
            ooc.matmul(path, np.ones((5, 2)))
        proc = run("matmul", path, self.save("bad.npy", np.ones((5, 2))), "-o", self.tmp.file("no.npy"), check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("size 5 is different from 4", proc.stderr)
        self.assertEqual(proc.stderr.count("\n"), 1)
        self.assertFalse(any(name.startswith("no") for name in os.listdir(self.tmp.path)))

    def test_qr_r_and_singular_values_at_condition_1e10(self):
        rng = np.random.default_rng(21)
        n, m = 40_000, 6
        u, _ = np.linalg.qr(rng.normal(size=(n, m)))
        v, _ = np.linalg.qr(rng.normal(size=(m, m)))
        x = (u * np.logspace(0, -10, m)) @ v.T * 1e3
        want_r = np.linalg.qr(x, mode="r")
        want_r = want_r * np.sign(np.diag(want_r))[:, None]  # ooc's R has a non-negative diagonal
        want_s = np.linalg.svd(x, compute_uv=False)
        for order in "CF":
            path = self.save(f"x{order}.npy", np.asarray(x, order=order))
            r = ooc.qr(path)
            assert_close(self, r, want_r, 1e-13, f"qr {order}")
            np.testing.assert_array_equal(np.tril(r, -1), 0)
            s = ooc.svd(path, compute_uv=False)
            self.assertLessEqual(np.abs(s - want_s).max(), 1e-12 * want_s[0], order)
            self.assertEqual(ooc.qr(path, threads=1, tile_bytes="64K").tobytes(),
                             ooc.qr(path, threads=3, tile_bytes="4M").tobytes())
            result = loads(run("linalg", "svd", path, "--json", "--quiet").stdout)
            self.assertLessEqual(np.abs(np.array(result["s"]) - want_s).max(), 1e-12 * want_s[0])
        x32 = self.save("x32.npy", x.astype(np.float32))
        self.assertEqual(ooc.qr(x32).dtype, np.float32)
        self.assertEqual(ooc.svd(self.save("i.npy", np.arange(12).reshape(6, 2)), compute_uv=False).dtype, np.float64)
        with self.assertRaisesRegex(ValueError, "array type float16 is unsupported in linalg"):
            ooc.qr(self.save("h.npy", np.ones((4, 2), np.float16)))
        with self.assertRaisesRegex(ValueError, "Array must be two-dimensional"):
            ooc.svd(self.save("v.npy", np.ones(4)), compute_uv=False)
        with self.assertRaisesRegex(ValueError, "only mode='r'"):
            ooc.qr(x32, mode="reduced")
        wide = np.arange(12.0).reshape(2, 6) ** 1.5  # N < M: R is (2, 6), as numpy's
        got = ooc.qr(self.save("w.npy", wide))
        want = np.linalg.qr(wide, mode="r")
        assert_close(self, got, want * np.sign(np.diag(want))[:, None], 1e-13, "wide qr")

    def test_lstsq_at_condition_1e6_against_numpy(self):
        rng = np.random.default_rng(31)
        n, m = 40_000, 5
        u, _ = np.linalg.qr(rng.normal(size=(n, m)))
        v, _ = np.linalg.qr(rng.normal(size=(m, m)))
        x = (u * np.logspace(0, -6, m)) @ v.T
        b = rng.normal(size=m)
        y = x @ b + 1e-6 * rng.normal(size=n)
        ys = np.stack([y, x @ (2 * b) + 1e-6 * rng.normal(size=n)], axis=1)
        for order in "CF":
            x_path = self.save(f"x{order}.npy", np.asarray(x, order=order))
            for name, rhs in (("y.npy", y), ("ys.npy", np.asarray(ys, order=order))):
                y_path = self.save(name, rhs)
                got = ooc.lstsq(x_path, y_path)
                want = np.linalg.lstsq(x, rhs, rcond=None)
                what = f"{order} {name}"
                self.assertLessEqual(np.linalg.norm(got[0] - want[0]) / np.linalg.norm(want[0]), 1e-8, what)
                self.assertEqual(got[1].shape, want[1].shape, what)
                np.testing.assert_allclose(got[1], want[1], rtol=1e-6, err_msg=what)  # tiny residuals: 1e-6 of themselves
                self.assertEqual(got[2], want[2], what)
                self.assertLessEqual(np.abs(got[3] - want[3]).max(), 1e-10 * want[3][0], what)
                self.assertEqual(got[0].tobytes(), ooc.lstsq(x_path, y_path, threads=3, tile_bytes="64K")[0].tobytes())
        result = loads(run("linalg", "lstsq", x_path, self.tmp.file("y.npy"), "--json", "--quiet").stdout)
        self.assertEqual(result["rank"], m)
        self.assertLessEqual(np.linalg.norm(np.array(result["x"]) - np.linalg.lstsq(x, y, rcond=None)[0]), 1e-8 * np.linalg.norm(b))
        # rank deficiency: a repeated column; rcond as numpy's
        d = np.hstack([x[:, :2], x[:, :1]])
        d_path = self.save("d.npy", d)
        for rcond in (None, 1e-3):
            got, want = ooc.lstsq(d_path, self.tmp.file("y.npy"), rcond=rcond), np.linalg.lstsq(d, y, rcond=rcond)
            self.assertEqual(got[2], want[2])
            self.assertEqual(got[1].shape, (0,))
            np.testing.assert_allclose(got[0], want[0], rtol=1e-8, atol=1e-8)
        with self.assertRaisesRegex(np.linalg.LinAlgError, "Incompatible dimensions"):
            ooc.lstsq(x_path, self.save("short.npy", y[:-1]))
        proc = run("linalg", "lstsq", x_path, self.tmp.file("short.npy"), check=False)
        self.assertEqual((proc.returncode, proc.stderr.count("\n")), (2, 1))
        self.assertIn("Incompatible dimensions", proc.stderr)


if __name__ == "__main__":
    unittest.main()
