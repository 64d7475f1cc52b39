"""Shared fixtures for the ooc Python tests (run by ctest with PYTHONPATH=build/python)."""
import os
import shutil
import tempfile

import numpy as np
import pytest

DTYPES = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]


def scratch_root():
    # tmpfs where there is one: the tests write hundreds of small outputs, each fsynced.
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def tmp(request):
    path = tempfile.mkdtemp(prefix="ooc-py-", dir=scratch_root())
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def module_tmp():
    path = tempfile.mkdtemp(prefix="ooc-py-", dir=scratch_root())
    yield path
    shutil.rmtree(path, ignore_errors=True)


def sample(dtype, shape, seed=0):
    """Values of `dtype` in `shape` that make the order of summation matter: inexact
    decimals for floats, the whole range of small integers, a mix for bools."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype.kind == "b":
        values = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dtype)
    else:
        values = (rng.standard_normal(n) * 3.3 + 0.7).astype(dtype)
    return values.reshape(shape)


def save(directory, name, values, byteorder="=", order="C"):
    """np.save of `values` in that byte order and memory order; returns the path."""
    dtype = values.dtype.newbyteorder(byteorder) if values.dtype.itemsize > 1 else values.dtype
    values = np.asarray(values, dtype=dtype, order=order)
    path = os.path.join(directory, name)
    np.save(path, values)
    return path


def leftovers(directory, keep=()):
    """Files in `directory` besides `keep`: temporaries (.NAME.ooc-...) and journals."""
    return sorted(set(os.listdir(directory)) - set(keep))
