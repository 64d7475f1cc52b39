"""Nothing lost: every way a run can end leaves the data in a known state.

* Ctrl-C / SIGTERM cancel a run, say how far it got, and leave no output (or, in place,
  a journal the same command finishes); --progress draws a bar with percent, GB/s and
  ETA on a terminal and plain lines otherwise.
* An in-place run killed with SIGKILL at random moments, and run again each time, ends
  with numpy's ``a + 1`` exactly: no tile applied twice, none skipped.
* A mapped input truncated by another process mid-run fails the run with "file shrank
  while being read", no crash, no output: a .npy, and a chunked HDF5 dataset (gzip or
  plain chunks), whose chunks are decoded from a mapping of its file.
* A full disk is refused before any work, naming the sizes (tmpfs mounted by the test).
* Runs that write the same output, or replace a file another run reads, or rewrite an
  array in place that another run uses, each end cleanly with one run's whole result.

Runs are paused with SIGSTOP at a known point (the first progress line) where a test must
act "mid-run", so nothing here depends on how fast the machine is, except the random kill
moments, which are drawn over the measured length of a run.
Run as ``OOCRUN=build/oocrun python3 test_crash_safety.py -v``.
"""
import json
import os
import pty
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import SANITIZED, mount_small_tmpfs, npy_bytes  # noqa: E402

OOCRUN = os.environ.get("OOCRUN") or os.path.join(os.environ.get("OOC_BUILD_DIR", "build"), "oocrun")
TIMEOUT = 120
CRASH_WORDS = ("terminate called", "Aborted", "core dumped", "Segmentation", "Bus error",
               "AddressSanitizer", "runtime error:")
KILLS = 20


def setUpModule():
    if not os.access(OOCRUN, os.X_OK):
        raise RuntimeError(f"set OOCRUN to the oocrun binary (got {OOCRUN!r})")


