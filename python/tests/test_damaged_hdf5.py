"""A damaged HDF5 file that crashes the HDF5 library raises ooc.Error; it never ends the
interpreter (each file version is probed in a child process first)."""
import os
import struct

import numpy as np
import pytest

import ooc

h5py = pytest.importorskip("h5py")

DAMAGED = "damaged HDF5 file (the HDF5 library crashed reading it)"


def damage_root_btree_address(path):
    """Overwrites the root group's B-tree address (the symbol table message of the root
    object header named by h5py's version-0 superblock) with 8 bytes of 0xff, which the
    HDF5 library follows to a SIGSEGV (as tests/interop/test_hdf5.py does)."""
    with open(path, "r+b") as f:
        head = f.read(96)
        assert head[:8] == b"\x89HDF\r\n\x1a\n" and head[8] == 0
        root, = struct.unpack_from("<Q", head, 64)
        f.seek(root)
        header = f.read(1024)
        assert header[0] == 1
        count, = struct.unpack_from("<H", header, 2)
        at = 16
        for _ in range(count):
            kind, size = struct.unpack_from("<HH", header, at)
            if kind == 0x11:
                f.seek(root + at + 8)
                f.write(b"\xff" * 8)
                return
            at += 8 + size
    raise AssertionError("no symbol table message in the root object header")


def make(path):
    with h5py.File(path, "w") as f:
        for k in range(10):
            f[f"g{k}/v"] = np.arange(50, dtype="<i4")
        f["c"] = np.arange(1000.0)
        f.create_dataset("x", data=np.arange(4000.0).reshape(200, 20), chunks=(5, 20), compression="gzip")


def test_a_file_that_crashes_the_library_raises_and_the_interpreter_lives_on(tmp):
    path = os.path.join(tmp, "damaged.h5")
    make(path)
    with open(path, "rb") as f:
        original = f.read()
    damage_root_btree_address(path)
    for name in ("/c", "/x"):
        with pytest.raises(ooc.Error, match=DAMAGED.replace("(", r"\(").replace(")", r"\)")) as raised:
            ooc.open(f"{path}:{name}")
        assert str(raised.value) == f"{path}: {DAMAGED}"
    with pytest.raises(ooc.Error, match="damaged HDF5 file"):  # the verdict is kept: asked again, the same
        ooc.sum(f"{path}:/c")
    npy = os.path.join(tmp, "a.npy")
    np.save(npy, np.arange(10.0))
    with pytest.raises(ooc.Error, match="damaged HDF5 file"):  # an output into it
        ooc.apply("add-one", npy, out=f"{path}:/y")
    # The same file repaired (a new version: size, mtime) is probed again, and opens.
    with open(path, "wb") as f:
        f.write(original)
    os.utime(path, ns=(0, 1))
    assert ooc.sum(f"{path}:/c") == np.arange(1000.0).sum()
    assert ooc.open(f"{path}:/x").shape == (200, 20)
    assert ooc.sum(f"{path}:/g3/v") == np.arange(50).sum()
