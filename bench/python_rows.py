"""The Python rows by hand: ooc.sum(path) against oocrun reduce sum and numpy's memmap sum,
map_blocks(np.log1p, out=) against np.log1p(memmap, out=open_memmap) + flush + fsync, and one
call on a 1 kB file; warm, 2 GiB float64, alternating in one process, medians.
Run from the repository root after a build: /usr/bin/python3 bench/python_rows.py [DIR]."""
import os, subprocess, sys, time, statistics
import numpy as np
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
import ooc
D = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ooc-python-rows"
os.makedirs(D, exist_ok=True)
big = os.path.join(D, "big.npy"); small = os.path.join(D, "small.npy")
if not os.path.exists(big):
    a = np.lib.format.open_memmap(big, mode="w+", dtype="<f8", shape=(2**28 // 8, 8))
    rng = np.random.default_rng(1)
    for i in range(0, a.shape[0], 1 << 21):
        a[i:i + (1 << 21)] = rng.standard_normal((min(1 << 21, a.shape[0] - i), 8))
    a.flush(); del a
np.save(small, np.arange(128.0))
nbytes = os.path.getsize(big)
def t(f):
    s = time.perf_counter(); f(); return time.perf_counter() - s
np.load(big, mmap_mode="r").sum()  # warm
rows = {"ooc.sum": [], "oocrun reduce sum": [], "numpy memmap sum": []}
for _ in range(5):
    rows["ooc.sum"].append(t(lambda: ooc.sum(big)))
    rows["oocrun reduce sum"].append(t(lambda: subprocess.run([os.path.join(ROOT, "build", "oocrun"), "reduce", "sum", big, "--quiet"], check=True, capture_output=True)))
    rows["numpy memmap sum"].append(t(lambda: np.load(big, mmap_mode="r").sum()))
for k, v in rows.items():
    print(f"{k}: median {statistics.median(v):.3f} s = {nbytes / 1e9 / statistics.median(v):.2f} GB/s  ({', '.join(f'{x:.3f}' for x in v)})")
m = {k: statistics.median(v) for k, v in rows.items()}
print(f"ooc.sum / oocrun: {m['oocrun reduce sum'] / m['ooc.sum']:.2f}x speed; ooc.sum / numpy: {m['numpy memmap sum'] / m['ooc.sum']:.2f}x")
out1, out2 = os.path.join(D, "o1.npy"), os.path.join(D, "o2.npy")
def numpy_log1p():
    a = np.load(big, mmap_mode="r")
    o = np.lib.format.open_memmap(out2, mode="w+", dtype=a.dtype, shape=a.shape)
    np.log1p(a, out=o); o.flush(); fd = os.open(out2, os.O_RDONLY); os.fsync(fd); os.close(fd)
lg = {"map_blocks log1p": [], "numpy log1p": []}
for _ in range(3):
    for p in (out1, out2):
        if os.path.exists(p): os.remove(p)
    lg["map_blocks log1p"].append(t(lambda: ooc.map_blocks(np.log1p, big, out=out1)))
    lg["numpy log1p"].append(t(numpy_log1p))
for k, v in lg.items():
    print(f"{k}: median {statistics.median(v):.3f} s ({', '.join(f'{x:.3f}' for x in v)})")
print(f"map_blocks / numpy: {statistics.median(lg['numpy log1p']) / statistics.median(lg['map_blocks log1p']):.2f}x")
calls = [t(lambda: ooc.sum(small)) for _ in range(200)]
print(f"one ooc.sum call on a 1 kB file: median {statistics.median(calls) * 1e3:.3f} ms")
for path in (big, small, out1, out2):
    if os.path.exists(path) and os.environ.get("OOC_BENCH_KEEP") != "1":
        os.remove(path)
