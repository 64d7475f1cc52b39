"""Bounded memory, proved with a real cgroup v1 memory limit.

DESIGN.md: "Resident memory is set by the tile size and depth, not by the file.
Processing a file 8x larger than the memory limit of its process works."

A 768 MiB float64 .npy is streamed through ``oocrun reduce sum`` and
``oocrun apply add-one -o OUT`` inside a memory cgroup limited to 96 MiB (memory and
memory+swap), after the file was dropped from the page cache so that its pages are
charged to the group as they are read.  The runs must finish (no OOM kill), give numpy's
answer (the sum bit for bit: ooc reproduces numpy's pairwise blocks), and the group's
peak usage must stay within the limit.

A cgroup run alone does not show that ooc itself releases pages (the kernel reclaims clean
file pages for it), so the same two runs are also made without a limit and their peak
resident set (ru_maxrss) must stay far below the file size; so are reductions of strided,
sliced, reversed and index-list selections.

The bound holds for every caller, not only oocrun: the sum of a selection through the C++
API with its default options (tests/memory/selection_sum.cpp: ooc::reduce(ooc::map_file(
"big.npy[2::8]"), Sum{}), every 8th element, as X[:, 2] of an (N, 8) array reads its
source) and through the Python module, and masked reductions (a 10% random mask of the
file's length, streamed beside it), through oocrun, Python and C++, each inside the cgroup
and without a limit.

The cgroup part needs root and a writable cgroup v1 memory hierarchy at
/sys/fs/cgroup/memory (memory_cgroup.py, the harness the bench shares); it is skipped
otherwise.  Run as
``OOCRUN=build/oocrun python3 test_memory_bound.py -v``.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

from memory_cgroup import MemoryGroup, Unavailable, drop_from_page_cache, group_base

MiB = 1 << 20
LIMIT = 96 * MiB
FILE_BYTES = 8 * LIMIT            # 768 MiB of float64
ELEMENTS = FILE_BYTES // 8
CHUNK = 2 * MiB                   # elements per chunk when writing / checking (16 MiB)
TILE = "8M"
RUN_TIMEOUT = 90                  # seconds per oocrun run; they take a few
# Without a cgroup: ooc must keep its own resident set far below the file (measured on
# 2 threads: ~40 MiB for reduce, ~75 MiB for apply).
UNCONSTRAINED_RSS_BOUND = 256 * MiB
# The C++ API's runs, with its default 16 MiB tiles: the bound (28), 6x below the file.
CXX_LIMIT = 128 * MiB


def find_selection_sum():
    """The C++ API program (tests/memory/selection_sum.cpp), or None where it is not built."""
    path = os.environ.get("OOC_SELECTION_SUM")
    if not path and os.environ.get("OOC_BUILD_DIR"):
        path = os.path.join(os.environ["OOC_BUILD_DIR"], "tests", "selection_sum")
    return path if path and os.access(path, os.X_OK) else None


def python_module_dir():
    """Where the built Python module is (OOC_BUILD_DIR/python), or None."""
    build = os.environ.get("OOC_BUILD_DIR")
    path = os.path.join(build, "python") if build else None
    return path if path and os.path.isdir(os.path.join(path, "ooc")) else None


def find_oocrun():
    path = os.environ.get("OOCRUN")
    if not path and os.environ.get("OOC_BUILD_DIR"):
        path = os.path.join(os.environ["OOC_BUILD_DIR"], "oocrun")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"set OOCRUN to the oocrun binary (got {path!r})")
    return path


def values(begin, end):
    """The test data: inexact decimals, so that the order of summation matters."""
    idx = np.arange(begin, end, dtype=np.int64)
    return (idx % 1021) * 0.37 + (idx % 7) * 1e-3


# A small launcher between the test and oocrun.  It exists to measure oocrun's own peak
# RSS: Python starts children with vfork, and Linux then credits the *parent's* RSS high
# water mark (which reached the file size while numpy wrote it) to the child's ru_maxrss.
# The launcher is a fresh, small process; it forks (not vforks), the child joins the cgroup
# (when one is given) and becomes oocrun, and the launcher reports oocrun's wait4() usage.
LAUNCHER = r"""
import os, sys
group, report, args = sys.argv[1], sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    try:
        if group:
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        os.execv(args[0], args)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    f.write("%d %d" % (os.waitstatus_to_exitcode(status), usage.ru_maxrss))
"""


def run_measured(args, group=None, timeout=RUN_TIMEOUT, program=None, environment=None):
    """Run oocrun (or `program`: an argv list, `args` after it; with `environment` added)
    inside the MemoryGroup `group` when given; return (status, stdout, stderr, maxrss, peaks)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "report")
        out = open(os.path.join(scratch, "out"), "w+b")
        err = open(os.path.join(scratch, "err"), "w+b")
        p = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER, group.path if group else "", report,
                              *(program or [find_oocrun()]), *args],
                             stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                             env={**os.environ, **environment} if environment else None)
        peaks = {}
        deadline = time.monotonic() + timeout
        while p.poll() is None:
            if group:
                stat = group.stat()
                for key in ("rss", "mapped_file", "cache", "dirty", "writeback"):
                    if key in stat:
                        peaks[key] = max(peaks.get(key, 0), stat[key])
            if time.monotonic() > deadline:
                os.killpg(p.pid, 9)  # the launcher's own session: the launcher and oocrun
                p.wait()
                raise AssertionError(f"oocrun {' '.join(args)} ran for more than {timeout} s")
            time.sleep(0.02)
        out.seek(0)
        err.seek(0)
        text_out, text_err = out.read().decode(), err.read().decode()
        out.close()
        err.close()
        if p.returncode != 0 or not os.path.exists(report):
            raise AssertionError(f"the launcher failed ({p.returncode}): {text_err!r}")
        with open(report) as f:
            code, maxrss_kib = (int(x) for x in f.read().split())
    return code, text_out, text_err, maxrss_kib * 1024, peaks


