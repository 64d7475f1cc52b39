"""Kill soak: kill -9 at a random moment of a run, then the same command, which must give
the exact result.

For each kind of run (in place with its journal; -o into a new .npy, a new HDF5 file, an
existing HDF5 file, a compressed HDF5 dataset), each round starts from the original
files, starts the run, kills it with SIGKILL after a random time drawn over the measured
length of a run (a little past its end too, so kills also land while it publishes and
exits), checks what the kill left, runs the same command again without a kill and checks
the result:

* in place: right after the kill, either a journal is left, or the array is exactly a
  (not started) or a + 1 (finished); the same command (where the run had not finished)
  exits 0 with exactly a + 1, never a + 2, and no journal left;
* -o: right after the kill, OUT is absent or whole (an existing HDF5 file, once any
  oocrun command has opened it, holds every object it held and /y absent or whole); the
  same command (with --overwrite, as the run may have finished) exits 0 with OUT exactly
  the fault-free run's, the input untouched, and no `.ooc-` file or hidden dataset left
  other than the killed run's own hidden temporary files, which README allows ("which
  you may delete"): those are counted and reported, not failed.

Kills per case: OOC_KILL_SOAK (CI: 8, so 40 kills; scripts/kill_soak.sh runs thousands),
OOC_KILL_SEED fixes the moments. The in-place test of test_crash_safety.py resumes runs
that are themselves killed again; this one checks one kill and one resume at a time, for
every output kind.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import ooctest  # noqa: E402
from ooctest import file_bytes, h5_objects, leftovers  # noqa: E402

OOCRUN = os.environ.get("OOCRUN") or os.path.join(os.environ.get("OOC_BUILD_DIR", "build"), "oocrun")
KILLS = int(os.environ.get("OOC_KILL_SOAK", "4" if ooctest.SANITIZED else "8"))
ELEMENTS = int(os.environ.get("OOC_KILL_ELEMENTS", str(1 << 20)))  # 8 MiB of float64: 64 tiles
TIMEOUT = 120

CASES = [  # name, command (in its directory), output, kind
    ("in_place", ["apply", "add-one", "X.npy", "--in-place"], "X.npy", "in_place"),
    ("npy", ["apply", "add-one", "X.npy", "-o", "Y.npy", "--overwrite"], "Y.npy", "npy"),
    ("h5_new", ["apply", "add-one", "X.npy", "-o", "new.h5:/y", "--overwrite"], "new.h5:/y", "h5"),
    ("h5_existing", ["apply", "add-one", "X.npy", "-o", "existing.h5:/y", "--overwrite"], "existing.h5:/y", "h5"),
    ("h5_gzip", ["apply", "add-one", "X.npy", "-o", "existing.h5:/y", "--overwrite", "--compression", "gzip:1",
                 "--chunks", "auto"], "existing.h5:/y", "h5"),
]
if os.environ.get("OOC_KILL_CASES"):
    CASES = [c for c in CASES if c[0] in os.environ["OOC_KILL_CASES"].split(",")]


def command(args):
    return [OOCRUN, *args, "--tile-bytes", "128K", "--threads", "2", "--quiet"]


def make_inputs(d):
    import h5py
    rng = np.random.default_rng(int(os.environ.get("OOC_KILL_SEED", "26")))
    x = rng.standard_normal(ELEMENTS)
    np.save(os.path.join(d, "X.npy"), x)
    with h5py.File(os.path.join(d, "existing.h5"), "w") as h:
        h.attrs["note"] = "the user's file"
        h["a"] = np.arange(1000, dtype="<f8")
        h.create_dataset("g/b", data=rng.integers(0, 1000, (300, 40), dtype="<i4"), chunks=(50, 40),
                         compression="gzip")
    return x


def output_state(d, output):
    if ":" not in output:
        p = os.path.join(d, output)
        return file_bytes(p) if os.path.exists(p) else None
    import h5py
    file, dataset = output.split(":")
    p = os.path.join(d, file)
    if not os.path.exists(p):
        return None
    with h5py.File(p, "r") as h:
        if dataset not in h:
            return None
        return h[dataset][()].tobytes()


def run(d, args):
    p = subprocess.run(command(args), cwd=d, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stderr


def soak(name, args, output, kind, pristine, root, rng):
    """KILLS rounds of one case; returns (kills, problems, temporaries left)."""
    d = os.path.join(root, name)
    shutil.copytree(pristine, d)
    reset = lambda: [shutil.copy2(os.path.join(pristine, n), d) for n in os.listdir(pristine)]  # noqa: E731
    for n in os.listdir(d):
        if n not in os.listdir(pristine):
            os.unlink(os.path.join(d, n))
    start = time.monotonic()
    rc, err = run(d, args)
    length = time.monotonic() - start
    assert rc == 0, f"{name}: the run without a kill exits {rc}: {err}"
    expected = output_state(d, output)
    if kind == "in_place":
        rc, err = run(d, args)
        twice = output_state(d, output)
    original_x = file_bytes(os.path.join(pristine, "X.npy"))
    existing_objects = h5_objects(os.path.join(pristine, "existing.h5"))
    kills, problems, temporaries, rounds = 0, [], 0, 0
    while kills < KILLS:
        rounds += 1
        if rounds > 20 * KILLS:
            problems.append(f"{name}: runs keep finishing before the kill")
            break
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        reset()
        delay = rng.uniform(0, length * 1.1)
        p = subprocess.Popen(command(args), cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        _, err = p.communicate(timeout=TIMEOUT)
        if p.returncode == 0:
            continue  # finished before the kill: not a kill
        where = f"{name}, kill {kills + 1} after {delay:.3f} s of ~{length:.3f} s"
        if p.returncode != -signal.SIGKILL:
            problems.append(f"{where}: the killed run exited {p.returncode}: {err.strip()[:200]}")
            continue
        kills += 1
        left = leftovers(d)
        if kind == "in_place":
            journal = "X.npy.ooc-journal" in left
            now = output_state(d, output)
            if not journal:
                if now == expected:
                    continue  # it had finished; the same command would rightly add one again
                if now != original_x:
                    problems.append(f"{where}: no journal, and the array is neither a nor a + 1")
                    continue
        else:
            if kind == "h5":
                file = output.split(":")[0]
                subprocess.run([OOCRUN, "info", file], cwd=d, capture_output=True, timeout=TIMEOUT)  # rolls back
            try:
                now = output_state(d, output)
            except Exception as e:  # noqa: BLE001
                problems.append(f"{where}: the output cannot be read after the kill: {str(e)[:150]}")
                now = None
            if now is not None and now != expected:
                problems.append(f"{where}: a partial output is visible under the final name")
            if output.startswith("existing.h5"):
                problems += [f"{where}: after the kill, {p}" for p in existing_problems(d, existing_objects, True)]
        rc, err = run(d, args)
        if rc != 0:
            problems.append(f"{where}: the same command again exits {rc}: {err.strip()[:200]}")
            continue
        now = output_state(d, output)
        if now != expected:
            problems.append(f"{where}: after the same command again, the output is "
                            + ("a + 2" if kind == "in_place" and now == twice else "not the fault-free run's"))
        if kind != "in_place" and file_bytes(os.path.join(d, "X.npy")) != original_x:
            problems.append(f"{where}: the input changed")
        if output.startswith("existing.h5"):
            problems += [f"{where}: after the rerun, {p}" for p in existing_problems(d, existing_objects, False)]
        left = leftovers(d)
        temporaries += len(left)
        if left:  # the rerun removes the dead run's temporaries (os::create_temp_beside)
            problems.append(f"{where}: after the same command again, {left} left")
    return kills, problems, temporaries


def existing_problems(d, was, y_optional):
    try:
        now = h5_objects(os.path.join(d, "existing.h5"))
    except Exception as e:  # noqa: BLE001
        return [f"h5py cannot read existing.h5: {str(e)[:150]}"]
    problems = [f"existing.h5:{n} changed or lost" for n, obj in was.items() if now.get(n) != obj]
    extra = sorted(set(now) - set(was) - {"y"})
    if extra:
        problems.append(f"existing.h5 holds {extra}")
    if "y" not in now and not y_optional:
        problems.append("existing.h5:/y missing")
    return problems


def main():
    if not os.access(OOCRUN, os.X_OK):
        print(f"set OOCRUN to the oocrun binary (got {OOCRUN!r})")
        return 1
    seed = int(os.environ.get("OOC_KILL_SEED", random.SystemRandom().randrange(1 << 30)))
    rng = random.Random(seed)
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="ooc-kill-soak-")
    total_kills, all_problems, total_temporaries = 0, [], 0
    try:
        pristine = os.path.join(root, "pristine")
        os.mkdir(pristine)
        make_inputs(pristine)
        for name, args, output, kind in CASES:
            t = time.monotonic()
            kills, problems, temporaries = soak(name, args, output, kind, pristine, root, rng)
            total_kills += kills
            total_temporaries += temporaries
            all_problems += problems
            print(f"{name}: {kills} kills, {len(problems)} bad outcomes, {temporaries} hidden temporaries left "
                  f"by killed runs ({time.monotonic() - t:.1f} s)", flush=True)
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for p in all_problems:
        print("FAIL " + p)
    print(f"kill soak (seed {seed}): {total_kills} kills, {len(all_problems)} bad outcomes, "
          f"{total_temporaries} temporaries left, in {time.monotonic() - started:.0f} s")
    return 1 if all_problems else 0


if __name__ == "__main__":
    sys.exit(main())
