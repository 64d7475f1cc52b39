"""The programs in examples/ give what numpy gives on the same files.

add_constant IN OUT C must write exactly np.add(np.load(IN), C) (dtype, shape, order,
bits); running_histogram IN BINS LO HI must print exactly
np.histogram(np.load(IN), BINS, (LO, HI))[0]; linear_fit X Y R must print np.polyfit's
line within rounding and write numpy's residuals for it. Both are run on files numpy writes: several
dtypes, a big-endian one, Fortran order, the 0-d and the empty array, and arrays spanning
many tiles (--tile-bytes). Needs OOC_BUILD_DIR (set by ctest) and numpy.
"""

import hashlib
import json
import os
import subprocess
import tempfile
import unittest
import warnings
from pathlib import Path

import numpy as np

BUILD_DIR = os.environ.get("OOC_BUILD_DIR")
SMALL_TILES = "65536"  # 8192 float64 elements (one block) per tile


def example(name):
    if not BUILD_DIR:
        raise RuntimeError("set OOC_BUILD_DIR to the build directory (ctest does)")
    path = Path(BUILD_DIR) / "examples" / name
    if not path.is_file():
        raise RuntimeError(f"{path} is not built (configure with -DOOC_BUILD_EXAMPLES=ON)")
    return str(path)


