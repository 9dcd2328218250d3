#!/usr/bin/env bash
# Compiles, links and runs protocol against a CUDA libtorch 2.x on a machine
# without a GPU: Debian trixie's libtorch-cuda-dev (2.6, CUDA 12.4, NCCL) in a
# root made with debootstrap. The CUDA and NCCL code paths are compiled into
# the binaries; the CPU test suite then runs in that build (the GPU-only tests
# report skipped: no device).
#
#   scripts/cuda-build-check.sh                           # root in $TMPDIR/protocol-cuda-root
#   CUDA_ROOT_CACHE=/var/cache/cuda-root scripts/cuda-build-check.sh   # make or reuse that root
#   scripts/cuda-build-check.sh -R dist_fsdp_test         # extra arguments go to ctest
#   scripts/cuda-build-check.sh --root-only               # steps 1 and 2 only
#   scripts/cuda-build-check.sh --programs-only           # steps 1-4 for protocol and protocol-native
#                                                         # alone (scripts/build-image.sh)
#
# Steps (each prints one line; the logs are under OUT_DIR, default
# results/cuda-build-check):
#   1. root     debootstrap --variant=minbase trixie (main, contrib, non-free)
#               into CUDA_ROOT_CACHE, once; about 17 minutes on 2 cores.
#   2. packages scripts/packages.sh's build and test packages plus
#               CUDA_TORCH_PACKAGES, once per package list (about 11 GB).
#   3. build    the working tree (tracked and untracked, not ignored files),
#               copied into the root, configured with cmake/cuda.cmake — the
#               settings scripts/gpu-check.sh uses on a GPU machine — and built
#               with the tests.
#   4. linked   `readelf -d protocol-native` NEEDED lines (the program that
#               links libtorch; `protocol` hands it run/validate/worker):
#               libtorch_cuda and c10_cuda must be among them, and
#               `protocol --version` must say CUDA and NCCL.
#   5. tests    the whole ctest suite in that build; its summary.
# Exit status: 0 when every step passed, 1 otherwise, 2 for bad usage.
#
# cuDNN. libtorch-cuda-2.6 depends on nvidia-cudnn, an installer package whose
# post-install script downloads cuDNN from outside Debian's archive. protocol
# calls no cuDNN function (it turns cuDNN off at start), so the root gets,
# instead, a local package of that name holding a stub libcudnn.so.9 that
# aborts on any call (scripts/cudnn-stub.sh). Nothing is downloaded outside
# the Debian archive. A GPU machine uses the PyTorch wheel's real cuDNN.
#
# Needs root (debootstrap, chroot, mounts) and Debian's archive. Not part of
# .ci/run: the root is too large and too slow for CI.
set -euo pipefail
cd "$(dirname "$0")/.."

case ${1:-} in -h|--help) sed -n '2,40p' "$0"; exit 0 ;; esac
root_only=0 programs_only=0
case ${1:-} in
  --root-only) root_only=1; shift ;;
  --programs-only) programs_only=1; shift ;;
esac
[[ $(id -u) -eq 0 ]] || { echo "cuda-build-check: needs root (debootstrap, chroot)" >&2; exit 2; }

SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=${CUDA_ROOT_CACHE:-${TMPDIR:-/tmp}/protocol-cuda-root}
OUT_DIR=${OUT_DIR:-results/cuda-build-check}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
src=/work/protocol        # inside the root
build=/work/build-cuda    # inside the root; kept between runs (incremental)

source scripts/packages.sh
packages=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${CUDA_TORCH_PACKAGES[@]}" binutils dpkg-dev)

say() { echo "cuda-build-check: $*"; }
fail() { say "$*"; exit 1; }

mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount_into_root() {  # type-or-bind source target
  local target=$root$3
  mkdir -p "$target"
  mountpoint -q "$target" && return 0
  if [[ $1 == bind ]]; then mount --bind "$2" "$target"; else mount -t "$1" "$2" "$target"; fi
  mounted+=("$target")
}
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                   DEBIAN_FRONTEND=noninteractive "$@"; }

