"""oocrun apply: in place exactly when numpy's `a += C` works, with numpy's values, in
the file's own byte order; new outputs appear whole under their name; the input is
never touched by a run that writes elsewhere."""
import hashlib
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import DTYPES, TempDir, npy_bytes, run, same_scalar, sample  # noqa: E402


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class InPlaceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def in_place(self, op, constant, a, *extra):
        path = self.tmp.save("a.npy", a)
        expected = a.copy(order="K")
        with np.errstate(all="ignore"):
            if op.startswith("scale"):
                expected *= constant  # numpy's own in-place rules (same_kind casting)
            else:
                expected += constant
        run("apply", op, path, "--in-place", "--quiet", *extra)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), npy_bytes(expected), f"{op} in place on {a.dtype.str}")

    def test_add_one_in_place_matches_numpys_plus_equals_for_every_dtype_it_allows(self):
        for dtype in DTYPES:
            if dtype == "|b1":
                continue  # numpy refuses bool += 1; test_cli_errors checks that ooc does too
            self.in_place("add-one", 1, sample(dtype, (40000,), seed=3), "--tile-bytes", "16K")

    def test_in_place_without_a_journal_gives_the_same_bytes_and_leaves_no_journal(self):
        for dtype in ("<f8", ">f4", "<i2", "|u1", ">f2"):
            self.in_place("add-one", 1, sample(dtype, (40000,), seed=4), "--tile-bytes", "16K", "--no-journal")
        self.in_place("scale:3", 3, np.asfortranarray(sample(">i4", (900, 11), seed=9)), "--tile-bytes", "8K",
                      "--no-journal", "--threads", "3")
        self.assertEqual([n for n in os.listdir(self.tmp.path) if ".ooc-" in n], [])

    def test_in_place_keeps_a_big_endian_file_big_endian(self):
        a = sample(">f8", (3, 5), seed=1)
        self.in_place("add:2.5", 2.5, a)
        self.assertEqual(np.load(self.tmp.file("a.npy")).dtype.str, ">f8")

    def test_in_place_narrows_a_wider_result_as_numpy_does(self):
        self.in_place("add:300", 300, np.arange(-100, 100, dtype="i1"))
        self.in_place("add:70000", 70000, np.arange(0, 1000, dtype=">u2"))

    def test_in_place_on_a_fortran_matrix_spanning_tiles(self):
        self.in_place("scale:3", 3, np.asfortranarray(sample("<i4", (9000, 11), seed=8)), "--tile-bytes", "8K",
                      "--threads", "3")


class NewOutputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_run_into_a_new_file_leaves_the_input_bytes_unchanged(self):
        for dtype in ["<f8", ">i4", "|u1"]:
            src = self.tmp.save("in.npy", sample(dtype, (100000,)))
            before = digest(src)
            run("apply", "add-one", src, "-o", self.tmp.file("out.npy"), "--tile-bytes", "64K", "--quiet")
            self.assertEqual(digest(src), before)

    def test_an_existing_output_is_replaced_whole_and_no_temporaries_remain(self):
        src = self.tmp.save("in.npy", np.arange(50000, dtype="<f4"))
        out = self.tmp.save("out.npy", np.zeros(3))
        run("apply", "add:2", src, "-o", out, "--quiet")
        np.testing.assert_array_equal(np.load(out), np.arange(50000, dtype="<f4") + 2)
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["in.npy", "out.npy"])

    def test_output_permissions_follow_the_umask_as_np_save_does(self):
        src = self.tmp.save("in.npy", np.arange(10))
        out = self.tmp.file("out.npy")
        old = os.umask(0o022)
        try:
            run("apply", "add-one", src, "-o", out, "--quiet")
        finally:
            os.umask(old)
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o644)

    def test_progress_reports_on_stderr_and_json_describes_the_result(self):
        src = self.tmp.save("in.npy", np.arange(200000, dtype="<f8"))
        out = self.tmp.file("out.npy")
        proc = run("apply", "add-one", src, "-o", out, "--progress", "--json", "--tile-bytes", "64K")
        self.assertIn("progress: 100%", proc.stderr)
        import json
        result = json.loads(proc.stdout)
        self.assertEqual(result["output"], out)
        self.assertEqual(result["dtype"], "<f8")
        self.assertEqual(result["shape"], [200000])
        result = json.loads(run("apply", "cast:>f4", src, "-o", out, "--overwrite", "--json").stdout)
        self.assertEqual(result["dtype"], ">f4")  # the file's descr, byte order included
        self.assertEqual(np.load(out).dtype.str, ">f4")

    def test_quiet_prints_nothing_on_success(self):
        src = self.tmp.save("in.npy", np.arange(10))
        proc = run("apply", "add-one", src, "-o", self.tmp.file("o.npy"), "--quiet")
        self.assertEqual((proc.stdout, proc.stderr), ("", ""))



