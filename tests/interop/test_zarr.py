"""Zarr v2 arrays as a source and a sink, against zarr-python 2.13 (Debian python3-zarr) in both
directions: every array zarr-python writes (dtype, byte order, C/F order, compressor, filters,
chunk shape, fill value, missing chunks, dimension separator, groups, consolidated metadata) reads
in ooc bit for bit, and every array ooc writes (-o out.zarr, --chunks, --compression, --shuffle,
from copy, apply, eval, import and Python's out=) reads in zarr-python bit for bit. Bad input is
one line naming the file, exit 1. Run by ctest (`zarr`), or OOCRUN=build/oocrun python3 test_zarr.py."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import (OOCRUN, TYPES, byte_order_applies, mount_small_tmpfs, run, same_bits, sample, sweep,  # noqa: E402
                     wait_until_signals_blocked, with_byte_order)

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
from numcodecs import GZip, LZ4, AsType, Blosc, Delta, Shuffle, Zlib, Zstd  # noqa: E402

BUILD = os.environ.get("OOC_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
try:
    import ooc
except ImportError:
    ooc = None
needs_module = pytest.mark.skipif(ooc is None, reason="the Python module is not built")

# What zarr-python compresses with, by a name for the test ids.
COMPRESSORS = {
    "none": None,
    "blosc-lz4-shuffle": Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE),
    "blosc-zstd-bitshuffle": Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE),
    "blosc-blosclz-noshuffle": Blosc(cname="blosclz", clevel=9, shuffle=Blosc.NOSHUFFLE),
    "blosc-lz4hc": Blosc(cname="lz4hc", clevel=4, shuffle=Blosc.SHUFFLE),
    "blosc-zlib": Blosc(cname="zlib", clevel=1, shuffle=Blosc.BITSHUFFLE),
    "zlib": Zlib(level=1),
    "gzip": GZip(level=6),
    "zstd": Zstd(level=3),
    "lz4": LZ4(acceleration=1),
}
# (shape, chunks): chunks that divide the shape, cut it (partial edge chunks), exceed it.
LAYOUTS = [((37, 23), (10, 7)), ((37, 23), (37, 23)), ((37, 23), (5, 23)), ((37, 23), (64, 64)),
           ((1000,), (64,)), ((6, 5, 4), (4, 2, 3)), ((), ()), ((0, 5), (3, 5))]


def layout_id(layout):
    return "x".join(map(str, layout[0])) or "0d"


def zarr_array(path, data, chunks, compressor, order="C", **kwargs):
    z = zarr.open(str(path), mode="w", shape=data.shape, chunks=chunks or None, dtype=data.dtype,
                  compressor=compressor, order=order, **kwargs)
    if data.size:
        z[...] = data
    return z


def read_ooc(path, tmp_path, name="back.npy"):
    """The array ooc reads at `path`, through oocrun copy to a .npy file."""
    out = tmp_path / name
    run("copy", str(path), "-o", out)
    got = np.load(out)
    out.unlink()
    return got


def hidden_leftovers(directory):
    return sorted(n for n in os.listdir(directory) if ".ooc-" in n)


# ---- zarr-python writes, ooc reads -------------------------------------------------------------

@pytest.mark.parametrize("kind,byteorder,order,codec,layout",
                         sweep(TYPES, "<>", "CF", list(COMPRESSORS), LAYOUTS,
                               valid=lambda k, b, o, c, l: byte_order_applies(k, b) and (o == "C" or len(l[0]) > 1)))
def test_reads_what_zarr_python_writes(tmp_path, kind, byteorder, order, codec, layout):
    shape, chunks = layout
    dtype = np.dtype(with_byte_order(kind, byteorder))
    data = sample(dtype, shape, seed=3, nan=dtype.kind == "f")
    path = tmp_path / "x.zarr"
    z = zarr_array(path, data, chunks, COMPRESSORS[codec], order=order)
    expected = z[...]
    got = read_ooc(path, tmp_path)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.ndim > 1:  # ooc keeps the array's memory order, as zarr-python returns it
        assert got.flags.f_contiguous if order == "F" else got.flags.c_contiguous
    assert same_bits(got, expected)


def test_reduce_and_selection(tmp_path):
    data = sample(np.dtype("<f8"), (300, 40), seed=1)
    zarr_array(tmp_path / "x.zarr", data, (64, 16), COMPRESSORS["blosc-lz4-shuffle"])
    got = json.loads(run("reduce", "sum", tmp_path / "x.zarr", "--json").stdout)["value"]
    assert got == float(np.sum(data))  # numpy's pairwise sum, bit for bit
    sel = read_ooc(f"{tmp_path / 'x.zarr'}[::3, 2]", tmp_path)
    assert same_bits(sel, data[::3, 2])
    axis = run("reduce", "max", tmp_path / "x.zarr", "--axis", "0", "--json")
    assert np.array_equal(np.array(json.loads(axis.stdout)["value"]), data.max(axis=0))


@pytest.mark.parametrize("dtype,fill", [("<f8", np.nan), (">f4", -2.5), ("<i4", 7), ("|u1", 255), ("|b1", True),
                                        ("<f8", None), ("<f2", np.inf)])
def test_fill_value_and_missing_chunks(tmp_path, dtype, fill):
    path = tmp_path / "x.zarr"
    z = zarr.open(str(path), mode="w", shape=(20, 9), chunks=(6, 4), dtype=dtype, fill_value=fill,
                  compressor=COMPRESSORS["zlib"])
    z[7:13, 2:5] = np.ones((6, 3), dtype=dtype)  # some chunks written, the others missing
    assert len([n for n in os.listdir(path) if not n.startswith(".")]) < 5 * 3
    got = read_ooc(path, tmp_path)
    expected = z[...]
    if fill is None:  # no fill value: zarr-python leaves missing chunks unset, ooc reads zeros
        expected[~np.isin(np.arange(20), range(7, 13))[:, None] | ~np.isin(np.arange(9), range(2, 5))[None, :]] = 0
    assert same_bits(got, expected)


def test_dimension_separator_slash(tmp_path):
    data = sample(np.dtype("<i8"), (13, 11, 3), seed=4)
    path = tmp_path / "nested.zarr"
    zarr_array(path, data, (4, 5, 2), COMPRESSORS["zstd"], dimension_separator="/")
    assert os.path.isdir(path / "0" / "0")
    assert same_bits(read_ooc(path, tmp_path), data)


def test_filters_shuffle_and_delta(tmp_path):
    data = np.cumsum(sample(np.dtype("<i4"), (500,), seed=2) % 100).astype("<i4")
    zarr_array(tmp_path / "d.zarr", data, (77,), Zlib(1), filters=[Delta(dtype="<i4")])
    assert same_bits(read_ooc(tmp_path / "d.zarr", tmp_path), data)
    f = sample(np.dtype("<f8"), (40, 6), seed=2)
    zarr_array(tmp_path / "s.zarr", f, (9, 6), Zstd(1), filters=[Shuffle(elementsize=8)])
    assert same_bits(read_ooc(tmp_path / "s.zarr", tmp_path), f)


def test_groups_info_and_consolidated_metadata(tmp_path):
    store = tmp_path / "store.zarr"
    root = zarr.open_group(str(store), mode="w")
    a = sample(np.dtype("<f4"), (30, 4), seed=5)
    root.create_group("g").array("a", a, chunks=(7, 4))
    root.array("b", np.arange(10, dtype=">i2"), chunks=(4,))
    root.array("s", np.array(["x", "yy"]), chunks=(1,))  # a string array: listed, not readable
    assert same_bits(read_ooc(store / "g" / "a", tmp_path), a)
    text = run("info", store).stdout
    assert "Zarr group, 3 array(s)" in text and f"{store}/g/a: float32" in text and f"{store}/b: int16" in text
    assert f"{store}/s: <U2" in text and "not readable" in text
    listed = json.loads(run("info", store, "--json").stdout)
    assert listed["format"] == "zarr" and [d["path"] for d in listed["arrays"]] == [f"{store}/b", f"{store}/g/a",
                                                                                   f"{store}/s"]
    one = json.loads(run("info", store / "g" / "a", "--json").stdout)
    assert one["format"] == "zarr" and one["chunks"] == [7, 4] and one["filters"] == ["blosc:lz4"]
    # Consolidated: the listing comes from .zmetadata (an array it names is listed even
    # where its directory is gone, as zarr.open_consolidated lists it).
    zarr.consolidate_metadata(str(store))
    shutil.rmtree(store / "b")
    text = run("info", store).stdout
    assert f"{store}/b: int16" in text
    # A group is not an array.
    p = run("copy", store, "-o", tmp_path / "o.npy", check=False)
    assert p.returncode == 2 and "is a Zarr group" in p.stderr and "g/a" in p.stderr


@needs_module
def test_python_open(tmp_path):
    data = sample(np.dtype(">f8"), (25, 6), seed=9)
    zarr_array(tmp_path / "x.zarr", data, (8, 4), COMPRESSORS["gzip"], order="F")
    a = ooc.open(str(tmp_path / "x.zarr"))
    assert a.shape == (25, 6) and a.dtype == np.dtype(">f8")
    assert same_bits(np.asarray(a), data)
    assert same_bits(np.asarray(a[3:9, 1]), data[3:9, 1])
    assert ooc.sum(a) == np.sum(zarr.open(str(tmp_path / "x.zarr"), mode="r")[...])  # numpy sums an F array in memory order


# ---- ooc writes, zarr-python reads -------------------------------------------------------------

WRITE_CODECS = [None, "none", "blosc:lz4:5", "blosc:zstd:1", "blosc:blosclz", "zlib:3", "gzip", "zstd:2", "lz4"]


@pytest.mark.parametrize("kind,byteorder,order,codec,chunks,shape",
                         sweep(TYPES, "<>", "CF", WRITE_CODECS, [None, "auto", "1", "7"],
                               [(41, 5), (300,), (4, 3, 5), (), (0, 4)],
                               valid=lambda k, b, o, c, n, s: byte_order_applies(k, b) and (o == "C" or len(s) > 1)))
def test_zarr_python_reads_what_ooc_writes(tmp_path, kind, byteorder, order, codec, chunks, shape):
    dtype = np.dtype(with_byte_order(kind, byteorder))
    data = sample(dtype, shape, seed=6, nan=dtype.kind == "f")
    data = np.asfortranarray(data) if order == "F" else data
    np.save(tmp_path / "x.npy", data)
    options = ([] if chunks is None else ["--chunks", chunks]) + ([] if codec is None else ["--compression", codec])
    run("copy", tmp_path / "x.npy", "-o", tmp_path / "out.zarr", *options)
    z = zarr.open(str(tmp_path / "out.zarr"), mode="r")
    assert z.dtype == dtype and z.shape == shape and z.order == ("C" if data.flags.c_contiguous else "F")  # as np.save
    assert same_bits(z[...], data)
    meta = json.loads((tmp_path / "out.zarr" / ".zarray").read_text())
    name = (codec or "blosc").split(":")[0]
    assert (meta["compressor"] or {"id": "none"})["id"] == name
    if codec is None:  # zarr-python's default compressor
        assert meta["compressor"] == {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    if chunks == "7" and len(shape) > 0 and shape[0]:
        assert meta["chunks"][0 if order == "C" or len(shape) == 1 else -1] == min(7, shape[0 if order == "C" else -1])
    assert same_bits(read_ooc(tmp_path / "out.zarr", tmp_path), data)
    assert hidden_leftovers(tmp_path) == []


@pytest.mark.parametrize("codec", ["zlib:1", "blosc:lz4", "zstd:1", "none"])
def test_shuffle_flag(tmp_path, codec):
    data = sample(np.dtype("<i4"), (100, 3), seed=8)
    np.save(tmp_path / "x.npy", data)
    run("copy", tmp_path / "x.npy", "-o", tmp_path / "s.zarr", "--compression", codec, "--shuffle", "--chunks", "9")
    meta = json.loads((tmp_path / "s.zarr" / ".zarray").read_text())
    if codec.startswith("blosc"):
        assert meta["compressor"]["shuffle"] == 1 and meta["filters"] is None
    else:
        assert meta["filters"] == [{"id": "shuffle", "elementsize": 4}]
    assert same_bits(zarr.open(str(tmp_path / "s.zarr"), mode="r")[...], data)


def test_compression_grammar_for_hdf5(tmp_path):
    """The grammar --compression shares: zlib is HDF5's deflate filter; zstd alone is Zarr's."""
    h5py = pytest.importorskip("h5py")
    data = sample(np.dtype("<f8"), (64, 3), seed=3)
    np.save(tmp_path / "x.npy", data)
    run("copy", tmp_path / "x.npy", "-o", f"{tmp_path / 'o.h5'}:/z", "--compression", "zlib:2")
    run("copy", tmp_path / "x.npy", "-o", f"{tmp_path / 'o.h5'}:/n", "--compression", "none", "--chunks", "8")
    with h5py.File(tmp_path / "o.h5", "r") as f:
        assert f["z"].compression == "gzip" and f["z"].compression_opts == 2 and same_bits(f["z"][...], data)
        assert f["n"].compression is None and f["n"].chunks == (8, 3) and same_bits(f["n"][...], data)
    p = run("copy", tmp_path / "x.npy", "-o", f"{tmp_path / 'o.h5'}:/s", "--compression", "zstd:1", check=False)
    assert p.returncode == 2 and "blosc:zstd" in p.stderr, p.stderr
    p = run("copy", tmp_path / "x.npy", "-o", tmp_path / "o.zarr", "--compression", "bz2", check=False)
    assert p.returncode == 2 and "--compression bz2" in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "o.zarr") and hidden_leftovers(tmp_path) == []


def test_apply_eval_import_write_zarr(tmp_path):
    data = sample(np.dtype("<f4"), (1000, 7), seed=2)
    zarr_array(tmp_path / "in.zarr", data, (100, 7), COMPRESSORS["blosc-lz4-shuffle"])
    run("apply", "add-one", tmp_path / "in.zarr", "-o", tmp_path / "a.zarr", "--compression", "blosc:lz4",
        "--chunks", "64", "--tile-bytes", "64K")
    assert same_bits(zarr.open(str(tmp_path / "a.zarr"), mode="r")[...], data + np.float32(1))
    run("eval", "x * 2", f"x={tmp_path / 'in.zarr'}", "-o", tmp_path / "e.zarr", "--compression", "zstd:3")
    assert same_bits(zarr.open(str(tmp_path / "e.zarr"), mode="r")[...], data * np.float32(2))
    np.savetxt(tmp_path / "t.csv", data[:50].astype("f8"), delimiter=",")
    run("import", tmp_path / "t.csv", "-o", tmp_path / "t.zarr")
    assert np.array_equal(zarr.open(str(tmp_path / "t.zarr"), mode="r")[...], np.loadtxt(tmp_path / "t.csv", delimiter=","))
    assert hidden_leftovers(tmp_path) == []


def test_write_into_a_store_and_replace(tmp_path):
    data = np.arange(60, dtype="<i8").reshape(12, 5)
    np.save(tmp_path / "x.npy", data)
    run("copy", tmp_path / "x.npy", "-o", tmp_path / "store.zarr" / "g" / "a")  # groups made on the way
    root = zarr.open_group(str(tmp_path / "store.zarr"), mode="r")
    assert same_bits(root["g/a"][...], data)
    run("apply", "add-one", tmp_path / "x.npy", "-o", tmp_path / "store.zarr" / "g" / "a")  # replaces the array
    assert same_bits(root["g/a"][...], data + 1)
    assert hidden_leftovers(tmp_path / "store.zarr" / "g") == []
    # Never anything but a Zarr array: a group, a plain directory, an array's inside.
    os.mkdir(tmp_path / "plain.zarr")
    for out, words in [(tmp_path / "store.zarr", "a Zarr group"), (tmp_path / "plain.zarr", "a directory"),
                       (tmp_path / "store.zarr" / "g" / "a" / "b", "is a Zarr array")]:
        p = run("copy", tmp_path / "x.npy", "-o", out, check=False)
        assert p.returncode == 2 and words in p.stderr, p.stderr
    assert os.listdir(tmp_path / "plain.zarr") == []


def test_cancelled_or_killed_run_leaves_nothing(tmp_path):
    np.save(tmp_path / "big.npy", np.random.default_rng(0).standard_normal(20_000_000))
    out = tmp_path / "out.zarr"
    for signal_name, sig, status in [("SIGINT", signal.SIGINT, 130), ("SIGKILL", signal.SIGKILL, -9)]:
        for delay in (0.6, 0.3, 0.15, 0.05):
            p = subprocess.Popen([OOCRUN, "copy", tmp_path / "big.npy", "-o", out, "--compression", "zstd:9",
                                  "--threads", "1", "--tile-bytes", "4M"], stderr=subprocess.PIPE, text=True)
            wait_until_signals_blocked(p)
            time.sleep(delay)
            p.send_signal(sig)
            _, err = p.communicate(timeout=120)
            if p.returncode == 0:  # finished before the signal: sooner
                shutil.rmtree(out)
                continue
            assert p.returncode == status, err
            if sig == signal.SIGINT:
                assert "no output written" in err and hidden_leftovers(tmp_path) == [], err
            break
        assert not os.path.exists(out)
    # A killed run's hidden directory is left (the one below, if the kill came too early to
    # leave one); the next run of that output removes it, and never a live run's.
    os.makedirs(tmp_path / ".out.zarr.ooc-0123456789abcdef" / "sub")
    (tmp_path / ".out.zarr.ooc-0123456789abcdef" / "0").write_bytes(b"x")
    run("copy", tmp_path / "big.npy[:1000]", "-o", out)
    assert hidden_leftovers(tmp_path) == [] and zarr.open(str(out), mode="r").shape == (1000,)


class _Cleanups:
    """What ooctest.mount_small_tmpfs asks of a unittest case, for a pytest function."""

    def __init__(self):
        self.calls = []

    def skipTest(self, why):
        pytest.skip(why)

    def addCleanup(self, fn, *args, **kwargs):
        self.calls.append((fn, args, kwargs))


def test_disk_full_leaves_nothing(tmp_path):
    case = _Cleanups()
    try:
        small = mount_small_tmpfs(case, str(tmp_path / "small"), size="2m")
        np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal(1_000_000))  # 8 MB, incompressible
        p = run("copy", tmp_path / "x.npy", "-o", os.path.join(small, "out.zarr"), "--compression", "lz4", check=False)
        assert p.returncode == 1 and "no space" in p.stderr.lower() and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert os.listdir(small) == []
    finally:
        for fn, args, kwargs in reversed(case.calls):
            fn(*args, **kwargs)


def test_consolidated_metadata_kept_current(tmp_path):
    store = tmp_path / "store.zarr"
    root = zarr.open_group(str(store), mode="w")
    root.array("a", np.arange(10, dtype="<i4"), chunks=(4,))
    root["a"].attrs["units"] = "m"
    zarr.consolidate_metadata(str(store))
    data = sample(np.dtype(">f4"), (6, 5), seed=2)
    np.save(tmp_path / "x.npy", data)
    run("copy", tmp_path / "x.npy", "-o", store / "a")  # replaces a, another dtype and shape
    run("copy", tmp_path / "x.npy", "-o", store / "new" / "b", "--compression", "zlib:1")  # a group made on the way
    c = zarr.open_consolidated(str(store), mode="r")
    assert same_bits(c["a"][...], data) and same_bits(c["new/b"][...], data) and dict(c["a"].attrs) == {}
    assert "store.zarr/new/b" in run("info", store).stdout


@needs_module
def test_python_out(tmp_path):
    data = sample(np.dtype("<u2"), (70, 3), seed=1)
    np.save(tmp_path / "x.npy", data)
    ooc.copy(ooc.open(str(tmp_path / "x.npy")), str(tmp_path / "c.zarr"), chunks=10, compression="zstd:5")
    assert same_bits(zarr.open(str(tmp_path / "c.zarr"), mode="r")[...], data)
    ooc.apply("add:3", str(tmp_path / "x.npy"), out=str(tmp_path / "p.zarr"))
    assert same_bits(zarr.open(str(tmp_path / "p.zarr"), mode="r")[...], data + np.uint16(3))


# ---- in place ---------------------------------------------------------------------------------

def test_in_place_refused_on_a_compressed_array(tmp_path):
    for compressor, filters in [(COMPRESSORS["zlib"], None), (None, [Shuffle(elementsize=8)])]:
        zarr_array(tmp_path / "c.zarr", np.zeros(10), (5,), compressor, filters=filters)
        before = chunk_files(tmp_path / "c.zarr")
        p = run("apply", "add-one", tmp_path / "c.zarr", "--in-place", check=False)
        assert p.returncode == 2 and "compressed Zarr array cannot be modified in place" in p.stderr, p.stderr
        assert chunk_files(tmp_path / "c.zarr") == before and hidden_leftovers(tmp_path) == []


def chunk_files(directory):
    """An array's chunk files (name relative to it -> bytes), hidden files included."""
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            if name not in (".zarray", ".zattrs"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, directory)] = f.read()
    return files


