"""Zarr rows (issue 31): `reduce sum` of a warm float64 Zarr array (blosc lz4 level 5,
shuffle, 1 MiB chunks) against zarr-python's z[:].sum(), dask.array.from_zarr(z).sum()
with 2 threads, and ooc's own sum over the same data in the same compressed HDF5 layout;
and `apply add-one -o out.zarr --compression blosc:lz4` against dask writing the same
array with to_zarr (2 threads). Same run, taking turns, medians of --reps; seconds.
The values are a smooth signal with noise (compressible, as measured data is).
With --cold-gib G, also the issue's larger-than-memory row: `reduce sum` of a G GiB array
in the same layout and of its .npy, each cold inside a cgroup v1 memory group of --limit
(page cache included; needs root), with the peak RSS (GNU time) and the group's peak.
Run from the repository root after a build:
  /usr/bin/python3 bench/zarr_rows.py [--dir DIR] [--gib 0.5] [--reps 3] [--cold-gib 8 --limit 1G]"""
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
parser.add_argument("--cold-gib", type=float, default=0, help="the cold cgroup row's size (0: no such row)")
parser.add_argument("--limit", default="1G", help="the cold row's memory group limit")
args = parser.parse_args()

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import zarr  # noqa: E402
from numcodecs import Blosc  # noqa: E402

os.makedirs(args.dir, exist_ok=True)
chunk = (1 << 20) // 8


def make_npy(path, n):
    if os.path.exists(path) and np.load(path, mmap_mode="r").shape == (n,):
        return
    m = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(n,))
    rng = np.random.default_rng(1)
    step = 1 << 22
    for i in range(0, n, step):
        k = min(step, n - i)
        t = np.arange(i, i + k, dtype="f8")
        m[i:i + k] = np.round(np.sin(t * 1e-5) * 1000 + rng.standard_normal(k), 2)
    m.flush()
    del m


def make_zarr(npy, path):
    subprocess.run([OOCRUN, "copy", npy, "-o", path, "--chunks", str(chunk), "--compression", "blosc:lz4:5",
                    "--shuffle", "--overwrite", "--quiet"], check=True)


n = int(args.gib * 2**30) // 8
npy = os.path.join(args.dir, "x.npy")
make_npy(npy, n)
zpath, h5 = os.path.join(args.dir, "x.zarr"), os.path.join(args.dir, "x.h5")
make_zarr(npy, zpath)
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

if args.cold_gib:
    sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
    from memory_cgroup import run_cold_in_group  # noqa: E402
    limit = int(args.limit[:-1]) << {"M": 20, "G": 30}[args.limit[-1]]
    big_n = int(args.cold_gib * 2**30) // 8
    big_npy, big_zarr = os.path.join(args.dir, "big.npy"), os.path.join(args.dir, "big.zarr")
    try:
        make_npy(big_npy, big_n)
        make_zarr(big_npy, big_zarr)
        stored = sum(os.path.getsize(os.path.join(big_zarr, f)) for f in os.listdir(big_zarr))
        print(f"\n{big_n * 8 / 2**30:.1f} GiB float64 cold, {stored / 2**20:.0f} MiB stored as Zarr, "
              f"each run in a {args.limit} memory cgroup; medians of {args.reps}")
        print("| row | seconds | GB/s of the array | peak RSS MiB | cgroup peak MiB |\n|---|---|---|---|---|")
        for name, target, cold in (("sum: ooc (Zarr)", big_zarr, os.path.join(big_zarr, ".zarray")),
                                   ("sum: ooc (.npy)", big_npy, big_npy)):
            runs = []
            for _ in range(args.reps):
                # A Zarr array's chunk files are dropped with the machine's clean pages.
                seconds, done, rss_kib, peak = run_cold_in_group(
                    limit, [OOCRUN, "reduce", "sum", target, "--threads", "2", "--quiet"], cold, "ooc-zarr-bench")
                if done.returncode:
                    sys.exit(f"oocrun reduce sum {target} failed: {done.stderr}")
                runs.append((seconds, rss_kib / 1024, peak / 2**20))
            med = [statistics.median(r[i] for r in runs) for i in range(3)]
            print(f"| {name} | {med[0]:.2f} | {big_n * 8 / med[0] / 1e9:.2f} | {med[1]:.0f} | {med[2]:.0f} |")
    finally:
        if os.path.exists(big_npy):
            os.remove(big_npy)
        shutil.rmtree(big_zarr, ignore_errors=True)
