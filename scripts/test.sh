#!/usr/bin/env bash
# Fresh machine to green: installs what is missing, builds, runs the whole test suite.
# Then runs the suite once more in a second tree built with clang under AddressSanitizer
# and UndefinedBehaviorSanitizer (build-sanitize/), with the .npy header, expression and
# selection fuzzers (OOC_FUZZ_SECONDS, default 10 each).
# OOC_SANITIZE=0 skips that tree. The sanitized tree compiles while the plain tree's
# tests run (those wait on fsync, subprocesses and mpirun as much as on the CPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh

SANITIZE_DIR=${OOC_SANITIZE_BUILD_DIR:-build-sanitize}
build_pid=
if [ "${OOC_SANITIZE:-1}" != 0 ]; then
  # -O0 with line tables: this tree is compiled to be checked, not to be fast, and -O0
  # compiles the template-heavy kernels 2.5x faster than -O1 (reductions.cpp: 47 s
  # against 119 s; the whole tree took 10.5 min at -O1, 4.6 at -O0).
  # Programs linked without PIE: the sanitized oocrun is 160 MB of code whose PIE build
  # carries 44 MB of relocations, applied at every start (11,700 page faults, 101 MB
  # resident for `--help`); without them a run starts in 52 ms instead of 82, and the
  # tests start thousands of runs (sanitized tests: 4.4-4.7 min, from 5.9).
  # No Python module there: an ASan-built module loads only into an interpreter started
  # with the ASan runtime preloaded (tests/CMakeLists.txt), so its tests are the plain tree's.
  cmake -S . -B "$SANITIZE_DIR" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=None -DOOC_BUILD_PYTHON=OFF \
    -DCMAKE_CXX_FLAGS="-O0 -gline-tables-only" -DCMAKE_EXE_LINKER_FLAGS="-no-pie" \
    -DOOC_SANITIZE=ON -DOOC_FUZZ=ON -DOOC_FUZZ_SECONDS="${OOC_FUZZ_SECONDS:-10}" -DOOC_PARSER_FUZZ_SECONDS="${OOC_FUZZ_SECONDS:-10}" >/dev/null
  cmake --build "$SANITIZE_DIR" -j"$(nproc)" >"$SANITIZE_DIR/build.log" 2>&1 &
  build_pid=$!
fi

status=0
(cd "${OOC_BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)" --timeout 600) || status=$?

if [ -n "$build_pid" ]; then
  if ! wait "$build_pid"; then
    tail -n 60 "$SANITIZE_DIR/build.log"
    echo "test.sh: the sanitized build failed (full log: $SANITIZE_DIR/build.log)" >&2
    exit 1
  fi
  (cd "$SANITIZE_DIR" && UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j"$(nproc)" --timeout 900) ||
    status=$?
fi
exit "$status"
