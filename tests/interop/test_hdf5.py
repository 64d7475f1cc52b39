"""HDF5 through ooc gives what h5py + numpy give: contiguous datasets are mapped,
chunked and compressed ones streamed, outputs are datasets h5py reads, and files are
never damaged - written ones keep their other objects, read ones keep every byte."""
import ctypes
import ctypes.util
import hashlib
import itertools
import json
import os
import struct
import sys
import unittest
import warnings

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import DTYPES, SANITIZED, TempDir, run, run_json, same_bits, same_scalar, sample, sweep  # noqa: E402

REDUCTIONS = {"sum": np.sum, "mean": np.mean, "min": np.min, "max": np.max}


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def contents(path):
    """Every object's values and attributes, for comparing a file before and after."""
    found = {}
    with h5py.File(path, "r") as f:
        found["/@"] = {k: np.asarray(v).tobytes() for k, v in f.attrs.items()}

        def visit(name, obj):
            attrs = {k: np.asarray(v).tobytes() for k, v in obj.attrs.items()}
            data = obj[()].tobytes() if isinstance(obj, h5py.Dataset) and obj.shape is not None else None
            found[name] = (type(obj).__name__, attrs, data, getattr(obj, "dtype", None))
        f.visititems(visit)
    return found


# The filter pipelines ooc decodes itself, as h5py writes them (the plugin filters
# through Debian's hdf5-filter-plugin, hdf5-filter-plugin-blosc-serial, hdf5-plugin-lzf).
LZ4, BLOSC = 32004, 32001
BLOSC_CODECS = {"blosclz": 0, "lz4": 1, "zlib": 4, "zstd": 5}
CODECS = {
    "gzip1": dict(compression="gzip", compression_opts=1),
    "gzip1_shuffle": dict(compression="gzip", compression_opts=1, shuffle=True),
    "gzip9_shuffle_fletcher": dict(compression="gzip", compression_opts=9, shuffle=True, fletcher32=True),
    "fletcher": dict(fletcher32=True),
    "shuffle": dict(shuffle=True),
    "lzf": dict(compression="lzf"),
    "lzf_shuffle_fletcher": dict(compression="lzf", shuffle=True, fletcher32=True),
    "lz4": dict(compression=LZ4),
    "lz4_shuffle": dict(compression=LZ4, shuffle=True),
    "blosc_lz4_shuffle": dict(compression=BLOSC, compression_opts=(0, 0, 0, 0, 5, 1, BLOSC_CODECS["lz4"])),
    "blosc_zstd_1_shuffle": dict(compression=BLOSC, compression_opts=(0, 0, 0, 0, 1, 1, BLOSC_CODECS["zstd"])),
    "blosc_zlib_bitshuffle": dict(compression=BLOSC, compression_opts=(0, 0, 0, 0, 5, 2, BLOSC_CODECS["zlib"])),
    "blosc_blosclz_noshuffle": dict(compression=BLOSC, compression_opts=(0, 0, 0, 0, 9, 0, BLOSC_CODECS["blosclz"])),
    "blosc_zstd_fletcher": dict(compression=BLOSC, compression_opts=(0, 0, 0, 0, 3, 1, BLOSC_CODECS["zstd"]),
                                fletcher32=True),
}


def available(kwargs):
    c = kwargs.get("compression")
    return not isinstance(c, int) or h5py.h5z.filter_avail(c)


