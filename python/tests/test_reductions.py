"""ooc's reductions against numpy on every dtype, byte order and memory order."""
import warnings

import numpy as np
import pytest

import ooc
from conftest import DTYPES, sample, save

FULL = ["sum", "prod", "mean", "min", "max", "argmin", "argmax", "var", "std", "count_nonzero", "any", "all",
        "nansum", "nanmean", "nanmin", "nanmax"]
# Within rounding, not bit for bit (docs/decisions/2026-11-29-var-std-one-pass.md;
# numpy's norm calls BLAS: docs/decisions/2026-11-30-norm.md).
# float16: numpy's own two-pass float16 variance along an axis is further than 4e-3 from
# the exact value on some data (measured 4.8e-3 here), where ooc's float64 moments are exact.
TOLERANCE = {"f2": 1e-2, "f4": 1e-5}
APPROXIMATE = {"var", "std", "norm"}


def numpy_reduction(op, values, axis=None, ddof=0):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if op == "count_nonzero":
            result = np.count_nonzero(values, axis=axis)
            return np.int64(result) if axis is None else result
        if op == "norm":
            return np.linalg.norm(values.ravel()) if axis is None else np.linalg.norm(values, axis=axis)
        if op in ("var", "std"):
            return getattr(np, op)(values, axis=axis, ddof=ddof)
        return getattr(np, op)(values, axis=axis)


def assert_same(ours, theirs, op, dtype_code):
    ours_array, theirs_array = np.asarray(ours), np.asarray(theirs)
    assert ours_array.dtype == theirs_array.dtype, (op, dtype_code, ours_array.dtype, theirs_array.dtype)
    assert ours_array.shape == theirs_array.shape
    if op in APPROXIMATE:
        np.testing.assert_allclose(ours_array, theirs_array, rtol=TOLERANCE.get(dtype_code.lstrip("<>"), 1e-12),
                                   equal_nan=True, err_msg=f"{op} {dtype_code}")
    else:  # numpy's bits
        assert ours_array.tobytes() == theirs_array.tobytes(), (op, dtype_code, ours, theirs)


def layouts():
    for code in DTYPES:
        for byteorder in ("<", ">") if np.dtype(code).itemsize > 1 else ("|",):
            yield code, byteorder


@pytest.mark.parametrize("code,byteorder", list(layouts()))
def test_every_reduction_full_and_along_each_axis(module_tmp, code, byteorder):
    values = sample(code, (301, 7), seed=len(code) + ord(byteorder))
    for order in ("C", "F"):
        path = save(module_tmp, f"r_{code}_{byteorder}_{order}.npy", values,
                    byteorder if byteorder != "|" else "=", order)
        data = np.load(path)
        a = ooc.open(path)
        for op in FULL + ["norm"]:
            for axis in (None, 0, 1, -1):
                try:
                    expected = numpy_reduction(op, data, axis)
                except (TypeError, ValueError):
                    with pytest.raises(ValueError):  # numpy's exception, for an empty axis too
                        getattr(ooc, op)(a, axis=axis)
                    continue
                ours = getattr(ooc, op)(a, axis=axis)
                assert_same(ours, expected, op, code)
                if axis is None:
                    assert isinstance(ours, np.generic), (op, type(ours))
                else:
                    assert isinstance(ours, np.ndarray)


def test_methods_match_functions(module_tmp):
    path = save(module_tmp, "methods.npy", sample("f8", (1000, 3)))
    a = ooc.open(path)
    for op in FULL:
        assert np.asarray(getattr(a, op)()).tobytes() == np.asarray(getattr(ooc, op)(a)).tobytes()
    assert ooc.sum(path) == a.sum() == np.load(path).sum()


def test_ddof(module_tmp):
    data = sample("f8", (500, 4))
    path = save(module_tmp, "ddof.npy", data)
    for op in ("var", "std"):
        np.testing.assert_allclose(getattr(ooc, op)(path, ddof=1), getattr(np, op)(data, ddof=1), rtol=1e-12)
        np.testing.assert_allclose(getattr(ooc, op)(path, axis=0, ddof=2), getattr(np, op)(data, axis=0, ddof=2),
                                   rtol=1e-12)


def test_nan_forms_skip_nan(module_tmp):
    data = sample("f8", (40000,))
    data[::7] = np.nan
    path = save(module_tmp, "nans.npy", data)
    for op in ("nansum", "nanmean", "nanmin", "nanmax", "sum", "max", "argmax"):
        assert_same(getattr(ooc, op)(path), getattr(np, op)(data), op, "f8")