def run(name, *args):
    return subprocess.run([example(name), *map(str, args)], capture_output=True, text=True, timeout=300)


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def same_bits(actual, expected):
    """Equal element for element, bit for bit (so -0.0 != 0.0), any NaN equal to any NaN."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if actual.dtype.kind != "f":
        return bool(np.array_equal(actual, expected))
    uint = np.dtype(f"u{actual.dtype.itemsize}")
    bits = actual.view(uint) == expected.view(uint)
    return bool(np.all(bits | (np.isnan(actual) & np.isnan(expected))))


def with_specials(values):
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype=values.dtype)
    return np.concatenate([specials, values])


class ExampleTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="ooc_examples_")
        cls.tmp = Path(cls._tmp.name)
        cls.rng = np.random.default_rng(20240611)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def save(self, name, array):
        path = self.tmp / f"{name}.npy"
        np.save(path, array)
        return path

    def assert_one_line_error(self, result, code, *mentions):
        self.assertEqual(result.returncode, code, result.stderr)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        for text in mentions:
            self.assertIn(str(text), lines[0])


class AddConstantTest(ExampleTestCase):
    def check(self, name, array, constant_text, constant, *options):
        """add_constant on `array` writes np.add(array, constant), and leaves IN alone."""
        src = self.save(name, array)
        dst = self.tmp / f"{name}.out.npy"
        before = sha256(src)
        result = run("add_constant", src, dst, constant_text, *options)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sha256(src), before, "the input was modified")
        out = np.load(dst)
        expected = np.add(np.load(src), constant)
        self.assertEqual(out.dtype, expected.dtype)
        self.assertEqual(out.shape, expected.shape)
        if array.ndim > 1 and array.flags.f_contiguous and not array.flags.c_contiguous:
            self.assertTrue(out.flags.f_contiguous, "Fortran order was not kept")
        self.assertTrue(same_bits(out, expected), f"{name}: values differ from numpy")
        dst.unlink()

    def test_a_float64_array_plus_a_float_is_numpys_sum_bit_for_bit(self):
        a = with_specials(self.rng.standard_normal(5000))
        self.check("f8", a, "2.5", 2.5)
        self.check("f8_small", a, "1e-300", 1e-300)

    def test_float32_and_float16_stay_in_their_own_precision(self):
        self.check("f4", with_specials(self.rng.standard_normal(3000).astype(np.float32)), "0.1", 0.1)
        self.check("f2", with_specials(self.rng.standard_normal(3000).astype(np.float16)), "0.1", 0.1)
        # numpy 1.24 looks at the value: 70000 does not fit float16, so the result is float32.
        self.check("f2_big", self.rng.standard_normal(100).astype(np.float16), "70000.0", 70000.0)

    def test_big_endian_inputs_give_native_outputs(self):
        self.check("be_f8", with_specials(self.rng.standard_normal(4000)).astype(">f8"), "-1.25", -1.25)
        self.check("be_i4", self.rng.integers(-10**9, 10**9, 4000).astype(">i4"), "7", 7)

    def test_integer_arrays_follow_numpys_value_based_dtypes_and_wrap(self):
        self.check("u1", np.arange(256, dtype=np.uint8), "3", 3)  # uint8, 253..255 wrap
        self.check("i1", np.arange(-128, 128, dtype=np.int8), "100", 100)  # int8, wraps
        self.check("i8", np.array([2**63 - 1, -2**63, 0, 5], dtype=np.int64), "1", 1)
        self.check("u2", np.arange(0, 65536, 7, dtype=np.uint16), "-1", -1)  # int32
        self.check("i2", np.arange(-500, 500, dtype=np.int16), "2.5", 2.5)  # float64
        self.check("b1", np.array([True, False, True]), "1", 1)  # int64

    def test_fortran_order_arrays_keep_their_order(self):
        self.check("f8_fortran", np.asfortranarray(self.rng.standard_normal((37, 53))), "1.5", 1.5)
        self.check("be_i2_fortran", np.asfortranarray(np.arange(35 * 29, dtype=">i2").reshape(35, 29)), "3", 3)

    def test_arrays_spanning_many_tiles(self):
        big = self.rng.standard_normal(150_001)
        self.check("big_f8", big, "0.75", 0.75, "--tile-bytes", SMALL_TILES)  # 19 tiles
        self.check("big_be_f4", big.astype(">f4"), "0.75", 0.75, "--tile-bytes", SMALL_TILES)
        self.check("big_i2_fortran", np.asfortranarray(
            self.rng.integers(-3000, 3000, (400, 301)).astype(np.int16)), "2.5", 2.5, "--tile-bytes", SMALL_TILES)

    def test_the_0d_and_the_empty_array(self):
        self.check("zero_d", np.array(4.5), "1", 1)
        self.check("empty", np.zeros(0, dtype=np.int32), "1", 1)
        self.check("empty_2d", np.zeros((3, 0), dtype=np.float32), "1.5", 1.5)

    def test_bad_arguments_exit_2_with_one_line(self):
        src = self.save("args", np.arange(3.0))
        self.assert_one_line_error(run("add_constant"), 2, "usage")
        self.assert_one_line_error(run("add_constant", src, self.tmp / "x.npy", "abc"), 2, "abc")
        self.assert_one_line_error(run("add_constant", src, self.tmp / "x.npy", "1", "--tile-bytes", "0"), 2)
        self.assertFalse((self.tmp / "x.npy").exists())

    def test_an_unreadable_input_exits_1_naming_the_file_and_writes_nothing(self):
        missing = self.tmp / "missing.npy"
        out = self.tmp / "never.npy"
        self.assert_one_line_error(run("add_constant", missing, out, "1"), 1, missing)
        truncated = self.save("truncated", np.arange(1000.0))
        data = truncated.read_bytes()
        truncated.write_bytes(data[: len(data) - 100])
        self.assert_one_line_error(run("add_constant", truncated, out, "1"), 1, truncated)
        self.assertFalse(out.exists())
        self.assertEqual([p.name for p in self.tmp.iterdir() if p.name.startswith("never")], [])


class RunningHistogramTest(ExampleTestCase):
    def check(self, name, array, bins, lo, hi, *options):
        """running_histogram prints np.histogram(array, bins, (lo, hi))'s counts."""
        src = self.save(name, array)
        result = run("running_histogram", src, bins, repr(lo), repr(hi), *options)
        self.assertEqual(result.returncode, 0, result.stderr)
        with warnings.catch_warnings():  # numpy warns that it converts bool to uint8
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.histogram(np.load(src), bins, (lo, hi))[0].tolist()
        self.assertEqual(json.loads(result.stdout), expected, name)
        return expected

    def near_edges(self, dtype, bins, lo, hi):
        """The edges numpy bins `dtype` values with, and the next values either side."""
        edges = np.linspace(lo, hi, bins + 1).astype(dtype)
        return np.concatenate([edges, np.nextafter(edges, dtype.type(np.inf)),
                               np.nextafter(edges, dtype.type(-np.inf))])

    def test_float64_counts_match_numpy_at_the_edges_and_beyond(self):
        values = np.concatenate([
            self.rng.uniform(-3, 3, 5000), self.near_edges(np.dtype(np.float64), 10, -2.0, 2.0),
            [np.nan, np.inf, -np.inf]])
        self.check("f8", values, 10, -2.0, 2.0)

    def test_float32_and_float16_are_binned_with_edges_in_their_own_precision(self):
        for dtype, bins, lo, hi in [(np.float32, 7, 0.1, 0.7), (np.float16, 9, -1.3, 2.9)]:
            dtype = np.dtype(dtype)
            values = np.concatenate([
                self.rng.uniform(lo - 0.2, hi + 0.2, 20000).astype(dtype),
                self.near_edges(dtype, bins, lo, hi), np.array([np.nan], dtype=dtype)])
            self.check(dtype.name, values, bins, lo, hi)

    def test_integer_and_bool_arrays(self):
        self.check("i2", self.rng.integers(-200, 200, 5000).astype(np.int16), 7, -100.5, 100.0)
        self.check("u1", np.arange(256, dtype=np.uint8), 16, 0.0, 255.0)
        self.check("be_i8", self.rng.integers(-1500, 1500, 5000).astype(">i8"), 13, -1000.0, 1000.0)
        self.check("b1", self.rng.integers(0, 2, 999).astype(bool), 2, 0.0, 1.0)

    def test_an_empty_range_is_widened_by_half_a_unit_as_numpy_does(self):
        self.check("lo_eq_hi", np.arange(10, dtype=np.int32), 3, 5.0, 5.0)

    def test_a_fortran_order_big_endian_array(self):
        a = np.asfortranarray(self.rng.standard_normal((61, 47)).astype(">f4"))
        self.check("be_f4_fortran", a, 12, -2.5, 2.5)

    def test_an_array_spanning_many_tiles_counts_the_same_as_in_one_tile(self):
        big = self.rng.standard_normal(300_000)
        counts = self.check("big_f8", big, 50, -4.0, 4.0, "--tile-bytes", SMALL_TILES)  # 37 tiles
        self.assertEqual(sum(counts), int(np.count_nonzero((big >= -4) & (big <= 4))))
        self.check("big_f8", big, 50, -4.0, 4.0)  # the default tile size: one tile
        self.check("big_be_f2", big.astype(">f2"), 20, -3.0, 3.0, "--tile-bytes", "16384")

    def test_the_0d_and_the_empty_array(self):
        self.check("zero_d", np.array(0.25), 4, 0.0, 1.0)
        self.check("empty", np.zeros(0), 4, 0.0, 1.0)

    def test_bad_arguments_exit_2_with_one_line(self):
        src = self.save("args", np.arange(3.0))
        self.assert_one_line_error(run("running_histogram", src, 4, 0), 2, "usage")
        self.assert_one_line_error(run("running_histogram", src, 0, 0, 1), 2, "BINS")
        self.assert_one_line_error(run("running_histogram", src, 4, 1, 0), 2, "LO")
        self.assert_one_line_error(run("running_histogram", src, 4, "nan", 1), 2, "nan")

    def test_an_unreadable_input_exits_1_naming_the_file(self):
        missing = self.tmp / "missing.npy"
        self.assert_one_line_error(run("running_histogram", missing, 4, 0, 1), 1, missing)
        not_npy = self.tmp / "not_npy.npy"
        not_npy.write_bytes(b"this is not an array\n")
        self.assert_one_line_error(run("running_histogram", not_npy, 4, 0, 1), 1, not_npy)



