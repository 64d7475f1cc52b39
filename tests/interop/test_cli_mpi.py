"""oocrun under mpirun gives one process's answers, bit for bit.

Every reduction and elementwise output of `mpirun -np N oocrun ...` (N = 1..4 on this
machine, oversubscribed) is compared with a plain single-process oocrun run with the
same tile size, and with numpy. Failures on any rank leave no output and no temporary
behind; a plain oocrun never initialises MPI. Needs OOCRUN, and OOC_MPIEXEC /
OOC_MPIEXEC_FLAGS (set by ctest when ooc is built with OOC_WITH_MPI).
"""
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import unittest
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import OOCRUN, SANITIZED, TempDir, loads, run, run_json, same_scalar, sample, sweep  # noqa: E402

MPIEXEC = os.environ.get("OOC_MPIEXEC") or shutil.which("mpirun")
FLAGS = shlex.split(os.environ.get("OOC_MPIEXEC_FLAGS", "--oversubscribe --allow-run-as-root --bind-to none -q"))
RANKS = (1, 2, 3, 4) if not SANITIZED else (2, 4)
TIMEOUT = 300
TILE = ["--tile-bytes", "64K"]
REDUCTIONS = {"sum": np.sum, "mean": np.mean, "min": np.min, "max": np.max}
LAUNCHER_VARIABLES = ("OMPI_", "PMIX_", "PMI_")


def mpirun(ranks, *args, mpmd_tail=None):
    """Runs oocrun ARGS on `ranks` ranks (then the MPMD `mpmd_tail` command, if any)."""
    command = [MPIEXEC, *FLAGS, "-np", str(ranks), OOCRUN, *map(str, args)]
    if mpmd_tail:
        command += [":", *mpmd_tail]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)


def mpirun_json(ranks, *args):
    proc = mpirun(ranks, *args, "--json", "--quiet")
    if proc.returncode != 0:
        raise AssertionError(f"mpirun -np {ranks} oocrun {' '.join(map(str, args))}: {proc.returncode} {proc.stderr}")
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected one JSON line from rank 0, got {lines!r}"
    return loads(lines[0])


def same_value(a, b):
    """Two JSON numbers are the same value (NaN is NaN): for floats, the same bits, as
    JSON floats are the shortest text that reads back as the value."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def numpy_reduce(op, a):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return REDUCTIONS[op](a)


def plain_env():
    """This environment without any MPI launcher's variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARIABLES)}


def leftovers(directory, keep):
    return sorted(set(os.listdir(directory)) - set(keep))


@unittest.skipUnless(MPIEXEC, "no mpirun")
class MpiCase(unittest.TestCase):
    def setUp(self):
        self.tmp = TempDir()

    def tearDown(self):
        self.tmp.cleanup()