def test_large_blocked_sum_is_numpy_bits_for_any_threads_and_tiles(module_tmp):
    data = sample("f4", (300000,))
    path = save(module_tmp, "blocks.npy", data)
    expected = np.sum(data)
    for threads, tile_bytes in ((1, 1 << 16), (2, "64K"), (7, 1 << 20), (None, None)):
        assert ooc.sum(path, threads=threads, tile_bytes=tile_bytes).tobytes() == expected.tobytes()
        assert ooc.mean(path, threads=threads, tile_bytes=tile_bytes, io="mmap") == np.mean(data)
    assert ooc.sum(path, io="direct") == expected


def test_zero_d_and_empty_arrays(tmp):
    zero_d = save(tmp, "zero_d.npy", np.array(2.5, dtype="f4"))
    a = ooc.open(zero_d)
    assert a.shape == () and a.ndim == 0 and a.size == 1
    assert ooc.sum(a) == np.float32(2.5) and ooc.sum(a).dtype == np.float32
    assert ooc.argmax(a) == 0
    with pytest.raises(TypeError):
        len(a)
    assert np.asarray(a).shape == () and np.asarray(a) == np.float32(2.5)

    empty = save(tmp, "empty.npy", np.zeros((0, 3), dtype="i2"))
    e = ooc.open(empty)
    assert e.shape == (0, 3) and e.size == 0 and len(e) == 0
    assert ooc.sum(e) == 0 and ooc.sum(e).dtype == np.int64
    for op in ("mean", "nanmean", "var", "std"):
        with pytest.warns(RuntimeWarning, match=f"{op} of an empty array is nan"):
            assert np.isnan(getattr(ooc, op)(e))
    for op, words in [("min", "zero-size array to reduction operation minimum which has no identity"),
                      ("nanmax", "zero-size array to reduction operation fmax"),
                      ("argmin", "attempt to get argmin of an empty sequence")]:
        with pytest.raises(ValueError, match=words):  # numpy's exception and words
            getattr(ooc, op)(e)
    assert np.array_equal(ooc.sum(e, axis=0), np.zeros(3, dtype=np.int64))
    assert ooc.sum(e, axis=1).shape == (0,)
    assert np.asarray(e).shape == (0, 3)


def test_axis_reduction_to_a_file(tmp):
    data = sample("f8", (2000, 6))
    path = save(tmp, "tall.npy", data)
    m = ooc.mean(path, axis=0, out=f"{tmp}/m.npy")
    assert isinstance(m, ooc.Array) and m.path == f"{tmp}/m.npy"
    assert np.load(f"{tmp}/m.npy").tobytes() == np.mean(data, axis=0).tobytes()
    rows = ooc.sum(path, axis=1, out=f"{tmp}/rows.npy")
    assert np.array_equal(np.asarray(rows), np.sum(data, axis=1))
    with pytest.raises(ValueError, match="axis"):
        ooc.sum(path, out=f"{tmp}/x.npy")  # a full reduction is one value
    with pytest.raises(ValueError, match="out of bounds"):
        ooc.sum(path, axis=2)


@pytest.mark.filterwarnings("ignore:Converting input from bool")  # numpy's own, for the bool data
def test_histogram_is_numpys(module_tmp):
    for code in ("f8", "f4", "i2", "u8", "b1"):
        data = sample(code, (5000,))
        path = save(module_tmp, f"h_{code}.npy", data)
        for bins, value_range in ((50, (-4, 4)), (7, None), (10, (0, 1.5))):
            counts, edges = ooc.histogram(path, bins=bins, range=value_range)
            expected_counts, expected_edges = np.histogram(data, bins=bins, range=value_range)
            assert np.array_equal(counts, expected_counts) and counts.dtype == expected_counts.dtype
            assert edges.tobytes() == expected_edges.tobytes() and edges.dtype == expected_edges.dtype
    counts, edges = ooc.open(path).histogram(bins=3)
    assert counts.sum() == 5000
    ints = save(module_tmp, "h_u8_wide.npy", np.arange(1000, dtype="u8") * 2**50)
    for value_range in ((0, 2**64 - 1), (np.int16(-3), np.float32(2.5e17)), (0.5, 2**63 + 2**12)):
        counts, edges = ooc.histogram(ints, bins=4, range=value_range)
        expected_counts, expected_edges = np.histogram(np.load(ints), bins=4, range=value_range)
        assert np.array_equal(counts, expected_counts) and edges.tobytes() == expected_edges.tobytes(), value_range