def outside_bytes(z, key, raw):
    """The bytes of chunk `key` of the array `z` that lie past the array's edges."""
    separator = z._dimension_separator or "."
    grid = [int(i) for i in key.split(separator)] if z.shape else []
    cells = np.frombuffer(raw, dtype=f"V{z.dtype.itemsize}").reshape(z.chunks, order=z.order)
    inside = np.ones(z.chunks, dtype=bool)
    for axis, (g, c, n) in enumerate(zip(grid, z.chunks, z.shape)):
        shape = [1] * len(z.chunks)
        shape[axis] = c
        inside &= (g * c + np.arange(c) < n).reshape(shape)
    return cells[~inside].tobytes()


def plus_equals(a, op):
    """numpy's `a OP= C` for the ops the tests run, in a's own dtype (same_kind casting)."""
    expected = a.copy()
    with np.errstate(all="ignore"):
        if op == "add-one":
            expected += 1
        else:
            expected *= int(op.split(":")[1])
    return expected


@pytest.mark.parametrize("kind,byteorder,order,layout,separator,tile",
                         sweep([t for t in TYPES if t != "b1"], "<>", "CF", LAYOUTS, "./", ["8K", "16M"],
                               valid=lambda k, b, o, l, s, t: byte_order_applies(k, b) and (o == "C" or len(l[0]) > 1)))
