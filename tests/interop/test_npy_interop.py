"""ooc gives numpy's answers: numpy writes files of every dtype, byte order, memory
order and header version; oocrun reads them, reduces them and writes results that
numpy reads back - bit for bit."""
import os
import sys
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import DTYPES, TempDir, npy_bytes, run, run_json, same_scalar, sample, sweep  # noqa: E402

SHAPES = [(), (0,), (1,), (7,), (3, 0), (5, 6), (2, 3, 4)]
REDUCTIONS = {"sum": np.sum, "mean": np.mean, "min": np.min, "max": np.max}
CONSTANTS = ["1", "-1", "300", "70000", str(2**40), str(2**63), "2.5", "0.5", "-3", "1e300", "nan", "inf"]


def distinct_layout(dtype, shape, order, *rest):
    """Fortran order only where it differs from C: two dimensions or more."""
    return order == "C" or len(shape) > 1


def numpy_reduce(op, a):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return REDUCTIONS[op](a)


def py_constant(text):
    try:
        return int(text)
    except ValueError:
        return float(text)


class InfoTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def test_info_reports_numpys_dtype_shape_and_order_for_every_header_version(self):
        for dtype, shape, order, version in sweep(DTYPES, [(), (0,), (4,), (2, 3)], "CF", [(1, 0), (2, 0), (3, 0)],
                                                  valid=distinct_layout):
            a = np.asarray(sample(dtype, shape), order=order)
            path = self.tmp.save("a.npy", a, version)
            info = run_json("info", path)
            with self.subTest(dtype=dtype, shape=shape, order=order, version=version):
                self.assertEqual(info["dtype"], np.lib.format.dtype_to_descr(a.dtype))
                self.assertEqual(tuple(info["shape"]), shape)
                self.assertEqual(info["fortran_order"], bool(a.ndim > 1 and order == "F"))
                self.assertEqual(info["format_version"], f"{version[0]}.0")
                self.assertEqual(info["nbytes"], a.nbytes)
                with open(path, "rb") as f:
                    np.lib.format.read_magic(f)
                    f.seek(0)
                    np.load(f, mmap_mode=None)
                self.assertEqual(os.path.getsize(path) - info["data_offset"], a.nbytes)

    def test_a_descr_without_byte_order_reads_as_native(self):
        header = "{'descr': 'f8', 'fortran_order': False, 'shape': (2,), }"
        body = header + " " * (118 - len(header)) + "\n"
        path = self.tmp.file("plain.npy")
        with open(path, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body.encode() +
                    np.array([1.5, 2.0]).tobytes())
        self.assertEqual(run_json("info", path)["dtype"], "<f8")
        self.assertEqual(run_json("reduce", "sum", path)["value"], 3.5)


class ReduceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, path, a, *extra, ops=REDUCTIONS):
        for op in ops:
            expected = numpy_reduce(op, a) if not (a.size == 0 and op in ("min", "max")) else None
            if expected is None:
                proc = run("reduce", op, path, "--json", check=False)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn("zero-size array", proc.stderr)
                continue
            got = run_json("reduce", op, path, *extra)
            with self.subTest(op=op, dtype=a.dtype.str, shape=a.shape, extra=extra):
                self.assertEqual(got["op"], op)
                self.assertEqual(got["dtype"], np.asarray(expected).dtype.name)
                self.assertTrue(same_scalar(got["value"], expected),
                                f"ooc {got['value']!r} numpy {expected!r}")
                if np.asarray(expected).dtype.kind in "iu":
                    self.assertIsInstance(got["value"], int)

    def test_every_dtype_shape_and_order_reduces_exactly_as_numpy(self):
        for dtype, shape, order, op in sweep(DTYPES, SHAPES, "CF", REDUCTIONS, valid=distinct_layout):
            a = np.asarray(sample(dtype, shape, seed=len(shape)), order=order)
            path = self.tmp.save("a.npy", a)
            self.check(path, a, ops=[op])

    def test_arrays_spanning_many_tiles_reduce_to_numpys_bits_for_any_thread_count(self):
        runs = [("--tile-bytes", "1K", "--threads", 1), ("--tile-bytes", "1K", "--threads", 2),
                ("--tile-bytes", "1K", "--threads", 7), ("--tile-bytes", "256K", "--prefetch", 0)]
        dtypes = ["<f8", ">f8", "<f4", ">f2", "<f2", "<i8", ">u8", "|u1", "|b1", ">i4"]
        for dtype, extra, op in sweep(dtypes, runs, REDUCTIONS):
            a = sample(dtype, (123457,), seed=7)
            path = self.tmp.save("big.npy", a)
            self.check(path, a, *extra, ops=[op])

    def test_a_fortran_order_matrix_spanning_tiles_reduces_as_numpy(self):
        a = np.asfortranarray(sample(">f8", (40001, 7), seed=3))
        path = self.tmp.save("f.npy", a)
        self.check(path, a, "--tile-bytes", "64K")

    def test_nan_propagates_through_sum_mean_min_and_max(self):
        for dtype in ["<f2", "<f4", ">f8"]:
            a = sample(dtype, (50000,), seed=1, nan=True)
            path = self.tmp.save("nan.npy", a)
            self.check(path, a, "--tile-bytes", "8K")
            self.assertTrue(np.isnan(run_json("reduce", "min", path)["value"]))

    def test_integer_sums_wrap_as_numpys_do(self):
        big = np.full(10, np.iinfo(np.int64).max, dtype="<i8")
        path = self.tmp.save("wrap.npy", big)
        self.assertEqual(run_json("reduce", "sum", path)["value"], int(big.sum()))
        ubig = np.full(10, np.iinfo(np.uint64).max, dtype=">u8")
        path = self.tmp.save("uwrap.npy", ubig)
        self.assertEqual(run_json("reduce", "sum", path)["value"], int(ubig.sum()))

    def test_bool_bytes_other_than_0_and_1_count_as_true(self):
        raw = np.array([0, 1, 2, 255, 0, 7], dtype=np.uint8)
        path = self.tmp.save("b.npy", raw.view(np.bool_))
        a = np.load(path)
        self.assertEqual(run_json("reduce", "sum", path)["value"], int(a.sum()))
        self.assertEqual(run_json("reduce", "mean", path)["value"], float(a.mean()))
        self.assertEqual(run_json("reduce", "max", path)["value"], bool(a.max()))
        self.assertEqual(run_json("reduce", "min", path)["value"], bool(a.min()))
        all_true = self.tmp.save("t.npy", np.array([1, 2, 255, 4], dtype=np.uint8).view(np.bool_))
        self.assertIs(run_json("reduce", "min", all_true)["value"], True)
        for op, fn in [("count_nonzero", np.count_nonzero), ("any", np.any), ("all", np.all),
                       ("argmax", np.argmax), ("argmin", np.argmin), ("prod", np.prod), ("var", np.var),
                       ("nansum", np.nansum), ("norm", np.linalg.norm)]:
            self.assertEqual(run_json("reduce", op, path)["value"], np.asarray(fn(a)).item(), op)
        self.assertEqual(run_json("reduce", "argmax", all_true)["value"], 0)
        self.assertEqual(run_json("eval", "sum(a)", f"a={path}")["value"], int(a.sum()))
        out = self.tmp.file("o.npy")
        run("apply", "add-one", path, "-o", out, "--quiet")
        np.testing.assert_array_equal(np.load(out), a + 1)

    def test_text_output_prints_the_value_as_numpy_does(self):
        path = self.tmp.save("t.npy", np.array([0.5, 1.0, 1.5]))
        self.assertEqual(run("reduce", "sum", path, "--quiet").stdout.strip(), str(np.array([0.5, 1.0, 1.5]).sum()))
        path = self.tmp.save("b.npy", np.array([True, False]))
        self.assertEqual(run("reduce", "max", path, "--quiet").stdout.strip(), "True")


class ApplyTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check_apply(self, op, a, expected, *extra):
        src = self.tmp.save("in.npy", a)
        out = self.tmp.file("out.npy")
        run("apply", op, src, "-o", out, "--quiet", *extra)
        got = np.load(out)
        with self.subTest(op=op, dtype=a.dtype.str, shape=a.shape, extra=extra):
            self.assertEqual(got.dtype, expected.dtype)
            self.assertEqual(got.shape, expected.shape)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), npy_bytes(expected), "file differs from np.save of numpy's result")
        os.remove(out)

    def test_add_and_scale_give_numpys_values_and_dtypes_for_every_dtype_and_constant(self):
        # numpy 1.24 takes the result dtype from the constant's value (value-based casting)
        # as a + c and a * c alike: every dtype meets every constant, in one of the two.
        for dtype, text, (op, fn) in sweep(DTYPES, CONSTANTS, [("add", np.add), ("scale", np.multiply)]):
            a = sample(dtype, (5, 7), seed=2)
            with np.errstate(all="ignore"):
                try:
                    expected = fn(a, py_constant(text))
                except OverflowError:
                    continue
            self.check_apply(f"{op}:{text}", a, np.asarray(expected))
        for dtype in DTYPES:
            a = sample(dtype, (5, 7), seed=2)
            with np.errstate(all="ignore"):
                self.check_apply("add-one", a, np.asarray(a + 1))

    def test_results_keep_fortran_order_and_odd_shapes(self):
        for shape in SHAPES:
            for order in "CF":
                a = np.asarray(sample("<f8", shape, seed=4), order=order)
                self.check_apply("add-one", a, np.asarray(a + 1))

    def test_multi_tile_results_are_identical_for_any_thread_count(self):
        a = sample(">i2", (300001,), seed=9)
        for threads in (1, 2, 7):
            with np.errstate(all="ignore"):
                self.check_apply("add:3", a, a + 3, "--tile-bytes", "1K", "--threads", threads)
                self.check_apply("scale:0.5", a, a * 0.5, "--tile-bytes", "64K", "--threads", threads)

    def test_an_array_of_32_dimensions_numpys_limit_is_read(self):
        a = sample("<f4", (2,) + (1,) * 30 + (3,), seed=9)
        path = self.tmp.save("d32.npy", a)
        self.assertTrue(same_scalar(run_json("reduce", "sum", path)["value"], np.sum(a)))

    def test_header_versions_2_and_3_are_read(self):
        a = sample("<i4", (1000,), seed=5)
        for version in [(2, 0), (3, 0)]:
            src = self.tmp.save("v.npy", a, version)
            out = self.tmp.file("v1.npy")
            run("apply", "add-one", src, "-o", out, "--quiet")
            np.testing.assert_array_equal(np.load(out), a + 1)


if __name__ == "__main__":
    unittest.main()
