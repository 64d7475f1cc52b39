"""ooc.sum of a file 4x larger than the memory cgroup its Python process runs in.

As tests/interop/test_memory_bound.py does for oocrun, with its harness
(tests/interop/memory_cgroup.py): a cgroup v1 memory group (root, /sys/fs/cgroup/memory
writable) limits a fresh Python process to LIMIT; the file is
dropped from the page cache first so its pages are charged to the group as ooc reads
them. The run must finish (no OOM kill) with numpy's bits, inside the limit; reading the
file whole into memory must be refused with MemoryError, by the cgroup's limit (the
machine has room for it).
"""
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "interop"))
from memory_cgroup import MemoryGroup, Unavailable, drop_from_page_cache  # noqa: E402

MiB = 1 << 20
LIMIT = 128 * MiB
FILE_BYTES = 4 * LIMIT


def make_group():
    try:
        return MemoryGroup(LIMIT, "ooc-python-test")
    except Unavailable as e:
        pytest.skip(str(e))


def test_sum_of_a_file_larger_than_the_memory_limit():
    directory = tempfile.mkdtemp(prefix="ooc-py-memory-", dir="/tmp")  # a disk, not tmpfs
    path = os.path.join(directory, "big.npy")
    group = None
    try:
        group = make_group()
        m = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(FILE_BYTES // 8,))
        chunk = 8 * MiB
        for i in range(0, m.size, chunk):
            m[i:i + chunk] = np.arange(i, min(m.size, i + chunk)) % 1021 * 0.37
        m.flush()
        expected = np.sum(m)
        del m
        drop_from_page_cache(path)
        code = textwrap.dedent(f"""
            import os
            with open({group.procs!r}, "w") as f:
                f.write(str(os.getpid()))
            import ooc
            try:  # reading it whole is refused up front, not killed by the limit
                ooc.open({path!r}).read()
            except MemoryError as e:
                print("MemoryError", e, flush=True)
            print(repr(float(ooc.sum({path!r}, tile_bytes="8M"))))
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        peak = group.peak()
        assert done.returncode == 0, f"exit {done.returncode} (-9: OOM-killed in {LIMIT >> 20} MiB): {done.stderr}"
        refused, total = done.stdout.splitlines()
        assert refused.startswith("MemoryError reading ") and "do not fit" in refused, refused
        assert float(total) == float(expected)
        assert peak <= LIMIT
        sys.stderr.write(f"\n  peak cgroup usage {peak / MiB:.0f} MiB of {LIMIT / MiB:.0f} MiB "
                         f"for a {FILE_BYTES / MiB:.0f} MiB file\n")
    finally:
        if os.path.exists(path):
            os.unlink(path)
        os.rmdir(directory)
        if group:
            group.remove()
