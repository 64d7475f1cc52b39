"""Linear algebra larger than memory (issue 29): `oocrun linalg cov X`, `linalg svd X`
(singular values) and `linalg lstsq X y` of an (N, 16) float64 file, each cold inside a
cgroup v1 memory group (page cache included) of --limit bytes, against the cold-read
probe (bench/probe.cpp `read`: O_DIRECT with 1 to 8 requests in flight, the best) taken
just before each run, since this disk's speed drifts from minute to minute. Prints each
row's seconds, GB/s of the bytes read (X, and y for lstsq), the ratio to the probe (goal
>= 0.8x), the peak RSS (GNU time, goal <= 256 MiB) and the group's peak; medians of
--reps. Needs root and /sys/fs/cgroup/memory. Run from the repository root after a build:
  /usr/bin/python3 bench/linalg_cgroup.py [--dir /tmp/ooc-linalg-cgroup] [--gib 8] [--limit 1G] [--reps 1]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
from memory_cgroup import drop_from_page_cache, run_cold_in_group  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--dir", default="/tmp/ooc-linalg-cgroup")
parser.add_argument("--gib", type=float, default=8)
parser.add_argument("--limit", default="1G")
parser.add_argument("--reps", type=int, default=1)
parser.add_argument("--ops", default="cov,svd,lstsq")
parser.add_argument("--build", default=os.path.join(ROOT, "build"))
parser.add_argument("--keep", action="store_true", help="keep the files")
args = parser.parse_args()
limit = int(args.limit[:-1]) << {"M": 20, "G": 30}[args.limit[-1]]
oocrun, probe = os.path.join(args.build, "oocrun"), os.path.join(args.build, "bench", "ooc_probe")
os.makedirs(args.dir, exist_ok=True)
M = 16
x_path, y_path = os.path.join(args.dir, "x.npy"), os.path.join(args.dir, "y.npy")
n = int(args.gib * 2**30) // (8 * M)
if not os.path.exists(x_path) or np.load(x_path, mmap_mode="r").shape != (n, M):
    x = np.lib.format.open_memmap(x_path, mode="w+", dtype="<f8", shape=(n, M))
    y = np.lib.format.open_memmap(y_path, mode="w+", dtype="<f8", shape=(n,))
    rng = np.random.default_rng(29)
    b = rng.normal(size=M)
    for i in range(0, n, 1 << 20):
        block = 10 + rng.standard_normal((min(1 << 20, n - i), M))
        x[i:i + len(block)] = block
        y[i:i + len(block)] = block @ b + rng.standard_normal(len(block))
    x.flush()
    y.flush()
    del x, y
x_bytes, y_bytes = os.path.getsize(x_path), os.path.getsize(y_path)


def probe_gbps():
    drop_from_page_cache(x_path, all_caches=True)
    lines = subprocess.run([probe, "read", x_path], check=True, capture_output=True, text=True).stdout.splitlines()
    return max(json.loads(line)["gbps"] for line in lines if line.startswith("{"))


commands = {"cov": (["linalg", "cov", x_path, "--json"], x_bytes),
            "svd": (["linalg", "svd", x_path, "--json"], x_bytes),
            "lstsq": (["linalg", "lstsq", x_path, y_path, "--json"], x_bytes + y_bytes)}
results = {op: [] for op in args.ops.split(",")}
for _ in range(args.reps):
    for op in results:
        command, nbytes = commands[op]
        limit_gbps = probe_gbps()
        seconds, done, rss_kib, group_peak = run_cold_in_group(limit, [oocrun, *command], x_path, "ooc-linalg-bench")
        if done.returncode:
            sys.exit(f"oocrun {op} failed: {done.stderr}")
        results[op].append((seconds, nbytes / seconds / 1e9, limit_gbps, rss_kib / 1024, group_peak / 2**20))
if not args.keep:
    os.remove(x_path)
    os.remove(y_path)
print(f"X: {x_bytes / 2**30:.1f} GiB float64 ({n}, {M}), cold, {args.limit} cgroup, medians of {args.reps}")
print("| row | seconds | GB/s | probe GB/s | vs probe | peak RSS MiB | cgroup peak MiB |\n|---|---|---|---|---|---|---|")
for op, rows in results.items():
    med = [statistics.median(r[i] for r in rows) for i in range(5)]
    ratio = statistics.median(r[1] / r[2] for r in rows)
    print(f"| linalg {op} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} | {ratio:.2f}x | {med[3]:.0f} | {med[4]:.0f} |")
