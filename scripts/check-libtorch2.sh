#!/usr/bin/env bash
# Compile-checks the libtorch-facing sources against libtorch 2.x headers on a
# machine that has only Debian's libtorch 1.13 (no GPU, no PyTorch wheel).
#
#   scripts/check-libtorch2.sh            # Debian trixie's libtorch-dev (2.6)
#   SUITE=sid scripts/check-libtorch2.sh  # another Debian suite
#
# It fetches the libtorch-dev package of that Debian suite from Debian's own
# archive into a scratch folder (apt-get download with a private source list:
# nothing is installed, the system's apt state is untouched), then runs the
# compiler with -fsyntax-only on every source file that includes libtorch,
# with the same flags as the real build. This catches API breaks between 1.13
# and 2.x (a header that moved, a function that was renamed) without linking
# or running anything. What it cannot check: CUDA/NCCL code paths (that
# package is CPU-only) and behaviour. scripts/gpu-check.sh builds and runs
# everything against a CUDA libtorch on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE=${SUITE:-trixie}
work=${WORK_DIR:-${TMPDIR:-/tmp}/protocol-libtorch-$SUITE}
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"

echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" \
  >"$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1)

if ! ls "$work"/debs/libtorch-dev_*.deb >/dev/null 2>&1; then
  echo "check-libtorch2: fetching libtorch-dev from Debian $SUITE" >&2
  apt-get "${apt_opts[@]}" update -qq
  (cd "$work/debs" && apt-get "${apt_opts[@]}" download libtorch-dev 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  dpkg -x "$work"/debs/libtorch-dev_*.deb "$work/root"
fi
version=$(basename "$work"/debs/libtorch-dev_*.deb | sed 's/libtorch-dev_\([^+_-]*\).*/\1/')
inc="$work/root/usr/include"

flags=(-fsyntax-only -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -DUSE_C10D_GLOO -DUSE_DISTRIBUTED
       -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB
       -Isrc -Itests/support -isystem "$inc" -isystem "$inc/torch/csrc/api/include"
       -DPROTOCOL_SOURCE_DIR="\"$PWD\"" -DPROTOCOL_BINARY="\"build/protocol\"" -DPROTOCOL_NATIVE_BINARY="\"build/protocol-native\"" -Wall -Wextra -Wno-unused-parameter)

mapfile -t files < <(find src bench tests -name '*.cc' -print0 |
                       xargs -0 grep -lE '#include <(ATen|torch|c10)/|#include "backends/native/' | sort)
failed=0
jobs=$(nproc)
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} sh -c '
  if out=$(c++ "$@" {} 2>&1); then echo "ok      {}"; else echo "FAILED  {}"; echo "$out" | grep -E "error" | head -5; exit 1; fi
' _ "${flags[@]}" || failed=1
echo "check-libtorch2: ${#files[@]} files against libtorch $version headers (Debian $SUITE): $([[ $failed == 0 ]] && echo ok || echo FAILED)"
exit $failed
