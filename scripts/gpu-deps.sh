#!/usr/bin/env bash
# Downloads, here, the Debian packages a GPU machine needs to build protocol
# when it has CUDA, a PyTorch wheel and a compiler but none of the project's
# C++ libraries, and cannot reach a package registry itself.
#
#   scripts/gpu-deps.sh            # → .gpu-deps/*.deb (ignored by git)
#
# Carry .gpu-deps to the GPU machine; scripts/gpu-check.sh --deps .gpu-deps
# unpacks them into a private prefix (dpkg -x, never into /) and builds there.
# The packages are Debian 12's (x86-64): header-only libraries plus the few
# shared ones (yaml-cpp, spdlog, fmt, sqlite3), which need glibc >= 2.36.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${DEST:-.gpu-deps}
PACKAGES=(
  libyaml-cpp-dev libyaml-cpp0.7
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libsqlite3-dev libsqlite3-0
  doctest-dev libcli11-dev nlohmann-json3-dev libkainjow-mustache-dev
  libgloo-dev
  libsnappy-dev libsnappy1v5 libzstd-dev libzstd1 zlib1g-dev   # parquet page codecs
  sentencepiece libsentencepiece0                              # spm_train: the tests' tokenizers
)
mkdir -p "$DEST"
cd "$DEST"
rm -f ./*.deb
apt-get download "${PACKAGES[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
n=$(ls ./*.deb 2>/dev/null | wc -l)
echo "gpu-deps: $n packages in $DEST ($(du -sh . | cut -f1))"
[[ $n -eq ${#PACKAGES[@]} ]] || { echo "gpu-deps: expected ${#PACKAGES[@]} packages" >&2; exit 1; }
