"""The linear-algebra rows by hand (issue 29): `oocrun linalg gram|cov` of a warm (N, 16)
float64 file (2 GiB by default) against `oocrun reduce sum` of the same file and numpy's
np.cov(a, rowvar=False) on the memmap; `oocrun linalg lstsq X y` against reduce sum of X
and np.linalg.lstsq(a, y). Taking turns, medians of --reps; ratios from the same run.
Run from the repository root after a build:
  /usr/bin/python3 bench/linalg_rows.py [--dir DIR] [--gib 2] [--reps 3] [--threads N] [--keep]"""
import argparse
import os
import shutil
import statistics
import subprocess
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--dir", default="/tmp/ooc-linalg-rows")
parser.add_argument("--oocrun", default=os.path.join(ROOT, "build", "oocrun"))
parser.add_argument("--reps", type=int, default=3)
parser.add_argument("--gib", type=float, default=2.0)
parser.add_argument("--threads", type=int, default=None, help="oocrun --threads (default: every core)")
parser.add_argument("--no-numpy", action="store_true", help="skip numpy's rows (they copy the file into memory)")
parser.add_argument("--keep", action="store_true", help="keep the data files in --dir afterwards")
args = parser.parse_args()
os.makedirs(args.dir, exist_ok=True)
M = 16
x_path = os.path.join(args.dir, "x.npy")
y_path = os.path.join(args.dir, "y.npy")
rows = int(args.gib * 2**30) // (8 * M)
if not os.path.exists(x_path) or np.load(x_path, mmap_mode="r").shape != (rows, M):
    x = np.lib.format.open_memmap(x_path, mode="w+", dtype="<f8", shape=(rows, M))
    y = np.lib.format.open_memmap(y_path, mode="w+", dtype="<f8", shape=(rows,))
    rng = np.random.default_rng(29)
    b = rng.normal(size=M)
    for i in range(0, rows, 1 << 18):
        block = 10 + rng.standard_normal((min(1 << 18, rows - i), M))
        x[i:i + len(block)] = block
        y[i:i + len(block)] = block @ b + rng.standard_normal(len(block))
    x.flush()
    y.flush()
    del x, y
x_bytes, y_bytes = os.path.getsize(x_path), os.path.getsize(y_path)
threads = ["--threads", str(args.threads)] if args.threads else []


def timed(*command):
    start = time.perf_counter()
    subprocess.run([args.oocrun, *command, *threads, "--quiet"], check=True, capture_output=True)
    return time.perf_counter() - start


def numpy_timed(f):
    x = np.load(x_path, mmap_mode="r")
    y = np.load(y_path, mmap_mode="r")
    start = time.perf_counter()
    f(x, y)
    return time.perf_counter() - start


rows_run = {
    "reduce sum X": lambda: timed("reduce", "sum", x_path),
    "linalg gram X": lambda: timed("linalg", "gram", x_path),
    "linalg cov X": lambda: timed("linalg", "cov", x_path),
    "linalg lstsq X y": lambda: timed("linalg", "lstsq", x_path, y_path),
    "linalg svd X (s)": lambda: timed("linalg", "svd", x_path),
}
if not args.no_numpy:
    rows_run["numpy np.cov(X, rowvar=False)"] = lambda: numpy_timed(lambda x, y: np.cov(x, rowvar=False))
    rows_run["numpy np.linalg.lstsq(X, y)"] = lambda: numpy_timed(lambda x, y: np.linalg.lstsq(x, y, rcond=None))
times = {}
np.load(x_path, mmap_mode="r").sum()  # warm
np.load(y_path, mmap_mode="r").sum()
for _ in range(args.reps):
    for name, run in rows_run.items():
        times.setdefault(name, []).append(run())
print(f"X: {x_bytes / 2**30:.2f} GiB float64 ({rows}, {M}), warm, {args.threads or os.cpu_count()} threads, "
      f"medians of {args.reps}")
median = {name: statistics.median(values) for name, values in times.items()}
for name, values in times.items():
    nbytes = x_bytes + (y_bytes if "lstsq" in name else 0)
    print(f"{name}: {median[name]:.3f} s = {nbytes / 1e9 / median[name]:.2f} GB/s "
          f"({', '.join(f'{v:.3f}' for v in values)})")
sum_rate = x_bytes / median["reduce sum X"]
for name in ("linalg gram X", "linalg cov X", "linalg svd X (s)", "linalg lstsq X y"):
    nbytes = x_bytes + (y_bytes if "lstsq" in name else 0)
    print(f"{name}: {nbytes / median[name] / sum_rate:.2f}x reduce sum's bytes/s")
if not args.no_numpy:
    print(f"linalg cov X: {median['numpy np.cov(X, rowvar=False)'] / median['linalg cov X']:.2f}x np.cov")
    print(f"linalg lstsq X y: {median['numpy np.linalg.lstsq(X, y)'] / median['linalg lstsq X y']:.2f}x np.linalg.lstsq")
if not args.keep:
    shutil.rmtree(args.dir)
