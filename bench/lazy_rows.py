"""Lazy expressions against eval's text: ooc.sum(np.sin(a) * np.cos(a)) beside
ooc.eval("sum(sin(a)*cos(a))", a=a) (the issue asks within 10%), and (a - 1).mean(axis=0)
beside ooc.mean(a, axis=0) (the expression read as an array by the axis reduction); warm
float64 (N, 8) file, taking turns, medians.
Run from the repository root after a build:
  /usr/bin/python3 bench/lazy_rows.py [--dir DIR] [--gib 1] [--reps 5]"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
import ooc  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--dir", default="/tmp/ooc-lazy-rows")
parser.add_argument("--gib", type=float, default=1.0)
parser.add_argument("--reps", type=int, default=5)
args = parser.parse_args()
os.makedirs(args.dir, exist_ok=True)
path = os.path.join(args.dir, "x.npy")
rows = int(args.gib * 2**30) // 64
if not os.path.exists(path) or np.load(path, mmap_mode="r").shape != (rows, 8):
    m = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(rows, 8))
    rng = np.random.default_rng(1)
    for i in range(0, rows, 1 << 20):
        m[i:i + (1 << 20)] = rng.standard_normal((min(1 << 20, rows - i), 8))
    m.flush()
    del m
a = ooc.open(path)
ooc.sum(a)  # warm


def seconds(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


pairs = {
    "sum(sin*cos)": (lambda: ooc.sum(np.sin(a) * np.cos(a)), lambda: ooc.eval("sum(sin(a)*cos(a))", a=a)),
    "mean(a - 1, axis=0)": (lambda: (a - 1).mean(axis=0), lambda: ooc.mean(a, axis=0)),
}
for name, (lazy, text) in pairs.items():
    assert np.asarray(lazy()).shape == np.asarray(text()).shape
    times = {"lazy": [], "reference": []}
    for _ in range(args.reps):
        times["lazy"].append(seconds(lazy))
        times["reference"].append(seconds(text))
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"{name}: lazy median {m['lazy']:.3f} s ({', '.join(f'{t:.3f}' for t in times['lazy'])}); "
          f"reference median {m['reference']:.3f} s ({', '.join(f'{t:.3f}' for t in times['reference'])}); "
          f"lazy / reference {m['lazy'] / m['reference']:.3f}")
if os.environ.get("OOC_BENCH_KEEP") != "1":
    os.remove(path)
