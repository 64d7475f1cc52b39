"""Order statistics larger than memory: `oocrun sort X -o S --axis none`, then `oocrun
reduce median X` and `reduce quantile:0.01,0.5,0.99 X`, of a float64 file, each inside a
cgroup v1 memory group (page cache included) of --limit bytes, cold, beside the I/O floor
the issue names: reading the input twice and writing the runs and the output, at this
disk's speeds (a cold read of the input and an fsynced write of as many bytes, measured
first). Prints the rows, the peak RSS (GNU time) and the group's peak; the sort is checked
sorted and of the input's size, chunk by chunk, and the median equal to the sorted file's. Needs root and /sys/fs/cgroup/memory.
Run from the repository root after a build:
  /usr/bin/python3 bench/sort_cgroup.py [--dir /tmp/ooc-sort-bench] [--gib 8] [--limit 1G]"""
import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
from memory_cgroup import drop_from_page_cache, run_cold_in_group  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--dir", default="/tmp/ooc-sort-bench")
parser.add_argument("--gib", type=float, default=8)
parser.add_argument("--limit", default="1G")
parser.add_argument("--oocrun", default=os.path.join(ROOT, "build", "oocrun"))
parser.add_argument("--keep", action="store_true", help="keep the files")
args = parser.parse_args()
limit = int(args.limit[:-1]) << {"M": 20, "G": 30}[args.limit[-1]]
os.makedirs(args.dir, exist_ok=True)
x, s, probe = (os.path.join(args.dir, name) for name in ("x.npy", "s.npy", "probe.bin"))
n = int(args.gib * 2**30) // 8
chunk = 1 << 24
if not os.path.exists(x) or np.load(x, mmap_mode="r").shape != (n,):
    m = np.lib.format.open_memmap(x, mode="w+", dtype="<f8", shape=(n,))
    rng = np.random.default_rng(0)
    for i in range(0, n, chunk):
        m[i:i + chunk] = rng.standard_normal(min(chunk, n - i))
    m.flush()
    del m
nbytes = os.path.getsize(x)

# The disk probe: a cold read of the input, an fsynced write of as many bytes.
drop_from_page_cache(x, all_caches=True)
start = time.perf_counter()
with open(x, "rb", buffering=0) as f:
    buf = bytearray(64 << 20)
    while f.readinto(buf):
        pass
read_s = time.perf_counter() - start
start = time.perf_counter()
with open(probe, "wb", buffering=0) as f:
    block = bytes(64 << 20)
    for _ in range(0, nbytes, len(block)):
        f.write(block)
    os.fsync(f.fileno())
write_s = time.perf_counter() - start
os.remove(probe)
floor = 2 * read_s + 2 * write_s



def in_group(command):
    """(seconds, completed process, peak RSS KiB, group peak) of oocrun COMMAND, cold, in the memory group."""
    return run_cold_in_group(limit, [args.oocrun, *command], x, "ooc-sort-bench")


sort_s, p, rss_kib, peak = in_group(["sort", x, "-o", s, "--axis", "none", "--json"])
if p.returncode:
    sys.exit(f"oocrun sort failed: {p.stderr}")
out = np.load(s, mmap_mode="r")
assert out.shape == (n,)
last = -np.inf
for i in range(0, n, chunk):
    piece = np.asarray(out[i:i + chunk])
    assert piece[0] >= last and np.all(piece[1:] >= piece[:-1]), f"not sorted at {i}"
    last = piece[-1]
median_row = []
for op in ("median", "quantile:0.01,0.5,0.99"):
    seconds, done, op_rss_kib, group_peak = in_group(["reduce", op, x, "--json"])
    if done.returncode:
        sys.exit(f"oocrun reduce {op} failed: {done.stderr}")
    value = json.loads(done.stdout.splitlines()[0])["value"]
    if op == "median":
        assert value == (float(out[n // 2 - 1]) + float(out[n // 2])) / 2 or n % 2, (value, out[n // 2 - 1:n // 2 + 1])
    median_row.append(f"| {op} of {args.gib:g} GiB float64, cold, {args.limit} cgroup | {seconds:.1f} s | "
                      f"{seconds / read_s:.2f}x one cold read | peak RSS "
                      f"{op_rss_kib / 1024:.0f} MiB | cgroup peak {group_peak / 2**20:.0f} MiB |")
del out
if not args.keep:
    os.remove(s)
    os.remove(x)
print(f"disk probe: cold read {nbytes / read_s / 1e9:.2f} GB/s, fsynced write {nbytes / write_s / 1e9:.2f} GB/s; "
      f"I/O floor (2 reads + 2 writes) {floor:.1f} s")
print(f"| sort of {args.gib:g} GiB float64, cold, {args.limit} cgroup | {sort_s:.1f} s | {sort_s / floor:.2f}x the "
      f"I/O floor | peak RSS {rss_kib / 1024:.0f} MiB | cgroup peak {peak / 2**20:.0f} MiB |")
print("\n".join(median_row))