class ReduceTest(MpiCase):
    def test_every_rank_count_gives_the_single_process_bits(self):
        files = [("<f8", (513, 1001), "C", False), (">f4", (701, 300), "F", True),
                 ("|i1", (300001,), "C", False), ("<f2", (90001,), "C", False)]
        # min and max do not depend on the order of merging: on 3 ranks. sum and mean do:
        # each file on every rank count, with one of the two (an mpirun costs ~1 s).
        merged = {(f, op): [] for f in range(len(files)) for op in REDUCTIONS}
        for f, op, ranks in sweep(range(len(files)), ("sum", "mean"), RANKS):
            merged[f, op].append(ranks)
        for f, (dtype, shape, order, nan) in enumerate(files):
            a = np.asarray(sample(dtype, shape, seed=5, nan=nan), order=order)
            path = self.tmp.save("a.npy", a)
            for op in REDUCTIONS:
                alone = run_json("reduce", op, path, *TILE)
                self.assertTrue(same_scalar(alone["value"], numpy_reduce(op, a)))
                for ranks in merged[f, op] or [3]:
                    with self.subTest(dtype=dtype, order=order, op=op, ranks=ranks):
                        together = mpirun_json(ranks, "reduce", op, path, *TILE)
                        self.assertTrue(same_value(together["value"], alone["value"]), (together, alone))
                        self.assertEqual(together["dtype"], alone["dtype"])
                        self.assertTrue(same_scalar(together["value"], numpy_reduce(op, a)))
                        self.assertEqual(together["elements"], a.size)

    def test_default_tiles_big_endian_fortran_and_bool(self):
        cases = [(">f8", (1000, 700), "F"), ("|b1", (200001,), "C"), (">u8", (99999,), "C")]
        for dtype, shape, order in cases:
            a = np.asarray(sample(dtype, shape, seed=6), order=order)
            path = self.tmp.save("a.npy", a)
            for op in ("sum", "mean"):
                with self.subTest(dtype=dtype, op=op):
                    alone = run_json("reduce", op, path)
                    together = mpirun_json(3, "reduce", op, path)
                    self.assertTrue(same_value(together["value"], alone["value"]), (together, alone))
                    self.assertTrue(same_scalar(together["value"], numpy_reduce(op, a)))

    def test_more_ranks_than_tiles_an_empty_and_a_0d_array(self):
        for name, a in [("few.npy", sample("<f8", (9000,), seed=1)), ("empty.npy", np.zeros((3, 0), "<f4")),
                        ("scalar.npy", np.array(2.5, ">f8"))]:
            path = self.tmp.save(name, a)
            for op in ("sum", "mean"):
                with self.subTest(name=name, op=op):
                    self.assertTrue(same_value(mpirun_json(4, "reduce", op, path, *TILE)["value"],
                                               run_json("reduce", op, path, *TILE)["value"]))
        proc = mpirun(4, "reduce", "min", self.tmp.file("empty.npy"))
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.splitlines(),
                         [f"oocrun: {self.tmp.file('empty.npy')}: zero-size array to reduction operation "
                          "minimum which has no identity"])

    def test_the_other_reductions_give_the_single_process_answer(self):
        a = np.asarray(sample("<f8", (3001, 70), seed=8, nan=True), order="F")
        b = np.asarray(sample("|b1", (120001,), seed=9))
        for path, ops in [(self.tmp.save("a.npy", a), ("argmin", "argmax", "var", "std", "nansum", "nanmean",
                                                        "nanmin", "nanmax", "norm", "count_nonzero", "any", "all")),
                          (self.tmp.save("b.npy", b), ("argmax", "count_nonzero", "any", "all", "prod", "var"))]:
            for op in ops:
                with self.subTest(path=path, op=op):
                    alone = run_json("reduce", op, path, *TILE)
                    together = mpirun_json(3, "reduce", op, path, *TILE)
                    self.assertTrue(same_value(together["value"], alone["value"]), (op, together, alone))
                    self.assertEqual(together["dtype"], alone["dtype"])

    def test_selections_split_across_ranks(self):
        a = np.asarray(sample("<f8", (9000, 12), seed=3), order="F")
        path = self.tmp.save("a.npy", a)
        for text in ("::3, 2:9", "::-2, [1, 7]", "@" + self.tmp.save("rows.npy", np.arange(0, 9000, 7))):
            spec = f"{path}[{text}]"
            with self.subTest(selection=text):
                alone = run_json("reduce", "sum", spec, *TILE)
                together = mpirun_json(3, "reduce", "sum", spec, *TILE)
                self.assertTrue(same_value(together["value"], alone["value"]), (together, alone))
        out = self.tmp.file("o.npy")
        proc = mpirun(2, "apply", "add-one", f"{path}[::3, [2, 9]]", "-o", out, *TILE)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(np.array_equal(np.load(out), a[::3, [2, 9]] + 1))

    def test_steps_not_split_across_ranks_are_refused_with_one_line(self):
        path = self.tmp.save("a.npy", sample("<f8", (3000, 4), seed=2))
        for args in (["reduce", "prod", path], ["reduce", "sum", path, "--axis", "0"],
                     ["reduce", "histogram", path], ["eval", "a + 1", f"a={path}"]):
            with self.subTest(args=args):
                proc = mpirun(2, *args)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                lines = proc.stderr.splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertIn("MPI", lines[0])
                self.assertIn("without mpirun", lines[0])

    def test_only_rank_zero_prints(self):
        path = self.tmp.save("a.npy", sample("<f8", (100000,)))
        proc = mpirun(3, "reduce", "sum", path, *TILE, "--progress")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(proc.stdout.splitlines()), 1)
        reports = [line for line in proc.stderr.splitlines() if line.startswith("oocrun: sum of")]
        self.assertEqual(len(reports), 1, proc.stderr)