def test_in_place_is_numpys_plus_equals(tmp_path, kind, byteorder, order, layout, separator, tile):
    """add-one (or scale:3) --in-place on an uncompressed array zarr-python wrote, with a chunk
    never written: zarr-python then reads numpy's `a += 1` of what it read before, bit for bit;
    edge chunks keep their bytes past the array's edges; nothing is left beside it."""
    shape, chunks = layout
    path = tmp_path / "a.zarr"
    z = zarr_array(path, sample(with_byte_order(kind, byteorder), shape, seed=5), chunks, None, order=order,
                   dimension_separator=separator)
    names = sorted(chunk_files(path))
    if len(names) > 1:
        os.remove(path / names[len(names) // 2])  # read (and rewritten) as the fill value
    before = chunk_files(path)
    op = "scale:3" if kind in ("i2", "u4") else "add-one"
    try:
        expected = plus_equals(z[...], op)
    except np.core._exceptions.UFuncTypeError:  # a 0-d array casts as scalars do: ooc refuses it too
        p = run("apply", op, path, "--in-place", check=False)
        assert p.returncode == 2 and "same_kind" in p.stderr and chunk_files(path) == before, p.stderr
        return
    run("apply", op, path, "--in-place", "--tile-bytes", tile, "--quiet")
    assert same_bits(zarr.open(str(path), mode="r")[...], expected)
    after = chunk_files(path)
    assert set(after) == set(names), sorted(after)
    for key, raw in before.items():
        assert outside_bytes(z, key.replace(os.sep, "/"), after[key]) == outside_bytes(z, key.replace(os.sep, "/"), raw)
    assert hidden_leftovers(tmp_path) == []


def test_in_place_fill_value_no_journal_and_python(tmp_path):
    """A missing chunk of fill value 7 is written as 7 + 1; --no-journal and Python's
    apply(inplace=True) give the same bytes as the journaled run."""
    data = sample(np.dtype(">i4"), (90, 7), seed=3)
    for how in ("journal", "no-journal", "python"):
        path = tmp_path / f"{how}.zarr"
        z = zarr_array(path, data, (20, 3), None, fill_value=7)
        os.remove(path / "1.1")
        expected = plus_equals(z[...], "add-one")
        assert (expected[20:40, 3:6] == 8).all()
        if how == "python":
            if ooc is None:
                continue
            ooc.apply("add-one", str(path), inplace=True)
        else:
            # One thread: the chunks tiles cut are replaced on tasks that the serial stage hands over.
            run("apply", "add-one", path, "--in-place", "--tile-bytes", "8K", "--threads", "1",
                *(["--no-journal"] if how == "no-journal" else []))
        assert same_bits(zarr.open(str(path), mode="r")[...], expected), how
        assert hidden_leftovers(tmp_path) == [] and not any(".ooc-" in n for n in chunk_files(path)), how


def test_in_place_killed_at_random_moments_applies_each_chunk_once(tmp_path):
    """SIGKILL at random moments of an in-place add-one over 160 chunks that are not whole
    rows (tiles cut them), the same command run again while the journal says the run is
    unfinished: the array ends exactly a + 1, with nothing left beside or inside it.
    While unfinished, a reader and another in-place command are refused, naming the
    command that finishes it."""
    seed = int(os.environ.get("OOC_KILL_SEED", np.random.SeedSequence().entropy % (1 << 30)))
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((2_000_000, 3))
    path = tmp_path / "a.zarr"
    cmd = [OOCRUN, "apply", "add-one", str(path), "--in-place", "--threads", "2", "--tile-bytes", "1M", "--quiet"]
    zarr_array(path, a, (25_000, 2), None)
    start = time.monotonic()
    subprocess.run(cmd, check=True, timeout=300)
    length = time.monotonic() - start
    journal = str(path) + ".ooc-journal"
    refusals = kills = 0
    for job in range(4):
        zarr_array(path, a, (25_000, 2), None)
        while True:
            p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(0, length))
            p.send_signal(signal.SIGKILL)
            _, err = p.communicate(timeout=300)
            if p.returncode == 0:
                break  # finished before the kill
            assert p.returncode == -signal.SIGKILL, (seed, err)
            kills += 1
            if not os.path.exists(journal):
                # Killed before its journal existed or after it removed it: nothing written
                # yet, or all of it; running the command again would rightly add one twice.
                now = zarr.open(str(path), mode="r")[...]
                assert same_bits(now, a) or same_bits(now, a + 1), \
                    (seed, job, "killed without a journal, the array is neither a nor a + 1")
                break
            if refusals < 2:
                refusals += 1
                for other in (["reduce", "sum", str(path)], ["apply", "add:2", str(path), "--in-place"],
                              ["reduce", "sum", f"{path}/"]):
                    q = run(*other, check=False)
                    assert q.returncode == 1 and f"finish it by running `oocrun apply add-one --in-place {path}" \
                        in q.stderr, (seed, q.stderr)
        if os.path.exists(journal) or same_bits(zarr.open(str(path), mode="r")[...], a):
            run(*cmd[1:])
        assert same_bits(zarr.open(str(path), mode="r")[...], a + 1), (seed, job)
        assert hidden_leftovers(tmp_path) == [] and not any(".ooc-" in n for n in chunk_files(path)), seed
    assert kills > 0, seed


def test_in_place_disk_full_then_finished(tmp_path):
    """No room for a chunk's new bytes: one line naming the chunk, exit 1, the array as it
    was (no chunk replaced yet) and nothing left; with room again, the same command runs."""
    case = _Cleanups()
    try:
        small = mount_small_tmpfs(case, str(tmp_path / "small"), size="2m")
        data = np.random.default_rng(1).standard_normal((100_000,))  # 800 KB in 8 chunks of 100 KB
        path = os.path.join(small, "a.zarr")
        zarr_array(path, data, (12_500,), None)
        before = chunk_files(path)
        filler = os.path.join(small, "filler")
        with open(filler, "wb") as f:
            try:
                f.write(b"\0" * (2 << 20))
            except OSError:
                pass
        os.truncate(filler, os.path.getsize(filler) - (48 << 10))  # room for the journal, not a chunk
        p = run("apply", "add-one", path, "--in-place", check=False)
        assert p.returncode == 1 and "no space" in p.stderr.lower() and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "a.zarr" in p.stderr and chunk_files(path) == before
        assert sorted(os.listdir(small)) == ["a.zarr", "filler"]
        os.remove(filler)
        run("apply", "add-one", path, "--in-place")
        assert same_bits(zarr.open(path, mode="r")[...], data + 1) and sorted(os.listdir(small)) == ["a.zarr"]
    finally:
        for fn, args, kwargs in reversed(case.calls):
            fn(*args, **kwargs)


# ---- bad input -------------------------------------------------------------------------------

def bad(tmp_path, path, words, status=1):
    p = run("copy", path, "-o", tmp_path / "o.npy", check=False)
    assert p.returncode == status, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), p.stderr
    assert not os.path.exists(tmp_path / "o.npy") and hidden_leftovers(tmp_path) == []


