"""A power-cut model: every file state a crash at an fsync/fdatasync/msync boundary of a run
could leave must be the old result or the new one, or one that the same command finishes.

Each case's run is recorded by the fault shim (OOC_FAULT_RECORD: every open, write,
mapped write, truncate, allocate, rename, unlink and sync, in order, on the files of its
directory). The recording is replayed over a copy of the directory's starting files, in
two models of what a crash keeps:

* prefix: every operation before the crash point reached the disk, none after (as if the
  page cache were written back in order); crash points are just before and just after
  each sync, and the start and end;
* synced: only what was made durable: a file's data as of its last fsync/fdatasync (and
  the ranges msync wrote), and a directory's names as of its last fsync: what POSIX
  promises and nothing more; crash points are just after each sync.

Each state is written back into the run's own directory (files rewritten in place, so an
array keeps its inode, which journals may be keyed by), and checked:

* `-o OUT.npy` / new HDF5: OUT absent or whole (exactly the recorded run's result); the
  input as it was; the same command again (--overwrite) gives the result;
* `-o existing.h5:/y`: after `oocrun info existing.h5` (any oocrun command on the file
  puts back what a rollback journal holds), h5py reads the file, every object it held is
  as it was, /y absent or whole, nothing else in it;
* in place: a journal and the same command gives exactly a + 1; or no journal and the
  array exactly a (then the same command gives a + 1) or a + 1.

OOC_POWER_CUT=full takes every operation as a crash point in the prefix model.
OOC_POWER_CUT_CASES=in_place,h5_existing narrows a run.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ooctest import file_bytes, h5_objects, leftovers  # noqa: E402

BUILD = os.environ.get("OOC_BUILD_DIR", "build")
OOCRUN = os.environ.get("OOCRUN") or os.path.join(BUILD, "oocrun")
SHIM = os.environ.get("OOC_FAULT_SHIM") or os.path.join(BUILD, "tests", "libooc_fault_shim.so")
FULL = os.environ.get("OOC_POWER_CUT") == "full"
TIMEOUT = 60
ELEMENTS = 40000  # 5 tiles of 64 KiB
O_TRUNC = os.O_TRUNC
FALLOC_FL_KEEP_SIZE = 1

CASES = [  # name, command, output, kind
    ("npy", ["apply", "add-one", "X.npy", "-o", "Y.npy"], "Y.npy", "npy"),
    ("npy_direct", ["apply", "add-one", "X.npy", "-o", "Y.npy", "--io", "direct"], "Y.npy", "npy"),
    ("h5_new", ["apply", "add-one", "X.npy", "-o", "new.h5:/y"], "new.h5:/y", "h5"),
    ("h5_existing", ["apply", "add-one", "X.npy", "-o", "existing.h5:/y"], "existing.h5:/y", "h5"),
    ("h5_existing_gzip", ["apply", "add-one", "X.npy", "-o", "existing.h5:/y", "--compression", "gzip",
                          "--chunks", "auto"], "existing.h5:/y", "h5"),
    ("in_place", ["apply", "add-one", "X.npy", "--in-place"], "X.npy", "in_place"),
    ("import", ["import", "data.csv", "-o", "I.npy"], "I.npy", "npy"),
]
if os.environ.get("OOC_POWER_CUT_CASES"):
    CASES = [c for c in CASES if c[0] in os.environ["OOC_POWER_CUT_CASES"].split(",")]


def command(args):
    return [OOCRUN, *args, "--tile-bytes", "64K", "--threads", "2", "--quiet"]


def make_inputs(d):
    import h5py
    rng = np.random.default_rng(26)
    np.save(os.path.join(d, "X.npy"), rng.standard_normal(ELEMENTS))
    np.savetxt(os.path.join(d, "data.csv"), rng.standard_normal((ELEMENTS // 6, 6)), delimiter=",")
    with h5py.File(os.path.join(d, "existing.h5"), "w") as h:
        h.attrs["note"] = "the user's file"
        h["a"] = np.arange(1000, dtype="<f8")
        h.create_dataset("g/b", data=rng.integers(0, 1000, (300, 40), dtype="<i4"), chunks=(50, 40),
                         compression="gzip")


# --------------------------------------------------------------------------------------
# The recording

def parse(log):
    """[(op, {field: value}, bytes or None)] from the shim's record file."""
    ops = []
    with open(log, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        end = data.index(b"\n", i)
        fields = data[i:end].decode().split("\t")
        i = end + 1
        op, kv = fields[0], dict(f.split("=", 1) for f in fields[1:])
        payload = None
        if "len" in kv:
            n = int(kv["len"])
            payload = data[i:i + n]
            i += n + 1
        ops.append((op, kv, payload))
    return ops


class Model:
    """The files of one directory: names to inodes (as the page cache has them, and as the
    disk has them), inodes to bytes (both too)."""

    def __init__(self, directory, snapshot):
        self.dir = directory
        self.vol_names = {name: ino for name, (ino, _) in snapshot.items()}
        self.dur_names = dict(self.vol_names)
        self.vol = {ino: bytearray(content) for ino, content in snapshot.values()}
        self.dur = {ino: bytearray(content) for ino, content in snapshot.values()}

    def name(self, path):
        """The name of `path` in the directory, or None for a file elsewhere."""
        path = os.path.normpath(path)
        if os.path.dirname(path) != self.dir:
            return None
        return os.path.basename(path)

    def content(self, ino):
        ino = int(ino)
        if ino not in self.vol:
            self.vol[ino], self.dur[ino] = bytearray(), bytearray()
        return self.vol[ino]

    @staticmethod
    def write(buf, off, data):
        if off < 0:
            off = len(buf)
        if len(buf) < off + len(data):
            buf.extend(b"\0" * (off + len(data) - len(buf)))
        buf[off:off + len(data)] = data

    def apply(self, op, kv, payload):
        if op == "open":
            name, ino = self.name(kv["path"]), int(kv["ino"])
            if name is not None and self.vol_names.get(name) != ino:
                self.vol[ino], self.dur[ino] = bytearray(), bytearray()
                self.vol_names[name] = ino
            if int(kv["flags"]) & O_TRUNC:
                self.content(ino)[:] = b""
        elif op in ("pwrite", "mwrite"):
            self.write(self.content(kv["ino"]), int(kv["off"]), payload)
        elif op == "ftruncate":
            buf, size = self.content(kv["ino"]), int(kv["size"])
            del buf[size:]
            buf.extend(b"\0" * (size - len(buf)))
        elif op == "fallocate":
            buf = self.content(kv["ino"])
            end = int(kv["off"]) + int(kv["size"])
            if not int(kv["mode"]) & FALLOC_FL_KEEP_SIZE and end > len(buf):
                buf.extend(b"\0" * (end - len(buf)))
        elif op == "rename":
            a, b = self.name(kv["from"]), self.name(kv["to"])
            if a in self.vol_names and b is not None:
                self.vol_names[b] = self.vol_names.pop(a)
        elif op == "unlink":
            self.vol_names.pop(self.name(kv["path"]), None)
        elif op == "link":
            a, b = self.name(kv["from"]), self.name(kv["to"])
            if a in self.vol_names and b is not None:
                self.vol_names[b] = self.vol_names[a]
        elif op in ("fsync", "fdatasync"):
            if int(kv["dir"]):
                if os.path.normpath(kv["path"]) == self.dir:
                    self.dur_names = dict(self.vol_names)
            else:
                ino = int(kv["ino"])
                self.dur[ino] = bytearray(self.content(ino))
        elif op == "msync":
            if int(kv["sync"]):
                ino, off, size = int(kv["ino"]), int(kv["off"]), int(kv["size"])
                src = self.content(ino)
                self.write(self.dur[ino], off, bytes(src[off:off + size]))

    def state(self, durable):
        names, files = (self.dur_names, self.dur) if durable else (self.vol_names, self.vol)
        return {name: bytes(files.get(ino, b"")) for name, ino in names.items()}


def is_sync(op, kv):
    return op in ("fsync", "fdatasync") or (op == "msync" and int(kv.get("sync", 0)))


def crash_states(snapshot, directory, ops):
    """[(label, {name: bytes})] of the states to check, duplicates dropped."""
    model = Model(directory, snapshot)
    states, seen = [], set()

    def add(label, durable):
        st = model.state(durable)
        key = tuple(sorted((n, hash(c)) for n, c in st.items()))
        if key not in seen:
            seen.add(key)
            states.append((label, st))

    add("start", False)
    for i, (op, kv, payload) in enumerate(ops):
        what = f"{op} {os.path.basename(kv.get('path', kv.get('to', '')))}"
        if FULL or is_sync(op, kv):
            add(f"prefix, before op {i} ({what})", False)
        model.apply(op, kv, payload)
        if is_sync(op, kv):
            add(f"prefix, after op {i} ({what})", False)
            add(f"synced, after op {i} ({what})", True)
    add("prefix, the end", False)
    add("synced, the end", True)
    return states


# --------------------------------------------------------------------------------------
# Checking a state

def materialize(d, state, inode_of):
    """Makes directory `d` hold exactly `state`, rewriting a file in place where its name
    still names the inode the run saw (so the array's inode stays the one journals know)."""
    for n in os.listdir(d):
        if n not in state:
            os.unlink(os.path.join(d, n))
    for n, content in state.items():
        p = os.path.join(d, n)
        mode = "r+b" if os.path.exists(p) else "wb"
        with open(p, mode) as f:
            f.truncate(0)
            f.write(content)
            f.flush()
            os.fsync(f.fileno())


def run(d, args):
    p = subprocess.run(command(args), cwd=d, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stderr.strip()


def h5_dataset(path, dataset):
    import h5py
    with h5py.File(path, "r") as h:
        return h[dataset][()].tobytes() if dataset in h else None


def check(case, d, state, pristine, result):
    """The problems of one state, written into `d` already."""
    name, args, output, kind = case
    problems = []
    if kind == "in_place":
        journal = "X.npy.ooc-journal" in state
        x = state.get("X.npy")
        if not journal:
            if x == result["X.npy"]:
                return []
            if x != pristine["X.npy"]:
                return ["no journal, and the array is neither a nor a + 1"]
        rc, err = run(d, args)
        if rc != 0:
            return [f"the same command exits {rc}: {err[:200]}"]
        now = file_bytes(os.path.join(d, "X.npy"))
        if now != result["X.npy"]:
            problems.append("the same command gives " + ("a + 2" if now == result["twice"] else "neither a + 1 nor a + 2"))
        if leftovers(d):
            problems.append(f"left {leftovers(d)} after the same command")
        return problems
    file, _, dataset = output.partition(":")
    for n in pristine:  # the inputs, and every other file of the directory
        if n != file and state.get(n) != pristine[n]:
            problems.append(f"{n} changed")
    if kind == "npy":
        if file in state and state[file] != result["out"]:
            problems.append(f"{file} is there and not whole")
    elif file not in pristine:  # a new HDF5 file
        if file in state:
            try:
                if h5_dataset(os.path.join(d, file), dataset) != result["out"]:
                    problems.append(f"{file} is there and {dataset} not whole")
            except Exception as e:  # noqa: BLE001
                problems.append(f"{file} is there and h5py cannot read it: {str(e)[:100]}")
    else:  # an existing HDF5 file: any oocrun command on it puts back what its rollback journal holds
        p = subprocess.run([OOCRUN, "info", file], cwd=d, capture_output=True, text=True, timeout=TIMEOUT)
        if p.returncode != 0:
            problems.append(f"oocrun info {file} exits {p.returncode}: {p.stderr.strip()[:150]}")
        try:
            now = h5_objects(os.path.join(d, file))
            was = result["objects"]
            lost = [n for n, obj in was.items() if now.get(n) != obj]
            if lost:
                problems.append(f"{file}: {lost} changed or lost")
            extra = sorted(set(now) - set(was) - {dataset.lstrip("/")})
            if extra:
                problems.append(f"{file} holds {extra}")
            y = h5_dataset(os.path.join(d, file), dataset)
            if y is not None and y != result["out"]:
                problems.append(f"{file}:{dataset} is there and not whole")
        except Exception as e:  # noqa: BLE001
            problems.append(f"h5py cannot read {file}: {str(e)[:150]}")
    if not problems:  # and the same command finishes the job
        rc, err = run(d, args + ["--overwrite"])
        if rc != 0:
            problems.append(f"the same command (--overwrite) exits {rc}: {err[:200]}")
        else:
            got = file_bytes(os.path.join(d, file)) if kind == "npy" else h5_dataset(os.path.join(d, file), dataset)
            if got != result["out"]:
                problems.append("the same command (--overwrite) does not give the result")
    return problems


def run_case(case, pristine_dir, root):
    name, args, output, kind = case
    d = os.path.join(root, name)
    shutil.copytree(pristine_dir, d)
    pristine = {n: file_bytes(os.path.join(d, n)) for n in os.listdir(d)}
    snapshot = {n: (os.stat(os.path.join(d, n)).st_ino, pristine[n]) for n in pristine}
    inode_of = {n: ino for n, (ino, _) in snapshot.items()}
    log = os.path.join(root, name + ".log")
    env = {**os.environ, "LD_PRELOAD": SHIM, "OOC_FAULT_RECORD": log, "OOC_FAULT_PATH_SUBSTR": d}
    p = subprocess.run(command(args), cwd=d, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert p.returncode == 0, f"{name}: the recorded run exits {p.returncode}: {p.stderr}"
    file, _, dataset = output.partition(":")
    result = {}
    if kind == "in_place":
        result["X.npy"] = file_bytes(os.path.join(d, "X.npy"))
        run(d, args)
        result["twice"] = file_bytes(os.path.join(d, "X.npy"))
    elif kind == "npy":
        result["out"] = file_bytes(os.path.join(d, file))
    else:
        result["out"] = h5_dataset(os.path.join(d, file), dataset)
    if "existing.h5" in pristine:
        import h5py  # noqa: F401
        result["objects"] = h5_objects(os.path.join(pristine_dir, "existing.h5"))
    ops = parse(log)
    states = crash_states(snapshot, d, ops)
    failures = []
    for label, state in states:
        materialize(d, state, inode_of)
        problems = check(case, d, state, pristine, result)
        if problems:
            failures.append((label, sorted(state), problems))
    syncs = sum(1 for op, kv, _ in ops if is_sync(op, kv))
    return len(ops), syncs, len(states), failures


def main():
    for what, path in (("OOCRUN", OOCRUN), ("OOC_FAULT_SHIM", SHIM)):
        if not os.path.exists(path):
            print(f"set {what} (got {path!r})")
            return 1
    started = time.monotonic()
    root = os.path.realpath(tempfile.mkdtemp(prefix="ooc-power-cut-"))
    bad = 0
    try:
        pristine = os.path.join(root, "pristine")
        os.mkdir(pristine)
        make_inputs(pristine)
        for case in CASES:
            t = time.monotonic()
            nops, nsyncs, nstates, failures = run_case(case, pristine, root)
            bad += len(failures)
            print(f"{case[0]}: {nops} operations, {nsyncs} syncs, {nstates} crash states, "
                  f"{len(failures)} not recoverable ({time.monotonic() - t:.1f} s)", flush=True)
            for label, names, problems in failures:
                print(f"FAIL {case[0]}: crash {label}: files {names}: {'; '.join(problems)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"power cut: {bad} states not recoverable, in {time.monotonic() - started:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
