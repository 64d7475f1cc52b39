"""oocrun copy ARRAY -o OUT and ooc.copy(a, out=): any array, selection or masked selection
written to a new file as np.save(OUT, np.copy(x[sel], order="K")) writes it (a .npy byte for
byte: dtype with its byte order, shape, numpy's memory order), or to an HDF5 dataset (contiguous, or chunked and
compressed with apply's options), which h5py reads back. A copy onto its own input is
refused before anything is written; a failed or cancelled copy leaves nothing behind.
Run by ctest (OOCRUN, OOC_BUILD_DIR set), or: OOCRUN=build/oocrun python3 test_copy.py."""
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import DTYPES, OOCRUN, npy_bytes, run, sample, thin  # noqa: E402

h5py = pytest.importorskip("h5py")
BUILD = os.environ.get("OOC_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
try:
    import ooc  # ooc.copy's checks run where the module is built (OOC_BUILD_PYTHON)
except ImportError:
    ooc = None
needs_module = pytest.mark.skipif(ooc is None, reason="the Python module is not built")

SHAPES = [(), (0,), (13,), (40, 7), (0, 3), (5, 1), (3, 4, 5)]
# (selection text, numpy's index)
SELECTIONS = [("::3, 2", np.s_[::3, 2]), ("5", np.s_[5]), (":, [0, 4, 6]", np.s_[:, [0, 4, 6]]),
              ("-1:2:-3, 1:5", np.s_[-1:2:-3, 1:5]), ("[3, 1, 3]", np.s_[[3, 1, 3]])]


def leftovers(directory):
    """Temporaries ooc makes beside an output (named with '.ooc-')."""
    return sorted(n for n in os.listdir(directory) if ".ooc-" in n)


def save(directory, name, array):
    path = os.path.join(directory, name)
    np.save(path, array)
    return path


def in_order(array, order):
    return np.asfortranarray(array) if order == "F" else np.ascontiguousarray(array)


@pytest.mark.parametrize("dtype", thin(DTYPES))
@pytest.mark.parametrize("order", ["C", "F"])
def test_copy_writes_what_np_save_writes(tmp_path, dtype, order):
    for k, shape in enumerate(SHAPES):
        data = in_order(sample(dtype, shape, seed=k), order)
        src = save(tmp_path, f"in{k}.npy", data)
        out = str(tmp_path / f"out{k}.npy")
        run("copy", src, "-o", out, "--quiet")
        with open(out, "rb") as f:
            assert f.read() == npy_bytes(np.load(src)), (dtype, order, shape)


@pytest.mark.parametrize("dtype", ["<f8", ">f4", "|b1", ">i8", "<u2"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_copy_of_a_selection_is_numpy_s(tmp_path, dtype, order):
    data = in_order(sample(dtype, (40, 7), seed=3), order)
    src = save(tmp_path, "x.npy", data)
    for k, (text, index) in enumerate(SELECTIONS):
        out = str(tmp_path / f"s{k}.npy")
        run("copy", f"{src}[{text}]", "-o", out, "--quiet", "--tile-bytes", "64K")
        # numpy's result in its own memory order (np.save would copy a view that is not
        # contiguous into C order; a streamed copy keeps the order of the selection)
        expected = npy_bytes(np.copy(data[index], order="K"))
        with open(out, "rb") as f:
            assert f.read() == expected, (dtype, order, text)
        if ooc is None:
            continue
        # the same through Python, on an ooc.Array indexed as numpy is
        py_out = str(tmp_path / f"p{k}.npy")
        result = ooc.copy(ooc.open(src)[index], out=py_out)
        assert isinstance(result, ooc.Array) and result.path == py_out
        with open(py_out, "rb") as f:
            assert f.read() == expected, (dtype, order, text)


def test_copy_of_a_masked_selection(tmp_path):
    data = sample("<f8", (300, 6), seed=4)
    src = save(tmp_path, "x.npy", data)
    mask = data[:, 3] > 0.5
    m = save(tmp_path, "m.npy", mask)
    cases = [(f"@{m}", np.s_[mask]), (f"@{m}, 2", np.s_[mask, 2])]
    for k, (text, index) in enumerate(cases):
        out = str(tmp_path / f"o{k}.npy")
        proc = run("copy", f"{src}[{text}]", "-o", out, "--quiet", check=False)
        if proc.returncode == 2 and "mask" in proc.stderr:
            pytest.xfail("boolean masks in selections are not there yet: " + proc.stderr)
        assert proc.returncode == 0, proc.stderr
        with open(out, "rb") as f:
            assert f.read() == npy_bytes(data[index])
    # the mask file may be the output: it is read before the output replaces it
    proc = run("copy", f"{src}[@{m}, 0]", "-o", m, "--quiet")
    np.testing.assert_array_equal(np.load(m), data[mask, 0])


@pytest.mark.parametrize("options", [[], ["--chunks", "7"], ["--chunks", "auto", "--compression", "gzip:1"],
                                     ["--compression", "lz4", "--shuffle"], ["--compression", "blosc:zstd:3"],
                                     ["--shuffle"]])
def test_npy_to_hdf5_and_back(tmp_path, options):
    for dtype in ("<f8", ">f4", "|b1", "<i2", ">u8", "<f2"):
        data = sample(dtype, (50, 6), seed=5)
        src = save(tmp_path, "x.npy", data)
        h5 = str(tmp_path / "x.h5")
        run("copy", src, "-o", f"{h5}:/g/x", *options, "--quiet", "--overwrite")
        with h5py.File(h5, "r") as f:
            ds = f["g/x"]
            assert ds.dtype == np.dtype(dtype) or (dtype == "|b1" and ds.dtype == bool), (dtype, ds.dtype)
            assert (ds.chunks is not None) == bool(options), options
            if "--compression" in options:
                assert ds.compression is not None or ds._filters, options
            np.testing.assert_array_equal(ds[...], data)
        back = str(tmp_path / "back.npy")
        run("copy", f"{h5}:/g/x", "-o", back, "--quiet")  # decompress
        with open(back, "rb") as f:
            assert f.read() == npy_bytes(data.astype(np.dtype(dtype))), (dtype, options)


@needs_module
def test_python_copy_takes_the_output_options(tmp_path):
    data = sample("<f4", (100, 5), seed=6)
    src = save(tmp_path, "x.npy", data)
    h5 = str(tmp_path / "x.h5")
    out = ooc.copy(src, out=f"{h5}:/c", compression="gzip:1", shuffle=True, chunks=16)
    assert out.format == "hdf5" and out.shape == data.shape
    with h5py.File(h5, "r") as f:
        assert f["c"].chunks == (16, 5) and f["c"].compression == "gzip" and f["c"].shuffle
        np.testing.assert_array_equal(f["c"][...], data)
    with pytest.raises(ValueError, match="exists|overwrite"):
        ooc.copy(src, out=f"{h5}:/c")
    ooc.copy(ooc.open(src)[::2], out=f"{h5}:/c", overwrite=True, chunks="auto")
    with h5py.File(h5, "r") as f:
        np.testing.assert_array_equal(f["c"][...], data[::2])
    with pytest.raises(ValueError, match="HDF5"):
        ooc.copy(src, out=str(tmp_path / "y.npy"), compression="lz4")
    assert not os.path.exists(tmp_path / "y.npy")
    with pytest.raises(ValueError, match="chunks"):
        ooc.copy(src, out=f"{h5}:/d", chunks="many")
    with pytest.raises(TypeError):
        ooc.copy(src, out=None)


def test_fortran_order_to_hdf5_is_refused(tmp_path):
    src = save(tmp_path, "f.npy", np.asfortranarray(sample("<f8", (6, 4))))
    for options in ([], ["--compression", "gzip"]):
        proc = run("copy", src, "-o", f"{tmp_path}/f.h5:/x", *options, check=False)
        assert proc.returncode == 2 and "C order" in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1
        assert not os.path.exists(tmp_path / "f.h5") and leftovers(tmp_path) == []
    if ooc is not None:
        with pytest.raises(ValueError, match="C order"):
            ooc.copy(src, out=f"{tmp_path}/f.h5:/x", compression="gzip")


def test_copy_onto_its_own_input_is_refused_before_anything_is_written(tmp_path):
    data = sample("<i4", (30, 4))
    src = save(tmp_path, "x.npy", data)
    before = open(src, "rb").read()
    os.link(src, tmp_path / "hard.npy")
    os.symlink(src, tmp_path / "soft.npy")
    for out in (src, str(tmp_path / "hard.npy"), str(tmp_path / "soft.npy"), f"{tmp_path}/./x.npy"):
        for array in (src, f"{src}[::2]", str(tmp_path / "soft.npy")):
            proc = run("copy", array, "-o", out, check=False)
            assert proc.returncode == 2, proc.stderr
            assert proc.stderr.startswith(f"oocrun: {out}: copy: the output is the input"), proc.stderr
            assert proc.stderr.count("\n") == 1
            if ooc is not None:
                with pytest.raises(ValueError, match="the output is the input"):
                    ooc.copy(array, out=out)
    assert open(src, "rb").read() == before and leftovers(tmp_path) == []
    # HDF5: the same dataset, however its name is spelled, is refused (with --overwrite too);
    # another dataset of the file it is read from is a new array, as for apply.
    h5 = str(tmp_path / "r.h5")
    with h5py.File(h5, "w") as f:
        f["g/a"] = data
        f.create_dataset("c", data=data, chunks=(4, 4), compression="gzip")
    for name, spelled in (("g/a", "/g//a"), ("g/a", "/g/a/"), ("c", "/c")):
        proc = run("copy", f"{h5}:/{name}", "-o", f"{h5}:{spelled}", "--overwrite", check=False)
        assert proc.returncode == 2 and "the output is the input" in proc.stderr, proc.stderr
    for name in ("g/a", "c"):
        run("copy", f"{h5}:/{name}", "-o", f"{h5}:/copy_of_{name.replace('/', '_')}", "--quiet")
        if ooc is not None:
            ooc.copy(f"{h5}:/{name}", out=f"{h5}:/py_{name.replace('/', '_')}")
    with h5py.File(h5, "r") as f:
        for name in ("g/a", "c", "copy_of_g_a", "copy_of_c") + (("py_g_a", "py_c") if ooc else ()):
            np.testing.assert_array_equal(f[name][...], data)


def test_bad_copies_leave_nothing_behind(tmp_path):
    src = save(tmp_path, "x.npy", sample("<f8", (10, 3)))
    cases = [
        (["copy", str(tmp_path / "missing.npy"), "-o", str(tmp_path / "o.npy")], 1, "no such file"),
        (["copy", src, "-o", str(tmp_path / "o.txt")], 2, "an output is a .npy file"),
        (["copy", src, "-o", str(tmp_path / "o.npy"), "--compression", "gzip"], 2, "HDF5"),
        (["copy", src, "-o", f"{tmp_path}/o.h5:/x", "--compression", "zip"], 2, "zip"),
        (["copy", src, "-o", f"{tmp_path}/o.h5:/x", "--chunks", "0"], 2, "--chunks"),
        (["copy", f"{src}[10]", "-o", str(tmp_path / "o.npy")], 2, "index 10 is out of bounds for axis 0 with size 10"),
        (["copy", src], 2, "--output"),
    ]
    for args, code, words in cases:
        proc = run(*args, check=False)
        assert proc.returncode == code, (args, proc.stderr)
        assert words in proc.stderr and proc.stderr.count("\n") == 1, (args, proc.stderr)
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_json_and_report(tmp_path):
    data = sample(">f4", (20, 3))
    src = save(tmp_path, "x.npy", data)
    proc = run("copy", f"{src}[::2]", "-o", str(tmp_path / "o.npy"), "--json")
    import json
    report = json.loads(proc.stdout)
    assert report["op"] == "copy" and report["dtype"] == ">f4" and report["shape"] == [10, 3]
    assert report["bytes"] == 120 and report["output"] == str(tmp_path / "o.npy") and proc.stderr == ""
    proc = run("copy", src, "-o", str(tmp_path / "p.npy"))
    assert proc.stdout == "" and proc.stderr.startswith(f"oocrun: copy {src} -> ")


def test_a_cancelled_copy_leaves_no_output(tmp_path):
    src = str(tmp_path / "big.npy")
    m = np.lib.format.open_memmap(src, mode="w+", dtype="<f8", shape=(1 << 25,))  # sparse: no disk
    del m
    out = str(tmp_path / "o.npy")
    for _ in range(5):
        p = subprocess.Popen([OOCRUN, "copy", src, "-o", out, "--progress", "--tile-bytes", "256K", "--threads", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stderr.readline()
        assert line.startswith("progress: "), line
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        if p.returncode == 0:  # finished before the signal: again
            os.remove(out)
            continue
        assert p.returncode == 130, err
        assert "cancelled" in err and "no output written" in err, err
        break
    else:
        pytest.skip("each copy finished before its SIGINT")
    assert not os.path.exists(out) and leftovers(tmp_path) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))


def cached_bytes(path):
    """Bytes of the file in the page cache (util-linux fincore)."""
    return int(subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path], check=True,
                              capture_output=True, text=True).stdout.split()[0])


@pytest.mark.parametrize("dtype", ["<f8", ">i4", "|u1"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_selections_read_their_source_directly(tmp_path, dtype, order):
    """--io direct: a selection of a file (strides, index lists, masks) reads the file's
    spans with O_DIRECT, not through its mapping, and gives numpy's bytes; the source's
    pages are not left in the page cache (checked where the file system takes O_DIRECT)."""
    from memory_cgroup import drop_from_page_cache
    data = in_order(sample(dtype, (30_000, 9), seed=5), order)
    src = save(tmp_path, "x.npy", data)
    mask = np.random.default_rng(5).random(30_000) < 0.1
    m = save(tmp_path, "m.npy", mask)
    c = save(tmp_path, "c.npy", mask[:9])
    # (text, index, whether read directly in C order, in F order): a selection whose blocks
    # interleave (columns of a C array by a list or mask, rows of an F array by a mask) is
    # gathered in one pass through the mapping (a stash), and keeps reading it.
    cases = [("::3, 2", np.s_[::3, 2], True, True), (":, [0, 4, 6]", np.s_[:, [0, 4, 6]], False, True),
             ("-1:2:-7, 1:5", np.s_[-1:2:-7, 1:5], True, True), (f"@{m}", np.s_[mask], True, False),
             (f"@{m}, 3", np.s_[mask, 3], True, True), (f"5000:9000, @{c}", np.s_[5000:9000, mask[:9]], False, True)]
    for k, (text, index, direct_c, direct_f) in enumerate(cases):
        out = str(tmp_path / f"d{k}.npy")
        drop_from_page_cache(src)
        run("copy", f"{src}[{text}]", "-o", out, "--io", "direct", "--tile-bytes", "64K", "--threads", "2", "--quiet")
        with open(out, "rb") as f:
            assert f.read() == npy_bytes(np.copy(data[index], order="K")), (dtype, order, text)
        file_system = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True,
                                     text=True).stdout.strip()
        if file_system != "tmpfs" and (direct_c if order == "C" else direct_f):  # tmpfs refuses O_DIRECT
            assert cached_bytes(src) <= 64 << 10, (text, cached_bytes(src))
