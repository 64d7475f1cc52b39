#!/usr/bin/env bash
# Measures oocrun under mpirun on 1..N ranks of this machine: `reduce sum` and
# `apply add-one -o` on a float64 array (warm page cache), best of a few runs each, next
# to a plain oocrun (no mpirun, MPI never initialised). Prints wall time (start to exit,
# launch included) and oocrun's own time (rank 0's, from --json).
#   OOC_SCALING_GIB (default 2), OOC_SCALING_DIR (default /tmp), OOC_SCALING_RANKS
#   (default "1 2 3 4"), OOC_SCALING_REPEAT (default 3), OOC_SCALING_THREADS (default:
#   every core a rank may use), OOC_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DIR=${OOC_SCALING_DIR:-/tmp}/ooc-scaling-$$
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT

OOCRUN=${OOC_BUILD_DIR:-build}/oocrun DIR=$DIR /usr/bin/python3 - <<'EOF'
import json
import os
import subprocess
import time

import numpy as np

oocrun, folder = os.environ["OOCRUN"], os.environ["DIR"]
gib = float(os.environ.get("OOC_SCALING_GIB", "2"))
ranks = os.environ.get("OOC_SCALING_RANKS", "1 2 3 4").split()
repeat = int(os.environ.get("OOC_SCALING_REPEAT", "3"))
threads = os.environ.get("OOC_SCALING_THREADS")
mpirun = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-q"]

path, out = os.path.join(folder, "a.npy"), os.path.join(folder, "out.npy")
n = int(gib * (1 << 30)) // 8
a = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(n,))
rng = np.random.default_rng(0)
for i in range(0, n, 1 << 24):
    a[i:i + (1 << 24)] = rng.standard_normal(min(1 << 24, n - i))
a.flush()
del a
subprocess.run([oocrun, "reduce", "sum", path, "--quiet"], check=True, capture_output=True)  # warm the cache


def best(command):
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(command, check=True, capture_output=True, text=True)
        runs.append((time.perf_counter() - start, json.loads(proc.stdout)["seconds"]))
        if os.path.exists(out):
            os.remove(out)
    return min(runs)


size = os.path.getsize(path)
print(f"{gib:g} GiB float64, {os.cpu_count()} cores, threads per rank: {threads or 'every core'}")
print(f"{'ranks':<6} {'op':<8} {'wall_s':>8} {'oocrun_s':>9} {'GB/s_wall':>10}")
for r in ["plain"] + ranks:
    launcher = [] if r == "plain" else mpirun + ["-np", r]
    for op, args in [("sum", ["reduce", "sum", path]), ("add-one", ["apply", "add-one", path, "-o", out])]:
        extra = ["--threads", threads] if threads else []
        wall, own = best(launcher + [oocrun, *args, *extra, "--json", "--quiet"])
        print(f"{r:<6} {op:<8} {wall:8.3f} {own:9.3f} {size / wall / 1e9:10.2f}")
EOF
