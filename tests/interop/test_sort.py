"""Sort and argsort: `oocrun sort|argsort ARRAY -o OUT [--axis K|none]` and ooc.sort /
ooc.argsort against np.sort / np.argsort(kind='stable') on every dtype and byte order, C and
Fortran order, along every axis and none, in memory and in runs merged from a temporary file,
with duplicates, NaNs (of both signs), +-0.0 and +-inf. Results equal numpy's bit for bit:
dtype (byte order included), shape and every value's bits, so the order of -0.0 and 0.0 and
of NaNs is the stable sort's. Then selections and masks, HDF5 and Zarr outputs, and what a
failure leaves behind: nothing."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import DTYPES, OOCRUN, run, sweep, wait_until_signals_blocked  # noqa: E402

sys.path.insert(0, os.path.join(os.environ.get("OOC_BUILD_DIR", "build"), "python"))
try:
    import ooc  # noqa: E402
except ImportError:  # the sanitized tree builds no Python module
    ooc = None

# (shape, axis): every element, each axis, a negative one; a slab that fits a tile and
# one that does not (--tile-bytes 64K makes (9000, 3) along axis 0 run through the merge).
LAYOUTS = [((), None), ((1,), -1), ((300,), -1), ((300,), None), ((7, 5), None), ((7, 5), 0), ((7, 5), 1),
           ((6, 4, 5), 1), ((6, 4, 5), -1), ((6, 4, 5), None), ((9000, 3), 0), ((9000, 3), None), ((3, 9000), 1)]
# In memory, or runs: --memory 1M with 4 threads makes runs of 8,192 to 32,768 elements.
WAYS = [("256M", 2), ("1M", 4)]


def sample(dtype, shape, seed):
    """Many duplicates; for floats +-0.0, +-inf and NaNs of both signs and two payloads."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, n, dtype=dt.newbyteorder("="), endpoint=True)
        flat = np.where(rng.random(n) < 0.5, rng.choice(np.array([info.min, info.max, 0, 1, 7], flat.dtype), n), flat)
    else:
        native = dt.newbyteorder("=")
        special = np.array([0.0, -0.0, np.inf, -np.inf, 1.5, -2.25, np.nan, -np.nan], dtype=native)
        flat = np.where(rng.random(n) < 0.4, rng.choice(special, n),
                        (rng.standard_normal(n) * 100).astype(native)).astype(native)
        bits = flat.view(f"u{dt.itemsize}")
        payload = np.isnan(flat) & (rng.random(n) < 0.5)
        bits[payload] |= 1  # another NaN payload, which the stable sort keeps in its place
    return flat.astype(dt).reshape(shape)


