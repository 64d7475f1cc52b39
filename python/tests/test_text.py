"""ooc.import_text and ooc.export_text: oocrun import / export from Python, against
np.loadtxt and np.savetxt."""
import os

import numpy as np
import pytest

import ooc
from conftest import leftovers


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


@pytest.mark.parametrize("dtype", ["f8", "f4", "i8", "u2"])
def test_import_gives_np_loadtxts_values_dtype_and_shape(tmp_path, dtype):
    rng = np.random.default_rng(4)
    values = rng.integers(0, 1000, (301, 5)) if dtype[0] in "iu" else rng.standard_normal((301, 5)) * 1e3
    src = str(tmp_path / "a.csv")
    np.savetxt(src, values, fmt="%d" if dtype[0] in "iu" else "%.17g", delimiter=",")
    out = str(tmp_path / "a.npy")
    got = ooc.import_text(src, out, dtype=dtype, tile_bytes="64K", threads=2)
    expected = np.loadtxt(src, delimiter=",", dtype=dtype)
    assert isinstance(got, ooc.Array)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.load(out).tobytes() == expected.tobytes()


def test_import_takes_np_loadtxts_keywords(tmp_path):
    src = write(tmp_path / "w.txt", "# a comment\nx y z\n1  2\t3\n\n4 5 6 # tail\n")
    out = str(tmp_path / "w.npy")
    ooc.import_text(src, out, delimiter=None, skiprows=1, header=True, usecols=[0, 2])
    np.testing.assert_array_equal(np.load(out), np.loadtxt(src, skiprows=2, usecols=[0, 2]))
    one = str(tmp_path / "one.npy")
    ooc.import_text(src, one, delimiter=None, skiprows=2, usecols=1, ndmin=2)
    assert np.load(one).shape == np.loadtxt(src, skiprows=2, usecols=1, ndmin=2).shape


def test_import_takes_several_character_comments_as_np_loadtxt(tmp_path):
    src = write(tmp_path / "c.csv", "// head\n1,2 // x\n3,4\n//\n5,6//7\n")
    out = str(tmp_path / "c.npy")
    ooc.import_text(src, out, comments="//")
    assert np.load(out).tobytes() == np.loadtxt(src, delimiter=",", comments="//").tobytes()


def test_bad_text_is_an_ooc_error_naming_line_and_column_and_leaves_nothing(tmp_path):
    src = write(tmp_path / "bad.csv", "1,2\n3,abc\n")
    with pytest.raises(ooc.Error, match=r"bad\.csv:2:3"):  # bad file contents: a runtime error, as oocrun's exit 1
        ooc.import_text(src, str(tmp_path / "bad.npy"))
    assert leftovers(str(tmp_path), keep=["bad.csv"]) == []
    with pytest.raises(FileNotFoundError):
        ooc.import_text(str(tmp_path / "missing.csv"), str(tmp_path / "m.npy"))
    with pytest.raises(ValueError, match="delimiter"):
        ooc.import_text(src, str(tmp_path / "d.npy"), delimiter=";;")


def test_export_round_trips_through_np_loadtxt_and_takes_selections(tmp_path):
    a = np.random.default_rng(5).standard_normal((200, 3)).astype(">f4")
    src = str(tmp_path / "a.npy")
    np.save(src, a)
    out = str(tmp_path / "a.csv")
    ooc.export_text(src, out, threads=2, tile_bytes="4K")
    assert np.loadtxt(out, delimiter=",", dtype="f4").tobytes() == a.astype("<f4").tobytes()
    part = str(tmp_path / "part.csv")
    ooc.export_text(ooc.open(src)[::7, 1], part, fmt="%.6g")
    with open(part) as f:
        assert f.read().splitlines() == ["%.6g" % v for v in a[::7, 1]]
    assert sorted(os.listdir(tmp_path)) == ["a.csv", "a.npy", "part.csv"]