class Hdf5Case(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()

    def check_reductions(self, spec, a, *extra, ops=REDUCTIONS):
        for op in ops:
            fn = REDUCTIONS[op]
            if a.size == 0 and op in ("min", "max"):
                continue
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                expected = fn(a)
            got = run_json("reduce", op, spec, *extra)
            with self.subTest(spec=spec, op=op, dtype=a.dtype.str, shape=a.shape, extra=extra):
                self.assertEqual(got["dtype"], np.asarray(expected).dtype.name)
                self.assertTrue(same_scalar(got["value"], expected), f"ooc {got['value']!r} numpy {expected!r}")


class ReadTest(Hdf5Case):
    def test_contiguous_datasets_of_every_dtype_in_nested_groups_reduce_as_numpy(self):
        path = self.tmp.file("all.h5")
        arrays = {}
        with h5py.File(path, "w") as f:
            for i, dtype in enumerate(DTYPES):
                a = sample(dtype, (3, 4, 5) if i % 2 else (41,), seed=i)
                name = f"/run{i % 3}/deep/d{i}"
                f.create_dataset(name, data=a)
                arrays[name] = a
        before = digest(path)
        for i, (name, a) in enumerate(arrays.items()):
            info = run_json("info", f"{path}:{name}")
            self.assertEqual(info["dtype"], np.dtype(a.dtype).str if a.dtype.itemsize > 1 else "|" + a.dtype.str[1:])
            self.assertEqual(info["shape"], list(a.shape))
            self.assertTrue(info["mappable"])
            # A mapped dataset is read as a .npy file is (whose every op on every dtype
            # test_npy_interop.py proves): one reduction each, in turn.
            self.check_reductions(f"{path}:{name}", a, ops=[list(REDUCTIONS)[i % len(REDUCTIONS)]])
        self.assertEqual(digest(path), before, "reading changed the file")

    def test_chunked_and_compressed_datasets_stream_to_numpys_answers(self):
        path = self.tmp.file("chunked.h5")
        cases = {
            "gzip_1d": (sample("<f8", (200003,), seed=1), dict(chunks=(7000,), compression="gzip")),
            "plain_1d": (sample(">f4", (150001,), seed=2), dict(chunks=(4096,))),
            "shuffle_2d": (sample("<i4", (1001, 257), seed=3), dict(chunks=(64, 50), compression="gzip", shuffle=True)),
            "cube_3d": (sample(">f8", (37, 41, 43), seed=4), dict(chunks=(5, 7, 11), compression="gzip")),
            "bool_2d": (sample("|b1", (300, 301), seed=5), dict(chunks=(30, 30))),
            "half_2d": (sample("<f2", (500, 300), seed=6), dict(chunks=(100, 100), compression="gzip")),
        }
        with h5py.File(path, "w") as f:
            for name, (a, kw) in cases.items():
                f.create_dataset(name, data=a, **kw)
        before = digest(path)
        # Small tiles cut chunks and rows in the middle; several thread counts: each
        # dataset with each of them and each reduction.
        runs = [(), ("--tile-bytes", "64K", "--threads", "1"), ("--tile-bytes", "64K", "--threads", "7")]
        for name, extra, op in sweep(cases, runs, REDUCTIONS):
            self.check_reductions(f"{path}:/{name}", cases[name][0], *extra, ops=[op])
        for name, (a, _) in cases.items():
            spec = f"{path}:/{name}"
            self.assertFalse(run_json("info", spec)["mappable"])
            # Along an axis too: the slabs of a chunked dataset are read as a mapped array's.
            for extra in (["--tile-bytes", "64K"], ["--io", "direct"]):
                result = run_json("reduce", "sum", spec, "--axis", str(a.ndim - 1), *extra)
                self.assertTrue(same_bits(np.array(result["value"], a.sum(axis=-1).dtype), a.sum(axis=-1)), name)
        self.assertEqual(digest(path), before, "reading changed the file")

    def test_empty_scalar_and_never_written_datasets(self):
        path = self.tmp.file("odd.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("empty", shape=(0,), dtype="f8")
            f.create_dataset("empty_chunked", shape=(0, 4), dtype="i2", chunks=(1, 4), maxshape=(None, 4))
            f["scalar"] = np.float32(2.5)
            f.create_dataset("unwritten", shape=(5, 3), dtype="i4", fillvalue=7)
            f.create_dataset("unwritten_chunked", shape=(100,), dtype="f8", chunks=(10,), fillvalue=1.5)
        for name in ["empty", "empty_chunked", "scalar", "unwritten", "unwritten_chunked"]:
            with h5py.File(path, "r") as f:
                a = f[name][()]
            self.check_reductions(f"{path}:/{name}", np.asarray(a))

    def test_info_lists_every_dataset_with_layout_and_whether_it_maps(self):
        path = self.tmp.file("list.h5")
        with h5py.File(path, "w") as f:
            f["a"] = np.arange(3)
            f.create_dataset("g/c", data=np.arange(10.0), chunks=(5,), compression="gzip")
            f["s"] = np.array([b"text"])
        info = run_json("info", path)
        by_name = {d["path"]: d for d in info["datasets"]}
        self.assertEqual(sorted(by_name), [f"{path}:/a", f"{path}:/g/c", f"{path}:/s"])
        self.assertEqual(by_name[f"{path}:/g/c"]["layout"], "chunked")
        self.assertEqual(by_name[f"{path}:/g/c"]["filters"], ["deflate"])
        self.assertTrue(by_name[f"{path}:/a"]["mappable"])
        self.assertIsNone(by_name[f"{path}:/s"]["dtype"])
        text = run("info", path).stdout
        self.assertIn("3 dataset(s)", text)

    def make_linked_files(self):
        """link.h5 holds a big dataset of its own, an external link to a dataset of
        target.h5 (named as h5py users do, relative to the linking file), an external link
        to a group of it, and a soft link; target.h5 holds the data after other data."""
        target, link = self.tmp.file("target.h5"), self.tmp.file("link.h5")
        data = sample("<f8", (20000,), seed=11)
        with h5py.File(target, "w") as f:
            f["pad"] = np.full(1000, 7.0)
            f["data"] = data
            f.create_dataset("g/c", data=np.arange(5000, dtype="i4"), chunks=(1000,), compression="gzip")
        with h5py.File(link, "w") as f:
            f["junk"] = np.full(50000, 1.0)
            f["el"] = h5py.ExternalLink("target.h5", "/data")
            f["eg"] = h5py.ExternalLink("target.h5", "/g")
            f["soft"] = h5py.SoftLink("/junk")
        return target, link, data

    def test_a_dataset_behind_an_external_link_is_read_from_the_file_it_lies_in(self):
        target, link, data = self.make_linked_files()
        before = digest(target), digest(link)
        with h5py.File(link, "r") as f:
            np.testing.assert_array_equal(f["el"][()], data)  # what h5py users expect
            chunked = f["eg/c"][()]
        for extra in ([], ["--tile-bytes", "16K", "--threads", "3"]):
            self.check_reductions(f"{link}:/el", data, *extra)
            self.check_reductions(f"{link}:/eg/c", chunked, *extra)
        self.check_reductions(f"{link}:/soft", np.full(50000, 1.0))  # a soft link stays mapped
        self.assertTrue(run_json("info", f"{link}:/soft")["mappable"])
        info = run_json("info", f"{link}:/el")
        self.assertFalse(info["mappable"])
        self.assertIn("external link", info["why_not_mappable"])
        self.assertIn("target.h5:/data", info["why_not_mappable"])
        listed = {d["path"]: d for d in run_json("info", link)["datasets"]}
        self.assertEqual(sorted(listed), [f"{link}:/el", f"{link}:/junk"])
        self.assertFalse(listed[f"{link}:/el"]["mappable"])
        out = self.tmp.file("out.npy")
        run("apply", "add-one", f"{link}:/el", "-o", out, "--quiet")
        np.testing.assert_array_equal(np.load(out), data + 1)
        self.assertEqual((digest(target), digest(link)), before, "reading changed a file")

    def test_a_dataset_read_through_the_library_can_be_written_beside_in_its_own_file(self):
        # HDF5 opens a file for writing only when nothing in the process holds it open
        # read-only, as a chunked input or an external link's target is held while read.
        target, link, data = self.make_linked_files()
        with h5py.File(target, "r") as f:
            chunked = f["g/c"][()]
        run("apply", "add-one", f"{target}:/g/c", "-o", f"{target}:/g/c1", "--quiet")
        run("apply", "add-one", f"{target}:/g/c", "-o", f"{target}:/g/c", "--overwrite", "--quiet")
        run("eval", "x * 2 + y", f"x={link}:/el", f"y={target}:/g/c1[:1]", "-o", f"{target}:/e", "--quiet")
        run("apply", "add-one", f"{link}:/el", "-o", f"{target}:/data", "--overwrite", "--quiet")
        run("apply", "scale:3", f"{link}:/el", "-o", f"{link}:/copy", "--quiet")
        with h5py.File(target, "r") as f:
            np.testing.assert_array_equal(f["g/c1"][()], chunked + 1)
            np.testing.assert_array_equal(f["g/c"][()], chunked + 1)
            np.testing.assert_array_equal(f["e"][()], data * 2 + (chunked[:1] + 1))
            np.testing.assert_array_equal(f["data"][()], data + 1)
            np.testing.assert_array_equal(f["pad"][()], np.full(1000, 7.0))
        with h5py.File(link, "r") as f:
            np.testing.assert_array_equal(f["copy"][()], (data + 1) * 3)
            np.testing.assert_array_equal(f["junk"][()], np.full(50000, 1.0))
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["link.h5", "target.h5"])
        # A run that fails leaves no hidden dataset behind, though its input holds the file.
        with h5py.File(target, "a") as f:
            f.create_dataset("ints", data=np.arange(-5000, 5000, dtype="i8"), chunks=(1000,))
        proc = run("eval", "x ** x", f"x={target}:/ints", "-o", f"{target}:/fails", check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("negative integer powers", proc.stderr)
        with h5py.File(target, "r") as f:
            names = []
            f.visit(names.append)
            self.assertEqual([n for n in names if "ooc" in n or n == "fails"], [])

    def test_files_with_a_user_block_are_read_and_written_at_h5pys_offsets(self):
        for size in (512, 1024, 4096):
            path = self.tmp.file(f"ub{size}.h5")
            a = sample("<f8", (30000,), seed=size)
            with h5py.File(path, "w", userblock_size=size) as f:
                f["pad"] = np.full(100, 3.0)
                f["d"] = a
                offset = f["d"].id.get_offset()
            with open(path, "r+b") as f:  # the user block is the writer's: MATLAB puts a header there
                f.write(b"MATLAB 7.3 MAT-file".ljust(size, b" "))
            with h5py.File(path, "r") as f:
                np.testing.assert_array_equal(f["d"][()], a)
            with self.subTest(userblock=size):
                info = run_json("info", f"{path}:/d")
                self.assertTrue(info["mappable"])
                self.assertEqual(info["data_offset"], offset)
                self.assertEqual(len(run_json("info", path)["datasets"]), 2)
                self.check_reductions(f"{path}:/d", a)
                out = self.tmp.file(f"out{size}.npy")
                run("apply", "add-one", f"{path}:/d", "-o", out, "--quiet")
                np.testing.assert_array_equal(np.load(out), a + 1)
                run("apply", "add-one", f"{path}:/d", "--in-place", "--quiet", "--tile-bytes", "16K")
                run("apply", "add-one", f"{path}:/pad", "-o", f"{path}:/new/p", "--quiet")
                with h5py.File(path, "r") as f:
                    self.assertEqual(f.userblock_size, size)
                    np.testing.assert_array_equal(f["d"][()], a + 1)
                    np.testing.assert_array_equal(f["pad"][()], np.full(100, 3.0))
                    np.testing.assert_array_equal(f["new/p"][()], np.full(100, 4.0))
                with open(path, "rb") as f:
                    self.assertEqual(f.read(size), b"MATLAB 7.3 MAT-file".ljust(size, b" "))


class CodecReadTest(Hdf5Case):
    """Chunks ooc decodes itself (raw chunk reads, decoded on every thread) give exactly
    what h5py reads: every dtype, every filter pipeline, edge chunks, chunks never written."""

    def check_exact(self, spec, a, *extra):
        """A cast to its own dtype (a copy) bit for bit, and reduce sum as numpy on h5py's
        array: the decoded chunks through both of the readers' callers. (The copy proves
        every decoded value; the kernels are proved on every dtype elsewhere.)"""
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            expected = np.sum(a)
        got = run_json("reduce", "sum", spec, *extra)
        with self.subTest(spec=spec, op="sum", extra=extra):
            self.assertTrue(same_scalar(got["value"], expected), f"ooc {got['value']!r} numpy {expected!r}")
        out = self.tmp.file("copy.npy")
        run("apply", f"cast:{a.dtype.str}", spec, "-o", out, "--overwrite", "--quiet", *extra)
        got = np.load(out)
        with self.subTest(spec=spec, extra=extra, what="copy"):
            self.assertEqual(got.dtype, a.dtype)
            self.assertEqual(got.tobytes(), a.tobytes())
        os.remove(out)

    def test_every_dtype_and_filter_pipeline_reads_as_h5py_does(self):
        path = self.tmp.file("codecs.h5")
        shapes = [((10007,), (1000,)), ((203, 77), (50, 30)), ((23, 19, 31), (5, 7, 11)), ((64, 40), (64, 40))]
        codecs = [name for name, kw in CODECS.items() if available(kw)]
        self.assertGreaterEqual(len(codecs), 6)
        names = []
        with h5py.File(path, "w") as f:
            for i, dtype in enumerate(DTYPES):
                for j in range(2):
                    codec = codecs[(2 * i + j) % len(codecs)]
                    shape, chunks = shapes[(i + j) % len(shapes)]
                    name = f"d{i}_{j}_{codec}"
                    f.create_dataset(name, data=sample(dtype, shape, seed=i), chunks=chunks, **CODECS[codec])
                    names.append(name)
            for codec in codecs:  # each pipeline on smooth data, which compresses
                a = (np.arange(30011) % 97 * 3 - 100).astype("<i4")
                f.create_dataset(f"smooth_{codec}", data=a, chunks=(4096,), **CODECS[codec])
                names.append(f"smooth_{codec}")
        before = digest(path)
        cases = names[::3] if SANITIZED else names
        for name in cases:
            with h5py.File(path, "r") as f:
                a = f[name][()]
            spec = f"{path}:/{name}"
            info = run_json("info", spec)
            self.assertFalse(info["mappable"])
            self.check_exact(spec, a)
            self.check_exact(spec, a, "--tile-bytes", "8K", "--threads", "3")
        self.assertEqual(digest(path), before, "reading changed the file")

    def test_chunks_never_written_give_the_fill_value_and_partial_edges_read_whole(self):
        path = self.tmp.file("fill.h5")
        codecs = [name for name, kw in CODECS.items() if available(kw)]
        with h5py.File(path, "w") as f:
            for k, codec in enumerate(codecs):
                d = f.create_dataset(f"f{k}", shape=(37, 29, 13), dtype=">f4" if k % 2 else "<i2", chunks=(8, 6, 5),
                                     fillvalue=-7 if k % 2 == 0 else 2.5, **CODECS[codec])
                d[3:20, 10:25, 2:9] = sample(d.dtype, (17, 15, 7), seed=k)  # most chunks stay unwritten
                e = f.create_dataset(f"z{k}", shape=(5000,), dtype="<u8", chunks=(300,), **CODECS[codec])
                e[1234:2345] = np.arange(1111, dtype="<u8") * 977
        for k, _ in enumerate(codecs if not SANITIZED else codecs[::3]):
            for name in (f"f{k}", f"z{k}"):
                with h5py.File(path, "r") as f:
                    a = f[name][()]
                    self.assertLess(f[name].id.get_num_chunks(), np.prod(f[name].id.get_space().shape) // 300)
                self.check_exact(f"{path}:/{name}", a, "--tile-bytes", "4K", "--threads", "4")
                self.check_exact(f"{path}:/{name}", a)

    def test_unfiltered_chunks_are_read_from_the_mapped_file_in_any_order(self):
        # Unfiltered chunks are copied from a mapping of the file (or used in place when a
        # tile's whole-row chunks lie one after another), whatever order they were written in.
        a = sample("<f8", (20000, 8), seed=3)
        b = sample("<i2", (301, 203), seed=4)
        for userblock in (0, 512):  # with a user block, raw chunk reads instead of the mapping
            path = self.tmp.file(f"plain{userblock}.h5")
            with h5py.File(path, "w", userblock_size=userblock) as f:
                f.create_dataset("rows", data=a, chunks=(1000, 8))
                d = f.create_dataset("reversed", shape=a.shape, dtype=a.dtype, chunks=(999, 8))
                for lo in reversed(range(0, a.shape[0], 999)):
                    d[lo:lo + 999] = a[lo:lo + 999]
                f.create_dataset("tiles", data=b, chunks=(40, 30))
                e = f.create_dataset("holes", shape=(5000,), dtype=">u4", chunks=(300,), fillvalue=9)
                e[1234:2345] = np.arange(1111, dtype="<u4")
            before = digest(path)
            for name in ("rows", "reversed", "tiles", "holes"):
                with h5py.File(path, "r") as f:
                    x = f[name][()]
                self.check_exact(f"{path}:/{name}", x)
                self.check_exact(f"{path}:/{name}", x, "--tile-bytes", "8K", "--threads", "3")
            self.assertEqual(digest(path), before, "reading changed the file")

    def test_every_chunk_index_of_the_newer_file_format_is_looked_up(self):
        # libver="latest" files index chunks as a fixed array, an extensible array, a
        # version-2 B-tree, a single chunk, or (allocated early, unfiltered) implicitly.
        path = self.tmp.file("index.h5")
        a = (np.arange(300 * 40) % 977).astype("<i4").reshape(300, 40)
        with h5py.File(path, "w", libver="latest") as f:
            f.create_dataset("fixed", data=a, chunks=(32, 40))
            f.create_dataset("extensible", data=a, chunks=(32, 40), maxshape=(None, 40))
            f.create_dataset("btree2", data=a, chunks=(32, 16), maxshape=(None, None))
            f.create_dataset("single", data=a, chunks=(300, 40))
            f.create_dataset("fixed_gzip", data=a, chunks=(32, 40), compression="gzip")
            f.create_dataset("extensible_gzip", data=a, chunks=(33, 7), maxshape=(None, 40), compression="gzip",
                             shuffle=True)
            for name, rows in (("implicit", slice(0, 300)), ("implicit_part", slice(100, 200))):
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                dcpl.set_chunk((32, 40))
                dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
                h5py.h5d.create(f.id, name.encode(), h5py.h5t.STD_I32LE, h5py.h5s.create_simple(a.shape), dcpl=dcpl)
                f[name][rows] = a[rows]
        with h5py.File(path, "r") as f:
            expected = {name: f[name][()] for name in f}
        for name, x in expected.items():
            self.check_exact(f"{path}:/{name}", x, "--tile-bytes", "4K", "--threads", "3")

    def test_a_chunk_stored_without_its_filters_is_read_through_the_library(self):
        path = self.tmp.file("mask.h5")
        a = np.arange(4000, dtype="<i4")
        with h5py.File(path, "w") as f:
            d = f.create_dataset("m", data=a, chunks=(1000,), compression="gzip", shuffle=True)
            # Chunk 2 stored shuffled but not compressed: filter mask bit 1 (deflate) set.
            raw = a[2000:3000].view(np.uint8).reshape(1000, 4).T.tobytes()
            d.id.write_direct_chunk((2000,), raw, filter_mask=0b10)
        with h5py.File(path, "r") as f:
            self.assertEqual(f["m"][()].tobytes(), a.tobytes())
        self.check_exact(f"{path}:/m", a, "--tile-bytes", "4K", "--threads", "2")

    def test_info_shows_chunks_filters_and_compression_ratio(self):
        path = self.tmp.file("info.h5")
        a = np.zeros((1000, 100), dtype="<f8")
        with h5py.File(path, "w") as f:
            f.create_dataset("z", data=a, chunks=(100, 50), compression="gzip", shuffle=True)
            stored = f["z"].id.get_storage_size()
        info = run_json("info", f"{path}:/z")
        self.assertEqual(info["chunks"], [100, 50])
        self.assertEqual(info["filters"], ["shuffle", "deflate"])
        self.assertEqual(info["stored_bytes"], stored)
        self.assertAlmostEqual(info["compression_ratio"], a.nbytes / stored, delta=a.nbytes / stored * 1e-3)
        text = run("info", f"{path}:/z").stdout
        self.assertIn("chunks (100, 50)", text)
        self.assertIn(f"{stored} of {a.nbytes} bytes stored", text)


# Bitshuffle (32008): no Debian plugin, so h5py can neither write nor read it here. The
# chunks are made by this reference encoder, written from the filter's description
# (bitshuffle's bshuf_h5filter.c and bitshuffle_core.c) with numpy alone, and stored
# with write_direct_chunk; ooc's reading is checked against the numpy array itself.
BITSHUFFLE = 32008


def bitshuffle_block(raw, n, item):
    """One block of n (a multiple of 8) elements: 8 * item rows of n / 8 bytes, row
    8 * j + b holding bit b of byte j of every element, element i at bit i % 8 of byte i // 8."""
    bits = np.unpackbits(np.frombuffer(raw, np.uint8).reshape(n, item), axis=1, bitorder="little")
    rows = bits.reshape(n, item, 8).transpose(1, 2, 0).reshape(item * 8, n)
    return np.packbits(rows, axis=1, bitorder="little").tobytes()


def zstd_compress(data, level=1):
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
    lib.ZSTD_compress.restype = ctypes.c_size_t
    lib.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    cap = lib.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(cap)
    n = lib.ZSTD_compress(out, cap, data, len(data), level)
    assert n <= cap
    return out.raw[:n]


def lz4_block(data):
    try:
        import lz4.block
        return lz4.block.compress(data, store_size=False)
    except ImportError:  # literals only: one sequence, a valid LZ4 block of data as it is
        n = len(data)
        token, extra = (15 << 4, [n - 15]) if n >= 15 else (n << 4, [])
        length = b""
        for rest in extra:
            while rest >= 255:
                length += b"\xff"
                rest -= 255
            length += bytes([rest])
        return bytes([token]) + length + data


def bitshuffle_encode(raw, item, block, compression):
    """A chunk as the bitshuffle filter stores it: blocks of `block` elements (0: the
    default, 8 KiB of elements), the last partial block cut to a multiple of 8, the last
    size % 8 elements as they are; with lz4 (2) or zstd (3) a 12-byte big-endian header
    and each block's 4-byte size before it."""
    n = len(raw) // item
    if block == 0:
        block = max(8192 // item // 8 * 8, 128)
    parts, done = [], 0
    while n - done >= 8:
        m = min(block, (n - done) // 8 * 8)
        t = bitshuffle_block(raw[done * item:(done + m) * item], m, item)
        if compression:
            c = lz4_block(t) if compression == 2 else zstd_compress(t)
            t = struct.pack(">I", len(c)) + c
        parts.append(t)
        done += m
    parts.append(raw[done * item:])
    body = b"".join(parts)
    return struct.pack(">QI", len(raw), block * item) + body if compression else body


def bitshuffle_dataset(f, name, a, chunks, block, compression, skip=()):
    """`a` as a chunked dataset with bitshuffle (optional: this library lacks it), each
    chunk (full size, edges padded with zeros as HDF5 stores them) written raw; chunks
    in `skip` (grid indices) are never written."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    dcpl.set_filter(BITSHUFFLE, h5py.h5z.FLAG_OPTIONAL, (0, 4, a.dtype.itemsize, block, compression, 0))
    space = h5py.h5s.create_simple(a.shape)
    dsid = h5py.h5d.create(f.id, name.encode(), h5py.h5t.py_create(a.dtype), space, dcpl=dcpl)
    grid = [range(0, n, c) for n, c in zip(a.shape, chunks)]
    for k, origin in enumerate(itertools.product(*grid)):
        if k in skip:
            continue
        piece = a[tuple(slice(o, o + c) for o, c in zip(origin, chunks))]
        full = np.zeros(chunks, a.dtype)
        full[tuple(slice(0, n) for n in piece.shape)] = piece
        dsid.write_direct_chunk(origin, bitshuffle_encode(full.tobytes(), a.dtype.itemsize, block, compression))


class BitshuffleTest(Hdf5Case):
    check_exact = CodecReadTest.check_exact

    def test_the_reference_encoder_is_bitshuffles_transpose(self):
        # Bit 0 of byte 0 of every element first, LSB first within a byte.
        raw = np.array([1, 0, 0, 0, 0, 0, 0, 3], "<u2").tobytes()
        t = bitshuffle_block(raw, 8, 2)
        self.assertEqual(t[:2], bytes([0b10000001, 0b10000000]))
        self.assertEqual(t[2:], bytes(14))

    def test_every_dtype_block_size_and_codec_reads_as_the_array(self):
        path = self.tmp.file("bshuf.h5")
        cases = []
        shapes = [((10007,), (1000,)), ((203, 77), (50, 30)), ((1003,), (1003,)), ((45,), (7,)), ((19, 5), (4, 3))]
        # Every dtype with every block size and every codec (none, lz4, zstd), each block
        # size with each codec.
        for k, (dtype, block, compression) in enumerate(sweep(("<u1", "<i2", ">i2", "<f4", "<i4", "<f8", "<u8"),
                                                              (0, 8, 64, 136), (0, 2, 3))):
            shape, chunks = shapes[k % len(shapes)]
            a = sample(dtype, shape, seed=k) if k % 2 else \
                (np.arange(np.prod(shape)) % 251 - 100).astype(dtype).reshape(shape)
            cases.append((f"b{k}", a, chunks, block, compression, (1,) if k % 5 == 0 else ()))
        with h5py.File(path, "w") as f:
            for name, a, chunks, block, compression, skip in cases:
                bitshuffle_dataset(f, name, a, chunks, block, compression, skip)
        for name, a, chunks, block, compression, skip in cases if not SANITIZED else cases[::4]:
            expected = a.copy()
            if skip:  # chunk 1 along the first axis' grid: the fill value, 0
                grid = [range(0, n, c) for n, c in zip(a.shape, chunks)]
                origin = list(itertools.product(*grid))[1]
                expected[tuple(slice(o, o + c) for o, c in zip(origin, chunks))] = 0
            spec = f"{path}:/{name}"
            with self.subTest(name=name, dtype=a.dtype.str, shape=a.shape, block=block, compression=compression):
                info = run_json("info", spec)
                self.assertEqual(info["filters"], ["bitshuffle"])
                self.check_exact(spec, expected)
                self.check_exact(spec, expected, "--tile-bytes", "4K", "--threads", "3")

    def test_corrupt_and_truncated_bitshuffle_chunks_are_one_line_naming_the_chunk(self):
        a = (np.arange(60_000) % 1000).astype("<i4")
        cases = [(0, "truncated", lambda raw: raw[:len(raw) // 3]),
                 (2, "truncated", lambda raw: raw[:len(raw) // 3]),
                 (3, "truncated", lambda raw: raw[:len(raw) - 9]),
                 (2, "corrupt", lambda raw: raw[:12] + b"\x7f\xff\xff\xff" + raw[16:]),
                 (3, "corrupt", lambda raw: raw[:16] + b"\xa5" * 32 + raw[48:]),
                 (2, "header", lambda raw: b"\xff" * 12 + raw[12:])]
        for compression, what, how in cases:
            path = self.tmp.file(f"bad_{compression}_{what}.h5")
            with h5py.File(path, "w") as f:
                bitshuffle_dataset(f, "x", a, (6000,), 0, compression)
                d = f["x"]
                offset = (42000,)
                mask, raw = d.id.read_direct_chunk(offset)
                d.id.write_direct_chunk(offset, how(raw), filter_mask=mask)
            with self.subTest(compression=compression, what=what):
                for args in (["reduce", "sum", f"{path}:/x", "--threads", "3", "--tile-bytes", "16K"],
                             ["apply", "add-one", f"{path}:/x", "-o", self.tmp.file("o.npy")]):
                    proc = run(*args, check=False)
                    self.assertEqual(proc.returncode, 1, proc.stderr)
                    lines = proc.stderr.strip().splitlines()
                    self.assertEqual(len(lines), 1, lines)
                    for word in (f"{path}:/x", "chunk (7,) at element (42000,)", "bitshuffle"):
                        self.assertIn(word, lines[0])
                    self.assertFalse(os.path.exists(self.tmp.file("o.npy")))


class CompressedWriteTest(Hdf5Case):
    """-o FILE.h5:/x --chunks --compression --shuffle: chunks compressed on the kernel
    threads, written in order; h5py reads back exactly what was written."""

    OPTIONS = [["--compression", "gzip"], ["--compression", "gzip:1", "--shuffle"], ["--compression", "lz4"],
               ["--compression", "lz4", "--shuffle", "--chunks", "3"], ["--compression", "blosc:zstd:1", "--shuffle"],
               ["--compression", "blosc"], ["--compression", "blosc:blosclz:9", "--chunks", "auto"],
               ["--shuffle", "--chunks", "5"], ["--chunks", "7"]]
    H5PY = {"gzip": "gzip", "lz4": str(LZ4), "blosc": str(BLOSC)}

    def test_every_dtype_and_codec_reads_back_bit_for_bit_in_h5py(self):
        shapes = [(10007,), (203, 77), (23, 19, 31)]
        out = self.tmp.file("out.h5")
        cases = [(dtype, i) for i, dtype in enumerate(DTYPES)]
        for dtype, i in cases[::3] if SANITIZED else cases:
            a = sample(dtype, shapes[i % len(shapes)], seed=i)
            src = self.tmp.save(f"in{i}.npy", a)
            options = self.OPTIONS[i % len(self.OPTIONS)]
            for extra in ([], ["--tile-bytes", "8K", "--threads", "3"]):
                with self.subTest(dtype=dtype, options=options, extra=extra):
                    run("apply", f"cast:{a.dtype.str}", src, "-o", f"{out}:/g/x", "--overwrite", "--quiet", *options, *extra)
                    with h5py.File(out, "r") as f:
                        d = f["/g/x"]
                        self.assertEqual(d.dtype, a.dtype)
                        self.assertEqual(d[()].tobytes(), a.tobytes())
                        self.assertIsNotNone(d.chunks)
                        if "--chunks" in options and options[options.index("--chunks") + 1].isdigit():
                            self.assertEqual(d.chunks, (int(options[options.index("--chunks") + 1]),) + a.shape[1:])
                        self.assertEqual(d.shuffle, "--shuffle" in options and "blosc" not in " ".join(options))
                        self.assertEqual(list(f.keys()), ["g"], "a hidden dataset was left behind")
                    # ooc reads it back too (its own decoders)
                    self.assertTrue(same_scalar(run_json("reduce", "max", f"{out}:/g/x")["value"], a.max()))

    def test_eval_writes_a_compressed_dataset_and_keeps_the_files_other_objects(self):
        path = self.tmp.file("e.h5")
        a = sample("<f8", (3001, 7), seed=3)
        with h5py.File(path, "w") as f:
            f["a"] = a
            f["keep"] = np.arange(5)
            f["keep"].attrs["note"] = "kept"
        before = {k: v for k, v in contents(path).items() if k not in ("/r",)}
        run("eval", "a * 2 + 1", f"a={path}:/a", "-o", f"{path}:/r", "--compression", "gzip:6", "--shuffle",
            "--chunks", "100", "--tile-bytes", "16K", "--quiet")
        with h5py.File(path, "r") as f:
            self.assertEqual(f["r"].chunks, (100, 7))
            self.assertEqual(f["r"].compression, "gzip")
            self.assertTrue(same_bits(f["r"][()], a * 2 + 1))
        after = contents(path)
        for k, v in before.items():
            self.assertEqual(str(after[k]), str(v), k)

    def test_a_failed_run_leaves_no_file_and_no_hidden_dataset(self):
        src = self.tmp.file("src.h5")
        with h5py.File(src, "w") as f:
            f.create_dataset("g", data=np.arange(300_000.0), chunks=(10_000,), compression="gzip")
        self.damage_chunk(src, "g", 23)
        new = self.tmp.file("new.h5")
        proc = run("apply", "add-one", f"{src}:/g", "-o", f"{new}:/x", "--compression", "lz4", "--tile-bytes", "64K",
                   check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("chunk (23,)", proc.stderr)
        self.assertFalse(os.path.exists(new))
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["src.h5"])
        existing = self.tmp.file("existing.h5")
        with h5py.File(existing, "w") as f:
            f["other"] = np.arange(3)
        proc = run("apply", "add-one", f"{src}:/g", "-o", f"{existing}:/x", "--compression", "gzip", check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        with h5py.File(existing, "r") as f:
            self.assertEqual(list(f.keys()), ["other"])

    def damage_chunk(self, path, name, chunk):
        with h5py.File(path, "r") as f:
            info = f[name].id.get_chunk_info(chunk)
        with open(path, "r+b") as f:
            f.seek(info.byte_offset + info.size // 2)
            f.write(b"\xff" * 64)

    def test_bad_options_are_usage_errors(self):
        src = self.tmp.save("a.npy", np.arange(10.0))
        for args, words in [
            (["-o", self.tmp.file("o.npy"), "--compression", "gzip"], ["HDF5"]),
            (["-o", self.tmp.file("o.h5") + ":/x", "--compression", "zip"], ["gzip[:LEVEL]"]),
            (["-o", self.tmp.file("o.h5") + ":/x", "--compression", "gzip:12"], ["level"]),
            (["-o", self.tmp.file("o.h5") + ":/x", "--compression", "blosc:brotli"], ["blosclz"]),
            (["-o", self.tmp.file("o.h5") + ":/x", "--chunks", "0"], ["--chunks"]),
            (["-o", self.tmp.file("o.h5") + ":/x", "--chunks", "many"], ["--chunks"]),
        ]:
            proc = run("apply", "add-one", src, *args, check=False)
            with self.subTest(args=args):
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
                for w in words:
                    self.assertIn(w, proc.stderr)
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["a.npy"])


class WriteTest(Hdf5Case):
    def test_outputs_are_datasets_h5py_reads_with_numpys_values(self):
        src = self.tmp.file("src.h5")
        with h5py.File(src, "w") as f:
            for dtype in DTYPES:
                f[f"x{dtype[1:]}{'be' if dtype[0] == '>' else ''}"] = sample(dtype, (50, 3), seed=9)
            f.create_dataset("chunked", data=sample("<f8", (20001,), seed=9), chunks=(1000,), compression="gzip")
        out = self.tmp.file("out.h5")
        with h5py.File(src, "r") as f:
            names = list(f.keys())
        for name in names:
            with h5py.File(src, "r") as f:
                a = f[name][()]
            run("apply", "add-one", f"{src}:/{name}", "-o", f"{out}:/results/{name}", "--quiet", "--tile-bytes", "64K")
            with np.errstate(all="ignore"):
                expected = a + 1
            with h5py.File(out, "r") as f:
                got = f[f"results/{name}"]
                self.assertEqual(got.dtype, expected.dtype, name)
                self.assertEqual(got.id.get_create_plist().get_layout(), h5py.h5d.CONTIGUOUS)
                np.testing.assert_array_equal(got[()], expected)
        # .npy in, HDF5 out, and back
        npy = self.tmp.save("a.npy", sample(">i2", (1000,)))
        run("apply", "scale:3", npy, "-o", f"{out}:/from_npy", "--quiet")
        with h5py.File(out, "r") as f:
            np.testing.assert_array_equal(f["from_npy"][()], np.load(npy) * 3)
        back = self.tmp.file("back.npy")
        run("apply", "add:0", f"{out}:/from_npy", "-o", back, "--quiet")
        np.testing.assert_array_equal(np.load(back), np.load(npy) * 3)
        # cast keeps the byte order asked for, as astype and h5py's create_dataset keep it
        for target in [">f4", "<i8", ">u2"]:
            run("apply", f"cast:{target}", npy, "-o", f"{out}:/cast{target[1:]}", "--quiet")
            with h5py.File(out, "r") as f:
                got = f[f"cast{target[1:]}"]
                self.assertEqual(got.dtype.str, np.dtype(target).str)
                np.testing.assert_array_equal(got[()], np.load(npy).astype(target))

    def test_writing_into_an_existing_file_keeps_its_other_objects(self):
        path = self.tmp.file("keep.h5")
        with h5py.File(path, "w") as f:
            f.attrs["title"] = "run 7"
            f["a"] = np.arange(10.0)
            f["a"].attrs["units"] = "Pa"
            f.create_dataset("g/c", data=np.arange(100), chunks=(10,), compression="gzip")
            f["g"].attrs["n"] = 3
        before = contents(path)
        run("apply", "add-one", f"{path}:/a", "-o", f"{path}:/results/run7/p", "--quiet")
        after = contents(path)
        for name, value in before.items():
            self.assertEqual(after[name], value, name)
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["results/run7/p"][()], np.arange(10.0) + 1)
            self.assertFalse([k for k in f.keys() if k.startswith(".ooc")], "temporary dataset left behind")

    def test_an_existing_dataset_is_an_error_unless_overwrite(self):
        path = self.tmp.file("over.h5")
        with h5py.File(path, "w") as f:
            f["a"] = np.arange(5)
            f["b"] = np.zeros(5)
        before = digest(path)
        proc = run("apply", "add-one", f"{path}:/a", "-o", f"{path}:/b", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("already exists", proc.stderr)
        self.assertEqual(digest(path), before, "a refused write changed the file")
        run("apply", "add-one", f"{path}:/a", "-o", f"{path}:/b", "--overwrite", "--quiet")
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["b"][()], np.arange(5) + 1)

    def test_a_new_file_appears_only_when_complete(self):
        src = self.tmp.save("a.npy", np.arange(10.0))
        proc = run("apply", "add-one", src, "-o", f"{self.tmp.file('missing-dir/x.h5')}:/d", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["a.npy"])

    def test_in_place_on_a_contiguous_dataset_is_numpys_plus_equals(self):
        path = self.tmp.file("ip.h5")
        a = sample(">i4", (30000,), seed=3)
        with h5py.File(path, "w") as f:
            f["d"] = a
            f["other"] = np.arange(4)
        run("apply", "add-one", f"{path}:/d", "--in-place", "--quiet", "--tile-bytes", "16K")
        with h5py.File(path, "r") as f:
            expected = a.copy()
            with np.errstate(all="ignore"):
                expected += 1
            np.testing.assert_array_equal(f["d"][()], expected)
            self.assertEqual(f["d"].dtype, np.dtype(">i4"))
            np.testing.assert_array_equal(f["other"][()], np.arange(4))


class ErrorTest(Hdf5Case):
    def error(self, code, *args, words=()):
        proc = run(*args, check=False)
        self.assertEqual(proc.returncode, code, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, lines)
        for w in words:
            self.assertIn(w, lines[0])
        return lines[0]

    def test_each_bad_dataset_is_one_clear_line(self):
        path = self.tmp.file("bad.h5")
        with h5py.File(path, "w") as f:
            f["num"] = np.arange(3)
            f.create_group("grp")
            f["str"] = np.array([b"ab", b"cd"])
            f["cmp"] = np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")])
            f.create_dataset("vlen", shape=(2,), dtype=h5py.vlen_dtype(np.int32))
            f.create_dataset("ref", shape=(1,), dtype=h5py.ref_dtype)
        self.error(1, "reduce", "sum", f"{self.tmp.file('none.h5')}:/x", words=["none.h5"])
        self.error(1, "reduce", "sum", f"{path}:/nope", words=[f"{path}:/nope", "no such dataset"])
        self.error(1, "reduce", "sum", f"{path}:/grp", words=["is a group"])
        for name, kind in [("str", "string"), ("cmp", "compound"), ("vlen", "variable-length"), ("ref", "reference")]:
            self.error(1, "reduce", "sum", f"{path}:/{name}", words=[f"{path}:/{name}", kind])
        self.error(2, "reduce", "sum", path, words=["name a dataset", "/num"])
        npy = self.tmp.save("a.npy", np.arange(3))
        self.error(1, "reduce", "sum", f"{npy}:/x", words=["not an HDF5 file"])
        chunked = self.tmp.file("c.h5")
        with h5py.File(chunked, "w") as f:
            f.create_dataset("c", data=np.arange(10), chunks=(5,), compression="gzip")
            f.create_dataset("unwritten", shape=(10,), dtype="f8")
            compact = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            compact.set_layout(h5py.h5d.COMPACT)
            f.create_dataset("compact", data=np.arange(4.0), dcpl=compact)
        before = digest(chunked)
        for name, why in (("c", "its layout is chunked"), ("unwritten", "not allocated (never written)"),
                          ("compact", "its layout is compact")):
            self.error(2, "apply", "add-one", f"{chunked}:/{name}", "--in-place",
                       words=[f"{chunked}:/{name}", "cannot be modified in place", why])
        self.assertEqual(digest(chunked), before)
        odd = self.tmp.file("szip.h5")  # a filter neither ooc nor this HDF5 library decodes
        with h5py.File(odd, "w") as f:
            f.create_dataset("z", data=np.arange(1000.0), chunks=(100,), compression=32017, allow_unknown_filter=True)
        self.error(1, "reduce", "sum", f"{odd}:/z", words=[f"{odd}:/z", "32017", "cannot decode"])
        fortran = self.tmp.save("f.npy", np.asfortranarray(np.zeros((3, 4))))
        self.error(2, "apply", "add-one", fortran, "-o", f"{self.tmp.file('o.h5')}:/x", words=["C order"])
        self.assertFalse(os.path.exists(self.tmp.file("o.h5")))

    def test_a_corrupt_chunk_is_one_line_whichever_thread_reads_it(self):
        # Debian's libhdf5 is thread-safe, so its error printing is set per thread: every
        # worker that reads a tile must have it off, or the library's stack reaches stderr.
        path = self.tmp.file("corrupt.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("g", data=sample("<f8", (300_000,), seed=5), chunks=(10_000,), compression="gzip")
        with h5py.File(path, "r") as f:
            info = f["g"].id.get_chunk_info(23)
        with open(path, "r+b") as f:
            f.seek(info.byte_offset + info.size // 2)
            f.write(b"\xff" * 64)
        out = self.tmp.file("o.npy")
        for _ in range(3):
            for threads in ("1", "2", "4"):
                self.error(1, "reduce", "sum", f"{path}:/g", "--tile-bytes", "64K", "--threads", threads,
                           words=[f"{path}:/g", "chunk (23,)", "deflate"])
                self.error(1, "apply", "add-one", f"{path}:/g", "-o", out, "--tile-bytes", "64K", "--threads", threads,
                           words=[f"{path}:/g", "chunk (23,)", "deflate"])
                self.assertFalse(os.path.exists(out))

    def damage(self, path, name, chunk, how):
        """Rewrites chunk `chunk` of /name: its stored bytes through `how`."""
        with h5py.File(path, "r+") as f:
            d = f[name]
            info = d.id.get_chunk_info(chunk)
            mask, raw = d.id.read_direct_chunk(info.chunk_offset)
            d.id.write_direct_chunk(info.chunk_offset, how(raw), filter_mask=mask)

    def test_corrupt_truncated_and_mis_summed_chunks_are_one_line_naming_the_chunk(self):
        a = (np.arange(200_000) % 1000).astype("<i4")
        # Without a checksum, only damage to a codec's structure can be told from data:
        # the first 16 bytes (headers, block sizes) and 64 in the middle are overwritten.
        flip = lambda raw: b"\xa5" * 16 + raw[16:len(raw) // 2] + \
            bytes(b ^ 0x5A for b in raw[len(raw) // 2:len(raw) // 2 + 64]) + raw[len(raw) // 2 + 64:]
        cases = []
        for codec in ("gzip1_shuffle", "lz4", "lzf", "blosc_zstd_1_shuffle", "fletcher", "gzip9_shuffle_fletcher"):
            if not available(CODECS[codec]):
                continue
            cases.append((codec, "truncated", lambda raw: raw[:len(raw) // 3]))
            cases.append((codec, "corrupt", flip))
        out = self.tmp.file("o.npy")
        for codec, what, how in cases if not SANITIZED else cases[::2]:
            path = self.tmp.file(f"{codec}_{what}.h5")
            with h5py.File(path, "w") as f:
                f.create_dataset("x", data=a, chunks=(20_000,), **CODECS[codec])
            self.damage(path, "x", 7, how)
            expect = [f"{path}:/x", "chunk (7,) at element (140000,)"]
            if "fletcher" in codec and what == "corrupt":
                expect.append("checksum")
            left = sorted(os.listdir(self.tmp.path))
            with self.subTest(codec=codec, what=what):
                for threads in ("1", "3"):
                    self.error(1, "reduce", "sum", f"{path}:/x", "--threads", threads, "--tile-bytes", "64K",
                               words=expect)
                self.error(1, "apply", "add-one", f"{path}:/x", "-o", out, words=expect)
                self.assertFalse(os.path.exists(out))
                self.assertEqual(sorted(os.listdir(self.tmp.path)), left, "something was left behind")

    def test_overwrite_replaces_a_dataset_never_a_group(self):
        path = self.tmp.file("t.h5")
        with h5py.File(path, "w") as f:
            f["c"] = np.arange(10.0)
            f["g/x"] = np.arange(4.0)
            f["g/y"] = np.arange(3.0)
            f["soft"] = h5py.SoftLink("/nowhere")
        before = digest(path)
        for name, extra, words in (("/g", ["--overwrite"], ["is a group, not a dataset"]),
                                   ("/g", [], ["is a group, not a dataset"]),
                                   ("/", ["--overwrite"], ["is a group, not a dataset"]),
                                   ("/soft", ["--overwrite"], ["link to nothing"]),
                                   ("/c/x", [], ["/c is a dataset, not a group"]),
                                   ("/c/x/y", ["--overwrite"], ["/c is a dataset, not a group"])):
            for args in (["apply", "add-one", f"{path}:/c"], ["eval", "a + 1", f"a={path}:/c"]):
                self.error(2, *args, "-o", f"{path}:{name}", *extra, words=[f"{path}:{name}", *words])
        self.assertEqual(digest(path), before, "a refused write changed the file")
        # A dataset in the group is replaced, by each command that writes one.
        with h5py.File(path, "a") as f:
            f["m"] = np.ones((4, 3))
        run("apply", "add-one", f"{path}:/c", "-o", f"{path}:/g/x", "--overwrite", "--quiet")
        run("eval", "a * 3", f"a={path}:/c", "-o", f"{path}:/g/y", "--overwrite", "--quiet")
        run("reduce", "sum", f"{path}:/m", "--axis", "0", "-o", f"{path}:/c", "--overwrite", "--quiet")
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["g/x"][()], np.arange(10.0) + 1)
            np.testing.assert_array_equal(f["g/y"][()], np.arange(10.0) * 3)
            np.testing.assert_array_equal(f["c"][()], np.full(3, 4.0))
            self.assertEqual(sorted(f), ["c", "g", "m", "soft"])

    def test_nothing_is_written_through_an_external_link(self):
        target, link, _ = ReadTest.make_linked_files(self)
        before = digest(target), digest(link)
        self.error(2, "apply", "add-one", f"{link}:/el", "--in-place",
                   words=[f"{link}:/el", "external link", "target.h5:/data", "in place"])
        npy = self.tmp.save("a.npy", np.arange(20000.0))
        self.error(2, "apply", "add-one", npy, "-o", f"{link}:/el", "--overwrite",
                   words=[f"{link}:/el", "external link", "target.h5:/data"])
        self.error(2, "apply", "add-one", npy, "-o", f"{link}:/eg/new", words=[f"{link}:/eg/new", "external link"])
        self.assertEqual((digest(target), digest(link)), before, "a refused write changed a file")
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["a.npy", "link.h5", "target.h5"])


def damage_root_btree_address(path):
    """Overwrites the root group's B-tree address (in the symbol table message of the root
    object header, which a version-0 superblock, h5py's default, names) with 8 bytes of
    0xff. The HDF5 library follows it when it looks anything up in the root group, and
    dies by SIGSEGV (h5py too). Returns the offset overwritten."""
    with open(path, "r+b") as f:
        head = f.read(96)
        assert head[:8] == b"\x89HDF\r\n\x1a\n" and head[8] == 0, "a version-0 superblock expected"
        # The root symbol table entry (offset 56): link name, object header, cache type,
        # reserved, then the cached B-tree and heap addresses.
        root, = struct.unpack_from("<Q", head, 64)
        cached_btree, = struct.unpack_from("<Q", head, 80)
        f.seek(root)
        header = f.read(1024)
        assert header[0] == 1, "a version-1 object header expected"
        count, = struct.unpack_from("<H", header, 2)
        at = 16  # the 12-byte prefix, aligned to 8
        for _ in range(count):
            kind, size = struct.unpack_from("<HH", header, at)
            if kind == 0x11:  # symbol table message: B-tree address, local heap address
                assert struct.unpack_from("<Q", header, at + 8)[0] == cached_btree
                f.seek(root + at + 8)
                f.write(b"\xff" * 8)
                return root + at + 8
            at += 8 + size
    raise AssertionError("no symbol table message in the root object header")


class DamagedFileTest(Hdf5Case):
    """A damaged file can crash the HDF5 library itself (SIGSEGV: it trusts the addresses
    the file holds). oocrun contains that crash: one line naming the file, exit 1."""

    DAMAGED = "damaged HDF5 file (the HDF5 library crashed reading it)"

    def make(self, name):
        path = self.tmp.file(name)
        with h5py.File(path, "w") as f:
            for k in range(10):
                f[f"g{k}/v"] = np.arange(50, dtype="<i4")
            f["c"] = np.arange(1000.0)
            f.create_dataset("x", data=np.arange(4000.0).reshape(200, 20), chunks=(5, 20), compression="gzip")
        return path

    def crashes_contained(self, *args, name):
        proc = run(*args, check=False)
        self.assertEqual(proc.returncode, 1, f"{args}: {proc.stderr}")
        self.assertEqual(proc.stderr.splitlines(), [f"oocrun: {name}: {self.DAMAGED}"], args)
        self.assertEqual(proc.stdout, "")

    def test_a_root_group_with_its_btree_address_overwritten_is_one_line_and_exit_1(self):
        path = self.make("damaged.h5")
        damage_root_btree_address(path)
        before = digest(path)
        self.crashes_contained("info", path, name=path)
        self.crashes_contained("info", f"{path}:/c", name=path)
        self.crashes_contained("reduce", "sum", f"{path}:/c", name=path)
        self.crashes_contained("reduce", "sum", f"{path}:/x", name=path)
        out = self.tmp.file("out.npy")
        self.crashes_contained("apply", "add-one", f"{path}:/x", "-o", out, name=path)
        self.crashes_contained("apply", "add-one", f"{path}:/c", "-o", f"{self.tmp.file('new.h5')}:/y", name=path)
        npy = self.tmp.save("a.npy", np.arange(10.0))
        self.crashes_contained("apply", "add-one", npy, "-o", f"{path}:/y", name=path)
        self.crashes_contained("eval", "a + 1", f"a={path}:/x", "-o", out, name=path)
        self.assertEqual(digest(path), before, "the damaged file was written to")
        self.assertEqual(sorted(os.listdir(self.tmp.path)), ["a.npy", "damaged.h5"])

    def test_words_of_the_metadata_overwritten_one_by_one_never_kill_a_run(self):
        # Each 8-byte word of the first 768 bytes (superblock, root object header, B-tree,
        # the root group's heap) overwritten with 0xff in turn, then info and a
        # reduction: exit 0, or exit 1 with one line naming the file; never a signal.
        good = self.make("good.h5")
        with open(good, "rb") as f:
            original = f.read()
        path = self.tmp.file("mutant.h5")
        crashes = 0
        offsets = range(0, 768, 8)
        for at in offsets[::4] if SANITIZED else offsets:
            with open(path, "wb") as f:
                f.write(original[:at] + b"\xff" * 8 + original[at + 8:])
            for args in (["info", path], ["reduce", "sum", f"{path}:/x"]):
                proc = run(*args, check=False)
                with self.subTest(offset=at, command=args[0]):
                    self.assertIn(proc.returncode, (0, 1), proc.stderr)
                    if proc.returncode == 1:
                        lines = proc.stderr.splitlines()
                        self.assertEqual(len(lines), 1, lines)
                        self.assertTrue(lines[0].startswith(f"oocrun: {path}"), lines[0])
                        crashes += self.DAMAGED in lines[0]
        # The sweep meets crashes of the library (at the root group's B-tree address and
        # heap, its B-tree node's child pointers, ...), or it tests nothing.
        self.assertGreater(crashes, 0)


if __name__ == "__main__":
    unittest.main()