class ApplyTest(MpiCase):
    def test_outputs_are_byte_for_byte_the_single_process_output(self):
        a = np.asarray(sample(">f4", (601, 333), seed=3, nan=True), order="F")
        b = sample("<i2", (250001,), seed=4)
        inputs = {"add-one": self.tmp.save("a.npy", a), "scale:0.5": self.tmp.save("b.npy", b)}
        for op, path in inputs.items():
            run("apply", op, path, "-o", self.tmp.file("alone.npy"), *TILE, "--quiet")
            with open(self.tmp.file("alone.npy"), "rb") as f:
                alone = f.read()
            for ranks in RANKS:
                with self.subTest(op=op, ranks=ranks):
                    out = self.tmp.file(f"together{ranks}.npy")
                    proc = mpirun(ranks, "apply", op, path, "-o", out, *TILE, "--quiet")
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    self.assertEqual(proc.stderr, "")
                    with open(out, "rb") as f:
                        self.assertEqual(f.read(), alone)
        np.testing.assert_array_equal(np.load(self.tmp.file(f"together{RANKS[-1]}.npy")), (b * 0.5))
        self.assertEqual(leftovers(self.tmp.path, ["a.npy", "b.npy", "alone.npy"] +
                                   [f"together{r}.npy" for r in RANKS]), [])

    def test_in_place_matches_the_single_process_in_place(self):
        a = sample("<f8", (300007,), seed=8)
        alone = self.tmp.save("alone.npy", a)
        together = self.tmp.save("together.npy", a)
        run("apply", "add:2.5", alone, "--in-place", *TILE, "--quiet")
        # Ranks keep no crash journal: the run says so unless --no-journal asks for that.
        proc = mpirun(3, "apply", "add:2.5", together, "--in-place", *TILE, "--quiet")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        self.assertIn("together.npy: under MPI an in-place run keeps no crash journal", proc.stderr)
        self.assertIn("add --no-journal", proc.stderr)
        self.assertEqual(np.load(together).tobytes(), a.tobytes())
        proc = mpirun(3, "apply", "add:2.5", together, "--in-place", "--no-journal", *TILE, "--quiet")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(alone, "rb") as f1, open(together, "rb") as f2:
            self.assertEqual(f1.read(), f2.read())
        self.assertEqual(leftovers(self.tmp.path, ["alone.npy", "together.npy"]), [])