def leftovers(directory):
    """Temporaries and journals: files ooc names with '.ooc-'."""
    return sorted(n for n in os.listdir(directory) if ".ooc-" in n)


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ooc-crash-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.procs = []
        self.addCleanup(self.reap)

    def reap(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()

    def path(self, name):
        return os.path.join(self.dir, name)

    def save(self, name, array):
        np.save(self.path(name), array)
        return name

    def sparse(self, name, elements, head=None):
        """A float64 .npy of `elements`, all holes but `head` at the start: costs no disk."""
        m = np.lib.format.open_memmap(self.path(name), mode="w+", dtype="<f8", shape=(elements,))
        if head is not None:
            m[:len(head)] = head
        del m
        return name

    def run_ooc(self, *args):
        p = subprocess.run([OOCRUN, *map(str, args)], cwd=self.dir, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=TIMEOUT)
        for word in CRASH_WORDS:
            self.assertNotIn(word, p.stderr)
        return p

    def start(self, *args):
        p = subprocess.Popen([OOCRUN, *map(str, args)], cwd=self.dir, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def start_paused(self, *args):
        """Starts oocrun with --progress and pauses it (SIGSTOP) at its first progress line,
        about 10% into the run."""
        p = self.start(*args, "--progress")
        line = p.stderr.readline()
        self.assertTrue(line.startswith("progress: "), f"expected a progress line, got {line!r}")
        p.send_signal(signal.SIGSTOP)
        return p

    def locked(self, name):
        """Whether some process holds one of ooc's locks (open-file-description locks; the
        HDF5 library's own are flock()s) on file `name`, which /proc/locks names by device
        and inode."""
        st = os.stat(self.path(name))
        where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks") as f:
            return any("OFDLCK" in fields and where in fields for fields in map(str.split, f))

    def start_caught_mid_run(self, *args, prepare=None, holding=None):
        """start_paused for a run that only reads: on a loaded machine the run can finish
        between its first progress line and the SIGSTOP, so it is started again (reading
        changes nothing; a run that writes calls `prepare` to make its input anew) until it
        is caught stopped mid-run, and, where `holding` names a file, still holding its
        lock on it (a run that has read its last tile lets go of its input before it
        exits)."""
        for _ in range(5):
            if prepare:
                prepare()
            p = self.start_paused(*args)
            time.sleep(0.05)
            try:
                with open(f"/proc/{p.pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:  # it had finished: Popen.send_signal reaps a process that has
                state = "gone"
            if state == "T" and (holding is None or self.locked(holding)):
                return p
            self.finish(p)
        self.skipTest("the reader finished before it could be stopped, five times: machine too loaded")

    def finish(self, p, after_signal=None):
        if after_signal is not None:
            p.send_signal(after_signal)
        p.send_signal(signal.SIGCONT)
        out, err = p.communicate(timeout=TIMEOUT)
        for word in CRASH_WORDS:
            self.assertNotIn(word, err)
        return p.returncode, out, err

    def assert_refused(self, args, words):
        """oocrun `args` fails with exit 1 and one line saying `words`."""
        p = self.run_ooc(*args)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn(words, p.stderr)
        return p.stderr

    def last_line(self, err):
        lines = [l for l in err.splitlines() if not l.startswith("progress: ")]
        self.assertEqual(len(lines), 1, f"one line besides progress expected: {err!r}")
        return lines[0]


# ---------------------------------------------------------------------------------------
# 1. Interrupted runs and progress

class InterruptTest(Case):
    def test_sigterm_during_apply_says_how_far_it_got_and_leaves_no_output(self):
        self.sparse("big.npy", 16 << 20)  # 128 MiB
        before = sorted(os.listdir(self.dir))
        p = self.start_paused("apply", "add-one", "big.npy", "-o", "out.npy", "--threads", "1", "--tile-bytes", "1M")
        rc, out, err = self.finish(p, after_signal=signal.SIGTERM)
        self.assertEqual(rc, 143, err)
        line = self.last_line(err)
        self.assertRegex(line, r"^oocrun: big\.npy: SIGTERM: cancelled after \d+ of 128 tiles "
                               r"\(\d+\.\d\d MB of 134\.22 MB\); no output written$")
        self.assertEqual(sorted(os.listdir(self.dir)), before)

    def test_ctrl_c_during_in_place_keeps_a_journal_and_the_same_command_finishes_exactly_once(self):
        a = np.random.default_rng(5).standard_normal(4 << 20)
        self.save("a.npy", a)
        cmd = ("apply", "add-one", "a.npy", "--in-place", "--threads", "2", "--tile-bytes", "256K")
        p = self.start_paused(*cmd)
        rc, out, err = self.finish(p, after_signal=signal.SIGINT)
        self.assertEqual(rc, 130, err)
        line = self.last_line(err)
        self.assertIn("a.npy: SIGINT: cancelled after ", line)
        self.assertIn("run the same command again to finish it (progress is kept in a.npy.ooc-journal)", line)
        self.assertEqual(leftovers(self.dir), ["a.npy.ooc-journal"])
        p = self.run_ooc(*cmd)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resuming the interrupted in-place run on a.npy: ", p.stderr)
        self.assertEqual(leftovers(self.dir), [])
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(a + 1))

    def test_sigterm_during_an_in_place_run_without_a_journal_says_the_array_may_be_partly_rewritten(self):
        a = np.random.default_rng(6).standard_normal(4 << 20)
        # Without a journal the run is quick enough to finish before the SIGSTOP lands:
        # it is started again on a fresh copy until it is caught mid-run.
        # Caught, it can still finish before oocrun's signal thread runs (the first progress
        # line of so quick a run comes late): then it is whole, and it is tried again.
        for _ in range(5):
            p = self.start_caught_mid_run("apply", "add-one", "a.npy", "--in-place", "--no-journal", "--threads",
                                         "2", "--tile-bytes", "256K", prepare=lambda: self.save("a.npy", a))
            rc, out, err = self.finish(p, after_signal=signal.SIGTERM)
            if rc != 0:
                break
            np.testing.assert_array_equal(np.load(self.path("a.npy")), a + 1)
        self.assertEqual(rc, 143, err)
        line = self.last_line(err)
        self.assertIn("a.npy: SIGTERM: cancelled after ", line)
        self.assertIn("the array may be partly rewritten (--no-journal: the run cannot be resumed)", line)
        self.assertEqual(leftovers(self.dir), [])
        # What a stopped run without a journal leaves: every element is a or a + 1 (which
        # ones depends on when the signal came: on a loaded machine it can land before the
        # first tile is written, so "some of both" is not asserted).
        b = np.load(self.path("a.npy"))
        self.assertTrue(np.all((b == a) | (b == a + 1)))

    def test_ctrl_c_before_any_tile_leaves_the_array_unchanged_and_no_journal(self):
        a = np.arange(1000.0)
        self.save("a.npy", a)

        def pending_sigint():  # blocked and pending across exec: oocrun sees it at once
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            os.kill(os.getpid(), signal.SIGINT)

        p = subprocess.run([OOCRUN, "apply", "add-one", "a.npy", "--in-place"], cwd=self.dir, capture_output=True,
                           text=True, timeout=TIMEOUT, preexec_fn=pending_sigint)
        if p.returncode == 0:
            # oocrun's signal thread took the signal after the one tile was done (seen on a
            # machine loaded by other tests): the run finished, and must have finished whole.
            self.assertEqual(leftovers(self.dir), [])
            np.testing.assert_array_equal(np.load(self.path("a.npy")), a + 1)
            return
        self.assertEqual(p.returncode, 130, p.stderr)
        line = self.last_line(p.stderr)
        if "the array is unchanged" in line:
            self.assertIn("cancelled after 0 of 1 tiles", line)
            self.assertEqual(leftovers(self.dir), [])
            np.testing.assert_array_equal(np.load(self.path("a.npy")), a)
        else:  # the signal came after the tile was saved: then the line must say so
            self.assertIn("run the same command again", line)
            self.assertEqual(leftovers(self.dir), ["a.npy.ooc-journal"])


class ProgressTest(Case):
    def test_on_a_terminal_progress_is_a_bar_with_percent_speed_and_time_left(self):
        self.save("a.npy", np.arange(4 << 20, dtype="<f8"))
        master, slave = pty.openpty()
        p = subprocess.Popen([OOCRUN, "reduce", "sum", "a.npy", "--progress", "--tile-bytes", "256K", "--threads", "2"],
                             cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if not ready:
                if p.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end closed
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        out, _ = p.communicate(timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0)
        self.assertEqual(float(out), float(np.arange(4 << 20, dtype="<f8").sum()))
        text = seen.decode()
        frames = [f for f in text.replace("\r\n", "\n").split("\r") if f.startswith("[")]
        self.assertGreater(len(frames), 2, text)
        self.assertRegex(frames[-1], r"^\[#{30}\] 100%  \d+\.\d\d GB/s  ETA 0:00")
        for frame in frames:
            self.assertRegex(frame, r"^\[[#.]{30}\] +\d+%  \d+\.\d\d GB/s  ETA (\d+:\d\d|\?)")
        self.assertIn("\n", text.split("100%")[-1], "the bar ends with a newline when done")

    def test_without_a_terminal_progress_is_plain_lines(self):
        self.save("a.npy", np.arange(4 << 20, dtype="<f8"))
        p = self.run_ooc("reduce", "sum", "a.npy", "--progress", "--tile-bytes", "256K")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [l for l in p.stderr.splitlines() if l.startswith("progress: ")]
        self.assertNotIn("\r", p.stderr)
        self.assertEqual(len(lines), 10, p.stderr)
        for line in lines:
            self.assertRegex(line, r"^progress: \d+% \(\d+/128 tiles, \d+\.\d\d GB/s, ETA (\d+:\d\d|\?)\)$")
        self.assertTrue(lines[-1].startswith("progress: 100% (128/128 tiles"))


# ---------------------------------------------------------------------------------------
# 2. Resumable in-place runs

class KillNineTest(Case):
    def test_in_place_add_one_killed_at_random_moments_ends_as_numpys_a_plus_1(self):
        """SIGKILL at KILLS random moments over the length of a run, the same command run
        again after each while a journal says the job is unfinished. Without a journal the
        array must be exactly a (nothing written yet) or exactly a + 1 (the job finished
        and removed its journal just before the kill); after a job, a fresh one starts.
        128 tiles of 256 KiB: the journal saves and records them in batches of 4, so the
        kills land while a batch is being written and the one before it synced, while
        written tiles wait for their sync, while committed tiles wait for their record,
        and while a record waits for the next fdatasync."""
        self.kill_and_resume(4 << 20, "256K", KILLS)  # 32 MiB

    def test_the_same_with_tiles_saved_in_several_pieces(self):
        """Tiles of 8 MiB, which the journal writes in 4 MiB pieces side by side, 3 threads."""
        self.kill_and_resume(12 << 20, "8M", KILLS // 2, threads=3)  # 96 MiB, 12 tiles

    def kill_and_resume(self, elements, tile_bytes, kills, threads=2):
        seed = int(os.environ.get("OOC_KILL_SEED", random.SystemRandom().randrange(1 << 30)))
        rng = random.Random(seed)
        a = np.random.default_rng(seed).standard_normal(elements)
        original, expected = npy_bytes(a), npy_bytes(a + 1)
        cmd = [OOCRUN, "apply", "add-one", "a.npy", "--in-place", "--threads", str(threads), "--tile-bytes",
               tile_bytes, "--quiet"]
        self.save("a.npy", a)
        start = time.monotonic()
        subprocess.run(cmd, cwd=self.dir, check=True, timeout=TIMEOUT)
        length = time.monotonic() - start
        self.save("a.npy", a)
        wanted, kills, jobs, runs = kills, 0, 0, 0

        def array_bytes():
            with open(self.path("a.npy"), "rb") as f:
                return f.read()

        def job_done(how):
            nonlocal jobs
            jobs += 1
            self.assertTrue(array_bytes() == expected, f"seed {seed}: job {jobs} ({how}) differs from a + 1")
            self.assertEqual(leftovers(self.dir), [])
            self.save("a.npy", a)

        while kills < wanted:
            runs += 1
            self.assertLess(runs, 20 * wanted, f"seed {seed}: runs keep finishing before the kill")
            p = subprocess.Popen(cmd, cwd=self.dir, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(0, length))
            p.send_signal(signal.SIGKILL)
            _, err = p.communicate(timeout=TIMEOUT)
            if p.returncode == 0:
                job_done("finished before the kill")
                continue
            self.assertEqual(p.returncode, -signal.SIGKILL, f"seed {seed}: {err!r}")
            kills += 1
            if "a.npy.ooc-journal" in leftovers(self.dir):
                continue  # unfinished: the same command again
            content = array_bytes()
            self.assertTrue(content in (original, expected),
                            f"seed {seed}: killed without a journal, the array is neither a nor a + 1")
            if content == expected:
                job_done("finished, then killed before exiting")
        if "a.npy.ooc-journal" in leftovers(self.dir) or array_bytes() == original:
            p = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, f"seed {seed}: {p.stderr}")
        job_done("the last")


class JournalConflictTest(Case):
    def setUp(self):
        super().setUp()
        self.a = np.random.default_rng(2).standard_normal(1 << 20)
        self.save("a.npy", self.a)
        p = self.start_paused("apply", "add-one", "a.npy", "--in-place", "--threads", "2", "--tile-bytes", "64K")
        p.send_signal(signal.SIGKILL)
        p.communicate()
        self.assertEqual(leftovers(self.dir), ["a.npy.ooc-journal"])
        with open(self.path("a.npy"), "rb") as f:
            self.stopped = f.read()

    def refused(self, *args):
        err = self.assert_refused(args, "finish it by running `oocrun apply add-one --in-place a.npy` again")
        with open(self.path("a.npy"), "rb") as f:
            self.assertTrue(f.read() == self.stopped, "a refused command changed the array")
        self.assertEqual(leftovers(self.dir), ["a.npy.ooc-journal"])
        return err

    def test_another_in_place_command_is_refused_with_the_command_that_finishes_the_first(self):
        err = self.refused("apply", "add:2", "a.npy", "--in-place")
        self.assertIn("did not finish", err)

    def test_an_in_place_run_without_a_journal_is_refused_too(self):
        self.refused("apply", "add-one", "a.npy", "--in-place", "--no-journal")

    def test_reading_a_half_rewritten_array_is_refused(self):
        self.refused("reduce", "sum", "a.npy")
        self.refused("apply", "scale:2", "a.npy", "-o", "out.npy")
        # A selection reads the array's bytes: its journal is the array's.
        err = self.refused("reduce", "sum", "a.npy[::2]")
        self.assertTrue(err.startswith("oocrun: a.npy: "), err)
        self.refused("apply", "scale:2", "a.npy[1:]", "-o", "out.npy")
        self.refused("eval", "sum(a)", "a=a.npy")
        self.refused("eval", "a * 2", "a=a.npy[::2]", "-o", "out.npy")

    def test_info_still_works_and_the_same_command_finishes(self):
        self.assertEqual(self.run_ooc("info", "a.npy").returncode, 0)
        p = self.run_ooc("apply", "add-one", "a.npy", "--in-place", "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(self.a + 1))
        self.assertEqual(leftovers(self.dir), [])

    def test_an_array_made_anew_by_np_save_is_not_resumed(self):
        # np.save over the stopped array rewrites the same inode: the journal's name and
        # identity still match, its bytes do not.
        inode = os.stat(self.path("a.npy")).st_ino
        anew = np.full(self.a.shape, 100.0)
        np.save(self.path("a.npy"), anew)
        self.assertEqual(os.stat(self.path("a.npy")).st_ino, inode)
        err = self.assert_refused(["apply", "add-one", "a.npy", "--in-place"],
                                  "are not the ones the unfinished in-place run left")
        self.assertIn("if it was made anew on purpose, remove the journal", err)
        self.assert_refused(["reduce", "sum", "a.npy"], "if the array was made anew since, remove the journal")
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(anew))
        os.remove(self.path("a.npy.ooc-journal"))
        p = self.run_ooc("apply", "add-one", "a.npy", "--in-place")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(anew + 1))


# ---------------------------------------------------------------------------------------
# 3. Input that shrinks under a run

class ShrinkTest(Case):
    def shrink_mid_run(self, *args):
        head = np.random.default_rng(3).standard_normal(1000)
        self.sparse("big.npy", 16 << 20, head)  # 128 MiB of holes but the head
        before = sorted(os.listdir(self.dir))
        p = self.start_paused(*args, "--threads", "2", "--tile-bytes", "1M")
        os.truncate(self.path("big.npy"), 1 << 20)  # another process cuts the file
        rc, out, err = self.finish(p)
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")
        line = self.last_line(err)
        self.assertEqual(line, "oocrun: big.npy: file shrank while being read (truncated by another process)")
        self.assertEqual(sorted(os.listdir(self.dir)), before, "an output or temporary was left")

    def test_reduce_of_a_truncated_input_fails_cleanly(self):
        self.shrink_mid_run("reduce", "sum", "big.npy")

    def test_apply_from_a_truncated_input_fails_and_writes_no_output(self):
        self.shrink_mid_run("apply", "add-one", "big.npy", "-o", "out.npy")

    def test_apply_over_an_existing_output_keeps_the_old_output(self):
        old = np.full(5, 7.0)
        self.save("out.npy", old)
        self.shrink_mid_run("apply", "add-one", "big.npy", "-o", "out.npy")
        np.testing.assert_array_equal(np.load(self.path("out.npy")), old)

    def shrink_chunked_hdf5_mid_run(self, compression, *args):
        """The same for a chunked HDF5 input: its chunks are decoded (or copied) on the
        kernel threads from a mapping of the file, which the shrink watch guards as it
        guards a .npy's. Unguarded, about half of these runs died by SIGBUS inside the
        decompressor. Several tries: where the cut lands among the tiles in flight varies."""
        import h5py
        data = np.random.default_rng(5).integers(0, 1 << 40, 4 << 20).astype("<f8")  # 32 MiB
        with h5py.File(self.path("source.h5"), "w") as f:
            f.create_dataset("x", data=data, chunks=(16384,), compression=compression)
        del data
        caught = 0
        for _ in range(2 if SANITIZED else 6):
            shutil.copyfile(self.path("source.h5"), self.path("big.h5"))
            before = sorted(os.listdir(self.dir))
            p = self.start_paused(*args, "--threads", "2", "--tile-bytes", "1M")
            os.truncate(self.path("big.h5"), 1 << 20)  # another process cuts the file
            rc, out, err = self.finish(p)
            if rc == 0:  # it had finished before it could be stopped (a loaded machine)
                continue
            caught += 1
            self.assertEqual(rc, 1, err)
            self.assertEqual(out, "")
            self.assertEqual(self.last_line(err),
                             "oocrun: big.h5:/x: file shrank while being read (truncated by another process)")
            self.assertEqual(sorted(os.listdir(self.dir)), before, "an output or temporary was left")
        if caught == 0:
            self.skipTest("every run finished before it could be stopped: machine too loaded")

    def test_reduce_of_a_truncated_gzip_hdf5_input_fails_cleanly(self):
        self.shrink_chunked_hdf5_mid_run("gzip", "reduce", "sum", "big.h5:/x")

    def test_apply_from_a_truncated_gzip_hdf5_input_fails_and_writes_no_output(self):
        self.shrink_chunked_hdf5_mid_run("gzip", "apply", "add-one", "big.h5:/x", "-o", "out.npy")

    def test_reduce_of_a_truncated_chunked_hdf5_input_fails_cleanly(self):
        self.shrink_chunked_hdf5_mid_run(None, "reduce", "sum", "big.h5:/x")

    def test_apply_from_a_truncated_chunked_hdf5_input_fails_and_writes_no_output(self):
        self.shrink_chunked_hdf5_mid_run(None, "apply", "add-one", "big.h5:/x", "-o", "out.h5:/y")


# ---------------------------------------------------------------------------------------
# 4. Full disk

class FullDiskTest(Case):
    # An output too big for the disk: test_cli_errors.OutputErrorTest.test_output_filesystem_full.
    def test_an_in_place_journal_too_big_for_the_disk_is_refused_before_any_work(self):
        mnt = mount_small_tmpfs(self, self.path("small"))
        a = np.arange(64 * 1024, dtype="<f8")  # 512 KiB; the journal wants 2 slots (one per tile) of 256 KiB and a block
        np.save(os.path.join(mnt, "a.npy"), a)
        p = self.run_ooc("apply", "add-one", "small/a.npy", "--in-place", "--threads", "2", "--tile-bytes", "256K")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertRegex(p.stderr, r"^oocrun: small/a\.npy\.ooc-journal: not enough disk space: needs 548\.86 kB "
                                   r"\(548864 bytes\), .* free \(--no-journal runs in place without one\)\n$")
        p = self.run_ooc("apply", "add-one", "small/a.npy", "--in-place", "--no-journal")  # as it says
        self.assertEqual(p.returncode, 0, p.stderr)
        a += 1
        self.assertEqual(os.listdir(mnt), ["a.npy"])
        np.testing.assert_array_equal(np.load(os.path.join(mnt, "a.npy")), a)


# ---------------------------------------------------------------------------------------
# 5. Concurrent use

class ConcurrencyTest(Case):
    def test_two_runs_writing_one_output_both_finish_and_it_is_one_runs_whole_result(self):
        x = np.random.default_rng(7).standard_normal(2 << 20)
        y = np.random.default_rng(8).standard_normal(2 << 20)
        self.save("x.npy", x)
        self.save("y.npy", y)
        results = {npy_bytes(x + 1), npy_bytes(y * 2)}
        for round_ in range(4):
            p = self.start("apply", "add-one", "x.npy", "-o", "out.npy", "--tile-bytes", "64K", "--threads", "1")
            q = self.start("apply", "scale:2", "y.npy", "-o", "out.npy", "--tile-bytes", "64K", "--threads", "1")
            for r in (p, q):
                _, err = r.communicate(timeout=TIMEOUT)
                self.assertEqual(r.returncode, 0, err)
            with open(self.path("out.npy"), "rb") as f:
                self.assertIn(f.read(), results, f"round {round_}: the output mixes the two runs")
            self.assertEqual(leftovers(self.dir), [])

    def test_a_reader_keeps_reading_the_old_bytes_of_a_file_replaced_by_rename(self):
        head = np.random.default_rng(9).standard_normal(100000)
        self.sparse("data.npy", 8 << 20, head)
        expected = np.load(self.path("data.npy")).sum()
        reader = self.start_caught_mid_run("reduce", "sum", "data.npy", "--json", "--threads", "1", "--tile-bytes", "256K")
        self.save("small.npy", np.arange(10.0))
        p = self.run_ooc("apply", "add-one", "small.npy", "-o", "data.npy")  # replaces data.npy
        self.assertEqual(p.returncode, 0, p.stderr)
        np.testing.assert_array_equal(np.load(self.path("data.npy")), np.arange(10.0) + 1)
        rc, out, err = self.finish(reader)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["value"], expected)  # the old file's sum, bit for bit

    def test_a_second_in_place_run_on_a_busy_array_is_refused_and_the_first_finishes_once(self):
        a = np.random.default_rng(10).standard_normal(1 << 20)
        self.save("a.npy", a)
        first = self.start_paused("apply", "add-one", "a.npy", "--in-place", "--tile-bytes", "64K", "--threads", "2")
        self.assert_refused(["apply", "add-one", "a.npy", "--in-place"], "a.npy: is in use by another run")
        self.assert_refused(["reduce", "sum", "a.npy"], "a.npy: is being rewritten in place by another run")
        rc, _, err = self.finish(first)
        self.assertEqual(rc, 0, err)
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(a + 1))

    def test_an_in_place_run_without_a_journal_holds_the_array_as_one_with_a_journal_does(self):
        a = np.random.default_rng(12).standard_normal(1 << 20)
        self.save("a.npy", a)
        first = self.start_paused("apply", "add-one", "a.npy", "--in-place", "--no-journal", "--tile-bytes", "64K",
                                  "--threads", "2")
        self.assert_refused(["apply", "add-one", "a.npy", "--in-place"], "a.npy: is in use by another run")
        self.assert_refused(["reduce", "sum", "a.npy"], "a.npy: is being rewritten in place by another run")
        self.assertEqual(leftovers(self.dir), [])
        rc, _, err = self.finish(first)
        self.assertEqual(rc, 0, err)
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(a + 1))

    def test_an_in_place_run_does_not_start_under_a_reader(self):
        a = np.random.default_rng(11).standard_normal(1 << 20)
        self.save("a.npy", a)
        reader = self.start_caught_mid_run("reduce", "sum", "a.npy", "--json", "--tile-bytes", "64K", "--threads", "1",
                                           holding="a.npy")
        self.assert_refused(["apply", "add-one", "a.npy", "--in-place"], "a.npy: is in use by another run")
        self.assert_refused(["apply", "add-one", "a.npy", "--in-place", "--no-journal"],
                            "a.npy: is in use by another run")
        self.assertEqual(leftovers(self.dir), [])
        rc, out, err = self.finish(reader)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["value"], a.sum())
        np.testing.assert_array_equal(np.load(self.path("a.npy")), a)