def bit_equal(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return False
    view = f"u{got.itemsize}"
    return bool(np.array_equal(np.ascontiguousarray(got).view(view), np.ascontiguousarray(expected).view(view)))


def expected_of(a, axis, indices):
    return (np.argsort if indices else np.sort)(a, axis=axis, kind="stable")


def valid(dtype, order, layout, *rest):
    return order == "C" or len(layout[0]) > 1


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ooc-sort-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def leftovers(self):
        return sorted(f for f in os.listdir(self.dir) if f.startswith("."))


class CliSweep(Case):
    def test_sweep(self):
        """Every dtype and byte order, C and F, every layout, sort and argsort, in memory and in runs (pairs)."""
        cases = sweep(DTYPES, ["C", "F"], LAYOUTS, ["sort", "argsort"], WAYS, valid=valid)
        for i, (dtype, order, (shape, axis), command, (memory, threads)) in enumerate(cases):
            a = np.asarray(sample(dtype, shape, i), order=order)
            np.save(self.path("a.npy"), a)
            out = self.path(f"o{i}.npy")
            p = run(command, self.path("a.npy"), "-o", out, "--axis", "none" if axis is None else axis,
                    "--memory", memory, "--threads", threads, "--tile-bytes", "64K", "--quiet")
            got = np.load(out)
            expected = expected_of(a, axis, command == "argsort")
            with self.subTest(dtype=dtype, order=order, shape=shape, axis=axis, command=command, memory=memory):
                self.assertEqual(p.stderr, "")
                self.assertTrue(bit_equal(got, expected), f"ooc {got.ravel()[:12]!r}\nnumpy {expected.ravel()[:12]!r}")
                if a.ndim > 1 and axis is not None:
                    self.assertEqual(got.flags.f_contiguous and not got.flags.c_contiguous, order == "F")
            os.remove(out)
        self.assertEqual(self.leftovers(), [])

    def test_runs_merged_from_many_files_worth(self):
        """Many runs (8,192 to 32,768 elements each) merged: floats with every special value,
        and integers with few distinct values (long ties across runs keep the input's order)."""
        # 1.2M elements: the merge is cut into parts by key, merged on every core.
        for dtype, distinct, n in (("<f8", None, 200_003), (">i8", 5, 200_003), ("<f4", None, 200_003),
                                   ("<f8", None, 1_200_007), ("<i2", 3, 1_200_007)):
            a = sample(dtype, (n,), 7)
            if distinct:
                a = (np.arange(a.size) % distinct).astype(dtype)[::-1].copy()
            np.save(self.path("a.npy"), a)
            for command in ("sort", "argsort"):
                p = run(command, self.path("a.npy"), "-o", self.path("o.npy"), "--axis", "none", "--memory", "1M",
                        "--threads", "4", "--json")
                self.assertGreaterEqual(__import__("json").loads(p.stdout)["runs"], 6)
                self.assertTrue(bit_equal(np.load(self.path("o.npy")), expected_of(a, None, command == "argsort")),
                                f"{command} {dtype}")

    def test_runs_merged_by_key_ranges(self):
        """The merge by key ranges (runs cut by their samples into parts sorted in memory):
        ties across parts and runs in the input's order, a value too frequent for one part
        (0.0 beside -0.0, NaN with two payloads: a part of its own, not sorted), all equal."""
        n = 600_011
        rng = np.random.default_rng(11)
        normal = rng.standard_normal(n)
        zeros = np.where(rng.random(n) < 0.3, 0.0, normal)
        zeros[rng.random(n) < 0.1] = -0.0
        nans = np.where(rng.random(n) < 0.5, np.nan, normal)
        nans.view(np.uint64)[rng.random(n) < 0.3] |= 1
        cases = [("<f8", sample("<f8", (n,), 5)), ("<f8", zeros), ("<f8", nans), (">f8", nans.astype(">f8")),
                 ("<i8", np.zeros(n, dtype="<i8")), (">i4", rng.integers(-3, 3, n).astype(">i4")),
                 ("<f4", sample("<f4", (n,), 6))]
        for dtype, a in cases:
            np.save(self.path("a.npy"), a)
            for command in ("sort", "argsort"):
                p = run(command, self.path("a.npy"), "-o", self.path("o.npy"), "--axis", "none", "--memory", "4M",
                        "--threads", "2", "--json")
                report = __import__("json").loads(p.stdout)
                with self.subTest(dtype=dtype, command=command, first=a[:3]):
                    self.assertGreaterEqual(report["runs"], 2)
                    self.assertGreaterEqual(report["merge_parts"], 2)
                    self.assertTrue(bit_equal(np.load(self.path("o.npy")), expected_of(a, None, command == "argsort")))

    def test_selections_masks_and_outputs(self):
        import h5py
        x = sample("<f8", (20_000, 6), 3)
        mask = np.random.default_rng(3).random(20_000) > 0.3
        np.save(self.path("x.npy"), x)
        np.save(self.path("m.npy"), mask)
        m = self.path("m.npy")
        cases = [("sort", "x.npy[::2, 2]", None, x[::2, 2], "s1.npy"),
                 ("sort", f"x.npy[@{m}]", 0, x[mask], "s2.npy"),
                 ("argsort", f"x.npy[@{m}, 3]", None, x[mask, 3], "s3.h5:/g/idx"),
                 ("sort", "x.npy", 1, x, "s4.zarr"),
                 ("sort", "x.npy", None, x, "s5.h5:/z"),
                 ("argsort", "x.npy[10:400]", 0, x[10:400], "s6.zarr")]
        for command, source, axis, a, out in cases:
            extra = ["--compression", "gzip"] if out == "s5.h5:/z" else []
            run(command, self.path(source), "-o", self.path(out), "--axis", "none" if axis is None else axis,
                "--memory", "1M", "--threads", "4", *extra)
            if out.endswith(".npy"):
                got = np.load(self.path(out))
            elif ".h5:" in out:
                f, d = out.split(":")
                with h5py.File(self.path(f), "r") as h:
                    got = h[d][()]
            else:
                import zarr
                got = zarr.open(self.path(out), mode="r")[...]
            with self.subTest(source=source, out=out):
                self.assertTrue(bit_equal(got, expected_of(a, axis, command == "argsort")))
        self.assertEqual(self.leftovers(), [])

    def test_bad_input(self):
        a = sample("<f8", (50, 4), 1)
        np.save(self.path("a.npy"), a)
        for args, rc, text in [
                (("--axis", "2"), 1, "a.npy: --axis 2 is out of bounds for array of dimension 2"),
                (("--axis", "x"), 2, "--axis must be an integer or 'none', not 'x'"),
                (("--temp-dir", self.path("nope")), 1, "nope: --temp-dir: not a directory"),
                (("--memory", "12Q"), 2, "--memory: '12Q' is not a size")]:
            p = run("sort", self.path("a.npy"), "-o", self.path("o.npy"), *args, check=False)
            with self.subTest(args=args):
                self.assertEqual(p.returncode, rc, p.stderr)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertIn(text, p.stderr)
                self.assertFalse(os.path.exists(self.path("o.npy")))
        p = run("sort", self.path("a.npy"), "-o", self.path("a.npy"), check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("the output is the input", p.stderr)
        self.assertTrue(bit_equal(np.load(self.path("a.npy")), a))
        self.assertEqual(self.leftovers(), [])

    def test_not_enough_disk_for_the_runs_is_an_error_before_any_work(self):
        disk = self.path("small")
        os.mkdir(disk)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", disk], capture_output=True).returncode:
            self.skipTest("cannot mount a small tmpfs here (not root?)")
        try:
            np.save(self.path("a.npy"), np.arange(400_000, dtype="<f8")[::-1].copy())  # 3.2 MB of runs
            p = run("sort", self.path("a.npy"), "-o", self.path("o.npy"), "--axis", "none", "--memory", "1M",
                    "--temp-dir", disk, check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertRegex(p.stderr.strip(), r"^oocrun: .*small: sort: not enough disk space for the sorted runs: "
                                               r"3\.20 MB \(3200000 bytes\) needed, .* free \(choose another "
                                               r"--temp-dir\)$")
            self.assertFalse(os.path.exists(self.path("o.npy")))
            self.assertEqual(os.listdir(disk), [])
        finally:
            subprocess.run(["umount", disk])

    def test_interrupted_or_killed_sort_leaves_nothing_behind(self):
        """Ctrl-C: exit 130, no output; kill -9: the runs' file was never named, and the
        output's temporary is removed by the next run of the same command. The delays count
        from oocrun's start (its signals blocked), not from the fork."""
        np.save(self.path("a.npy"), sample("<f8", (3_000_000,), 5))
        expected = np.sort(np.load(self.path("a.npy")), kind="stable")
        cmd = [OOCRUN, "sort", "a.npy", "-o", "o.npy", "--axis", "none", "--memory", "4M", "--threads", "2"]
        for sig in (signal.SIGINT, signal.SIGKILL):
            for delay in (0.05, 0.15, 0.3):
                if os.path.exists(self.path("o.npy")):
                    os.remove(self.path("o.npy"))
                p = subprocess.Popen(cmd, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                wait_until_signals_blocked(p)  # CI failed a SIGINT sent while the libraries loaded
                time.sleep(delay)
                p.send_signal(sig)
                _, err = p.communicate()
                with self.subTest(signal=sig, delay=delay):
                    if p.returncode == 0:
                        continue  # finished first: nothing to see
                    self.assertEqual(p.returncode, 130 if sig == signal.SIGINT else -9, err)
                    if sig == signal.SIGINT:
                        self.assertFalse(os.path.exists(self.path("o.npy")))
                        self.assertEqual(self.leftovers(), [])
                    elif os.path.exists(self.path("o.npy")):  # killed after the commit: whole
                        self.assertTrue(bit_equal(np.load(self.path("o.npy")), expected))
        if os.path.exists(self.path("o.npy")):
            os.remove(self.path("o.npy"))
        subprocess.run(cmd, cwd=self.dir, check=True, capture_output=True)
        self.assertEqual(self.leftovers(), [])
        self.assertTrue(bit_equal(np.load(self.path("o.npy")), expected))


@unittest.skipIf(ooc is None, "the Python module is not built")
class PythonSort(Case):
    def test_sweep(self):
        cases = sweep(DTYPES, ["C", "F"], LAYOUTS, ["sort", "argsort"], [None, 1 << 20], valid=valid)
        for i, (dtype, order, (shape, axis), name, budget) in enumerate(cases):
            a = np.asarray(sample(dtype, shape, 50 + i), order=order)
            np.save(self.path("a.npy"), a)
            got = getattr(ooc, name)(self.path("a.npy"), axis=axis, memory_budget=budget, threads=4,
                                     tile_bytes="64K")
            with self.subTest(dtype=dtype, order=order, shape=shape, axis=axis, name=name, budget=budget):
                self.assertIsInstance(got, np.ndarray)
                self.assertTrue(bit_equal(got, expected_of(a, axis, name == "argsort")))

    def test_out_masks_and_errors(self):
        x = sample("<f4", (5000, 3), 9)
        np.save(self.path("x.npy"), x)
        arr = ooc.open(self.path("x.npy"))
        out = ooc.sort(arr[x[:, 0] > 0], axis=0, out=self.path("s.npy"))
        self.assertIsInstance(out, ooc.Array)
        self.assertTrue(bit_equal(np.load(self.path("s.npy")), np.sort(x[x[:, 0] > 0], axis=0, kind="stable")))
        self.assertTrue(bit_equal(ooc.argsort(arr[:, 1], axis=None), np.argsort(x[:, 1], kind="stable")))
        with self.assertRaises(np.AxisError) as caught:
            ooc.sort(arr, axis=2)
        self.assertEqual(str(caught.exception), "axis 2 is out of bounds for array of dimension 2")
        with self.assertRaises(ValueError):
            ooc.sort(arr, kind="bogus")
        self.assertEqual(self.leftovers(), [])


class UniqueBeyondTheTables(Case):
    """unique -o / ooc.unique(out=): more distinct values than the tables hold are sorted
    first (the runs of sort), then read once: np.unique's values (NaNs as one) and counts."""

    def test_cli_and_python(self):
        for i, dtype in enumerate(["<f8", ">f8", "<f4", ">i8", "<u4", ">i4", "<f2", "|u1", "|b1"]):
            x = sample(dtype, (150_001,), 200 + i)
            if dtype[1] in "iu":
                x = np.arange(x.size).astype(dtype)[::-1] % 100_003  # many distinct, some twice
            np.save(self.path("x.npy"), x)
            p = run("unique", self.path("x.npy"), "-o", self.path("u.npy"), "--memory", "1M", "--threads", "4",
                    "--json")
            values, counts = np.unique(x, return_counts=True)
            with self.subTest(dtype=dtype):
                got = np.load(self.path("u.npy"))
                self.assertTrue(np.array_equal(got, values, equal_nan=True), f"{got[:8]} {values[:8]}")
                self.assertEqual(__import__("json").loads(p.stdout)["sorted"], np.dtype(dtype).itemsize >= 4)
                if ooc is not None:
                    array, got_counts = ooc.unique(self.path("x.npy"), return_counts=True, out=self.path("v.npy"),
                                                   memory_budget=4 << 20, threads=4)
                    self.assertIsInstance(array, ooc.Array)
                    self.assertTrue(np.array_equal(np.load(self.path("v.npy")), values, equal_nan=True))
                    self.assertTrue(np.array_equal(got_counts, counts))
        self.assertEqual(self.leftovers(), [])

    def test_counts_too_many_to_print_leave_no_output(self):
        np.save(self.path("x.npy"), np.arange(1_100_000, dtype="<i8"))
        p = run("unique", self.path("x.npy"), "-o", self.path("u.npy"), "--counts", "--memory", "16M", check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("too many to print; run without --counts (no output written)", p.stderr)
        self.assertFalse(os.path.exists(self.path("u.npy")))
        self.assertEqual(self.leftovers(), [])


if __name__ == "__main__":
    unittest.main()