class BigFile:
    """A 768 MiB float64 .npy under /tmp, written by numpy in chunks, and a 96 MiB bool mask
    of its length, true at a random 10%."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ooc-memory-bound-", dir="/tmp")
        self.path = os.path.join(self.dir, "big.npy")
        self.mask = os.path.join(self.dir, "mask.npy")

    def fill(self):
        m = np.lib.format.open_memmap(self.path, mode="w+", dtype="<f8", shape=(ELEMENTS,))
        for i in range(0, ELEMENTS, CHUNK):
            m[i:i + CHUNK] = values(i, min(ELEMENTS, i + CHUNK))
        m.flush()
        del m
        keep = np.lib.format.open_memmap(self.mask, mode="w+", dtype="|b1", shape=(ELEMENTS,))
        rng = np.random.default_rng(28)
        for i in range(0, ELEMENTS, CHUNK):
            keep[i:i + CHUNK] = rng.random(min(ELEMENTS, i + CHUNK) - i) < 0.1
        keep.flush()
        del keep

    def masked_sum(self):
        """numpy's np.sum(big[mask]), the selection made in memory (outside any cgroup)."""
        return np.load(self.path, mmap_mode="r")[np.load(self.mask)].sum()

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def check_output(test, out_path, in_path):
    out = np.load(out_path, mmap_mode="r")
    inp = np.load(in_path, mmap_mode="r")
    test.assertEqual(out.dtype, np.dtype("<f8"))
    test.assertEqual(out.shape, inp.shape)
    for i in range(0, ELEMENTS, CHUNK):
        j = min(ELEMENTS, i + CHUNK)
        if not np.array_equal(out[i:j], inp[i:j] + 1):
            test.fail(f"{out_path}[{i}:{j}] differs from input + 1")
    del out, inp


BIG = None


def setUpModule():
    global BIG
    find_oocrun()
    BIG = BigFile()
    unittest.addModuleCleanup(BIG.remove)  # registered before writing: removed even if that fails
    BIG.fill()


def mib(n):
    return f"{n / MiB:.1f} MiB"


class MemoryBoundTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            group_base()
        except Unavailable as e:
            raise unittest.SkipTest(str(e))
        cls.big = BIG
        cls.expected_sum = np.load(cls.big.path, mmap_mode="r").sum()  # outside any cgroup

    def make_group(self, limit=LIMIT):
        group = MemoryGroup(limit, f"ooc-test-{self.id().rsplit('.', 1)[-1]}")
        self.addCleanup(group.remove)
        return group

    def run_in_group(self, args, program=None, environment=None, limit=LIMIT):
        drop_from_page_cache(self.big.mask)
        drop_from_page_cache(self.big.path, all_caches=True)
        group = self.make_group(limit)
        code, out, err, maxrss, peaks = run_measured(args, group, program=program, environment=environment)
        max_usage = group.peak()
        failcnt = group.read("memory.failcnt")
        kills = group.oom_kills()
        group.remove()
        report = (f"peak cgroup usage {mib(max_usage)} of {mib(limit)} limit; peak RSS {mib(maxrss)}; "
                  f"sampled peaks: anon {mib(peaks.get('rss', 0))}, mapped {mib(peaks.get('mapped_file', 0))}, "
                  f"page cache {mib(peaks.get('cache', 0))}, dirty {mib(peaks.get('dirty', 0))}, "
                  f"writeback {mib(peaks.get('writeback', 0))}; failcnt {failcnt}; oom kills {kills}")
        sys.stderr.write(f"\n  [{' '.join(os.path.basename(a) for a in (program or args)[:2])}] {report}\n  ")
        self.assertNotEqual(code, -9, f"the run was OOM-killed in a {mib(limit)} cgroup: {report}; {err!r}")
        self.assertEqual(kills, 0, f"the OOM killer fired in the group: {report}")
        self.assertEqual(code, 0, f"the run failed: {err!r}; {report}")
        self.assertLessEqual(max_usage, limit, report)
        # The file's pages were charged here as they were read (else the limit proved nothing).
        self.assertGreater(max_usage, 16 * MiB, f"the run was not charged to the group: {report}")
        self.assertLessEqual(maxrss, limit, report)
        return out, report

    def test_reduce_sum_of_a_file_8x_the_limit(self):
        out, _ = self.run_in_group(["reduce", "sum", self.big.path, "--json", "--tile-bytes", TILE])
        result = json.loads(out)
        self.assertEqual(result["elements"], ELEMENTS)
        # Same blocks and order as numpy's pairwise sum: equal bit for bit.
        self.assertEqual(result["value"], float(self.expected_sum))

    def test_reduce_sum_of_a_strided_selection_of_a_file_8x_the_limit(self):
        # A selection reads the source through its own reader, which must let go of the
        # source pages as the stream passes them, as a whole-array read does.
        out, _ = self.run_in_group(["reduce", "sum", self.big.path + "[1::4]", "--json", "--tile-bytes", TILE])
        self.assertEqual(json.loads(out)["value"], float(np.load(self.big.path, mmap_mode="r")[1::4].sum()))

    def test_cxx_api_sum_of_a_column_selection_of_a_file_6x_its_bound(self):
        # ooc::reduce(ooc::map_file("big.npy[2::8]"), Sum{}) with the C++ API's defaults (16
        # MiB tiles of the selection, 2 in flight per thread: 64 MiB of tiles on 2 cores),
        # under the bound of 128 MiB: the selection's tiles let go of the source
        # pages they read, whoever calls.
        program = find_selection_sum()
        if program is None:
            self.skipTest("tests/memory/selection_sum is not built (OOC_SELECTION_SUM unset)")
        out, _ = self.run_in_group([self.big.path + "[2::8]"], program=[program], limit=CXX_LIMIT)
        self.assertEqual(float(out), float(np.load(self.big.path, mmap_mode="r")[2::8].sum()))

    def test_masked_reductions_of_a_file_8x_the_limit(self):
        expected = float(self.big.masked_sum())
        masked = f"{self.big.path}[@{self.big.mask}]"
        out, _ = self.run_in_group(["reduce", "sum", masked, "--json"])
        self.assertEqual(json.loads(out)["value"], expected)
        if python_module_dir():
            code = f"import ooc; print(repr(float(ooc.sum(ooc.open({self.big.path!r})[ooc.open({self.big.mask!r})]))))"
            out, _ = self.run_in_group(["-c", code], program=[sys.executable],
                                       environment={"PYTHONPATH": python_module_dir()})
            self.assertEqual(float(out), expected)

    def test_apply_add_one_of_a_file_8x_the_limit(self):
        out_path = os.path.join(self.big.dir, "out.npy")
        self.addCleanup(lambda: os.path.exists(out_path) and os.remove(out_path))
        self.run_in_group(["apply", "add-one", self.big.path, "-o", out_path, "--tile-bytes", TILE])
        self.assertEqual([n for n in os.listdir(self.big.dir) if ".ooc-" in n], [])
        check_output(self, out_path, self.big.path)