class FailureTest(MpiCase):
    def assert_one_line_failure(self, proc, code, *words):
        self.assertEqual(proc.returncode, code, proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, f"rank 0 alone should speak: {lines!r}")
        for word in words:
            self.assertIn(word, lines[0])

    def test_a_bad_input_fails_on_every_rank_with_one_message(self):
        self.tmp.save("good.npy", sample("<f8", (1000,)))
        with open(self.tmp.file("truncated.npy"), "wb") as f:
            with open(self.tmp.file("good.npy"), "rb") as g:
                f.write(g.read()[:-8])
        self.assert_one_line_failure(mpirun(3, "reduce", "sum", self.tmp.file("missing.npy")), 1,
                                     "missing.npy: no such file or directory")
        self.assert_one_line_failure(
            mpirun(2, "apply", "add-one", self.tmp.file("truncated.npy"), "-o", self.tmp.file("out.npy")),
            1, "truncated.npy")
        self.assert_one_line_failure(mpirun(3, "reduce", "mode", self.tmp.file("good.npy")), 2,
                                     "unknown reduction")
        self.assertEqual(leftovers(self.tmp.path, ["good.npy", "truncated.npy"]), [])

    def test_an_output_directory_that_fails_leaves_nothing(self):
        good = self.tmp.save("good.npy", sample("<f8", (100000,)))
        self.assert_one_line_failure(mpirun(3, "apply", "add-one", good, "-o", self.tmp.file("no/out.npy")), 1,
                                     "cannot create output")
        os.mkdir(self.tmp.file("ro"))
        os.chmod(self.tmp.file("ro"), 0o555)
        if os.geteuid() != 0:  # root writes anyway
            self.assert_one_line_failure(mpirun(3, "apply", "add-one", good, "-o", self.tmp.file("ro/out.npy")), 1,
                                         "permission denied")
        self.assertEqual(leftovers(self.tmp.path, ["good.npy", "ro"]), [])
        self.assertEqual(os.listdir(self.tmp.file("ro")), [])

    @unittest.skipIf(SANITIZED, "ASan reserves terabytes of address space, which ulimit -v cannot leave it")
    def test_one_rank_failing_after_the_output_exists_removes_it_on_all(self):
        # The last rank runs under an address-space limit that holds its share of the
        # 1.5 GiB (sparse) input but not also its share of the output: it fails to map
        # its part of the output after rank 0 has created it.
        big = self.tmp.file("big.npy")
        m = np.lib.format.open_memmap(big, mode="w+", dtype="<f8", shape=(192 << 20,))
        del m
        limited = ["-np", "1", "bash", "-c", f'ulimit -v 1200000; exec "$0" "$@"', OOCRUN]
        control = mpirun(1, "reduce", "sum", big, "--quiet", mpmd_tail=limited + ["reduce", "sum", big, "--quiet"])
        self.assertEqual(control.returncode, 0, "the limited rank cannot even map its input: " + control.stderr)
        out = self.tmp.file("out.npy")
        proc = mpirun(1, "apply", "add-one", big, "-o", out, mpmd_tail=limited + ["apply", "add-one", big, "-o", out])
        self.assert_one_line_failure(proc, 1, "out.npy: cannot map the data")
        self.assertEqual(leftovers(self.tmp.path, ["big.npy"]), [])

    def test_an_interrupted_run_leaves_no_temporary(self):
        big = self.tmp.file("big.npy")
        m = np.lib.format.open_memmap(big, mode="w+", dtype="<f8", shape=(192 << 20,))  # sparse, 1.5 GiB
        del m
        command = [MPIEXEC, *FLAGS, "-np", "2", OOCRUN, "apply", "add-one", big, "-o", self.tmp.file("out.npy"),
                   "--threads", "1", "--tile-bytes", "1M"]
        p = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            deadline = time.monotonic() + TIMEOUT
            while not leftovers(self.tmp.path, ["big.npy"]) and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if p.poll() is not None:
                self.skipTest("the run finished before it could be interrupted")
            time.sleep(0.05)
            p.send_signal(signal.SIGINT)  # mpirun passes it on to the ranks as SIGTERM
            _, err = p.communicate(timeout=TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        if p.returncode == 0:
            self.skipTest("the run finished before the interrupt reached it")
        self.assertIn("cancelled after", err)
        self.assertIn("no output written", err)
        self.assertEqual(leftovers(self.tmp.path, ["big.npy"]), [])


class PlainLaunchTest(MpiCase):
    # Open MPI reads OMPI_MCA_* at MPI_Init: naming components that do not exist makes any
    # MPI_Init fail loudly. A plain run under them must not notice.
    POISON = {"OMPI_MCA_pml": "ooc_no_such_component", "OMPI_MCA_btl": "ooc_no_such_component"}

    def test_a_plain_run_never_initialises_mpi(self):
        path = self.tmp.save("a.npy", sample("<f8", (100000,)))
        env = {**plain_env(), **self.POISON}
        proc = subprocess.run([OOCRUN, "reduce", "sum", path, "--json", "--quiet"], env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")  # no MPI warnings, as root too
        self.assertEqual(loads(proc.stdout)["value"], run_json("reduce", "sum", path)["value"])
        proc = subprocess.run([OOCRUN, "apply", "add-one", path, "-o", self.tmp.file("o.npy")], env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)

    def test_the_poison_does_catch_an_mpi_init(self):
        # The control: with a launcher's variable oocrun initialises MPI, which fails.
        path = self.tmp.save("a.npy", sample("<f8", (1000,)))
        env = {**plain_env(), **self.POISON, "OMPI_COMM_WORLD_SIZE": "1"}
        proc = subprocess.run([OOCRUN, "reduce", "sum", path], env=env, capture_output=True, text=True,
                              timeout=TIMEOUT)
        self.assertNotEqual(proc.returncode, 0)
        # Open MPI's own words; on a loaded machine its help system can fail too, and then
        # only ORTE's error log says what stopped it.
        self.assertRegex(proc.stderr, "MPI|ORTE")


if __name__ == "__main__":
    unittest.main()