class Hdf5ExampleTest(ExampleTestCase):
    def test_both_examples_read_chunked_datasets_and_write_hdf5(self):
        import h5py
        a = self.rng.standard_normal((300, 211)).astype(">f4")
        src = self.tmp / "in.h5"
        with h5py.File(src, "w") as f:
            f.create_dataset("g/x", data=a, chunks=(32, 50), compression="gzip")
        out = self.tmp / "out.h5"
        result = run("add_constant", f"{src}:/g/x", f"{out}:/y", "0.5", "--tile-bytes", SMALL_TILES)
        self.assertEqual(result.returncode, 0, result.stderr)
        with h5py.File(out, "r") as f:
            self.assertTrue(same_bits(f["y"][()], np.add(a, 0.5)))
        result = run("running_histogram", f"{src}:/g/x", "7", "-2", "2", "--tile-bytes", SMALL_TILES)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout), np.histogram(a, 7, (-2, 2))[0].tolist())
class LinearFitTest(ExampleTestCase):
    def check(self, name, x, y, *options):
        """linear_fit prints np.polyfit(x, y, 1) within rounding and writes the residuals
        y - (intercept + slope * x) exactly as numpy computes them with those numbers."""
        px, py = self.save(f"{name}_x", x), self.save(f"{name}_y", y)
        out = self.tmp / f"{name}_r.npy"
        result = run("linear_fit", px, py, out, *options)
        self.assertEqual(result.returncode, 0, result.stderr)
        fit = json.loads(result.stdout)
        slope, intercept = np.polyfit(np.ravel(x).astype(np.float64), np.ravel(y).astype(np.float64), 1)
        np.testing.assert_allclose([fit["slope"], fit["intercept"]], [slope, intercept], rtol=1e-9, atol=1e-12)
        self.assertEqual(fit["count"], x.size)
        residuals = np.load(out)
        expected = y.astype(np.float64) - (fit["intercept"] + fit["slope"] * x.astype(np.float64))
        self.assertEqual(residuals.dtype, np.float64)
        self.assertTrue(same_bits(residuals, expected))
        return fit

    def test_a_noisy_line_over_many_tiles_and_threads(self):
        x = self.rng.uniform(-5, 5, 200_001)
        y = 2 * x - 1 + self.rng.standard_normal(x.size) * 0.1
        fits = {json.dumps(self.check("line", x, y, "--tile-bytes", SMALL_TILES, "--threads", threads))
                for threads in ("1", "2", "7")}
        self.assertEqual(len(fits), 1, "the fit depends on the thread count")

    def test_two_files_of_different_dtypes_and_byte_orders(self):
        x = np.asfortranarray(self.rng.integers(-1000, 1000, (300, 70)).astype(">i4"))
        y = np.asfortranarray((0.5 * x + 3 + self.rng.standard_normal(x.shape)).astype(np.float32))
        self.check("mixed", x, y, "--tile-bytes", SMALL_TILES)

    def test_files_that_do_not_match_are_refused(self):
        x = self.save("short_x", np.arange(10.0))
        y = self.save("short_y", np.arange(11.0))
        self.assert_one_line_error(run("linear_fit", x, y, self.tmp / "no.npy"), 2, "do not broadcast")
        flat = self.save("flat_x", np.ones(10))
        self.assert_one_line_error(run("linear_fit", flat, x, self.tmp / "no.npy"), 2, "two distinct x values")
        self.assertFalse((self.tmp / "no.npy").exists())


