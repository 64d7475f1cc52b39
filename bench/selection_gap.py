"""How far apart selected rows must be before skipping the gap beats reading through it.

    /usr/bin/python3 bench/selection_gap.py --oocrun build/oocrun [--dir /tmp] [--gib 1]

Makes a (N, 40) float64 file, then for rows GAP bytes apart (a[::k, 3]) sums the
selection cold (caches dropped) with the gap read through (OOC_SELECTION_GAP_BYTES large:
one span, sequential readahead) and skipped (0: MADV_RANDOM, each run's pages advised a
few tiles ahead), medians of --reps runs. The crossover is where src/selection.cpp's
kSelectionGapBytes comes from (docs/decisions/2026-11-30-selection-gap-16k.md). Needs root for drop_caches.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

import numpy as np


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oocrun", required=True)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    row = 40 * 8
    rows = int(args.gib * 2**30) // row
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="ooc-gap-") as tmp:
        path = os.path.join(tmp, "wide.npy")
        a = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(rows, 40))
        for i in range(0, rows, 1 << 16):
            a[i:i + (1 << 16)] = i
        a.flush()
        del a
        print("| rows apart | gap | read through s | skipped s | skipped/through |")
        print("|---|---|---|---|---|")
        for k in (4, 16, 64, 256, 1024, 4096):
            times = {}
            for label, gap in (("through", 1 << 40), ("skipped", 0)):
                env = {**os.environ, "OOC_SELECTION_GAP_BYTES": str(gap)}
                seconds = []
                for _ in range(args.reps):
                    drop_caches()
                    out = subprocess.run([args.oocrun, "reduce", "sum", f"{path}[::{k}, 3]", "--json", "--quiet"],
                                         env=env, capture_output=True, text=True, check=True).stdout
                    seconds.append(json.loads(out)["seconds"])
                times[label] = statistics.median(seconds)
            gap_bytes = k * row - 8
            print(f"| {k} | {gap_bytes / 1024:.1f} KiB | {times['through']:.3f} | {times['skipped']:.3f} | "
                  f"{times['skipped'] / times['through']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
