#!/usr/bin/env bash
# Installs the Debian packages ooc needs that are missing, then builds it (Release) in
# ./build. Sourced by demo.sh and test.sh; safe to run again. OOC_SETUP_PACKAGES_ONLY=1
# stops after the packages (test.sh starts its second tree's build before the first's).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# pybind11, the Python headers and pytest: the Python module (python/) and its tests.
# clang-14 and its sanitizer/libFuzzer runtimes (only with OOC_SANITIZE=1): scripts/test.sh
# then builds a second, sanitized tree with them and runs the fuzzers. strace: the crash
# tests fail a directory's fsyncs with it. libfast-float-dev: text
# import's float parser; python3-pandas: the bench's text rows compare against it; time:
# GNU time, the bench's peak-RSS measure.
# nlohmann-json3-dev: Zarr's metadata; python3-zarr, python3-numcodecs: the Zarr interop tests.
PACKAGES=(g++ cmake make libboost-dev libtbb-dev libeigen3-dev doctest-dev libcli11-dev libhdf5-dev
          libfast-float-dev python3-numpy python3-dask python3-h5py python3-pandas strace
          libopenmpi-dev openmpi-bin time pybind11-dev python3-pybind11 python3-pytest python3-dev
          libdeflate-dev zlib1g-dev liblz4-dev libblosc-dev libzstd-dev hdf5-filter-plugin
          hdf5-filter-plugin-blosc-serial hdf5-plugin-lzf python3-hdf5plugin python3-lz4
          nlohmann-json3-dev python3-zarr python3-numcodecs)
[ "${OOC_SANITIZE:-0}" = 1 ] && PACKAGES+=(clang-14 libclang-rt-14-dev)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: packages installed in $SECONDS s"
fi
[ "${OOC_SETUP_PACKAGES_ONLY:-0}" = 1 ] && exit 0

BUILD_DIR=${OOC_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
# OOC_BUILD_TARGETS: only these (the demo builds what it runs, not the test suite).
read -r -a targets <<<"${OOC_BUILD_TARGETS:-}"
cmake --build "$BUILD_DIR" -j"$(nproc)" ${targets[@]+--target "${targets[@]}"}