if __name__ == "__main__":
    unittest.main(verbosity=2)


class ColumnStatsTest(ExampleTestCase):
    """column_stats X LOG: the README's C++ API in one program (reduce_axis, a kernel over
    two selected columns, a 2-d histogram, a strided selection, transform<Floating>)."""

    def check(self, x, tile_bytes=SMALL_TILES):
        path = self.save("x", x)
        log_path = self.tmp / "log.npy"
        result = run("column_stats", path, log_path, "--tile-bytes", tile_bytes)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = dict(line.split(":", 1) for line in result.stdout.strip().splitlines())
        dtype = x.dtype.newbyteorder("=")
        mean = np.array(lines["mean"].split(), dtype=dtype)
        self.assertTrue(same_bits(mean, np.mean(x, axis=0)), (mean, np.mean(x, axis=0)))
        # ooc's one-pass std is float64 inside; numpy's float32 sums rows one by one.
        exact_std = np.std(x.astype("f8"), axis=0, ddof=1)
        std = np.array(lines["std"].split(), dtype=dtype)
        np.testing.assert_allclose(std, exact_std, rtol=1e-13 if dtype.itemsize == 8 else 1e-6)
        self.assertEqual(int(lines["above"]), np.count_nonzero(x[:, 0] > x[:, 1]))
        lo, hi = x.min(axis=0).astype("f8"), x.max(axis=0).astype("f8")
        counts, _, _ = np.histogram2d(x[:, 0].astype("f8"), x[:, 1].astype("f8"), bins=4,
                                      range=[[lo[0], hi[0]], [lo[1], hi[1]]])
        self.assertEqual([int(c) for c in lines["hist2d"].split()], counts.astype(int).ravel().tolist())
        every10 = np.sum(x[::10, 1])
        self.assertEqual(lines["every10"].strip(), str(every10))
        written = np.load(log_path)
        expected = np.log1p(np.abs(x)) * 2
        self.assertEqual(written.dtype, dtype)
        self.assertEqual(written.flags.f_contiguous and not written.flags.c_contiguous,
                         x.flags.f_contiguous and not x.flags.c_contiguous)
        ulps = np.abs(written.astype("f8") - expected.astype("f8")) / np.spacing(np.abs(expected)).astype("f8")
        self.assertLessEqual(float(np.max(ulps)), 4)

    def test_float64_and_float32_over_many_tiles(self):
        for dtype in ("f8", "f4"):
            with self.subTest(dtype=dtype):
                self.check((self.rng.standard_normal((30011, 5)) * 3).astype(dtype))

    def test_big_endian_fortran_order_in_one_tile(self):
        x = np.asfortranarray((self.rng.standard_normal((2000, 3)) + 1).astype(">f8"))
        self.check(x, tile_bytes="64M")

    def test_an_integer_matrix_is_refused_by_the_float_kernel_with_one_line(self):
        path = self.save("ints", np.arange(20, dtype="i4").reshape(10, 2))
        log_path = self.tmp / "ints_log.npy"
        result = run("column_stats", path, log_path)
        self.assert_one_line_error(result, 1, "float32, float64", "int32")
        self.assertFalse(log_path.exists())