@pytest.mark.parametrize("decoded,encoded,compressor", [("<f8", "<f4", "zlib"), (">f8", "<f2", "none"),
                                                        ("<i8", "|i1", "blosc-lz4-shuffle"), ("<f4", ">i2", "zstd"),
                                                        ("<u4", "<u2", "lz4"), ("<f8", ">f4", "blosc-zstd-bitshuffle")])
def test_filter_astype(tmp_path, decoded, encoded, compressor):
    """numcodecs' AsType: chunks stored in encode_dtype (fewer bytes), read back as the array's
    dtype through numpy's astype, with or without a compressor, and before a shuffle."""
    values = sample(np.dtype(encoded), (53, 7), seed=9, nan=np.dtype(encoded).kind == "f")
    data = values.astype(decoded)
    z = zarr_array(tmp_path / "a.zarr", data, (10, 4), COMPRESSORS[compressor],
                   filters=[AsType(encode_dtype=encoded, decode_dtype=decoded)])
    expected = z[...]
    assert same_bits(expected, data)
    assert same_bits(read_ooc(tmp_path / "a.zarr", tmp_path), expected)
    z = zarr_array(tmp_path / "b.zarr", data, (10, 4), COMPRESSORS[compressor],
                   filters=[AsType(encode_dtype=encoded, decode_dtype=decoded),
                            Shuffle(elementsize=np.dtype(encoded).itemsize)])
    assert same_bits(read_ooc(tmp_path / "b.zarr", tmp_path), z[...])
    assert "astype(" in run("info", tmp_path / "b.zarr").stdout


