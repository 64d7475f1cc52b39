#!/usr/bin/python3
"""In-place add-one, crash-journalled and not, against numpy, alternating in one run.

    /usr/bin/python3 bench/in_place.py --oocrun build/oocrun [--gib 1] [--reps 3] [--threads N]

Makes a float64 .npy of GIB GiB in a temp dir under /tmp (or --dir), warms it, then
repeats REPS rounds of: oocrun apply add-one --in-place (the crash journal),
the same with --no-journal, numpy's `a = np.load(p, mmap_mode='r+'); a += 1;
a.flush()` then os.fsync on the file, and a disk probe: O_DIRECT writes of the array's
bytes into two files at once by 8 threads (a journalled run writes every byte twice, into
the journal and into the array), the floor for the journalled row. Prints each time and the medians
(GB/s = 10^9 bytes of the array per second), each over numpy's. Each round
adds 3 to the array; nothing checks the values (the tests do).
--variant NAME:VAR=VALUE[,VAR=VALUE] adds a row of the journalled run with those
environment variables set (for trying settings); --compare NAME:OOCRUN one of another
build's journalled run (before/after a change).
"""
import argparse
import mmap
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

import numpy as np


def numpy_add_one(path):
    a = np.load(path, mmap_mode="r+")
    a += 1
    a.flush()
    del a
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_probe(directory, nbytes, files=2, threads=8, chunk=4 << 20):
    """O_DIRECT writes of `nbytes` into each of `files` files (written once before, as the
    array and the journal's ring are), `threads` writers of `chunk` bytes at a time, then
    fdatasync: what the disk takes for a crash-journalled run's writes (the array's bytes,
    and the same again into the journal). 8 writers of 4 MiB were the fastest of the ways
    tried on this machine's disk (1 x 16 MiB, 4 x 16 MiB, 1 x 64 MiB, 8 x 4 MiB)."""
    buffer = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
    buffer.write(os.urandom(chunk))
    paths = [os.path.join(directory, f"probe{i}") for i in range(files)]
    fds = []
    for path in paths:
        if not os.path.exists(path):
            with open(path, "wb") as f:
                for _ in range(0, nbytes, chunk):
                    f.write(buffer)
                os.fsync(f.fileno())
        fds.append(os.open(path, os.O_WRONLY | os.O_DIRECT))
    work = [(fd, at) for at in range(0, nbytes, chunk) for fd in fds]

    def writer(k):
        for fd, at in work[k::threads]:
            os.pwrite(fd, buffer, at)

    start = time.perf_counter()
    pool = [threading.Thread(target=writer, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    for fd in fds:
        os.fdatasync(fd)
        os.close(fd)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oocrun", required=True)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--compare", action="append", default=[], help="NAME:OOCRUN, another build's journalled run")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="ooc-inplace-", dir=args.dir or "/tmp")
    try:
        path = os.path.join(directory, "big.npy")
        n = int(args.gib * (1 << 30)) // 8
        m = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(n,))
        m[:] = np.arange(n, dtype="<f8")
        m.flush()
        del m
        nbytes = n * 8
        extra = ["--threads", str(args.threads)] if args.threads else []
        ooc = [args.oocrun, "apply", "add-one", path, "--in-place", "--quiet", *extra]
        rows = {"ooc (crash journal)": (ooc, None), "ooc --no-journal": (ooc + ["--no-journal"], None)}
        for v in args.variant:
            name, _, assignments = v.partition(":")
            env = dict(os.environ)
            env.update(dict(a.split("=", 1) for a in assignments.split(",") if a))
            rows[f"ooc (crash journal) {name}"] = (ooc, env)
        for c in args.compare:
            name, _, binary = c.partition(":")
            rows[f"ooc (crash journal) {name}"] = ([binary, *ooc[1:]], None)
        rows["numpy + fsync"] = (numpy_add_one, None)
        rows["disk: 2 x the bytes (probe)"] = (lambda _: write_probe(directory, nbytes), None)
        numpy_add_one(path)  # warm: the file in the page cache, written once
        times = {name: [] for name in rows}
        for rep in range(args.reps):
            for name, (what, env) in rows.items():
                start = time.perf_counter()
                if callable(what):
                    took = what(path)
                else:
                    subprocess.run(what, check=True, env=env)
                    took = None
                times[name].append(took or time.perf_counter() - start)
                print(f"rep {rep + 1} {name}: {times[name][-1]:.3f} s", flush=True)
        print(f"\n{nbytes / 2**30:.2f} GiB float64, warm, medians of {args.reps}, alternating:")
        base = nbytes / statistics.median(times["numpy + fsync"]) / 1e9
        for name, t in times.items():
            gbs = nbytes / statistics.median(t) / 1e9
            spread = ", ".join(f"{nbytes / x / 1e9:.2f}" for x in t)
            print(f"  {name:40s} {gbs:5.2f} GB/s ({spread})  {gbs / base:.2f}x numpy")
    finally:
        shutil.rmtree(directory, True)


if __name__ == "__main__":
    main()
