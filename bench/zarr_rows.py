"""Zarr rows (issue 31): `reduce sum` of a warm float64 Zarr array (blosc lz4 level 5,
shuffle, 1 MiB chunks) against zarr-python's z[:].sum(), dask.array.from_zarr(z).sum()
with 2 threads, and ooc's own sum over the same data in the same compressed HDF5 layout;
and `apply add-one -o out.zarr --compression blosc:lz4` against dask writing the same
array with to_zarr (2 threads). Same run, taking turns, medians of --reps; seconds.
The values are a smooth signal with noise (compressible, as measured data is).
Run from the repository root after a build:
  /usr/bin/python3 bench/zarr_rows.py [--dir DIR] [--gib 0.5] [--reps 3]"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OOCRUN = os.path.join(ROOT, "build", "oocrun")

parser = argparse.ArgumentParser()
parser.add_argument("--dir", default="/tmp/ooc-zarr-rows")
parser.add_argument("--gib", type=float, default=0.5)
parser.add_argument("--reps", type=int, default=3)
args = parser.parse_args()

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import zarr  # noqa: E402
from numcodecs import Blosc  # noqa: E402

os.makedirs(args.dir, exist_ok=True)
n = int(args.gib * 2**30) // 8
npy = os.path.join(args.dir, "x.npy")
if not os.path.exists(npy) or np.load(npy, mmap_mode="r").shape != (n,):
    m = np.lib.format.open_memmap(npy, mode="w+", dtype="<f8", shape=(n,))
    rng = np.random.default_rng(1)
    step = 1 << 22
    for i in range(0, n, step):
        k = min(step, n - i)
        t = np.arange(i, i + k, dtype="f8")
        m[i:i + k] = np.round(np.sin(t * 1e-5) * 1000 + rng.standard_normal(k), 2)
    m.flush()
    del m
chunk = (1 << 20) // 8
zpath, h5 = os.path.join(args.dir, "x.zarr"), os.path.join(args.dir, "x.h5")
subprocess.run([OOCRUN, "copy", npy, "-o", zpath, "--chunks", str(chunk), "--compression", "blosc:lz4:5", "--shuffle",
                "--quiet"], check=True)
if os.path.exists(h5):
    os.remove(h5)
subprocess.run([OOCRUN, "copy", npy, "-o", h5 + ":/x", "--chunks", str(chunk), "--compression", "blosc:lz4:5",
                "--shuffle", "--quiet"], check=True)
z = zarr.open(zpath, mode="r")


def ooc(*argv):
    start = time.perf_counter()
    subprocess.run([OOCRUN, *argv, "--quiet"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


out = os.path.join(args.dir, "out.zarr")


def dask_write():
    shutil.rmtree(out, ignore_errors=True)
    with dask.config.set(scheduler="threads", num_workers=2):
        (da.from_zarr(zpath) + 1).to_zarr(out, compressor=Blosc("lz4", 5, Blosc.NOSHUFFLE))


rows = {
    "sum: ooc (Zarr)": lambda: ooc("reduce", "sum", zpath, "--threads", "2"),
    "sum: ooc (HDF5, same chunks and codec)": lambda: ooc("reduce", "sum", h5 + ":/x", "--threads", "2"),
    "sum: zarr-python z[:].sum()": lambda: timed(lambda: z[:].sum()),
    "sum: dask from_zarr(z).sum(), 2 threads": lambda: timed(
        lambda: da.from_zarr(z).sum().compute(scheduler="threads", num_workers=2)),
    "write: ooc apply add-one -o out.zarr --compression blosc:lz4": lambda: ooc(
        "apply", "add-one", zpath, "-o", out, "--compression", "blosc:lz4", "--threads", "2"),
    "write: dask (from_zarr + 1).to_zarr, 2 threads": lambda: timed(dask_write),
}
for fn in rows.values():  # warm
    fn()
times = {name: [] for name in rows}
for _ in range(args.reps):
    for name, fn in rows.items():
        times[name].append(fn())
stored = sum(os.path.getsize(os.path.join(zpath, f)) for f in os.listdir(zpath))
print(f"{n * 8 / 2**30:.2f} GiB float64, {stored / 2**20:.0f} MiB stored as Zarr; medians of {args.reps}, seconds")
print("| row | seconds |\n|---|---|")
for name, t in times.items():
    print(f"| {name} | {statistics.median(t):.3f} |")