class LinkedReadersTest(Case):
    """A selection or an HDF5 external link reads another array's bytes: the in-place
    runs on that array and the readers through them exclude each other, as readers and
    in-place runs of the array itself do."""

    def setUp(self):
        super().setUp()
        import h5py
        self.data = np.random.default_rng(13).standard_normal(1 << 20)
        with h5py.File(self.path("target.h5"), "w") as f:
            f["pad"] = np.full(1000, 7.0)
            f["data"] = self.data
        with h5py.File(self.path("link.h5"), "w") as f:
            f["el"] = h5py.ExternalLink("target.h5", "/data")
        self.save("a.npy", self.data)

    def target(self):
        import h5py
        with h5py.File(self.path("target.h5"), "r") as f:
            return f["data"][()]

    def test_no_selection_or_link_is_read_while_its_source_is_rewritten_in_place(self):
        for source, readers, message in (
                ("a.npy", ["a.npy[::3]"], "a.npy: is being rewritten in place by another run"),
                ("target.h5:/data", ["link.h5:/el", "link.h5:/el[5:]"],
                 "target.h5:/data: is being rewritten in place by another run")):
            first = self.start_paused("apply", "add-one", source, "--in-place", "--tile-bytes", "64K",
                                      "--threads", "2")
            for reader in readers:
                self.assert_refused(["reduce", "sum", reader], message)
                self.assert_refused(["eval", "sum(x)", f"x={reader}"], message)
            rc, _, err = self.finish(first)
            self.assertEqual(rc, 0, err)
        np.testing.assert_array_equal(np.load(self.path("a.npy")), self.data + 1)
        np.testing.assert_array_equal(self.target(), self.data + 1)

    def test_no_in_place_run_starts_under_a_reader_through_a_selection_or_a_link(self):
        for source, reader in (("a.npy", "a.npy[::2]"), ("target.h5:/data", "link.h5:/el")):
            r = self.start_caught_mid_run("reduce", "sum", reader, "--json", "--tile-bytes", "64K", "--threads", "1",
                                          holding=source.split(":")[0])
            for extra in ([], ["--no-journal"]):
                self.assert_refused(["apply", "add-one", source, "--in-place", *extra], "is in use by another run")
            rc, out, err = self.finish(r)
            self.assertEqual(rc, 0, err)
        for source, reader in (("a.npy", "a.npy"), ("target.h5:/data", "link.h5:/el")):
            r = self.start_caught_mid_run("eval", "sum(x * 2)", f"x={reader}", "--tile-bytes", "64K", "--threads", "1",
                                          holding=source.split(":")[0])
            self.assert_refused(["apply", "add-one", source, "--in-place"], "is in use by another run")
            rc, out, err = self.finish(r)
            self.assertEqual(rc, 0, err)
        np.testing.assert_array_equal(np.load(self.path("a.npy")), self.data)
        np.testing.assert_array_equal(self.target(), self.data)

    def test_a_link_to_a_half_rewritten_dataset_is_refused(self):
        p = self.start_paused("apply", "add-one", "target.h5:/data", "--in-place", "--threads", "2",
                              "--tile-bytes", "64K")
        p.send_signal(signal.SIGKILL)
        p.communicate()
        self.assertIn("target.h5%data.ooc-journal", os.listdir(self.dir))
        for reader in ("link.h5:/el", "link.h5:/el[::2]"):
            self.assert_refused(["reduce", "sum", reader], "target.h5:/data: an in-place run on it did not finish")
        p = self.run_ooc("apply", "add-one", "target.h5:/data", "--in-place")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(float(self.run_ooc("reduce", "sum", "link.h5:/el").stdout), (self.data + 1).sum())


