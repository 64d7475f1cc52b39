#!/usr/bin/env bash
# Fresh machine to the main job: installs what is missing, builds, writes a demo array
# of about 2 GiB with numpy, then runs oocrun on it: info, an add-one into a new file,
# and sums of both, each with its speed; then the same from Python (import ooc), beside
# numpy. Set OOC_DEMO_DIR (default /tmp/ooc-demo) and
# OOC_DEMO_GIB (default 2); the demo files are removed at the end unless OOC_DEMO_KEEP=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OOC_BUILD_TARGETS=${OOC_BUILD_TARGETS:-oocrun ooc_python} bash scripts/setup.sh
OOCRUN="$PWD/${OOC_BUILD_DIR:-build}/oocrun"

DIR=${OOC_DEMO_DIR:-/tmp/ooc-demo}
GIB=${OOC_DEMO_GIB:-2}
mkdir -p "$DIR"
[ "${OOC_DEMO_KEEP:-0}" = 1 ] || trap 'rm -f "$DIR/demo.npy" "$DIR/demo_plus_one.npy"' EXIT

echo "== writing a ${GIB} GiB float64 demo array with numpy: $DIR/demo.npy"
/usr/bin/python3 - "$DIR/demo.npy" "$GIB" <<'PY'
import sys
import numpy as np
path, gib = sys.argv[1], float(sys.argv[2])
n = int(gib * 2**30) // 8
a = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(n // 8, 8))
rng = np.random.default_rng(2026)
rows = 1 << 21
for i in range(0, a.shape[0], rows):
    a[i:i + rows] = rng.standard_normal((min(rows, a.shape[0] - i), 8))
a.flush()
PY

echo "== oocrun info"
"$OOCRUN" info "$DIR/demo.npy"
echo "== oocrun apply add-one (into a new file, fsynced before it appears)"
"$OOCRUN" apply add-one "$DIR/demo.npy" -o "$DIR/demo_plus_one.npy"
echo "== oocrun reduce sum, input and output"
"$OOCRUN" reduce sum "$DIR/demo.npy" --json
"$OOCRUN" reduce sum "$DIR/demo_plus_one.npy" --json
echo "== numpy on the same file, for reference (np.load(mmap_mode='r').sum())"
/usr/bin/python3 - "$DIR/demo.npy" <<'PY'
import sys, time
import numpy as np
a = np.load(sys.argv[1], mmap_mode="r")
start = time.perf_counter()
value = a.sum()
seconds = time.perf_counter() - start
print(f"numpy sum {value!r}: {a.nbytes / 1e9:.3g} GB in {seconds:.3g} s ({a.nbytes / 1e9 / seconds:.3g} GB/s)")
PY

echo "== the same from Python: import ooc (PYTHONPATH=${OOC_BUILD_DIR:-build}/python)"
PYTHONPATH="$PWD/${OOC_BUILD_DIR:-build}/python" /usr/bin/python3 - "$DIR/demo.npy" "$DIR/demo_plus_one.npy" <<'PY'
import sys, time
import numpy as np
import ooc
a = ooc.open(sys.argv[1])
print(f"ooc.open: {a!r}")
start = time.perf_counter()
total = ooc.sum(a)
seconds = time.perf_counter() - start
print(f"ooc.sum {total!r} ({type(total).__name__}): {a.nbytes / 1e9:.3g} GB in {seconds:.3g} s "
      f"({a.nbytes / 1e9 / seconds:.3g} GB/s)")
print(f"column means, ooc.mean(a, axis=0): {ooc.mean(a, axis=0)}")
b = ooc.open(sys.argv[2])
print(f"ooc.sum of the add-one output equals np.sum(np.load(..., mmap_mode='r')): "
      f"{ooc.sum(b) == np.load(sys.argv[2], mmap_mode='r').sum()}")
PY
