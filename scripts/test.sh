#!/usr/bin/env bash
# Fresh machine to green: installs what is missing, builds, runs the whole test suite.
# Then builds the same sources again with clang under AddressSanitizer and
# UndefinedBehaviorSanitizer (build-sanitize/) and runs the suite once more there, with
# the .npy header fuzzer for OOC_FUZZ_SECONDS (default 30). OOC_SANITIZE=0 skips that.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
(cd "${OOC_BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)" --timeout 600)

if [ "${OOC_SANITIZE:-1}" != 0 ]; then
  SANITIZE_DIR=${OOC_SANITIZE_BUILD_DIR:-build-sanitize}
  # -O0 with line tables: this tree is compiled to be checked, not to be fast, and -O0
  # compiles the template-heavy kernels 2.5x faster than -O1 (reductions.cpp: 47 s
  # against 119 s; the whole tree took 10.5 min at -O1), which CI's time budget needs.
  cmake -S . -B "$SANITIZE_DIR" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_CXX_FLAGS="-O0 -gline-tables-only" \
    -DOOC_SANITIZE=ON -DOOC_FUZZ=ON -DOOC_FUZZ_SECONDS="${OOC_FUZZ_SECONDS:-30}" >/dev/null
  cmake --build "$SANITIZE_DIR" -j"$(nproc)"
  cd "$SANITIZE_DIR"
  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j"$(nproc)" --timeout 900
fi
