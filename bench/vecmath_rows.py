"""The vectorised-math rows by hand (issue 19): `oocrun apply log1p` into a new file and
`oocrun eval "sum(sin(a)*cos(a))"` against numpy's np.sum(np.sin(a)*np.cos(a)) on the
memmap, on a warm 1 GiB float64 file of standard normal values (bench.py's matrix), taking
turns, medians of --reps. --before OOCRUN adds the same rows for another oocrun binary (a
build of the commit before, for the before/after figures).
Run from the repository root after a build:
  /usr/bin/python3 bench/vecmath_rows.py [--dir DIR] [--before OLD_OOCRUN] [--reps 3]"""
import argparse
import os
import statistics
import subprocess
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--dir", default="/tmp/ooc-vecmath-rows")
parser.add_argument("--oocrun", default=os.path.join(ROOT, "build", "oocrun"))
parser.add_argument("--before", default=None, help="another oocrun to measure beside it")
parser.add_argument("--reps", type=int, default=3)
parser.add_argument("--gib", type=float, default=1.0)
args = parser.parse_args()
os.makedirs(args.dir, exist_ok=True)
src = os.path.join(args.dir, "a.npy")
out = os.path.join(args.dir, "o.npy")
rows = int(args.gib * 2**30) // 64
if not os.path.exists(src) or os.path.getsize(src) < rows * 64:
    a = np.lib.format.open_memmap(src, mode="w+", dtype="<f8", shape=(rows, 8))
    rng = np.random.default_rng(7)
    for i in range(0, rows, 1 << 20):
        a[i:i + (1 << 20)] = rng.standard_normal((min(1 << 20, rows - i), 8))
    a.flush()
    del a
nbytes = os.path.getsize(src)


def timed(command):
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def numpy_sin_cos():
    a = np.load(src, mmap_mode="r")
    start = time.perf_counter()
    np.sum(np.sin(a) * np.cos(a))
    return time.perf_counter() - start


binaries = {"ooc": args.oocrun}
if args.before:
    binaries["ooc before"] = args.before
times = {}
np.load(src, mmap_mode="r").sum()  # warm
for _ in range(args.reps):
    for name, oocrun in binaries.items():
        times.setdefault(f"{name}: apply log1p", []).append(
            timed([oocrun, "apply", "log1p", src, "-o", out, "--quiet"]))
        os.remove(out)
        times.setdefault(f"{name}: eval sum(sin(a)*cos(a))", []).append(
            timed([oocrun, "eval", "sum(sin(a)*cos(a))", f"a={src}", "--quiet"]))
    times.setdefault("numpy: np.sum(np.sin(a)*np.cos(a)) on the memmap", []).append(numpy_sin_cos())
print(f"{nbytes / 2**30:.2f} GiB float64, warm, medians of {args.reps}")
medians = {}
for name, values in times.items():
    medians[name] = statistics.median(values)
    print(f"{name}: {medians[name]:.3f} s = {nbytes / 1e9 / medians[name]:.2f} GB/s "
          f"({', '.join(f'{v:.3f}' for v in values)})")
numpy_time = medians["numpy: np.sum(np.sin(a)*np.cos(a)) on the memmap"]
for name in binaries:
    print(f"{name}: eval sin*cos / numpy {numpy_time / medians[f'{name}: eval sum(sin(a)*cos(a))']:.2f}x")
if args.before:
    print(f"apply log1p after / before: {medians['ooc before: apply log1p'] / medians['ooc: apply log1p']:.2f}x faster; "
          f"eval: {medians['ooc before: eval sum(sin(a)*cos(a))'] / medians['ooc: eval sum(sin(a)*cos(a))']:.2f}x")