# ---------------------------------------------------------------------------------------
# 6. A directory that cannot be synced (strace fails its fsync), and hard links

def strace_works():
    try:
        return subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@unittest.skipUnless(shutil.which("strace") and strace_works(), "needs strace, allowed to trace (ptrace)")
class DirectorySyncTest(Case):
    """Exit 0 means the output's directory entry is durable (fsync of the file, rename,
    fsync of the directory, then the report). When the directory's fsync fails, the run
    exits 1 with one line naming the output (never `.`), and either nothing changed, or
    (in place, once the array holds its result) the same command finishes with nothing
    applied twice. strace -P DIR fails the fsyncs of that directory only, the `when`th
    of them or all."""

    def run_failing_dir_sync(self, *args, when=None, call="fsync", error="EIO"):
        inject = f"{call}:error={error}" + (f":when={when}" if when else "")
        p = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-P", os.path.realpath(self.dir),
                            "-e", "trace=" + call, "-e", "inject=" + inject, OOCRUN, *map(str, args)],
                           cwd=self.dir, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
        for word in CRASH_WORDS:
            self.assertNotIn(word, p.stderr)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertNotIn(" .:", p.stderr)
        return p.stderr

    def test_new_outputs_are_not_written(self):
        a = np.arange(1000.0)
        self.save("x.npy", a)
        with open(self.path("c.csv"), "w") as f:
            f.write("1,2\n3,4\n")
        cases = [(("apply", "add-one", "x.npy", "-o", "out.npy"), "out.npy"),
                 (("apply", "add-one", "x.npy", "-o", "new.h5:/y"), "new.h5"),
                 (("eval", "x * 2", "x=x.npy", "-o", "out.npy"), "out.npy"),
                 (("import", "c.csv", "-o", "out.npy"), "out.npy"),
                 (("export", "x.npy", "-o", "o.csv"), "o.csv")]
        for args, out in cases:
            with self.subTest(args=args):
                err = self.run_failing_dir_sync(*args)
                self.assertEqual(err, f"oocrun: {out}: cannot sync its directory (fsync failed: input/output "
                                      f"error); nothing was written\n")
                self.assertEqual(sorted(os.listdir(self.dir)), ["c.csv", "x.npy"])
                p = self.run_ooc(*args)  # the same command, on a healthy disk
                self.assertEqual(p.returncode, 0, p.stderr)
                os.remove(self.path(out))

    def test_a_directory_that_cannot_be_opened_to_be_synced(self):
        # Named by its full path, the directory is opened by that path, which -P matches.
        a = np.arange(1000.0)
        self.save("x.npy", a)
        out = os.path.join(os.path.realpath(self.dir), "out.npy")
        err = self.run_failing_dir_sync("apply", "add-one", "x.npy", "-o", out, call="openat", error="EACCES")
        self.assertEqual(err, f"oocrun: {out}: cannot sync its directory (cannot open it: permission denied); "
                              f"nothing was written\n")
        self.assertEqual(sorted(os.listdir(self.dir)), ["x.npy"])
        array = os.path.join(os.path.realpath(self.dir), "x.npy")
        err = self.run_failing_dir_sync("apply", "add-one", array, "--in-place", call="openat", error="EACCES")
        self.assertEqual(err, f"oocrun: {array}: cannot sync the directory of its in-place journal {array}.ooc-journal "
                              f"(cannot open it: permission denied); the array is unchanged\n")
        self.assertEqual(sorted(os.listdir(self.dir)), ["x.npy"])
        np.testing.assert_array_equal(np.load(self.path("x.npy")), a)

    def test_an_output_run_again_keeps_the_file_it_would_replace(self):
        self.save("x.npy", np.arange(1000.0))
        self.save("out.npy", np.zeros(3))
        os.link(self.path("out.npy"), self.path("other-name.npy"))
        with open(self.path("out.npy"), "rb") as f:
            old = f.read()
        err = self.run_failing_dir_sync("apply", "add-one", "x.npy", "-o", "out.npy")
        self.assertEqual(err, "oocrun: out.npy: cannot sync its directory (fsync failed: input/output error); "
                              "nothing was written (the file it replaced is back)\n")
        with open(self.path("out.npy"), "rb") as f:
            self.assertEqual(f.read(), old)
        self.assertTrue(os.path.samefile(self.path("out.npy"), self.path("other-name.npy")))
        self.assertEqual(leftovers(self.dir), [])

    def test_in_place_a_journal_that_cannot_be_made_durable_leaves_the_array_unchanged(self):
        a = np.arange(1000.0)
        self.save("a.npy", a)
        cmd = ("apply", "add-one", "a.npy", "--in-place")
        err = self.run_failing_dir_sync(*cmd, when=1)  # the journal's creation
        self.assertEqual(err, "oocrun: a.npy: cannot sync the directory of its in-place journal a.npy.ooc-journal "
                              "(fsync failed: input/output error); the array is unchanged\n")
        self.assertEqual(leftovers(self.dir), [])
        np.testing.assert_array_equal(np.load(self.path("a.npy")), a)
        self.assertEqual(self.run_ooc(*cmd).returncode, 0)
        np.testing.assert_array_equal(np.load(self.path("a.npy")), a + 1)

    def test_in_place_the_same_command_after_a_failed_last_sync_applies_nothing_again(self):
        a = np.random.default_rng(7).standard_normal(64 * 1024)
        self.save("a.npy", a)
        cmd = ("apply", "add-one", "a.npy", "--in-place", "--tile-bytes", "64K")
        err = self.run_failing_dir_sync(*cmd, when=2)  # the journal's removal
        self.assertEqual(err, "oocrun: a.npy: cannot sync the directory of its in-place journal a.npy.ooc-journal "
                              "(fsync failed: input/output error); the array holds the result: running the same "
                              "command again applies nothing and removes its finished journal a.npy.ooc-journal\n")
        np.testing.assert_array_equal(np.load(self.path("a.npy")), a + 1)
        self.assertEqual(leftovers(self.dir), ["a.npy.ooc-journal"])
        # The array is whole: readers read it.
        self.assertEqual(self.run_ooc("reduce", "sum", "a.npy").returncode, 0)
        p = self.run_ooc(*cmd)  # as the message says
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("the in-place run on a.npy had finished (8 tiles done): nothing is applied again", p.stderr)
        self.assertEqual(leftovers(self.dir), [])
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(a + 1))  # X + 1, not X + 2

    def test_in_place_another_command_after_a_failed_last_sync_starts_afresh(self):
        a = np.arange(1000.0)
        self.save("a.npy", a)
        self.run_failing_dir_sync("apply", "add-one", "a.npy", "--in-place", when=2)
        p = self.run_ooc("apply", "add:2", "a.npy", "--in-place")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(leftovers(self.dir), [])
        np.testing.assert_array_equal(np.load(self.path("a.npy")), a + 3)

    def test_a_resumed_run_whose_new_journal_cannot_be_synced_stays_resumable(self):
        a = np.random.default_rng(8).standard_normal(1 << 20)
        self.save("a.npy", a)
        cmd = ("apply", "add-one", "a.npy", "--in-place", "--threads", "2", "--tile-bytes", "64K")
        p = self.start_paused(*cmd)
        p.send_signal(signal.SIGKILL)
        p.communicate()
        err = self.run_failing_dir_sync(*cmd, when=1)  # the resumed run's new journal
        self.assertIn("oocrun: a.npy: cannot sync the directory of its in-place journal a.npy.ooc-journal (fsync "
                      "failed: input/output error); run the same command again to finish it", err)
        self.assertEqual(leftovers(self.dir), ["a.npy.ooc-journal"])
        p = self.run_ooc(*cmd)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(a + 1))


