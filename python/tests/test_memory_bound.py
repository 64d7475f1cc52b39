"""ooc.sum of a file 4x larger than the memory cgroup its Python process runs in.

As tests/interop/test_memory_bound.py does for oocrun: a cgroup v1 memory group (root,
/sys/fs/cgroup/memory writable) limits a fresh Python process to LIMIT; the file is
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

import numpy as np
import pytest

MiB = 1 << 20
LIMIT = 128 * MiB
FILE_BYTES = 4 * LIMIT
CGROUP_V1_MEMORY = "/sys/fs/cgroup/memory"


def make_group():
    if not os.path.isfile(os.path.join(CGROUP_V1_MEMORY, "memory.limit_in_bytes")):
        pytest.skip(f"no cgroup v1 memory hierarchy at {CGROUP_V1_MEMORY}")
    if os.geteuid() != 0:
        pytest.skip("creating a memory cgroup needs root")
    group = os.path.join(CGROUP_V1_MEMORY, f"ooc-python-test-{os.getpid()}")
    try:
        os.mkdir(group)
        with open(os.path.join(group, "memory.limit_in_bytes"), "w") as f:
            f.write(str(LIMIT))
        memsw = os.path.join(group, "memory.memsw.limit_in_bytes")
        if os.path.exists(memsw):
            with open(memsw, "w") as f:
                f.write(str(LIMIT))
    except OSError as e:
        pytest.skip(f"{CGROUP_V1_MEMORY} is not writable here ({e})")
    return group


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
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        code = textwrap.dedent(f"""
            import os
            with open({os.path.join(group, 'cgroup.procs')!r}, "w") as f:
                f.write(str(os.getpid()))
            import ooc
            try:  # reading it whole is refused up front, not killed by the limit
                ooc.open({path!r}).read()
            except MemoryError as e:
                print("MemoryError", e, flush=True)
            print(repr(float(ooc.sum({path!r}, tile_bytes="8M"))))
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        with open(os.path.join(group, "memory.max_usage_in_bytes")) as f:
            peak = int(f.read())
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
            try:
                os.rmdir(group)
            except OSError:
                pass