def test_bad_metadata(tmp_path):
    path = tmp_path / "x.zarr"
    zarr_array(path, np.arange(20.0), (6,), COMPRESSORS["zlib"])
    good = (path / ".zarray").read_text()
    meta = json.loads(good)
    cases = [("{ not json", ["x.zarr/.zarray", "not JSON"]),
             (json.dumps({**meta, "extra": 1}), ["x.zarr/.zarray", "unknown key \"extra\""]),
             (json.dumps({**meta, "zarr_format": 3}), ["x.zarr/.zarray", "zarr_format 3"]),
             (json.dumps({**meta, "compressor": {"id": "bz2", "level": 1}}), ["x.zarr/.zarray", "\"bz2\""]),
             (json.dumps({**meta, "filters": [{"id": "fixedscaleoffset", "offset": 0, "scale": 1, "dtype": "<f8"}]}),
              ["x.zarr/.zarray", "\"fixedscaleoffset\""]),
             (json.dumps({**meta, "filters": [{"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<i8"}]}),
              ["x.zarr/.zarray", "filter astype", "decode_dtype"]),
             (json.dumps({**meta, "chunks": [6, 2]}), ["x.zarr/.zarray", "chunks [6,2]"]),
             (json.dumps({**meta, "shape": [-1]}), ["x.zarr/.zarray", "shape -1"]),
             (json.dumps({**meta, "dtype": "|O"}), ["x.zarr/.zarray", "object"]),
             (json.dumps({k: v for k, v in meta.items() if k != "order"}), ["x.zarr/.zarray", "no \"order\""])]
    for text, words in cases:
        (path / ".zarray").write_text(text)
        bad(tmp_path, path, words)
    (path / ".zarray").unlink()
    bad(tmp_path, path, ["x.zarr: is a directory, not a Zarr array (it holds no .zarray)"])