class HardLinkTest(Case):
    """The journal is found by the file's identity (a mark on its inode names it), not by
    the name the run was started under: another name of the same file, in the same
    directory or another, finds the unfinished run (once any name started a fresh run on
    the half-rewritten array)."""

    def setUp(self):
        super().setUp()
        self.a = np.random.default_rng(9).standard_normal(1 << 20)
        self.save("a.npy", self.a)
        p = self.start_paused("apply", "add-one", "a.npy", "--in-place", "--threads", "2", "--tile-bytes", "64K")
        p.send_signal(signal.SIGKILL)
        p.communicate()
        self.assertEqual(leftovers(self.dir), ["a.npy.ooc-journal"])
        with open(self.path("a.npy"), "rb") as f:
            self.stopped = f.read()
        os.mkdir(self.path("other"))
        os.link(self.path("a.npy"), self.path("b.npy"))
        os.link(self.path("a.npy"), self.path("other/c.npy"))

    def check_name(self, name):
        hint = f"finish it by running `oocrun apply add-one --in-place {name}` again"
        for args in (("reduce", "sum", name), ("apply", "scale:2", name, "-o", "out.npy"),
                     ("apply", "add:2", name, "--in-place"), ("apply", "add-one", name, "--in-place", "--no-journal")):
            with self.subTest(args=args):
                self.assert_refused(args, hint)
                with open(self.path("a.npy"), "rb") as f:
                    self.assertTrue(f.read() == self.stopped, "a refused command changed the array")
        p = self.run_ooc("apply", "add-one", name, "--in-place")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"resuming the interrupted in-place run on {name}: ", p.stderr)
        with open(self.path("a.npy"), "rb") as f:
            self.assertEqual(f.read(), npy_bytes(self.a + 1))
        self.assertEqual(leftovers(self.dir), [])
        self.assertEqual(leftovers(self.path("other")), [])

    def test_a_hard_link_in_the_same_directory(self):
        self.check_name("b.npy")

    def test_a_hard_link_in_another_directory(self):
        self.check_name("other/c.npy")

    def test_an_hdf5_dataset_through_a_hard_link_of_its_file(self):
        import h5py
        data = np.random.default_rng(10).standard_normal(1 << 20)
        with h5py.File(self.path("t.h5"), "w") as f:
            f["d"] = data
            f["e"] = np.zeros(4)
        p = self.start_paused("apply", "add-one", "t.h5:/d", "--in-place", "--threads", "2", "--tile-bytes", "64K")
        p.send_signal(signal.SIGKILL)
        p.communicate()
        os.link(self.path("t.h5"), self.path("other/u.h5"))
        self.assert_refused(("reduce", "sum", "other/u.h5:/d"), "finish it by running `oocrun apply add-one "
                                                                "--in-place other/u.h5:/d` again")
        self.assertEqual(self.run_ooc("reduce", "sum", "other/u.h5:/e").returncode, 0)  # another dataset: whole
        p = self.run_ooc("apply", "add-one", "other/u.h5:/d", "--in-place")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resuming the interrupted in-place run on other/u.h5:/d: ", p.stderr)
        with h5py.File(self.path("t.h5"), "r") as f:
            np.testing.assert_array_equal(f["d"][()], data + 1)
        self.assertEqual([n for n in leftovers(self.dir) if "t.h5" in n], [])


if __name__ == "__main__":
    unittest.main()
