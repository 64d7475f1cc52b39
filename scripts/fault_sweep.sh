#!/usr/bin/env bash
# The full fault-injection sweep (issue 26): every N of every family of calls, each with
# EIO and ENOSPC, the sticky (full disk) variant and a short write, over every output kind,
# with bigger arrays than CI's `faults` test (5,300 injected faults, ~18 min on 2
# cores); then the power-cut model with every operation of each recorded run as a crash
# point. CI's `faults` and `power_cut` tests run a subsample of both.
#   OOC_BUILD_DIR=build bash scripts/fault_sweep.sh
#   OOC_FAULT_CASES=h5_existing,in_place OOC_FAULT_FAMILIES=pwrite,fsync bash scripts/fault_sweep.sh
#   OOC_FAULT_REPORT=faults.json ...   (the bad outcomes as JSON)
# Needs the oocrun and ooc_fault_shim targets built (`cmake --build build`).
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${OOC_BUILD_DIR:-$here/build}"
python="${OOC_PYTHON:-/usr/bin/python3}"
export OOCRUN="${OOCRUN:-$build/oocrun}"
export OOC_FAULT_SHIM="${OOC_FAULT_SHIM:-$build/tests/libooc_fault_shim.so}"
status=0
OOC_FAULT_SWEEP="${OOC_FAULT_SWEEP:-full}" "$python" "$here/tests/interop/test_faults.py" || status=1
OOC_POWER_CUT="${OOC_POWER_CUT:-full}" "$python" "$here/tests/interop/test_power_cut.py" || status=1
exit $status
