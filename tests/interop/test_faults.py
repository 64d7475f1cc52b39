"""Nothing lost when a system call fails: a sweep of injected faults over every output kind.

Each case (a command and what it writes) is run once under the fault shim
(tests/fault/fault_shim.c, OOC_FAULT_SHIM) only counting the calls of each family on the
files of its directory, then again and again with the Nth call of one family failed
(EIO or ENOSPC, once, or from N on as a full disk does). Every outcome must be one of:

* exit 0, and the output (or the array, in place) exactly the fault-free run's;
* exit 1 with one line on stderr that names the output or input file; nothing published
  under the final name (the output absent; in an existing HDF5 file, no dataset /y and
  every other object as it was); no `.ooc-` temporary or hidden dataset left; the input
  byte for byte as it was; and the same command run again without faults gives the
  exact result (in place: a + 1, never a + 2).

Never a signal death, never a hang (each run has a timeout). CI takes a few N per family,
spread over its whole range; OOC_FAULT_SWEEP=full (scripts/fault_sweep.sh) takes every N,
with each errno and the sticky variant. OOC_FAULT_CASES=npy,h5_existing and
OOC_FAULT_FAMILIES=pwrite,fsync narrow a run; OOC_FAULT_REPORT=path writes the failures
as JSON. Run as ``OOCRUN=build/oocrun OOC_FAULT_SHIM=build/tests/libooc_fault_shim.so
python3 test_faults.py``.
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import ooctest  # noqa: E402

BUILD = os.environ.get("OOC_BUILD_DIR", "build")
OOCRUN = os.environ.get("OOCRUN") or os.path.join(BUILD, "oocrun")
SHIM = os.environ.get("OOC_FAULT_SHIM") or os.path.join(BUILD, "tests", "libooc_fault_shim.so")
FULL = os.environ.get("OOC_FAULT_SWEEP") == "full"
# CI: this many N per family and case, the first and the last included; each errno in turn.
# Under ASan (ooctest.SANITIZED), where each run costs several times more: 2.
PER_FAMILY = int(os.environ.get("OOC_FAULT_PER_FAMILY", "2" if ooctest.SANITIZED else "4"))
FAMILIES = ["pwrite", "write", "fsync", "fdatasync", "msync", "rename", "ftruncate", "fallocate", "open", "mmap"]
if os.environ.get("OOC_FAULT_FAMILIES"):
    FAMILIES = os.environ["OOC_FAULT_FAMILIES"].split(",")
STICKY_FAMILIES = {"pwrite", "write", "ftruncate", "fallocate"}  # a full disk: every later call fails too
TIMEOUT = 60
# Elements of the arrays: the full sweep's are bigger, so each family has more calls.
ELEMENTS = int(os.environ.get("OOC_FAULT_ELEMENTS", "640000" if FULL else "40000"))
TILE = "64K"
WORKERS = max(1, min(4, os.cpu_count() or 1))


def h5py():
    import h5py as module
    return module


# --------------------------------------------------------------------------------------
# The inputs, made once; every trial copies them into a directory of its own.

def make_inputs(d):
    rng = np.random.default_rng(26)
    n = ELEMENTS  # 40000 float64: 5 tiles of 64 KiB
    x = rng.standard_normal(n)
    np.save(os.path.join(d, "X.npy"), x)
    np.save(os.path.join(d, "W.npy"), rng.standard_normal(n))
    np.save(os.path.join(d, "M.npy"), rng.standard_normal((n // 8, 8)))
    np.savetxt(os.path.join(d, "data.csv"), rng.standard_normal((n // 6, 6)), delimiter=",")  # ~400 KB of text
    f = h5py()
    with f.File(os.path.join(d, "existing.h5"), "w") as h:
        h.attrs["note"] = "the user's file"
        h["a"] = np.arange(1000, dtype="<f8")
        g = h.create_group("g")
        g.create_dataset("b", data=rng.integers(0, 1000, (300, 40), dtype="<i4"), chunks=(50, 40),
                         compression="gzip")
        g["b"].attrs["unit"] = "m"
    with f.File(os.path.join(d, "in.h5"), "w") as h:
        h.create_dataset("c", data=rng.standard_normal((n // 8, 8)), chunks=(500, 8), compression="gzip")
    if zarr() is not None:  # X's values, uncompressed, in chunks that tiles cut (rewritten in place)
        z = zarr().open(os.path.join(d, "U.zarr"), mode="w", shape=x.shape, chunks=(5000,), dtype=x.dtype,
                        compressor=None)
        z[...] = x


def zarr():
    try:
        import zarr as module
    except ImportError:
        return None
    return module


def state_of(path):
    """A file's bytes, or a directory's files (hidden ones too) with their bytes."""
    if not os.path.isdir(path):
        return file_bytes(path)
    return tuple(sorted((os.path.relpath(os.path.join(root, n), path), file_bytes(os.path.join(root, n)))
                        for root, _, names in os.walk(path) for n in names))


# --------------------------------------------------------------------------------------
# The cases: what runs, what it reads, what it writes.

class Case:
    def __init__(self, name, args, inputs, output, kind, needs=()):
        self.name, self.args, self.inputs, self.output, self.kind = name, args, inputs, output, kind
        self.needs = needs  # HDF5 filters (h5py must read them)
        self.expected = None  # set by the fault-free run


CASES = [
    Case("npy", ["apply", "add-one", "X.npy", "-o", "Y.npy"], ["X.npy"], "Y.npy", "npy"),
    Case("npy_direct", ["apply", "add-one", "X.npy", "-o", "Y.npy", "--io", "direct"], ["X.npy"], "Y.npy", "npy"),
    Case("h5_new", ["apply", "add-one", "X.npy", "-o", "new.h5:/y"], ["X.npy"], "new.h5:/y", "h5"),
    Case("h5_existing", ["apply", "add-one", "X.npy", "-o", "existing.h5:/y"], ["X.npy"], "existing.h5:/y", "h5"),
    Case("h5_gzip", ["apply", "add-one", "X.npy", "-o", "new.h5:/y", "--compression", "gzip", "--chunks", "auto"],
         ["X.npy"], "new.h5:/y", "h5"),
    Case("h5_lz4", ["apply", "add-one", "X.npy", "-o", "new.h5:/y", "--compression", "lz4", "--chunks", "4096"],
         ["X.npy"], "new.h5:/y", "h5", needs=("lz4",)),
    Case("h5_existing_blosc", ["apply", "add-one", "X.npy", "-o", "existing.h5:/y", "--compression", "blosc",
                               "--chunks", "4096"], ["X.npy"], "existing.h5:/y", "h5", needs=("blosc",)),
    Case("h5_input", ["apply", "add-one", "in.h5:/c", "-o", "Y.npy"], ["in.h5"], "Y.npy", "npy"),
    Case("in_place", ["apply", "add-one", "X.npy", "--in-place"], [], "X.npy", "in_place"),
    Case("eval", ["eval", "a * 2 + b", "a=X.npy", "b=W.npy", "-o", "E.npy"], ["X.npy", "W.npy"], "E.npy", "npy"),
    Case("reduce_axis", ["reduce", "sum", "M.npy", "--axis", "0", "-o", "R.npy"], ["M.npy"], "R.npy", "npy"),
    Case("import", ["import", "data.csv", "-o", "I.npy"], ["data.csv"], "I.npy", "npy"),
    Case("import_h5_existing", ["import", "data.csv", "-o", "existing.h5:/y"], ["data.csv"], "existing.h5:/y", "h5"),
    Case("export", ["export", "M.npy", "-o", "out.csv"], ["M.npy"], "out.csv", "text"),
    Case("zarr_new", ["apply", "add-one", "X.npy", "-o", "Z.zarr", "--chunks", "5000"], ["X.npy"], "Z.zarr", "zarr",
         needs=("zarr",)),
    Case("zarr_in_place", ["apply", "add-one", "U.zarr", "--in-place"], [], "U.zarr", "in_place", needs=("zarr",)),
]
if os.environ.get("OOC_FAULT_CASES"):
    wanted = os.environ["OOC_FAULT_CASES"].split(",")
    CASES = [c for c in CASES if c.name in wanted]


def command(case):
    return [OOCRUN, *case.args, "--tile-bytes", TILE, "--threads", "2", "--quiet"]


leftovers, file_bytes, h5_objects = ooctest.leftovers, ooctest.file_bytes, ooctest.h5_objects


class Trial:
    """One run of one case in a directory of its own, under the shim or not."""

    def __init__(self, case, pristine, root, tag):
        self.case = case
        self.deferred = False
        self.dir = tempfile.mkdtemp(prefix=f"{case.name}-{tag}-", dir=root)
        for n in os.listdir(pristine):
            if os.path.isdir(os.path.join(pristine, n)):
                shutil.copytree(os.path.join(pristine, n), os.path.join(self.dir, n))
            else:
                shutil.copy2(os.path.join(pristine, n), self.dir)
        self.before = {n: state_of(os.path.join(self.dir, n)) for n in os.listdir(self.dir)}

    def path(self, name):
        return os.path.join(self.dir, name)

    def run(self, fault=None):
        """Runs the case's command; `fault` is the shim's environment (None: no shim)."""
        env = dict(os.environ)
        counts = os.path.join(os.path.dirname(self.dir), os.path.basename(self.dir) + ".counts")
        if fault is not None:
            env.update({"LD_PRELOAD": SHIM, "OOC_FAULT_PATH_SUBSTR": self.dir, "OOC_FAULT_COUNT_FILE": counts})
            env.update({k: str(v) for k, v in fault.items()})
        start = time.monotonic()
        try:
            p = subprocess.run(command(self.case), cwd=self.dir, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=TIMEOUT)
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = "timeout", (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        self.seconds = time.monotonic() - start
        self.counts, self.injected = {}, []
        if fault is not None and os.path.exists(counts):
            with open(counts) as f:
                for line in f:
                    w = line.split()
                    if w[0] == "count":
                        self.counts[w[1]] = int(w[2])
                    elif w[0] == "inject":
                        self.injected.append(line.strip())
            os.unlink(counts)
        return rc, err

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- what the directory holds --------------------------------------------------------

    def output_state(self):
        """The output as comparable data, or None where it is absent."""
        case = self.case
        if case.kind in ("npy", "text", "in_place", "zarr"):
            p = self.path(case.output)
            return state_of(p) if os.path.exists(p) else None
        file, dataset = case.output.split(":")
        p = self.path(file)
        if not os.path.exists(p):
            return None
        with h5py().File(p, "r") as h:
            if dataset not in h:
                return None
            d = h[dataset]
            return (d.dtype.str, d.shape, d[()].tobytes())

    def problems_after_failure(self, err):
        """What is wrong with the state an exit 1 left (before any rerun)."""
        case, problems = self.case, []
        lines = [l for l in err.splitlines() if l.strip()]
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr")
        names = {os.path.basename(case.output.split(":")[0])} | {os.path.basename(i) for i in case.inputs}
        if case.kind == "in_place":
            names.add("X.npy")
        if lines and not any(n in lines[-1] for n in names):
            problems.append("the message names neither the output nor an input")
        for n in case.inputs:
            if state_of(self.path(n)) != self.before[n]:
                problems.append(f"input {n} changed")
        problems += self.rollback(err)
        if case.kind != "in_place":
            left = leftovers(self.dir)
            if left:
                problems.append(f"left {left}")
        if case.kind in ("npy", "text", "zarr"):
            if os.path.exists(self.path(case.output)):
                problems.append(f"{case.output} published")
        elif case.kind == "h5":
            file = case.output.split(":")[0]
            if file in self.before:
                problems += self.existing_h5_problems(file, allow_y=False)
            elif os.path.exists(self.path(file)):
                problems.append(f"{file} published")
        return problems

    def rollback(self, err):
        """A run that could not put an existing HDF5 file's bytes back (its disk full) may
        leave FILE.ooc-rollback, if its message says that the next oocrun command on the file
        puts them back: that command (`oocrun info FILE`, no faults) is run here, and the
        file must then be as it was. Counted apart, as deferred rollbacks."""
        journals = [n for n in leftovers(self.dir) if n.endswith(".ooc-rollback")]
        if not journals:
            return []
        self.deferred = True
        problems = []
        if "ooc-rollback" not in err:
            problems.append("left a rollback journal that the message does not mention")
        for j in journals:
            p = subprocess.run([OOCRUN, "info", j[:-len(".ooc-rollback")]], cwd=self.dir, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=TIMEOUT)
            if p.returncode != 0:
                problems.append(f"oocrun info after the failure exits {p.returncode}: {p.stderr.strip()[:120]}")
        return problems

    def existing_h5_problems(self, file, allow_y):
        try:
            now = h5_objects(self.path(file))
        except Exception as e:  # noqa: BLE001 (h5py's errors are OSError, KeyError, RuntimeError...)
            return [f"h5py cannot read {file}: {str(e)[:120]}"]
        was = Case.pristine_objects[file]
        problems = []
        for name, obj in was.items():
            if now.get(name) != obj:
                problems.append(f"{file}:{name} changed or lost")
        extra = sorted(set(now) - set(was) - ({"y"} if allow_y else set()))
        if extra:
            problems.append(f"{file} gained {extra}")
        return problems

    def problems_after_success(self):
        case, problems = self.case, []
        got = self.output_state()
        if got != case.expected:
            problems.append("output missing" if got is None else "output differs from the fault-free run's")
        for n in case.inputs:
            if state_of(self.path(n)) != self.before[n]:
                problems.append(f"input {n} changed")
        left = leftovers(self.dir)
        if left:
            problems.append(f"left {left}")
        if case.kind == "h5":
            file = case.output.split(":")[0]
            if file in self.before:
                problems += self.existing_h5_problems(file, allow_y=True)
        return problems


# --------------------------------------------------------------------------------------

def signal_death(rc):
    return rc == "timeout" or rc < 0 or rc >= 128


def one_fault(case, pristine, root, family, n, errno_name, sticky):
    """Runs one injected fault; returns (injected, failure dict or None)."""
    t = Trial(case, pristine, root, f"{family}{n}")
    fault = {"OOC_FAULT_CALL": family, "OOC_FAULT_NTH": n, "OOC_FAULT_ERRNO": errno_name}
    if errno_name == "short":  # a partial write (half the bytes), which a caller must continue
        fault.update({"OOC_FAULT_ERRNO": "EIO", "OOC_FAULT_SHORT": 1})
    if sticky:
        fault["OOC_FAULT_STICKY"] = 1
    try:
        rc, err = t.run(fault)
        injected = len(t.injected) > 0
        DEFERRED[case.name] = DEFERRED.get(case.name, 0)
        problems = []
        rerun = None
        if signal_death(rc):
            problems.append("hang (timeout)" if rc == "timeout" else f"killed by a signal (exit {rc})")
        elif rc == 0:
            problems += t.problems_after_success()
        elif rc == 1:
            if case.kind != "in_place":
                problems += t.problems_after_failure(err)
            else:
                problems += [p for p in t.problems_after_failure(err) if not p.startswith("left")]
            rc2, err2 = t.run(None)  # the same command, no fault: must finish exactly once
            rerun = f"exit {rc2}: {err2.strip()[:200]}"
            if rc2 != 0:
                problems.append(f"the same command again exits {rc2}")
            else:
                more = t.problems_after_success()
                if case.kind == "in_place" and t.output_state() != case.expected:
                    more = ["the rerun's array is not a + 1" + (" (it is a + 2)" if t.output_state() == case.twice
                                                                 else "")] + [m for m in more if "differs" not in m]
                problems += [f"after the rerun: {m}" for m in more]
        else:
            problems.append(f"exit {rc}")
        if t.deferred:
            with DEFERRED_LOCK:
                DEFERRED[case.name] += 1
        if not problems:
            return injected, None
        return injected, {"case": case.name, "command": " ".join(case.args), "family": family, "n": n,
                          "errno": errno_name, "sticky": bool(sticky), "exit": rc, "stderr": err.strip()[:400],
                          "rerun": rerun, "problems": problems, "injected": t.injected[:3]}
    finally:
        t.cleanup()


def spread(total, k):
    """k values of 1..total, evenly spread, first and last included."""
    if total <= k:
        return list(range(1, total + 1))
    return sorted({1 + round(i * (total - 1) / (k - 1)) for i in range(k)})


def plan(case, counts):
    """(family, n, errno, sticky) to run for a case."""
    runs = []
    for family in FAMILIES:
        total = counts.get(family, 0)
        if total == 0:
            continue
        ns = list(range(1, total + 1)) if FULL else spread(total, PER_FAMILY)
        for i, n in enumerate(ns):
            if FULL:
                for errno_name in ("EIO", "ENOSPC"):
                    runs.append((family, n, errno_name, False))
                if family in ("pwrite", "write"):
                    runs.append((family, n, "short", False))
                if family in STICKY_FAMILIES:
                    runs.append((family, n, "ENOSPC", True))
            else:
                runs.append((family, n, ("EIO", "ENOSPC")[i % 2], False))
                if family in ("pwrite", "write") and i == len(ns) // 2:
                    runs.append((family, n, "short", False))
                if family in STICKY_FAMILIES and i % 2 == 0:
                    runs.append((family, n, "ENOSPC", True))
    return runs


def filters_available(names):
    """Whether oocrun writes and h5py reads the HDF5 filters `names` (Debian's plugins)."""
    return all(name in AVAILABLE_FILTERS for name in names)


AVAILABLE_FILTERS = set()
DEFERRED_LOCK = threading.Lock()
DEFERRED = {}  # per case: exits 1 that left a rollback journal the next command applied


def main():
    if not os.access(OOCRUN, os.X_OK):
        print(f"set OOCRUN to the oocrun binary (got {OOCRUN!r})")
        return 1
    if not os.path.exists(SHIM):
        print(f"set OOC_FAULT_SHIM to the fault shim (got {SHIM!r}; build the ooc_fault_shim target)")
        return 1
    started = time.monotonic()
    root = os.path.realpath(tempfile.mkdtemp(prefix="ooc-faults-"))
    failures, injected_total, runs_total = [], 0, 0
    try:
        pristine = os.path.join(root, "pristine")
        os.mkdir(pristine)
        make_inputs(pristine)
        Case.pristine_objects = {"existing.h5": h5_objects(os.path.join(pristine, "existing.h5"))}
        x = np.load(os.path.join(pristine, "X.npy"))
        for case in CASES:
            # The fault-free run: its output is what every successful outcome must hold.
            t = Trial(case, pristine, root, "clean")
            if "zarr" in case.needs and zarr() is None:
                print(f"{case.name}: skipped, zarr-python is not installed")
                t.cleanup()
                case.skip = True
                continue
            rc, err = t.run(None)
            if rc != 0 and case.needs:
                print(f"{case.name}: skipped, the filter is not available here ({err.strip()[:120]})")
                t.cleanup()
                case.skip = True
                continue
            case.skip = False
            assert rc == 0, f"{case.name}: the fault-free run exits {rc}: {err}"
            case.expected = t.output_state()
            check_against_numpy(case, t, x)
            if case.kind == "in_place":
                t.run(None)
                case.twice = t.output_state()
            t.cleanup()
            # The counting run.
            t = Trial(case, pristine, root, "count")
            rc, err = t.run({})
            assert rc == 0, f"{case.name}: the counting run exits {rc}: {err}"
            case.counts = t.counts
            t.cleanup()
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            for case in CASES:
                if case.skip:
                    continue
                runs = plan(case, case.counts)
                case_start = time.monotonic()
                futures = [pool.submit(one_fault, case, pristine, root, *r) for r in runs]
                injected = 0
                for fut in futures:
                    inj, failure = fut.result()
                    injected += inj
                    if failure:
                        failures.append(failure)
                injected_total += injected
                runs_total += len(runs)
                nfail = sum(1 for f in failures if f["case"] == case.name)
                counts = " ".join(f"{k}={v}" for k, v in case.counts.items() if v and k in FAMILIES)
                deferred = f", {DEFERRED[case.name]} deferred rollbacks" if DEFERRED.get(case.name) else ""
                print(f"{case.name}: {len(runs)} runs, {injected} faults injected, {nfail} bad outcomes{deferred} "
                      f"({time.monotonic() - case_start:.1f} s; calls: {counts})", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(failures)
    if os.environ.get("OOC_FAULT_REPORT"):
        with open(os.environ["OOC_FAULT_REPORT"], "w") as f:
            json.dump(failures, f, indent=1, default=str)
    print(f"faults: {runs_total} runs, {injected_total} faults injected, {len(failures)} bad outcomes "
          f"in {time.monotonic() - started:.0f} s")
    return 1 if failures else 0


def check_against_numpy(case, t, x):
    """The fault-free run's output against numpy's (so the sweep's reference is right)."""
    p = t.path
    if case.name in ("npy", "h5_new", "h5_existing", "h5_gzip", "h5_lz4", "h5_existing_blosc", "in_place",
                     "zarr_new", "zarr_in_place"):
        want = x + 1
    elif case.name == "h5_input":
        with h5py().File(p("in.h5"), "r") as h:
            want = h["c"][()] + 1
    elif case.name == "eval":
        want = np.load(p("X.npy")) * 2 + np.load(p("W.npy"))
    elif case.name == "reduce_axis":
        want = np.load(p("M.npy")).sum(axis=0)
    elif case.name in ("import", "import_h5_existing"):
        want = np.loadtxt(p("data.csv"), delimiter=",")
    elif case.name == "export":
        got = np.loadtxt(p("out.csv"), delimiter=",")
        assert ooctest.same_bits(got, np.load(p("M.npy"))), "export: the text does not read back"
        return
    else:
        return
    if case.kind == "h5":
        file, dataset = case.output.split(":")
        with h5py().File(p(file), "r") as h:
            got = h[dataset][()]
    elif case.output.endswith(".zarr"):
        got = zarr().open(p(case.output), mode="r")[...]
    else:
        got = np.load(p(case.output))
    assert got.shape == want.shape and ooctest.same_bits(got, want.astype(got.dtype)), \
        f"{case.name}: the fault-free output is not numpy's"


def report(failures):
    """The bad outcomes, grouped by what went wrong."""
    groups = {}
    for f in failures:
        key = (f["case"], "; ".join(sorted({p.split(" (")[0] for p in f["problems"]})))
        groups.setdefault(key, []).append(f)
    for (case, what), fs in sorted(groups.items()):
        print(f"FAIL {case}: {what}: {len(fs)} outcomes")
        for f in fs[:3]:
            print(f"    {f['family']} N={f['n']} {f['errno']}{' sticky' if f['sticky'] else ''}: "
                  f"exit {f['exit']}, stderr {f['stderr'][:200]!r}" + (f", rerun {f['rerun']}" if f["rerun"] else "")
                  + f"; {'; '.join(f['problems'])}")


if __name__ == "__main__":
    sys.exit(main())
