"""Selections: 'x.npy[::5, 3]' wherever an array is named gives numpy's x[::5, 3].

For every form (slices with negative starts, stops and steps, single indices, one list,
an index array from a .npy), on C- and Fortran-order arrays of several dtypes and HDF5
datasets: reductions are numpy's bit for bit (sums too: ooc reads the selection in the
order numpy iterates it), `apply -o` writes numpy's values in numpy's shape, axis
reductions and eval take selections, and bad selections are one line, exit 2, nothing
written."""
import os
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import TempDir, loads, numpy_or_error, run, run_json, same_bits, same_scalar, sample, thin  # noqa: E402

TILE = ["--tile-bytes", "64K"]  # many tiles even for small selections
REDUCTIONS = {"sum": np.sum, "mean": np.mean, "min": np.min, "max": np.max, "argmax": np.argmax,
              "prod": np.prod, "count_nonzero": np.count_nonzero}

# (shape, selection text) pairs numpy and ooc both evaluate. (An empty x.npy[], which
# Python does not parse, is a usage error: test_cli_errors.py.)
SELECTIONS_2D = ["::5, 3", "1000:2000, [0, 4, 7]", ":, 10:20", "::-3, 5", "-1", "7", "[5, 1, 9, 3, 9]",
                 "-50:, ::-2", "3:900:7, -3:", ":, [0, -1, 2]", "::2", ":", "1:1", "[]", "10:0, 2",
                 "-5000:-4000:3, 39", "123, ::3", "[-1, 0, 1999]"]
SELECTIONS_3D = ["::2, 3, 1:5", "1, :, [1, 3, 5]", "[1, 5, 7], :, 2", ":, 2, [1, 3]", "[3, 0, 3], 5, 1:",
                 "-1, -1, -1", "::-1, ::7, ::-3", "4:9",
                 # a list in a middle axis, but with axes of length 1 numpy's result is C or F
                 ":, [3, 0, 2, 1], 3:4", ":, 2:3, [6, 5, 1, 0, 2, 3]", "1:2, [1, 2, 7, 9], :",
                 "[3, 0, 3], 1:2, 4:5", "2:3, [1, 2], 5:6"]
# numpy's result of these is neither C- nor F-contiguous (the list's axis is outermost in
# memory but not first in the shape): ooc reads them in the source's order, so their
# sums agree within rounding rather than bit for bit (docs/decisions/2026-11-30-selection-numpy-order.md).
NEITHER_C_NOR_F = [":, [1, 2, 7, 9], :", ":, :, [1, 2, 5]", "[3, 0, 3], ::2, 1:"]


def numpy_select(a, text):
    return eval(f"a[{text}]", {"a": a}) if text else a[()]


class SelectionTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, path, a, text, ops=("sum", "min", "argmax"), exact=True):
        """reduce and apply over path[text] against numpy's a[text]."""
        expected = numpy_select(a, text)
        spec = f"{path}[{text}]"
        info = run_json("info", spec)
        self.assertEqual(info["shape"], list(expected.shape), spec)
        self.assertEqual(info["dtype"], a.dtype.str if a.dtype.itemsize > 1 else "|" + a.dtype.str[1:])
        for op in ops:
            want = numpy_or_error(REDUCTIONS[op], expected)
            proc = run("reduce", op, spec, *TILE, "--json", "--quiet", check=False)
            if isinstance(want, ValueError):
                self.assertEqual(proc.returncode, 1, (spec, op, proc.stderr))
                continue
            self.assertEqual(proc.returncode, 0, (spec, op, proc.stderr))
            got = loads(proc.stdout)["value"]
            if exact or op != "sum":
                self.assertTrue(same_scalar(got, want), (spec, op, got, want))
            else:
                np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=spec)
        out = self.tmp.file("out.npy")
        proc = run("apply", "add-one", spec, "-o", out, *TILE, "--quiet", check=False)
        self.assertEqual(proc.returncode, 0, (spec, proc.stderr))
        written = np.load(out)
        self.assertEqual(written.shape, expected.shape, spec)
        self.assertTrue(same_bits(written, np.add(expected, 1)), spec)
        os.remove(out)

    def test_every_form_on_c_and_fortran_arrays_of_several_dtypes(self):
        for dtype, order in thin([("<f8", "C"), (">f4", "F"), ("<i4", "F"), ("|u1", "C"), ("<f2", "C")]):
            a = np.asarray(sample(dtype, (2000, 40), seed=1), order=order)
            path = self.tmp.save(f"a_{order}.npy", a)
            for text in SELECTIONS_2D:
                with self.subTest(dtype=dtype, order=order, selection=text):
                    self.check(path, a, text)

    def test_three_dimensional_arrays(self):
        for order in ("C", "F"):
            a = np.asarray(sample("<f8", (30, 20, 12), seed=2, nan=False), order=order)
            path = self.tmp.save(f"c_{order}.npy", a)
            for text in SELECTIONS_3D:
                with self.subTest(order=order, selection=text):
                    self.check(path, a, text)
            for text in NEITHER_C_NOR_F:
                with self.subTest(order=order, selection=text):
                    self.check(path, a, text, exact=False)

    def test_one_dimensional_and_bool_arrays(self):
        a = sample("<f8", (300001,), seed=3)
        path = self.tmp.save("v.npy", a)
        for text in ["::5", "1000:200000", "::-1", "-10:", "[3, 1, 4, 1, 5]", "12345"]:
            with self.subTest(selection=text):
                self.check(path, a, text, ops=("sum", "mean", "max", "argmax"))
        b = np.asarray(sample("|b1", (5000, 7), seed=4), order="F")
        path = self.tmp.save("b.npy", b)
        for text in ["::3, 2", ":, [6, 0]", "100:50:-1"]:
            with self.subTest(selection=text):
                self.check(path, b, text, ops=("sum", "count_nonzero", "min", "argmax"))

    def test_steps_starts_and_stops_near_the_ends_of_int64(self):
        a = sample("<f8", (20,), seed=13)
        path = self.tmp.save("v.npy", a)
        big = [2**63 - 1, -2**63 + 1, -2**63, 2**63 - 8, 2**62, -2**62]
        texts = [f"::{step}" for step in big]
        rng = np.random.default_rng(14)
        ends = ["", "0", "-1", "19", "-20", "-21", str(10**30), str(-10**30)] + [str(e) for e in big]
        for _ in range(30):
            start, stop = rng.choice(ends, 2)
            step = rng.choice([str(s) for s in big] + ["1", "-1", "3", "-3", str(10**30), str(-10**30)])
            texts.append(f"{start}:{stop}:{step}")
        for text in texts:
            with self.subTest(selection=text):
                self.check(path, a, text, ops=("sum", "max"))

    def test_index_arrays_from_npy_files(self):
        a = sample("<f8", (50000, 8), seed=5)
        path = self.tmp.save("a.npy", a)
        rows = np.sort(np.random.default_rng(6).choice(50000, 700, replace=False))
        for dtype in ("<i8", ">i4", "<u2", "|i1"):
            idx = (rows % 120 if dtype == "|i1" else rows).astype(dtype)
            idx_path = self.tmp.save(f"rows_{dtype[1:]}.npy", idx)
            expected = a[idx.astype(np.int64)]
            with self.subTest(dtype=dtype):
                got = run_json("reduce", "max", f"{path}[@{idx_path}]")["value"]
                self.assertTrue(same_scalar(got, expected.max()))
                got = run_json("reduce", "sum", f"{path}[@{idx_path}, 3]", *TILE)["value"]
                self.assertTrue(same_scalar(got, expected[:, 3].sum()))
        negative = self.tmp.save("neg.npy", np.array([-1, -50000, 5]))
        self.assertTrue(same_scalar(run_json("reduce", "sum", f"{path}[@{negative}]")["value"],
                                    a[[-1, -50000, 5]].sum()))

    def test_selections_spanning_many_tiles_and_threads_give_one_answer(self):
        a = sample("<f8", (400000, 10), seed=7)
        path = self.tmp.save("big.npy", a)
        spec = f"{path}[::3, 2:9]"
        expected = a[::3, 2:9].sum()
        for threads in ("1", "2", "7"):
            for tile in ("64K", "1M", "16M"):
                got = run_json("reduce", "sum", spec, "--threads", threads, "--tile-bytes", tile)["value"]
                self.assertTrue(same_scalar(got, expected), (threads, tile))
        got = run_json("reduce", "mean", spec, "--io", "direct")["value"]
        self.assertTrue(same_scalar(got, a[::3, 2:9].mean()))

    def test_axis_reductions_and_eval_take_selections(self):
        x = np.asarray(sample("<f8", (3000, 12), seed=8), order="F")
        y = sample("<f4", (3000, 12), seed=9)
        px, py = self.tmp.save("x.npy", x), self.tmp.save("y.npy", y)
        result = run_json("reduce", "mean", f"{px}[::2, 3:7]", "--axis", "0", *TILE)
        self.assertTrue(same_bits(np.array(result["value"]), x[::2, 3:7].mean(axis=0)))
        out = self.tmp.file("d.npy")
        run("eval", "a - b", f"a={px}[::2]", f"b={py}[1::2]", "-o", out, "--quiet")
        self.assertTrue(same_bits(np.load(out), x[::2] - y[1::2]))
        got = run_json("eval", "sum(a * b)", f"a={px}[:, 4]", f"b={py}[:, [5]]")["value"]
        self.assertTrue(same_scalar(got, np.sum(x[:, 4] * y[:, [5]])))
        got = run_json("eval", "a + 1", f"a={px}[7, 3]")["value"]
        self.assertTrue(same_scalar(got, x[7, 3] + 1))

    def test_hdf5_datasets_contiguous_and_chunked(self):
        a = sample(">f8", (4000, 30), seed=10)
        path = self.tmp.file("d.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("plain", data=a)
            f.create_dataset("g/chunked", data=a, chunks=(100, 10), compression="gzip")
        for name in ("/plain", "/g/chunked"):
            for text in ["::5, 3", "1000:2000, [0, 4, 7]", "::-7, ::-2", "[3999, 0, 17]"]:
                with self.subTest(dataset=name, selection=text):
                    self.check(f"{path}:{name}", a, text, ops=("sum", "max"))

    def test_empty_selections(self):
        a = sample("<f8", (100, 6), seed=11)
        path = self.tmp.save("a.npy", a)
        for text in ["5:5", "[]", "::-1, 3:3", "10:0"]:
            spec = f"{path}[{text}]"
            with self.subTest(selection=text):
                self.assertEqual(run_json("reduce", "sum", spec)["value"], 0.0)
                proc = run("reduce", "min", spec, check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)

    def test_bad_selections_are_one_line_exit_2_and_write_nothing(self):
        a = sample("<f8", (100, 6), seed=12)
        path = self.tmp.save("a.npy", a)
        floats = self.tmp.save("f.npy", np.array([1.0, 2.0]))
        matrix = self.tmp.save("m.npy", np.zeros((2, 2), np.int64))
        cases = {
            "100": "index 100 is out of bounds for axis 0 with size 100",
            "0, -7": "index -7 is out of bounds for axis 1 with size 6",
            "[1, 200]": "index 200 is out of bounds for axis 0 with size 100",
            "1, 2, 3": "too many indices for array: array is 2-dimensional, but 3 were indexed",
            "::0": "slice step cannot be zero",
            "[1, 2], [3, 4]": "only one index list",
            "...": "not supported",
            "None": "not supported",
            "1:2:3:4": "at most start:stop:step",
            "a": "is not an integer index",
            f"@{floats}": "must be of integer (or boolean) type",
            f"@{matrix}": "only 1-D index arrays",
            "@missing.npy": "missing.npy",
            "[[1, 2]]": "nested lists",
        }
        out = self.tmp.file("out.npy")
        for text, message in cases.items():
            spec = f"{path}[{text}]"
            for args in (["reduce", "sum", spec], ["apply", "add-one", spec, "-o", out], ["info", spec]):
                with self.subTest(selection=text, command=args[0]):
                    proc = run(*args, check=False)
                    self.assertEqual(proc.returncode, 2, proc.stderr)
                    lines = proc.stderr.splitlines()
                    self.assertEqual(len(lines), 1, proc.stderr)
                    self.assertIn(message, lines[0])
                    self.assertIn(path, lines[0])
                    self.assertFalse(os.path.exists(out))
        proc = run("apply", "add-one", f"{path}[::2]", "--in-place", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("cannot be modified in place", proc.stderr)
        np.testing.assert_array_equal(np.load(path), a)

    def test_verbose_says_how_the_selection_is_read(self):
        a = sample("<f8", (200000, 40), seed=13)
        path = self.tmp.save("wide.npy", a)
        # Rows 1000 apart are 320 KB apart: more than the gap read through.
        sparse = run("reduce", "sum", f"{path}[::1000, [0, 20]]", "--verbose").stderr
        self.assertIn("sparse: random access", sparse)
        dense = run("reduce", "sum", f"{path}[::5, 3]", "--verbose").stderr
        self.assertIn("dense: sequential readahead", dense)
        # Several columns of the same rows: read in one pass, numpy's bits at any tile size.
        columns = f"{path}[::5, [36, 0, 9, 18, 27]]"
        self.assertIn("one pass over the rows: 5 blocks of 40000 elements",
                      run("reduce", "sum", columns, "--verbose").stderr)
        expected = float(np.sum(a[::5, [36, 0, 9, 18, 27]]))
        for tile in ("64K", "1M", "16M"):
            self.assertEqual(run_json("reduce", "sum", columns, "--tile-bytes", tile)["value"], expected, tile)
        self.assertIn("40000 elements", dense)
        self.assertNotIn("selection", run("reduce", "sum", f"{path}[::5, 3]").stderr)
        out = self.tmp.file("o.npy")
        said = run("apply", "add-one", f"{path}[::5, 3]", "-o", out, "--verbose").stderr
        self.assertEqual(said.count("oocrun: selection [::5, 3]"), 1, said)

    def test_a_file_whose_name_ends_in_brackets_is_that_file(self):
        a = np.arange(10.0)
        path = self.tmp.save("odd[1].npy", a)
        self.assertEqual(run_json("reduce", "sum", path)["value"], 45.0)
        self.assertEqual(run_json("reduce", "sum", f"{path}[::2]")["value"], 20.0)


if __name__ == "__main__":
    unittest.main()
