"""Boolean masks: 'X.npy[@m.npy]' wherever an array is named is numpy's X[m].

A bool .npy or HDF5 dataset named with @ inside a selection is a mask: a 1-d one over an
axis keeps the rows (or columns) where it is true, one of several dimensions covers as
many axes, and it combines with slices and indices as numpy's boolean indexing does (as
the index arrays np.nonzero(m) would). Swept over every dtype and byte order, C and
Fortran order, masks all false, all true, dense and sparse, in every position, both ways
a mask is read (small ones become an index list; OOC_MASK_LIST_TRUES=0 streams every
mask): reductions are numpy's bit for bit, `apply -o` writes numpy's values in numpy's
shape, and bad masks are one line with numpy's IndexError text, exit 2, nothing written.
The Python module's a[m] takes a bool ndarray or a bool ooc.Array; a mask that does not
fit raises numpy's IndexError."""
import gc
import os
import subprocess
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import (DTYPES, TempDir, loads, numpy_or_error, run, run_json, same_bits, same_scalar,  # noqa: E402
                     sample, sweep, thin)

TILE = ["--tile-bytes", "64K"]  # many tiles even for small selections
STREAMED = {"OOC_MASK_LIST_TRUES": "0"}
ROWS, COLS = 3001, 7
DENSITIES = ["none", "all", "dense", "sparse"]
# Where the mask stands: {rows} is a mask over axis 0, {cols} over axis 1, {cells} of the
# whole shape.
POSITIONS = ["{rows}", "{rows}, 3", "{rows}, 1::2", "-2, {cols}", "::-3, {cols}", ":, {cols}", "{cells}",
             "{rows}, :"]


def density_mask(density, shape, seed):
    rng = np.random.default_rng(seed)
    if density == "none":
        return np.zeros(shape, bool)
    if density == "all":
        return np.ones(shape, bool)
    return rng.random(shape) < (0.6 if density == "dense" else 0.01)


def numpy_select(a, text, masks):
    """a[text] in numpy, with @NAME standing for masks[NAME]."""
    for name, mask in masks.items():
        text = text.replace("{" + name + "}", f"masks[{name!r}]")
    return eval(f"a[{text}]", {"a": a, "masks": masks})