# ---- 1. root -------------------------------------------------------------------
if [[ ! -f $root/.protocol-base-ready ]]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  say "root: debootstrap $SUITE into $root (log: $OUT_DIR/debootstrap.log)"
  rm -rf "$root"
  mkdir -p "$root"
  debootstrap --variant=minbase --components=main,contrib,non-free "$SUITE" "$root" "$MIRROR" \
    >"$OUT_DIR/debootstrap.log" 2>&1 || { tail -5 "$OUT_DIR/debootstrap.log"; fail "root: debootstrap FAILED"; }
  touch "$root/.protocol-base-ready"
fi
say "root: $root (Debian $(cat "$root/etc/debian_version"))"

# The root is a mount point of its own: `ip netns` (the network-emulation
# tests) remounts / inside it, which fails on a plain chroot directory.
if ! mountpoint -q "$root"; then
  mount --bind "$root" "$root"
  mounted+=("$root")
fi
mount_into_root proc proc /proc
mount_into_root bind /dev /dev
mount_into_root bind /dev/pts /dev/pts
mount_into_root sysfs sysfs /sys
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# ---- 2. packages ---------------------------------------------------------------
stamp="$root/.protocol-packages-$({ printf '%s\n' "${packages[@]}"; cat scripts/cudnn-stub.sh; } | sha256sum | cut -c1-16)"
if [[ ! -f $stamp ]]; then
  say "root: installing ${#packages[@]} packages (log: $OUT_DIR/packages.log)"
  echo "deb $MIRROR $SUITE main contrib non-free" >"$root/etc/apt/sources.list"
  rm -f "$root/etc/apt/sources.list.d/"*
  # (&& between the steps: `set -e` does not act inside a group followed by ||.)
  {
    in_root apt-get update -qq &&
    # The tools the stub needs, before anything that depends on nvidia-cudnn.
    in_root apt-get install -y -qq --no-install-recommends gcc libc6-dev binutils dpkg-dev &&
    # The cuDNN stub package, built from the symbols libtorch_cuda imports.
    cp scripts/cudnn-stub.sh "$root/tmp/cudnn-stub.sh" &&
    in_root bash /tmp/cudnn-stub.sh /tmp/nvidia-cudnn-stub.deb &&
    in_root apt-get install -y -qq --no-install-recommends /tmp/nvidia-cudnn-stub.deb "${packages[@]}"
  } >"$OUT_DIR/packages.log" 2>&1 || { tail -15 "$OUT_DIR/packages.log"; fail "root: package installation FAILED"; }
  grep '^cudnn stub:' "$OUT_DIR/packages.log" | sed 's/^/cuda-build-check: root: /'
  touch "$stamp"
fi
say "root: libtorch $(in_root dpkg-query -W -f='${Version}' libtorch-cuda-dev), CUDA toolkit" \
    "$(in_root dpkg-query -W -f='${Version}' nvidia-cuda-toolkit), NCCL $(in_root dpkg-query -W -f='${Version}' libnccl-dev)"

((root_only)) && { say "root: ready"; exit 0; }

# ---- 3. build ------------------------------------------------------------------
# The working tree's files, synchronised into the root's copy: a file whose
# content changed is copied (and so gets a new time: the build redoes what
# depends on it), a file gone from the tree is removed, the rest is untouched.
umount -l "$root$src/.git" 2>/dev/null || true   # left mounted by an interrupted run
mkdir -p "$root$src"
tree_files=$(mktemp)
git ls-files -z --cached --others --exclude-standard >"$tree_files"
copied=0
while IFS= read -r -d '' f; do
  [[ -e $f ]] || continue
  if ! cmp -s "$f" "$root$src/$f"; then
    mkdir -p "$(dirname "$root$src/$f")"
    cp "$f" "$root$src/$f"
    copied=$((copied + 1))
  fi
