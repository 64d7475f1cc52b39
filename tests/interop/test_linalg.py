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

    def test_both_product_kernels_for_every_width(self):
        """A C-order chunk's Yᵀ Y goes through an AVX2 loop where the CPU has it and Eigen's
        product where OOC_VECMATH asks for sse (or the CPU has no AVX2): both give numpy's
        gram and cov for every number of variables (the loop's blocks of 4 columns by 4
        vectors, ragged at the end), symmetric, with the same bits for any thread count
        and tile size."""
        rng = np.random.default_rng(5)
        for m in list(range(1, 21)) + [31, 33, 64]:
            x = 1e3 + rng.normal(size=(max(3 * m, 20_011), m))
            path = self.save(f"x{m}.npy", x)
            for kernel in ({}, {"OOC_VECMATH": "sse"}):
                for op, want in (("gram", x.T @ x), ("cov", np.cov(x, rowvar=False))):
                    results = []
                    for options in (["--threads", "1", "--tile-bytes", "64K"], ["--threads", "2", "--tile-bytes", "1M"]):
                        result = loads(run("linalg", op, path, *options, "--json", "--quiet", environment=kernel).stdout)
                        results.append(np.array(result["value"], dtype=result["dtype"]).reshape(result["shape"]))
                    what = f"{op}, {m} variables, {kernel or 'default kernel'}"
                    assert_close(self, results[0], want, 1e-12, what)
                    self.assertEqual(results[0].tobytes(), results[1].tobytes(), what)
                    np.testing.assert_array_equal(results[0], results[0].T, err_msg=what)  # 0-d where numpy's is

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
        with self.assertRaisesRegex(ValueError, "Unrecognized mode 'full'"):
            ooc.qr(x32, mode="full")
        wide = np.arange(12.0).reshape(2, 6) ** 1.5  # N < M: R is (2, 6), as numpy's
        got = ooc.qr(self.save("w.npy", wide))
        want = np.linalg.qr(wide, mode="r")
        assert_close(self, got, want * np.sign(np.diag(want))[:, None], 1e-13, "wide qr")

    def check_factors(self, x, q, r, what, orthogonality=1e-12, backward=1e-13):
        """Q R = x to `backward` of ‖x‖, QᵀQ = I to `orthogonality`, R upper triangular."""
        q, r = np.asarray(q, dtype=np.float64), np.asarray(r, dtype=np.float64)
        k = min(x.shape)
        self.assertEqual(q.shape, (x.shape[0], k), what)
        self.assertEqual(r.shape, (k, x.shape[1]), what)
        np.testing.assert_array_equal(np.tril(r, -1), 0, err_msg=what)
        self.assertLessEqual(np.abs(q.T @ q - np.eye(k)).max(), orthogonality, what)
        self.assertLessEqual(np.linalg.norm(q @ r - x) / np.linalg.norm(x), backward, what)

    def test_qr_reduced_and_svd_at_condition_1e10_c_f_file_and_memory(self):
        rng = np.random.default_rng(23)
        n, m = 40_000, 6
        u, _ = np.linalg.qr(rng.normal(size=(n, m)))
        v, _ = np.linalg.qr(rng.normal(size=(m, m)))
        x = (u * np.logspace(0, -10, m)) @ v.T * 1e3
        want_q, want_r = np.linalg.qr(x)
        signs = np.sign(np.diag(want_r))  # ooc's R has a non-negative diagonal, Q the matching columns
        want_u, want_s, want_vt = np.linalg.svd(x, full_matrices=False)
        for order in "CF":
            path = self.save(f"x{order}.npy", np.asarray(x, order=order))
            q, r = ooc.qr(path, mode="reduced")
            self.assertIsInstance(q, np.ndarray)
            self.check_factors(x, q, r, f"qr {order}")
            assert_close(self, r, want_r * signs[:, None], 1e-13, f"R {order}")
            # Q's column j is as conditioned as R's leading j+1 columns: a forward error of eps r_00 / r_jj
            column_error = np.abs(q - want_q * signs).max(axis=0)
            self.assertTrue(np.all(column_error <= 1e-13 * r[0, 0] / np.diag(r)), f"Q {order}: {column_error}")
            self.assertEqual(r.tobytes(), ooc.qr(path).tobytes(), "R as mode='r'")
            q_file, r_file = ooc.qr(path, mode="reduced", out=self.tmp.file(f"q{order}.h5:/q"), threads=3,
                                    tile_bytes="64K")
            self.assertIsInstance(q_file, ooc.Array)
            self.assertEqual(np.asarray(q_file).tobytes(), q.tobytes(), f"Q bits, threads and tiles {order}")
            self.assertEqual(r_file.tobytes(), r.tobytes())
            u_got, s, vt = ooc.svd(path)
            self.assertLessEqual(np.abs(s - want_s).max(), 1e-12 * want_s[0], order)
            self.assertLessEqual(np.abs(u_got.T @ u_got - np.eye(m)).max(), 1e-12, order)
            self.assertLessEqual(np.abs(vt @ vt.T - np.eye(m)).max(), 1e-12, order)
            self.assertLessEqual(np.linalg.norm((u_got * s) @ vt - x) / np.linalg.norm(x), 1e-13, order)
            pair_signs = np.sign(np.sum(vt * want_vt, axis=1))  # each pair (u_i, v_i) up to its sign
            assert_close(self, vt * pair_signs[:, None], want_vt, 1e-5, f"Vt {order}")
            self.assertEqual(s.tobytes(), ooc.svd(path, compute_uv=False).tobytes())
            u_file = ooc.svd(path, out=self.tmp.file(f"u{order}.npy"), threads=1, tile_bytes="16M")[0]
            self.assertEqual(np.asarray(u_file).tobytes(), u_got.tobytes(), f"U bits {order}")

    def test_qr_and_svd_shapes_dtypes_rank_deficiency_and_cli(self):
        rng = np.random.default_rng(25)
        # N < M, one row, one column, a chunk boundary's last rows fewer than M, rank deficiency
        cases = [rng.normal(size=(3, 7)), rng.normal(size=(1, 4)), rng.normal(size=(5000, 1)),
                 rng.normal(size=(4097, 24)), np.repeat(rng.normal(size=(3000, 2)), 3, axis=1),
                 np.zeros((300, 3))]
        for i, x in enumerate(cases):
            what = f"{x.shape} case {i}"
            path = self.save(f"c{i}.npy", x)
            q, r = ooc.qr(path, mode="reduced")
            scale = np.linalg.norm(x) or 1.0
            k = min(x.shape)
            self.assertLessEqual(np.abs(q.T @ q - np.eye(k)).max(), 1e-12, what)
            self.assertLessEqual(np.linalg.norm(q @ r - x) / scale, 1e-13, what)
            u, s, vt = ooc.svd(path)
            self.assertLessEqual(np.abs(u.T @ u - np.eye(k)).max(), 1e-12, what)
            self.assertLessEqual(np.linalg.norm((u * s) @ vt - x) / scale, 1e-13, what)
            want_s = np.linalg.svd(x, compute_uv=False)
            self.assertLessEqual(np.abs(s - want_s).max(), 1e-12 * max(want_s[0], 1.0), what)
        for dtype in ("f4", ">f8", "i2", "u1", "b1"):
            x = (rng.normal(size=(500, 3)) * 10).astype(dtype)
            path = self.save(f"d{dtype[-2:]}.npy", x)
            q, r = ooc.qr(path, mode="reduced")
            for got, want in zip((q, r) + ooc.svd(path), np.linalg.qr(x) + tuple(np.linalg.svd(x, full_matrices=False))):
                self.assertEqual(got.dtype, want.dtype, dtype)
            tolerance = 1e-5 if dtype == "f4" else 1e-12
            self.check_factors(x.astype(np.float64), q, r, dtype, tolerance, tolerance)
        for shape in ((0, 3), (3, 0)):
            x = np.zeros(shape)
            path = self.save("e.npy", x)
            want_q, want_r = np.linalg.qr(x)
            q, r = ooc.qr(path, mode="reduced")
            self.assertEqual((q.shape, r.shape), (want_q.shape, want_r.shape), shape)
            got = ooc.svd(path)
            want = np.linalg.svd(x, full_matrices=False)
            self.assertEqual([a.shape for a in got], [a.shape for a in want], shape)
            self.assertEqual(ooc.svd(path, compute_uv=False).shape, (0,), shape)
        # CLI: qr -o writes Q, svd --json prints s and vt, svd -o writes U
        x = rng.normal(size=(20_000, 5)) * np.logspace(0, -8, 5)
        path = self.save("x.npy", np.asfortranarray(x))
        result = loads(run("linalg", "qr", path, "-o", self.tmp.file("q.npy"), "--json", "--quiet").stdout)
        self.assertEqual(result["output"], self.tmp.file("q.npy"))
        self.check_factors(x, np.load(self.tmp.file("q.npy")), np.array(result["value"]), "CLI qr")
        np.testing.assert_array_equal(np.load(self.tmp.file("q.npy")), ooc.qr(path, mode="reduced")[0])
        result = loads(run("linalg", "svd", path, "--json", "--quiet").stdout)
        u, s, vt = ooc.svd(path)
        np.testing.assert_array_equal(np.array(result["s"]), s)
        np.testing.assert_array_equal(np.array(result["vt"]), vt)
        self.assertNotIn("output", result)
        run("linalg", "svd", path, "-o", self.tmp.file("u.h5:/u"), "--quiet")
        self.assertEqual(ooc.open(self.tmp.file("u.h5:/u")).read().tobytes(), u.tobytes())

    def test_qr_and_svd_refusals(self):
        x = self.save("x.npy", np.ones((6, 2)))
        with self.assertRaisesRegex(ValueError, "full_matrices=True"):
            ooc.svd(x, full_matrices=True)
        with self.assertRaisesRegex(ValueError, "mode='complete' is not supported"):
            ooc.qr(x, mode="complete")
        with self.assertRaisesRegex(ValueError, "out= is where Q goes"):
            ooc.qr(x, out=self.tmp.file("q.npy"))
        with self.assertRaisesRegex(ValueError, "Array must be two-dimensional"):
            ooc.svd(self.save("v.npy", np.ones(4)))
        with self.assertRaisesRegex(ValueError, "output is the input"):
            ooc.qr(x, mode="reduced", out=x)
        # Q of a (2e11, 2) float64 array (a sparse file) cannot be held in memory
        big = self.tmp.file("big.npy")
        with open(big, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (200_000_000_000, 2)})
            header = f.tell()
        os.truncate(big, header + 200_000_000_000 * 16)
        for call in (lambda: ooc.qr(big, mode="reduced"), lambda: ooc.svd(big)):
            with self.assertRaisesRegex(MemoryError, "write it to a file with out="):
                call()
        os.remove(big)
        for op, extra in (("qr", ["-o", x]), ("gram", ["-o", self.tmp.file("no.npy")]),
                          ("svd", ["-o", self.tmp.file("no.h5")])):
            proc = run("linalg", op, x, *extra, check=False)
            self.assertIn(proc.returncode, (1, 2), (op, proc.stderr))
            self.assertEqual(proc.stderr.count("\n"), 1, proc.stderr)
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["v.npy", "x.npy"])  # nothing written

    def test_nan_inf_and_fewer_rows_than_columns_in_qr_svd_lstsq_as_numpy(self):
        rng = np.random.default_rng(27)
        x = rng.normal(size=(3000, 4))
        y = x @ np.arange(1.0, 5.0)
        y_path = self.save("y.npy", y)
        for value in (np.nan, np.inf):
            bad = x.copy()
            bad[2500, 1] = value
            path = self.save("bad.npy", bad)
            for call in (lambda: ooc.svd(path, compute_uv=False), lambda: ooc.svd(path),
                         lambda: ooc.lstsq(path, y_path)):
                with self.assertRaisesRegex(np.linalg.LinAlgError, "SVD did not converge"):
                    call()
            proc = run("linalg", "svd", path, check=False)
            self.assertEqual((proc.returncode, proc.stderr.count("\n")), (1, 1), proc.stderr)
            self.assertIn("SVD did not converge", proc.stderr)
            q, r = ooc.qr(path, mode="reduced")  # numpy's QR propagates it
            self.assertTrue(np.isnan(q).any() and not np.isfinite(r).all())
        bad_y = y.copy()
        bad_y[7] = np.nan  # NaN in y alone: numpy's NaN solution and residuals, finite s
        got = ooc.lstsq(self.save("x.npy", x), self.save("ny.npy", bad_y))
        want = np.linalg.lstsq(x, bad_y, rcond=None)
        self.assertTrue(np.isnan(got[0]).all() and np.isnan(got[1]).all())
        self.assertEqual(got[2], want[2])
        self.assertLessEqual(np.abs(got[3] - want[3]).max(), 1e-12 * want[3][0])
        wide = rng.normal(size=(3, 5))  # N < M: the minimum-norm solution, no residuals, as numpy's
        w_path, wy_path = self.save("w.npy", wide), self.save("wy.npy", np.arange(3.0))
        got, want = ooc.lstsq(w_path, wy_path), np.linalg.lstsq(wide, np.arange(3.0), rcond=None)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
        self.assertEqual((got[1].shape, got[2]), (want[1].shape, want[2]))
        assert_close(self, ooc.cov(w_path, rowvar=False), np.cov(wide, rowvar=False), 1e-12, "cov N < M")

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