class MaskTest(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, path, a, text, masks, mask_paths, ops=("sum",), exact=True, environment=None):
        """reduce and apply over path[text] against numpy's a[text]."""
        expected = numpy_select(a, text, masks)
        spec = f"{path}[{text.format(**{name: '@' + p for name, p in mask_paths.items()})}]"
        for op in ops:
            want = numpy_or_error(getattr(np, op), expected)
            proc = run("reduce", op, spec, *TILE, "--json", "--quiet", check=False, environment=environment)
            if isinstance(want, ValueError):  # the minimum of nothing
                self.assertEqual(proc.returncode, 1, (spec, op, proc.stderr))
                continue
            self.assertEqual(proc.returncode, 0, (spec, op, proc.stderr))
            got = loads(proc.stdout)["value"]
            if exact or op != "sum":
                self.assertTrue(same_scalar(got, want), (spec, op, got, want))
            else:
                np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=spec)
        out = self.tmp.file("out.npy")
        run("apply", "add-one", spec, "-o", out, *TILE, "--quiet", environment=environment)
        written = np.load(out)
        self.assertEqual(written.shape, expected.shape, spec)
        self.assertTrue(same_bits(written, np.add(expected, 1)), spec)
        os.remove(out)

    def save_masks(self, density, seed, cells_order="C"):
        masks = {"rows": density_mask(density, ROWS, seed), "cols": density_mask(density, COLS, seed + 1),
                 "cells": np.asarray(density_mask(density, (ROWS, COLS), seed + 2), order=cells_order)}
        paths = {name: self.tmp.save(f"{name}_{density}_{cells_order}.npy", mask) for name, mask in masks.items()}
        return masks, paths

    def test_every_dtype_order_density_and_position(self):
        # All pairs of dtype, order, density and way of reading; the positions taken in
        # turn (each meets most dtypes, both orders and every density).
        cases = sweep(DTYPES, ["C", "F"], DENSITIES, [False, True])
        arrays, masks = {}, {}
        for i, (dtype, order, density, streamed) in enumerate(thin(cases)):
            text = POSITIONS[i % len(POSITIONS)]
            with self.subTest(dtype=dtype, order=order, selection=text, density=density, streamed=streamed):
                if (dtype, order) not in arrays:
                    a = np.asarray(sample(dtype, (ROWS, COLS), seed=1), order=order)
                    arrays[dtype, order] = a, self.tmp.save(f"a_{dtype[1:]}_{order}.npy", a)
                if (density, order) not in masks:
                    masks[density, order] = self.save_masks(density, seed=len(masks), cells_order=order)
                a, path = arrays[dtype, order]
                self.check(path, a, text, *masks[density, order], environment=STREAMED if streamed else None)

    def test_more_reductions_and_tile_sizes(self):
        a = sample("<f8", (40000, 5), seed=2, nan=False)
        path = self.tmp.save("a.npy", a)
        masks = {"rows": density_mask("dense", 40000, 3), "cells": density_mask("dense", (40000, 5), 4)}
        paths = {name: self.tmp.save(f"{name}.npy", m) for name, m in masks.items()}
        for streamed in (False, True):
            for text in ["{rows}", "{rows}, 4", "{cells}"]:
                with self.subTest(selection=text, streamed=streamed):
                    self.check(path, a, text, masks, paths, ops=("sum", "mean", "min", "max", "argmax"),
                               environment=STREAMED if streamed else None)
        spec = f"{path}[@{paths['rows']}]"
        expected = float(np.sum(a[masks["rows"]]))
        for threads in ("1", "2", "7"):
            for tile in ("8K", "64K", "16M"):
                got = run_json("reduce", "sum", spec, "--threads", threads, "--tile-bytes", tile,
                               environment=STREAMED)["value"]
                self.assertEqual(got, expected, (threads, tile))

    def test_masks_of_several_dimensions_in_a_cube(self):
        for order in ("C", "F"):
            a = np.asarray(sample("<f8", (30, 20, 12), seed=5), order=order)
            path = self.tmp.save(f"c_{order}.npy", a)
            masks = {"lead": density_mask("dense", (30, 20), 6), "tail": density_mask("dense", (20, 12), 7),
                     "whole": density_mask("dense", (30, 20, 12), 8), "mid": density_mask("dense", 20, 9),
                     "last": density_mask("dense", 12, 10)}
            masks["whole_f"] = np.asfortranarray(masks["whole"])
            paths = {name: self.tmp.save(f"{name}_{order}.npy", m) for name, m in masks.items()}
            for streamed in (False, True):
                env = STREAMED if streamed else None
                for text in ["{lead}", "{lead}, 3", "{lead}, ::-5", "::2, {tail}", "4, {tail}", "{whole}",
                             "{whole_f}", "1:9, {mid}, 7", "-1, ::3, {last}", "2, {mid}"]:
                    with self.subTest(order=order, selection=text, streamed=streamed):
                        self.check(path, a, text, masks, paths, environment=env)
                # numpy's result of these is neither C- nor F-contiguous: sums agree within rounding.
                for text in [":, {mid}, :", "::2, :, {last}"]:
                    with self.subTest(order=order, selection=text, streamed=streamed):
                        self.check(path, a, text, masks, paths, exact=False, environment=env)

    def test_hdf5_masks_and_data(self):
        a = sample(">f8", (4000, 30), seed=11)
        m = density_mask("dense", 4000, 12)
        path = self.tmp.file("d.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("plain", data=a)
            f.create_dataset("g/chunked", data=a, chunks=(100, 10), compression="gzip")
            f.create_dataset("mask", data=m)
            f.create_dataset("chunked_mask", data=m, chunks=(512,), compression="gzip")
        npy = self.tmp.save("a.npy", a)
        for data in (f"{path}:/plain", f"{path}:/g/chunked", npy):
            for mask in ("mask", "chunked_mask"):
                for streamed in (False, True):
                    with self.subTest(data=data, mask=mask, streamed=streamed):
                        self.check(data, a, "{m}, 2:9", {"m": m}, {"m": f"{path}:/{mask}"},
                                   environment=STREAMED if streamed else None)

    def test_a_mask_of_a_selection_and_a_selection_of_a_masked_array(self):
        a = sample("<i4", (5000, 6), seed=13)
        m = density_mask("dense", 10000, 14)
        path, mask = self.tmp.save("a.npy", a), self.tmp.save("m.npy", m)
        got = run_json("reduce", "sum", f"{path}[@{mask}[::2]]", environment=STREAMED)["value"]
        self.assertTrue(same_scalar(got, np.sum(a[m[::2]])))

    def test_verbose_says_the_mask_is_streamed(self):
        a = sample("<f8", (200000, 4), seed=15)
        m = density_mask("dense", 200000, 16)  # more true elements than a mask turned into a list has
        path, mask = self.tmp.save("a.npy", a), self.tmp.save("m.npy", m)
        said = run("reduce", "sum", f"{path}[@{mask}]", "--verbose").stderr
        self.assertIn(f"mask {mask}: {int(m.sum())} of 200000 true, streamed beside the data", said)

    def test_bad_masks_are_one_line_exit_2_and_write_nothing(self):
        a = sample("<f8", (100, 6), seed=17)
        path = self.tmp.save("a.npy", a)
        short = self.tmp.save("short.npy", np.ones(99, bool))
        wide = self.tmp.save("wide.npy", np.ones((100, 7), bool))
        deep = self.tmp.save("deep.npy", np.ones((100, 6, 2), bool))
        floats = self.tmp.save("floats.npy", np.ones(100))
        zero_d = self.tmp.save("zero_d.npy", np.array(True))
        truncated = self.tmp.save("truncated.npy", np.ones(100, bool))
        os.truncate(truncated, os.path.getsize(truncated) - 10)
        cases = {
            f"@{short}": "boolean index did not match indexed array along dimension 0; dimension is 100 but "
                         "corresponding boolean dimension is 99",
            f"3, @{short}": "boolean index did not match indexed array along dimension 1; dimension is 6 but "
                            "corresponding boolean dimension is 99",
            f"@{wide}": "along dimension 1; dimension is 6 but corresponding boolean dimension is 7",
            f"@{deep}": "too many indices for array: array is 2-dimensional, but 3 were indexed",
            f"@{floats}": "arrays used as indices must be of integer (or boolean) type",
            f"@{zero_d}": "0-d boolean index",
            f"@{short}, @{short}": "only one index list, index array or mask",
            f"@{self.tmp.file('missing.npy')}": "missing.npy",
            f"@{truncated}": "truncated.npy",
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
                    self.assertEqual(sorted(os.listdir(self.tmp.path)).count("out.npy"), 0)
        self.assertEqual([n for n in os.listdir(self.tmp.path) if ".ooc-" in n], [])

    def test_a_mask_that_shrinks_under_a_run_fails_it_naming_the_mask(self):
        # The mask is counted when the selection is made; a run that then finds fewer true
        # elements (its file cut short: zeros where it was) fails before writing anything.
        a = sample("<f8", (2000000, 2), seed=18)
        m = np.ones(2000000, bool)
        path, mask = self.tmp.save("a.npy", a), self.tmp.save("m.npy", m)
        out = self.tmp.file("out.npy")
        # The mask must shrink after the count and before the read: a child waits for the
        # output's hidden temporary (made once the selection is), then cuts the mask.
        script = (f"import os, time\n"
                  f"d, deadline = {self.tmp.path!r}, time.time() + 20\n"
                  f"while not [n for n in os.listdir(d) if n.startswith('.out.npy')] and time.time() < deadline:\n"
                  f"    time.sleep(0.0002)\n"
                  f"os.truncate({mask!r}, 128 + 1000)\n")
        cutter = subprocess.Popen([sys.executable, "-c", script])
        proc = run("apply", "add-one", f"{path}[@{mask}]", "-o", out, "--threads", "1", "--tile-bytes", "8K",
                   check=False, environment=STREAMED)
        cutter.wait()
        if proc.returncode == 0:
            self.skipTest("the run finished before the mask was cut")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        self.assertIn(f"{mask}: file shrank while being read", proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_mask_rewritten_under_a_copy_fails_it_and_leaves_nothing(self):
        # The mask keeps its size but loses true elements after it was counted (written in
        # place by another process): the copy fails naming it, and neither the output nor
        # its hidden temporary is left.
        a = sample("<f8", (2000000, 2), seed=23)
        path, mask = self.tmp.save("a.npy", a), self.tmp.save("m.npy", np.ones(2000000, bool))
        out = self.tmp.file("out.npy")
        script = (f"import os, time\n"
                  f"d, deadline = {self.tmp.path!r}, time.time() + 20\n"
                  f"while not [n for n in os.listdir(d) if n.startswith('.out.npy')] and time.time() < deadline:\n"
                  f"    time.sleep(0.0002)\n"
                  f"with open({mask!r}, 'r+b') as f:\n"
                  f"    f.seek(os.path.getsize({mask!r}) - 1000000)\n"
                  f"    f.write(bytes(1000000))\n")
        cutter = subprocess.Popen([sys.executable, "-c", script])
        proc = run("copy", f"{path}[@{mask}]", "-o", out, "--threads", "1", "--tile-bytes", "8K",
                   check=False, environment=STREAMED)
        cutter.wait()
        if proc.returncode == 0:
            self.skipTest("the copy finished before the mask was rewritten")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        self.assertIn(f"{mask}: changed while being read", proc.stderr)
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["a.npy", "m.npy"])


class PythonMaskTest(unittest.TestCase):
    """ooc.Array[m]: a bool ndarray (or list of bools) or a bool ooc.Array, as numpy's a[m]."""

    @classmethod
    def setUpClass(cls):
        try:
            import ooc
        except ImportError as e:
            raise unittest.SkipTest(f"the Python module is not built here ({e})")
        cls.ooc = ooc

    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def test_masks_in_memory_and_in_files(self):
        ooc = self.ooc
        for dtype, order in thin([("<f8", "C"), (">f4", "F"), ("<i2", "C"), ("|b1", "F"), ("<u8", "F"), ("<f2", "C")]):
            a = np.asarray(sample(dtype, (2000, 9), seed=19), order=order)
            x = ooc.open(self.tmp.save(f"a_{order}.npy", a))
            rows = density_mask("dense", 2000, 20)
            cols = density_mask("dense", 9, 21)
            cells = np.asarray(density_mask("sparse", (2000, 9), 22), order=order)
            file_rows = ooc.open(self.tmp.save("rows.npy", rows))
            keys = [(rows, rows), ((slice(None), cols.tolist()), (slice(None), cols)), ((rows, 4), (rows, 4)),
                    ((slice(None, None, -2), cols), (slice(None, None, -2), cols)), (cells, cells),
                    ((Ellipsis, cols), (Ellipsis, cols)), (file_rows, rows), ((file_rows, -1), (rows, -1)),
                    (np.zeros(2000, bool), np.zeros(2000, bool))]
            for key, numpy_key in keys:
                with self.subTest(dtype=dtype, order=order, key=repr(key)[:60]):
                    expected = a[numpy_key]
                    got = x[key]
                    self.assertEqual(got.shape, expected.shape)
                    self.assertTrue(same_bits(np.asarray(got), expected))
                    self.assertEqual(ooc.sum(got).tobytes(), np.sum(expected).tobytes())
            chained = x[::3][rows[::3]][:, cols]
            self.assertTrue(same_bits(np.asarray(chained), a[::3][rows[::3]][:, cols]))

    def test_wrong_masks_raise_numpys_index_errors(self):
        ooc = self.ooc
        a = np.zeros((100, 8))
        x = ooc.open(self.tmp.save("a.npy", a))
        bad = [np.ones(99, bool), (slice(None), np.ones(9, bool)), np.ones((100, 9), bool),
               np.ones((100, 8, 2), bool), np.ones(100), ooc.open(self.tmp.save("f.npy", np.ones(100))),
               ooc.open(self.tmp.save("short.npy", np.ones(99, bool))), (3, np.ones(7, bool))]
        for key in bad:
            numpy_key = tuple(np.asarray(k) if isinstance(k, ooc.Array) else k for k in key) \
                if isinstance(key, tuple) else (np.asarray(key) if isinstance(key, ooc.Array) else key)
            with self.assertRaises(IndexError) as numpy_error:
                a[numpy_key]
            with self.subTest(key=repr(key)[:60]):
                with self.assertRaises(IndexError) as ooc_error:
                    x[key]
                self.assertEqual(str(ooc_error.exception), str(numpy_error.exception))

    def test_index_errors_are_numpys_exception_and_text(self):
        # Where numpy raises IndexError (or TypeError), a[key] raises it with numpy's words
        # alone; the library's index errors are of their own kind, not its usage errors.
        ooc = self.ooc
        a = np.arange(40.0).reshape(10, 4)
        path = self.tmp.save("a.npy", a)
        x = ooc.open(path)
        rows = ooc.open(self.tmp.save("rows.npy", np.array([0, 10])))
        floats = ooc.open(self.tmp.save("floats.npy", np.ones(10)))
        keys = [10, -11, (1, 2, 3), (slice(None), 4), (0, -5), [0, 10], (slice(None), [1, -5]), ([2, 3], 9),
                (slice(2, None), [4]), 0.5, "a", [0.5], [1, "a"], np.array([1.0]), (1, 0.5), slice(0.5, 2),
                (Ellipsis, 4), (rows,), (floats,), (slice(None), rows)]
        for key in keys:
            numpy_key = tuple(np.asarray(k) if isinstance(k, ooc.Array) else k for k in key) \
                if isinstance(key, tuple) else key
            with self.subTest(key=repr(key)[:60]):
                with self.assertRaises((IndexError, TypeError)) as numpy_error:
                    a[numpy_key]
                with self.assertRaises(Exception) as ooc_error:
                    x[key]
                self.assertIs(type(ooc_error.exception), type(numpy_error.exception))
                self.assertEqual(str(ooc_error.exception), str(numpy_error.exception))
        # the same selections written as text, and their errors' kind
        for text, numpy_key in [("10", 10), (":, 4", (slice(None), 4)), ("0, 0, 0", (0, 0, 0)),
                                (f"@{rows.path}", np.array([0, 10])), (f"@{floats.path}", np.ones(10))]:
            with self.subTest(text=text):
                with self.assertRaises(IndexError) as numpy_error:
                    a[numpy_key]
                with self.assertRaises(IndexError) as ooc_error:
                    ooc.open(f"{path}[{text}]")
                self.assertEqual(str(ooc_error.exception), str(numpy_error.exception))
                self.assertEqual(ooc_error.exception.kind, "index")
        with self.assertRaisesRegex(ValueError, "slice step cannot be zero"):  # numpy's ValueError
            ooc.open(f"{path}[::0]")

    def test_a_mask_file_changed_during_a_call_raises_and_leaves_nothing(self):
        # Rewritten in place (its last half set false) once the run has started, from the
        # run's own progress callback: the call raises ooc.Error naming the mask, and the
        # copy leaves no file.
        ooc = self.ooc
        x = ooc.open(self.tmp.save("a.npy", sample("<f8", (1 << 20, 2), seed=24)))
        mask_path = self.tmp.save("m.npy", np.ones(1 << 20, bool))
        m = ooc.open(mask_path)
        out = self.tmp.file("out.npy")
        for shrink in (False, True):
            np.save(mask_path, np.ones(1 << 20, bool))
            rewritten = []

            def rewrite(done, total):
                if not rewritten:
                    with open(mask_path, "r+b") as f:
                        if shrink:
                            f.truncate(os.path.getsize(mask_path) - (1 << 19))
                        else:
                            f.seek(-(1 << 19), os.SEEK_END)
                            f.write(bytes(1 << 19))
                    rewritten.append(done)
            with self.subTest(shrink=shrink):
                with self.assertRaises(ooc.Error) as raised:  # 2^20 true elements: streamed
                    ooc.copy(x[m], out=out, threads=1, tile_bytes="64K", progress=rewrite)
                self.assertLess(rewritten[0], 1 << 23)
                said = "file shrank while being read" if shrink else "changed while being read"
                self.assertIn(f"{mask_path}: {said}", str(raised.exception))
                self.assertEqual(sorted(os.listdir(self.tmp.path)), ["a.npy", "m.npy"])

    def test_an_in_memory_mask_leaves_nothing_behind(self):
        ooc = self.ooc
        x = ooc.open(self.tmp.save("a.npy", np.arange(1000.0)))
        fds = len(os.listdir("/proc/self/fd"))
        m = np.arange(1000) % 7 == 0
        view = x[m]
        self.assertEqual(float(ooc.sum(view)), float(np.arange(1000.0)[m].sum()))
        again = view[::2]  # a selection of it keeps the mask alive
        del view
        gc.collect()
        self.assertTrue(np.array_equal(np.asarray(again), np.arange(1000.0)[m][::2]))
        del again
        gc.collect()
        self.assertEqual(len(os.listdir("/proc/self/fd")), fds)
        self.assertEqual(os.listdir(self.tmp.path), ["a.npy"])


if __name__ == "__main__":
    unittest.main()