done <"$tree_files"
(cd "$root$src" && find . -path ./.git -prune -o -type f -print0 | sed -z 's|^\./||') |
  sort -z | comm -z -23 - <(sort -z "$tree_files") | (cd "$root$src" && xargs -0 -r rm -f)
rm -f "$tree_files"
# The repository, read-only, so the build records the revision it was made from.
if [[ -d .git ]]; then
  mount_into_root bind "$PWD/.git" "$src/.git"
  mount -o remount,ro,bind "$root$src/.git"
fi
say "build: $(git rev-parse --short HEAD 2>/dev/null || echo 'working tree')$(git diff --quiet HEAD 2>/dev/null || echo ' + local changes') → $build, $copied file(s) new or changed (log: $OUT_DIR/build.log)"
in_root bash -euo pipefail -c "
  cmake -S $src -B $build -G Ninja -C $src/cmake/cuda.cmake
  if [[ $programs_only == 1 ]]; then
    cmake --build $build -j $(nproc) --target protocol protocol-native
  else
    cmake --build $build -j $(nproc)
    cmake --build $build -j $(nproc) --target protocol_gpu_tests
  fi
" >"$OUT_DIR/build.log" 2>&1 || { grep -E 'error|Error' "$OUT_DIR/build.log" | head -30; fail "build: FAILED"; }
# The NF4 kernel ships in this build or the build fails: without a working nvcc
# configure would leave it out with a warning.
grep -q 'nf4_cuda\.cu' "$root$build/build.ninja" ||
  fail "build: the NF4 CUDA kernel was not compiled (no working nvcc for sm_90?): see $OUT_DIR/build.log"
say "build: ok ($(grep -c 'Building CXX' "$OUT_DIR/build.log") objects compiled, $(grep -m1 -o 'CUDA architectures [^.]*' "$OUT_DIR/build.log" || echo 'cmake/cuda.cmake'))"

# ---- 4. what the binary links --------------------------------------------------
needed=$(in_root readelf -d "$build/protocol-native" | grep NEEDED)
echo "$needed" | sed 's/^ */cuda-build-check: linked: /'
for lib in libtorch_cuda libc10_cuda; do
  grep -q "\[$lib\.so" <<<"$needed" || fail "linked: $lib is not among protocol-native's NEEDED libraries"
done
version=$(in_root "$build/protocol" --version)
say "version: $version"
grep -q 'CUDA' <<<"$version" && grep -q 'NCCL' <<<"$version" || fail "version: the binary was not built with CUDA and NCCL"
grep -q 'NF4 kernel sm_' <<<"$version" || fail "version: the binary has no NF4 CUDA kernel"
grep -q 'cuDNN off' <<<"$version" || fail "version: cuDNN is not turned off"

((programs_only)) && { say "ok (programs only)"; exit 0; }

# ---- 5. the test suite ---------------------------------------------------------
say "tests: ctest in $build (log: $OUT_DIR/ctest.log)"
set +e
in_root bash -c "cd $build && ctest --output-on-failure -j $(nproc) $(printf '%q ' "$@")" >"$OUT_DIR/ctest.log" 2>&1
ctest_rc=$?
set -e
grep -E '^[0-9]+% tests passed|\*\*\*(Failed|Skipped|Timeout)|Not Run|\(Failed\)|\(Timeout\)' "$OUT_DIR/ctest.log" |
  sed 's/^/cuda-build-check: tests: /'
# No SKIPPED line (a -R subset without GPU tests) is not a failure.
{ grep -h '^SKIPPED: ' "$root$build/Testing/Temporary/LastTest.log" 2>/dev/null || true; } | sort -u |
  sed 's/^/cuda-build-check: tests: /'
((ctest_rc == 0)) || fail "tests: FAILED (exit $ctest_rc)"
say "ok"
