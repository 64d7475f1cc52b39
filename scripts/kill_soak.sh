#!/usr/bin/env bash
# The long kill soak (issue 26): kill -9 at random moments of in-place and -o runs (.npy,
# new and existing HDF5, compressed), each followed by the same command, which must give
# the exact result. CI's `kill_soak` test runs 8 kills per case; this runs
# OOC_KILL_SOAK (default 200) per case, 1,000 in all.
#   OOC_BUILD_DIR=build bash scripts/kill_soak.sh
#   OOC_KILL_SOAK=50 OOC_KILL_CASES=in_place,h5_existing OOC_KILL_SEED=7 bash scripts/kill_soak.sh
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${OOC_BUILD_DIR:-$here/build}"
export OOCRUN="${OOCRUN:-$build/oocrun}"
export OOC_KILL_SOAK="${OOC_KILL_SOAK:-200}"
exec "${OOC_PYTHON:-/usr/bin/python3}" "$here/tests/interop/test_kill_soak.py"