class UnconstrainedResidentSetTest(unittest.TestCase):
    """Without any limit, ooc releases pages behind the stream itself."""

    @classmethod
    def setUpClass(cls):
        cls.big = BIG

    def measure(self, args):
        code, out, err, maxrss, _ = run_measured([*args, "--tile-bytes", TILE, "--threads", "2"])
        sys.stderr.write(f"\n  [{args[0]} {args[1]}, no limit] oocrun peak RSS {mib(maxrss)}\n  ")
        self.assertEqual(code, 0, err)
        self.assertLess(maxrss, UNCONSTRAINED_RSS_BOUND,
                        f"peak RSS {mib(maxrss)} for a {mib(FILE_BYTES)} file: pages are not released")
        return out

    def test_reduce_resident_set(self):
        self.measure(["reduce", "sum", self.big.path, "--json"])

    def test_selections_resident_set(self):
        rows = os.path.join(self.big.dir, "rows.npy")
        self.addCleanup(lambda: os.path.exists(rows) and os.remove(rows))
        np.save(rows, np.arange(3, ELEMENTS, 97, dtype=np.int64))  # 8 MiB of sorted indices
        for selection in ["[::8]", "[100:-100:3]", "[::-5]", "[@" + rows + "]"]:
            with self.subTest(selection=selection):
                self.measure(["reduce", "sum", self.big.path + selection, "--json"])

    def measure_program(self, program, args, environment=None):
        code, out, err, maxrss, _ = run_measured(args, program=program, environment=environment)
        sys.stderr.write(f"\n  [{os.path.basename(program[0])} {' '.join(args)[-40:]}, no limit] "
                         f"peak RSS {mib(maxrss)}\n  ")
        self.assertEqual(code, 0, err)
        self.assertLess(maxrss, UNCONSTRAINED_RSS_BOUND,
                        f"peak RSS {mib(maxrss)} for a {mib(FILE_BYTES)} file: pages are not released")
        return out

    def test_cxx_api_resident_set(self):
        # The C++ API's defaults: before its selections let go of their pages as they read,
        # the sum of every 8th element peaked at 330 MiB on 2 threads (each tile's 128 MiB
        # span of the source stayed mapped until its commit).
        program = find_selection_sum()
        if program is None:
            self.skipTest("tests/memory/selection_sum is not built (OOC_SELECTION_SUM unset)")
        expected = float(np.load(self.big.path, mmap_mode="r")[2::8].sum())
        self.assertEqual(float(self.measure_program([program], [self.big.path + "[2::8]"])), expected)
        # x.select(...) of a named array, sharing its mapping.
        self.assertEqual(float(self.measure_program([program], [self.big.path, "2::8"])), expected)
        self.measure_program([program], [f"{self.big.path}[@{self.big.mask}]"])

    def test_masked_resident_set(self):
        self.measure(["reduce", "sum", f"{self.big.path}[@{self.big.mask}]", "--json"])
        if python_module_dir():
            code = f"import ooc; print(float(ooc.sum(ooc.open({self.big.path!r})[ooc.open({self.big.mask!r})])))"
            self.measure_program([sys.executable], ["-c", code], environment={"PYTHONPATH": python_module_dir()})

    def test_apply_resident_set(self):
        out_path = os.path.join(self.big.dir, "out-unconstrained.npy")
        self.addCleanup(lambda: os.path.exists(out_path) and os.remove(out_path))
        self.measure(["apply", "add-one", self.big.path, "-o", out_path])


if __name__ == "__main__":
    unittest.main()
