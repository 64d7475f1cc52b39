#!/usr/bin/env bash
# Fresh machine to green: installs what is missing, builds, runs the whole test suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
cd "${OOC_BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" --timeout 600
