#!/usr/bin/env bash
# Prepares a Debian machine and builds protocol. Safe to run again: it installs
# only missing packages, configures only once, and rebuilds incrementally.
#
#   scripts/setup.sh            # packages + configure + build (Release) into build/
#   BUILD_DIR=out scripts/setup.sh
#
# Packages are installed as root, or through passwordless sudo; otherwise the
# exact apt-get command is printed and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}

source scripts/packages.sh
PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${CPU_TORCH_PACKAGES[@]}" "${SLURM_PACKAGES[@]}")

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  install=(apt-get install -y --no-install-recommends "${missing[@]}")
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo=(sudo)
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run as root (or with sudo):" >&2
    echo "  apt-get update && ${install[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" "${install[@]}" -qq
fi

# libtorch resolves BLAS through libblas.so.3; make sure it is OpenBLAS, not the
# reference implementation (measured ~18x slower on a training step).
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*|*mkl*|*blis*) ;;
  *) echo "setup: warning: libblas.so.3 is '$blas', not an optimised BLAS;" \
          "run: update-alternatives --config libblas.so.3-x86_64-linux-gnu" >&2 ;;
esac

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
