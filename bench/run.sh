#!/usr/bin/env bash
# The bench: builds ooc in Release, makes its own data, and measures ooc against numpy,
# dask and h5py and against the machine's limits, all in one run.
#   bench/run.sh            2 GiB files, warm and cold rows
#   bench/run.sh --quick    512 MiB files
#   bench/run.sh --large    the default rows, and a cold sum of an 8 GiB file in a 1 GiB memory cgroup
#   bench/run.sh --smoke    16 MiB files, one repetition (what ctest runs)
#   bench/run.sh --only text --text-bytes 64e6 --reps 3
#                           the text rows alone (import vs np.loadtxt and pandas, export vs
#                           np.savetxt) for a (1M, 8) float64 array: a 161 MB CSV
#   bench/run.sh --only statistics --reps 5
#                           sum,mean,std,min,max in one oocrun reduce (whole array and axis 0)
#                           against reduce sum alone and numpy's five calls
#   bench/run.sh --only selections --reps 3
#                           X[:, 2] against the whole-array sum (warm); peak RSS of the sum of X[:, 2]
#                           (C++ API, oocrun, Python), of a masked sum and of a masked copy, an 8 GiB
#                           file in a 1 GiB cgroup; the cold masked copy against the disk's read probe
# Other options go to bench/bench.py (--dir DIR, --reps N, --out FILE, --keep, --only, --text-bytes).
# Needs root for the cold rows (drop_caches) and the cgroup.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size=default
args=()
for arg in "$@"; do
  case "$arg" in
    --quick) size=quick ;;
    --large) size=large ;;
    --smoke) size=smoke ;;
    *) args+=("$arg") ;;
  esac
done
bash scripts/setup.sh
BUILD=${OOC_BUILD_DIR:-build}
OOC_BENCH_COMMAND="bench/run.sh $*" exec /usr/bin/python3 bench/bench.py --oocrun "$BUILD/oocrun" --probe "$BUILD/bench/ooc_probe" \
  $( [ -d "$BUILD/python/ooc" ] && echo --python-module "$BUILD/python" ) --size "$size" "${args[@]}"