class DirectIoTest(unittest.TestCase):
    """--io direct (O_DIRECT into aligned buffers) gives the same bytes as --io mmap."""

    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def test_outputs_are_identical_to_mapped_ones_at_any_offset_and_size(self):
        shapes = [(), (0,), (1,), (511,), (4096,), (123457,), (301, 17)]
        for dtype, shape, order in [("<f8", s, "C") for s in shapes] + [(">i2", (999, 33), "F"), ("|u1", (70001,), "C"),
                                                                         ("<f2", (8193,), "C")]:
            a = np.asarray(sample(dtype, shape, seed=11), order=order)
            src = self.tmp.save("in.npy", a)
            outs = {}
            for io in ("mmap", "direct"):
                out = self.tmp.file(f"{io}.npy")
                run("apply", "scale:3", src, "-o", out, "--io", io, "--tile-bytes", "64K", "--quiet")
                with open(out, "rb") as f:
                    outs[io] = f.read()
            with np.errstate(all="ignore"):
                expected = npy_bytes(np.asarray(a * 3))
            with self.subTest(dtype=dtype, shape=shape, order=order):
                self.assertEqual(outs["direct"], expected)
                self.assertEqual(outs["mmap"], expected)

    def test_direct_reads_give_numpys_reductions(self):
        for dtype in ["<f8", ">f4", "<i8", "|b1"]:
            a = sample(dtype, (200003,), seed=12)
            src = self.tmp.save("in.npy", a)
            for threads in ("1", "2", "7"):
                got = json.loads(run("reduce", "sum", src, "--io", "direct", "--json", "--quiet",
                                     "--tile-bytes", "64K", "--threads", threads).stdout)
                self.assertTrue(same_scalar(got["value"], a.sum()), (dtype, threads))

    def test_direct_output_into_an_existing_hdf5_file_keeps_the_bytes_around_it(self):
        import h5py
        path = self.tmp.file("f.h5")
        with h5py.File(path, "w") as f:
            f["before"] = np.arange(1000.0)
            f.attrs["note"] = "x" * 3000
        src = self.tmp.save("in.npy", sample("<f8", (100003,), seed=13))
        run("apply", "add-one", src, "-o", f"{path}:/out", "--io", "direct", "--tile-bytes", "64K", "--quiet")
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["out"][()], np.load(src) + 1)
            np.testing.assert_array_equal(f["before"][()], np.arange(1000.0))
            self.assertEqual(f.attrs["note"], "x" * 3000)
        got = json.loads(run("reduce", "sum", f"{path}:/out", "--io", "direct", "--json", "--quiet").stdout)
        self.assertTrue(same_scalar(got["value"], (np.load(src) + 1).sum()))

    def test_a_file_system_without_o_direct_falls_back_to_the_mapping(self):
        if not os.path.isdir("/dev/shm"):
            self.skipTest("no /dev/shm tmpfs here")
        tmp = TempDir.__new__(TempDir)
        import tempfile
        tmp._dir = tempfile.TemporaryDirectory(prefix="ooc-test-", dir="/dev/shm")
        tmp.path = tmp._dir.name
        try:
            a = sample("<f8", (50000,), seed=14)
            src = tmp.save("in.npy", a)
            out = tmp.file("out.npy")
            run("apply", "add-one", src, "-o", out, "--io", "direct", "--quiet")
            np.testing.assert_array_equal(np.load(out), a + 1)
            got = json.loads(run("reduce", "sum", src, "--io", "direct", "--json", "--quiet").stdout)
            self.assertTrue(same_scalar(got["value"], a.sum()))
        finally:
            tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
