"""ooc.Array: opening, attributes, selections, materialising, and the ways in."""
import os

import numpy as np
import pytest

import ooc
from conftest import sample, save


@pytest.fixture(scope="module")
def table(module_tmp):
    data = sample("f8", (1000, 8), seed=3)
    return save(module_tmp, "table.npy", data), data


def test_attributes_are_numpy_types(table):
    path, data = table
    a = ooc.open(path)
    assert a.shape == (1000, 8) and type(a.shape) is tuple and all(type(n) is int for n in a.shape)
    assert a.dtype == np.dtype("f8") and isinstance(a.dtype, np.dtype)
    assert (a.ndim, a.size, a.nbytes, len(a)) == (2, 8000, 64000, 1000)
    assert all(type(v) is int for v in (a.ndim, a.size, a.nbytes))
    assert a.order == "C"
    assert repr(a) == f"ooc.Array({path!r}, shape=(1000, 8), dtype=float64, order='C')"
    assert ooc.open(a) is a
    assert ooc.open(os.fsencode(path)).shape == a.shape


def test_byte_order_and_fortran_order_are_kept(module_tmp):
    data = sample("i4", (30, 4))
    path = save(module_tmp, "big_endian_f.npy", data, ">", "F")
    a = ooc.open(path)
    assert a.dtype == np.dtype(">i4") and a.order == "F"
    values = np.asarray(a)
    assert values.dtype == np.dtype(">i4") and values.flags.f_contiguous
    assert np.array_equal(values, data)


def test_selection_is_lazy_and_numpys(table):
    path, data = table
    a = ooc.open(path)
    for key in [np.s_[::10, [2, 5]], np.s_[5], np.s_[-3:], np.s_[::-7, 3], np.s_[..., 1], np.s_[10:20, ...],
                np.s_[[0, 999, 5]], np.s_[np.array([4, 1]), 2:6], np.s_[100:0:-3, ::2]]:
        v = a[key]
        assert isinstance(v, ooc.Array)
        expected = data[key]
        assert v.shape == expected.shape, key
        assert np.array_equal(np.asarray(v), expected), key
        assert np.array_equal(v.read(), expected)
        assert ooc.sum(v).tobytes() == np.sum(expected).tobytes(), key
    chained = a[::2][10:20, [1, 3]][::-1]
    assert np.array_equal(np.asarray(chained), data[::2][10:20, [1, 3]][::-1])
    assert "[::2]" in repr(chained)
    text = ooc.open(f"{path}[::5, 3]")
    assert np.array_equal(np.asarray(text), data[::5, 3])


def test_bad_selections_are_numpy_s_errors(table):
    path, _ = table
    a = ooc.open(path)
    with pytest.raises(IndexError, match="^index 1000 is out of bounds for axis 0 with size 1000$"):
        a[1000]
    with pytest.raises(IndexError, match="too many indices"):
        a[1, 2, 3]
    with pytest.raises(IndexError, match="boolean index did not match indexed array along dimension 0"):
        a[np.ones(999, dtype=bool)]
    with pytest.raises(ValueError):
        a[None]
    with pytest.raises(ValueError):
        a[::0]


def test_memory_error_when_larger_than_memory(tmp):
    # A sparse file whose header promises far more than memory: reading is refused
    # before anything is allocated.
    huge = (ooc._ooc.available_memory() // 8 + (1 << 20),)
    path = os.path.join(tmp, "huge.npy")
    m = np.lib.format.open_memmap(path, mode="w+", dtype="f8", shape=huge)
    del m
    a = ooc.open(path)
    with pytest.raises(MemoryError, match="do not fit in the .* bytes of memory available"):
        a.read()
    with pytest.raises(MemoryError):
        np.asarray(a)
    with pytest.raises(MemoryError):
        ooc.eval("a + 1", a=a)


def test_memmap_and_h5py_inputs(tmp):
    data = sample("f4", (500, 3))
    path = save(tmp, "m.npy", data)
    m = np.load(path, mmap_mode="r")
    assert ooc.sum(m) == np.sum(data)
    assert np.array_equal(ooc.mean(m, axis=0), np.mean(data, axis=0))
    with pytest.raises(ValueError, match="view of part"):
        ooc.sum(m[1:])
    h5py = pytest.importorskip("h5py")
    h5 = os.path.join(tmp, "run.h5")
    with h5py.File(h5, "w") as f:
        f.create_dataset("sim/p", data=data)
        f.create_dataset("chunked", data=data, chunks=(50, 3), compression="gzip")
    with h5py.File(h5, "r") as f:
        for name in ("sim/p", "chunked"):
            ds = f[name]
            assert ooc.sum(ds).tobytes() == np.sum(data).tobytes()
            assert ooc.open(ds).shape == (500, 3)
            assert np.array_equal(np.asarray(ooc.open(ds)[::7, 1]), data[::7, 1])
    assert ooc.open(f"{h5}:/sim/p").format == "hdf5"
    assert ooc.max(f"{h5}:/chunked") == data.max()
    with pytest.raises(TypeError):
        ooc.open([1, 2, 3])


def test_dask_from_array(table):
    da = pytest.importorskip("dask.array")
    path, data = table
    x = da.from_array(ooc.open(path), chunks=(128, 8))
    assert x.shape == data.shape and x.dtype == data.dtype
    np.testing.assert_allclose(x.sum().compute(), data.sum(), rtol=1e-12)
    part = x[10:20, 2:4].compute()
    assert isinstance(part, np.ndarray) and np.array_equal(part, data[10:20, 2:4])
    assert np.array_equal(np.asarray(x[::3].compute()), data[::3])


def test_the_type_stub_declares_the_api():
    import ast
    stub = os.path.join(os.path.dirname(ooc.__file__), "__init__.pyi")
    with open(stub) as f:
        tree = ast.parse(f.read())
    declared = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.Assign):
            declared.update(t.id for t in node.targets if isinstance(t, ast.Name))
    assert set(ooc.__all__) <= declared, set(ooc.__all__) - declared
    methods = {n.name for n in next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Array").body
               if isinstance(n, ast.FunctionDef)}
    methods |= {t.id for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Array"
                for n in c.body if isinstance(n, ast.Assign) for t in n.targets}
    public = {name for name in dir(ooc.Array) if not name.startswith("_")} - {"shape", "dtype", "order", "format"}
    assert public <= methods | {"path", "selections", "ndim", "size", "itemsize", "nbytes"}, public - methods
