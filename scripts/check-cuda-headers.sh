#!/usr/bin/env bash
# Compile-checks the CUDA and NCCL code paths against a CUDA libtorch 2.x's
# headers on a machine without a GPU, in about two minutes: the quick
# counterpart of scripts/cuda-build-check.sh, which builds, links and runs the
# suite in a whole Debian trixie root (an hour and 13 GB).
#
#   scripts/check-cuda-headers.sh
#
# It downloads Debian trixie's libtorch-cuda-dev (2.6), nvidia-cuda-dev (CUDA
# 12.4) and libnccl-dev with their header-only dependencies into a scratch
# folder (apt-get download with a private source list: nothing is installed;
# about 1 GB, kept for the next run), unpacks them, and runs the compiler with
# -fsyntax-only on every source file that has a CUDA path, requiring those
# paths to be the ones compiled (PROTOCOL_REQUIRE_NCCL). It checks that the
# code compiles against these headers: not that it links, nor that it runs.
set -euo pipefail
cd "$(dirname "$0")/.."

work=${WORK_DIR:-${TMPDIR:-/tmp}/protocol-cuda-headers}
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main contrib non-free" \
  >"$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1)
packages=(libtorch-cuda-dev nvidia-cuda-dev libnccl-dev libcu++-dev libcub-dev libthrust-dev)

if [[ ! -f "$work/root/usr/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp" ]]; then
  echo "check-cuda-headers: fetching ${packages[*]} from Debian trixie (about 1 GB)" >&2
  apt-get "${apt_opts[@]}" update -qq
  (cd "$work/debs" && apt-get "${apt_opts[@]}" download "${packages[@]}" 2>&1 |
     grep -v "^W: Download is performed unsandboxed" || true)
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
fi
inc="$work/root/usr/include"
version=$(basename "$work"/debs/libtorch-cuda-dev_*.deb | sed 's/libtorch-cuda-dev_\([^+_-]*\).*/\1/')

flags=(-fsyntax-only -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -DUSE_C10D_GLOO -DUSE_C10D_NCCL -DUSE_DISTRIBUTED
       -DPROTOCOL_REQUIRE_NCCL -DFMT_SHARED '-DPROTOCOL_TORCH_CUDA_ARCHITECTURES="not read"' -Isrc -isystem "$inc" -isystem "$inc/torch/csrc/api/include"
       -Wall -Wextra -Wno-unused-parameter)
mapfile -t files < <(grep -rl "PROTOCOL_WITH_CUDA\|PROTOCOL_WITH_NCCL" src --include='*.cc' | sort)
failed=0
for f in "${files[@]}"; do
  if out=$(c++ "${flags[@]}" "$f" 2>&1); then echo "ok      $f"; else echo "FAILED  $f"; echo "$out" | grep -E "error" | head -5; failed=1; fi
done
echo "check-cuda-headers: ${#files[@]} file(s) with CUDA paths against libtorch-cuda $version headers (Debian trixie): $([[ $failed == 0 ]] && echo ok || echo FAILED)"
exit $failed
