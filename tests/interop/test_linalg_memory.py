"""Bounded memory for linear algebra on a tall file (issue 29), with a real cgroup v1 memory
limit: `oocrun linalg cov`, `linalg lstsq` and `linalg svd` (the singular values) of a
512 MiB (N, 16) float64 .npy, dropped from the page cache first, inside a 96 MiB memory
cgroup (memory and memory+swap; memory_cgroup.py, the project's one harness). The runs
must finish without an OOM kill, within the limit, with numpy's answers (computed outside
the group); and without a limit their peak resident set must stay far below the file, so
ooc lets go of the pages itself rather than leaving it to the kernel's reclaim.

Needs root and a writable cgroup v1 memory hierarchy; skipped otherwise. Run as
``OOCRUN=build/oocrun /usr/bin/python3 tests/interop/test_linalg_memory.py -v``."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from memory_cgroup import MemoryGroup, Unavailable, drop_from_page_cache, group_base  # noqa: E402
from test_memory_bound import find_oocrun, mib, run_measured  # noqa: E402

MiB = 1 << 20
M = 16
FILE_BYTES = 512 * MiB
N = FILE_BYTES // (8 * M)
LIMIT = 96 * MiB
TILE = "8M"
UNCONSTRAINED_RSS_BOUND = 128 * MiB  # a quarter of the file
CHUNK_ROWS = 1 << 18

DIR = None


def setUpModule():
    global DIR
    try:
        group_base()
    except Unavailable as e:
        raise unittest.SkipTest(str(e))
    find_oocrun()
    DIR = tempfile.mkdtemp(prefix="ooc-linalg-memory-", dir="/tmp")
    unittest.addModuleCleanup(shutil.rmtree, DIR, ignore_errors=True)
    x = np.lib.format.open_memmap(os.path.join(DIR, "x.npy"), mode="w+", dtype="<f8", shape=(N, M))
    y = np.lib.format.open_memmap(os.path.join(DIR, "y.npy"), mode="w+", dtype="<f8", shape=(N,))
    rng = np.random.default_rng(29)
    b = rng.normal(size=M)
    for i in range(0, N, CHUNK_ROWS):
        block = 1e3 + rng.standard_normal((min(CHUNK_ROWS, N - i), M)) * np.linspace(1, 4, M)
        x[i:i + len(block)] = block
        y[i:i + len(block)] = block @ b + rng.standard_normal(len(block))
    x.flush()
    y.flush()
    del x, y


class LinalgMemoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.x = os.path.join(DIR, "x.npy")
        cls.y = os.path.join(DIR, "y.npy")
        x = np.load(cls.x, mmap_mode="r")
        y = np.load(cls.y, mmap_mode="r")
        cls.want_cov = np.cov(x, rowvar=False)
        cls.want_lstsq = np.linalg.lstsq(x, y, rcond=None)
        cls.want_s = np.linalg.svd(x, compute_uv=False)

    def run_in_group(self, args):
        for path in (self.x, self.y):
            drop_from_page_cache(path, all_caches=path == self.x)
        group = MemoryGroup(LIMIT, f"ooc-test-{self.id().rsplit('.', 1)[-1]}")
        self.addCleanup(group.remove)
        code, out, err, maxrss, _ = run_measured([*args, "--tile-bytes", TILE], group)
        peak, kills = group.peak(), group.oom_kills()
        group.remove()
        report = f"peak cgroup usage {mib(peak)} of {mib(LIMIT)}; peak RSS {mib(maxrss)}; oom kills {kills}"
        sys.stderr.write(f"\n  [{' '.join(args[:2])}] {report}\n  ")
        self.assertNotEqual(code, -9, f"OOM-killed: {report}; {err!r}")
        self.assertEqual(kills, 0, report)
        self.assertEqual(code, 0, f"{err!r}; {report}")
        self.assertLessEqual(peak, LIMIT, report)
        self.assertGreater(peak, 16 * MiB, f"the run was not charged to the group: {report}")
        code, _, err, unconstrained, _ = run_measured([*args, "--tile-bytes", TILE, "--threads", "2"])
        self.assertEqual(code, 0, err)
        self.assertLessEqual(unconstrained, UNCONSTRAINED_RSS_BOUND, f"peak RSS without a limit {mib(unconstrained)}")
        return json.loads(out)

    def assert_close(self, got, want, tolerance, what):
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        self.assertEqual(got.shape, want.shape, what)
        self.assertLessEqual(np.abs(got - want).max(), tolerance * np.abs(want).max(), what)

    def test_cov_of_a_file_5x_the_limit(self):
        result = self.run_in_group(["linalg", "cov", self.x, "--json"])
        self.assert_close(result["value"], self.want_cov, 1e-12, "cov")

    def test_lstsq_of_a_file_5x_the_limit(self):
        result = self.run_in_group(["linalg", "lstsq", self.x, self.y, "--json"])
        b, residuals, rank, s = self.want_lstsq
        self.assertEqual(result["rank"], rank)
        self.assert_close(result["x"], b, 1e-8, "lstsq x")
        self.assert_close(result["residuals"], residuals, 1e-10, "lstsq residuals")
        self.assert_close(result["singular_values"], s, 1e-10, "lstsq s")

    def test_singular_values_of_a_file_5x_the_limit(self):
        result = self.run_in_group(["linalg", "svd", self.x, "--json"])
        self.assert_close(result["s"], self.want_s, 1e-12, "svd s")


if __name__ == "__main__":
    unittest.main()