def test_array_rewritten_while_read(tmp_path):
    path = tmp_path / "x.zarr"
    zarr_array(path, np.arange(6_000_000, dtype="<f8"), (50_000,), COMPRESSORS["gzip"])
    for delay in (0.2, 0.12, 0.08, 0.05, 0.03, 0.3):
        p = subprocess.Popen([OOCRUN, "reduce", "sum", path, "--threads", "1", "--tile-bytes", "1M"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        text = (path / ".zarray").read_text()
        (path / ".zarray.new").write_text(text)
        os.replace(path / ".zarray.new", path / ".zarray")  # as zarr.open(mode="w") rewrites it
        _, err = p.communicate(timeout=120)
        if p.returncode == 0:
            continue
        assert p.returncode == 1 and "changed while being read" in err and len(err.strip().splitlines()) == 1, err
        break
    else:
        pytest.skip("each read finished before the rewrite")


def test_bad_chunks(tmp_path):
    path = tmp_path / "x.zarr"
    data = sample(np.dtype("<f8"), (30,), seed=1)
    zarr_array(path, data, (10,), COMPRESSORS["blosc-lz4-shuffle"])
    chunk = (path / "1").read_bytes()
    (path / "1").write_bytes(chunk[: len(chunk) // 2])  # truncated
    bad(tmp_path, path, ["x.zarr/1", "blosc"])
    (path / "1").write_bytes(Blosc(cname="lz4").encode(np.zeros(7)))  # the wrong decoded size
    bad(tmp_path, path, ["x.zarr/1", "decodes to 56 bytes"])
    (path / "1").write_bytes(b"garbage" * 20)  # corrupt
    bad(tmp_path, path, ["x.zarr/1", "blosc"])
    (path / "1").unlink()  # missing: the fill value, as zarr-python reads it
    expected = zarr.open(str(path), mode="r")[...]
    assert same_bits(read_ooc(path, tmp_path), expected) and np.all(expected[10:20] == 0)
    raw = tmp_path / "raw.zarr"
    zarr_array(raw, data, (10,), None)
    (raw / "2").write_bytes((raw / "2").read_bytes()[:-8])
    bad(tmp_path, raw, ["raw.zarr/2", "72 bytes, not the 80"])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
