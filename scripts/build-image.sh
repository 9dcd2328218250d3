#!/usr/bin/env bash
# Builds the rigs' image from Debian packages and this source alone: no
# registry, no base image, no Dockerfile. protocol is built against Debian
# trixie's CUDA libtorch 2.6 (CUDA 12.4, NCCL 2.22) with the NF4 kernel for
# sm_90; the image holds only what the programs load at run time.
#
#   scripts/build-image.sh      → results/image/protocol-<revision>.tar, tagged protocol:<revision>
#   docker load -i results/image/protocol-<revision>.tar             (docs/rigs.md)
#
# Steps (each prints one line; logs under OUT_DIR, default results/image):
#   1. build    scripts/cuda-build-check.sh --programs-only: the trixie root
#               (made once, kept in CUDA_ROOT_CACHE, about 25 minutes), protocol
#               and protocol-native built there; it fails when nvcc cannot
#               compile the NF4 kernel: the image never ships without it.
#   2. stage    cmake --install into the root's /work/stage/usr/local, with the
#               entrypoint (scripts/image/entrypoint.sh) and its sshd config.
#   3. runtime  mmdebstrap trixie: the packages owning the libraries the two
#               programs load (readelf NEEDED, dpkg -S in the build root), their
#               dependencies, OpenBLAS (OpenMP; else libtorch takes the reference
#               BLAS), openssh-server and -client (the ssh launcher),
#               ibverbs-providers (NCCL's InfiniBand), iproute2 and procps; the
#               cuDNN stub (scripts/cudnn-stub.sh); and a placeholder libcuda1:
#               the NVIDIA container toolkit mounts the host driver's libcuda.
#               No compiler, no -dev package. The ROCm and LLVM libraries that
#               UCX's plugins pull in are removed with those plugins when no
#               other file needs them (checked with readelf over the root).
#               Kept in IMAGE_CACHE per package list: made once.
#   4. layers   an OCI layout (umoci): the runtime root as one layer (cached
#               with it), the staged protocol as a second; entrypoint, working
#               directory /work, NVIDIA_VISIBLE_DEVICES=all,
#               NVIDIA_DRIVER_CAPABILITIES=compute,utility, and labels naming
#               the revision and the libtorch, CUDA and NCCL versions.
#   5. archive  skopeo copy into a docker-archive; prints the sizes.
# A second run after a source change rebuilds protocol and the second layer only.
#
# Needs root (debootstrap, chroot, mmdebstrap) and Debian's archive; installs
# mmdebstrap, umoci and skopeo when absent. Exit 0 when the image was written.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in -h|--help) sed -n '2,37p' "$0"; exit 0 ;; esac
[[ $(id -u) -eq 0 ]] || { echo "build-image: needs root (chroot, mmdebstrap)" >&2; exit 2; }

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
export CUDA_ROOT_CACHE=${CUDA_ROOT_CACHE:-${TMPDIR:-/tmp}/protocol-cuda-root}
IMAGE_CACHE=${IMAGE_CACHE:-${TMPDIR:-/tmp}/protocol-image-cache}
OUT_DIR=${OUT_DIR:-results/image}
mkdir -p "$OUT_DIR" "$IMAGE_CACHE"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
root=$CUDA_ROOT_CACHE
build=/work/build-cuda   # scripts/cuda-build-check.sh's build folder inside the root
stage=/work/stage        # inside the root
say() { echo "build-image: $*"; }
fail() { say "$*"; exit 1; }
started=$SECONDS

for tool in mmdebstrap umoci skopeo; do
  command -v $tool >/dev/null || apt-get install -y -qq --no-install-recommends $tool >/dev/null
done

# ---- 1. build ------------------------------------------------------------------
OUT_DIR="$OUT_DIR/build" scripts/cuda-build-check.sh --programs-only | sed 's/^cuda-build-check/build-image: build/' ||
  fail "build: FAILED (logs: $OUT_DIR/build)"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
revision=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD 2>/dev/null || revision+="-dirty"

# ---- 2. stage ------------------------------------------------------------------
rm -rf "$root$stage"
in_root cmake --install "$build" --prefix "$stage/usr/local" >"$OUT_DIR/stage.log" 2>&1 ||
  fail "stage: cmake --install FAILED ($OUT_DIR/stage.log)"
install -D -m 755 scripts/image/entrypoint.sh "$root$stage/usr/local/bin/protocol-entrypoint"
install -D -m 644 scripts/image/sshd_config "$root$stage/etc/ssh/protocol_sshd_config"
mkdir -p "$root$stage/work" "$root$stage/root"
chmod 700 "$root$stage/root"
# ssh reads the passwd home's .ssh, not $HOME's: root's is the work volume's,
# so the runner's key, config and known hosts live in /work/.ssh (docs/rigs.md).
ln -s /work/.ssh "$root$stage/root/.ssh"
# (protocol-native itself: without /proc in the chroot, protocol cannot find its sibling.)
version=$(in_root "$stage/usr/local/bin/protocol-native" --version 2>/dev/null | grep "^protocol ")
say "stage: $version"
grep -qE 'NF4 kernel [^ ]*sm_90' <<<"$version" || fail "stage: the NF4 kernel is not compiled for sm_90 (H100): $version"
libtorch=$(in_root dpkg-query -W -f='${Version}' libtorch-cuda-dev | sed 's/[+~-].*//')
cuda=$(sed -n 's/.*CUDA \([0-9.]*\).*/\1/p' <<<"$version")
nccl=$(sed -n 's/.*NCCL \([0-9.]*\).*/\1/p' <<<"$version")

# ---- 3. runtime root -------------------------------------------------------------
# The packages that own what the two programs NEED; apt brings their dependencies.
owners=$(for lib in $(in_root readelf -d "$stage/usr/local/bin/protocol-native" "$stage/usr/local/bin/protocol" |
                      sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | sort -u); do
           in_root dpkg -S "/usr/lib/x86_64-linux-gnu/$lib" 2>/dev/null | sed -n '1s/:.*//p'
         done | sort -u)
# The placeholder libcuda1 (host driver mounted by the NVIDIA container toolkit)
# and the cuDNN stub, as local packages.
debs=$IMAGE_CACHE/debs
mkdir -p "$debs"
if [[ ! -f $debs/nvidia-cudnn-stub.deb || scripts/cudnn-stub.sh -nt $debs/nvidia-cudnn-stub.deb ]]; then
  cp scripts/cudnn-stub.sh "$root/tmp/cudnn-stub.sh"
  in_root bash /tmp/cudnn-stub.sh /tmp/nvidia-cudnn-stub.deb >/dev/null
  cp "$root/tmp/nvidia-cudnn-stub.deb" "$debs/"
fi
if [[ ! -f $debs/libcuda1-host.deb ]]; then
  p=$(mktemp -d)
  mkdir -p "$p/DEBIAN" "$p/usr/share/doc/libcuda1"
  echo "libcuda.so.1 comes from the host's NVIDIA driver (NVIDIA container toolkit)." >"$p/usr/share/doc/libcuda1/README"
  cat >"$p/DEBIAN/control" <<CONTROL
Package: libcuda1
Version: 1:550.54.15+protocol.host
Architecture: amd64
Maintainer: protocol <protocol@localhost>
Provides: libcuda.so.1 (= 550.54.15), libcuda-12.4-1
Description: placeholder: libcuda.so.1 is the host driver's
 The NVIDIA container toolkit mounts the host's libcuda.so.1 (driver >= 550.54)
 into the container; this package only satisfies the dependency on it.
CONTROL
  dpkg-deb --build --root-owner-group "$p" "$debs/libcuda1-host.deb" >/dev/null
  rm -rf "$p"
fi
runtime_packages=($owners libopenblas0-openmp openssh-server openssh-client ibverbs-providers iproute2 procps
                  ca-certificates "$debs/libcuda1-host.deb" "$debs/nvidia-cudnn-stub.deb")
# UCX (through Open MPI, through libtorch) ships plugins for ROCm whose
# libraries pull in LLVM (about 210 MB): the plugins and these packages are
# removed; the check below proves no file left needs them.
rocm_llvm=(libamdhip64-5 libamd-comgr2 libhsa-runtime64-1 libhsakmt1 libllvm17t64 libdrm-amdgpu1)
# The runtime root is made again when what goes into it changes.
key=$({ printf '%s\n' "${runtime_packages[@]}" "${rocm_llvm[@]}"; sha256sum "$debs"/*.deb; } | sha256sum | cut -c1-16)
base=$IMAGE_CACHE/base-$key
if [[ ! -f $base/.ready ]]; then
  say "runtime: mmdebstrap trixie with ${#runtime_packages[@]} packages and their dependencies (log: $OUT_DIR/runtime.log)"
  rm -rf "$IMAGE_CACHE"/base-*
  mkdir -p "$base"
  # (the hook makes the local .deb files visible to dpkg inside the new root;
  # the placeholder's epoch puts it above the archive's libcuda1.)
  mmdebstrap --variant=essential --components=main,contrib,non-free --format=directory \
    --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
    --include="$(IFS=,; echo "${runtime_packages[*]}")" \
    --customize-hook='rm -f "$1"/usr/lib/x86_64-linux-gnu/ucx/*rocm*' \
    --customize-hook="chroot \"\$1\" dpkg --purge --force-depends ${rocm_llvm[*]}" \
    --customize-hook='rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    trixie "$base/rootfs" "$MIRROR" >"$OUT_DIR/runtime.log" 2>&1 ||
    { tail -15 "$OUT_DIR/runtime.log"; fail "runtime: mmdebstrap FAILED"; }
  touch "$base/.ready"
fi
say "runtime: $base ($(du -sh --apparent-size "$base/rootfs" | cut -f1) installed)"
# Every library the programs load is in the runtime root, and every NEEDED
# library of every ELF file of the root is there, but the host driver's
# (mounted by the NVIDIA container toolkit).
cp "$root$stage/usr/local/bin/protocol-native" "$base/rootfs/tmp/protocol-native"
missing=$(chroot "$base/rootfs" /usr/bin/env -i PATH=/usr/bin:/bin ldd /tmp/protocol-native | grep 'not found' || true)
rm -f "$base/rootfs/tmp/protocol-native"
[[ -z $missing ]] || fail "runtime: protocol-native's libraries not in the image: $missing"
host_provided='^(libcuda\.so\.1|libnvidia-ml\.so\.1)$'
present=$(find "$base/rootfs/usr/lib" "$base/rootfs/lib" -name '*.so*' \( -type f -o -type l \) -printf '%f\n' 2>/dev/null | sort -u)
unresolved=$(find "$base/rootfs/usr/lib" "$base/rootfs/usr/bin" "$base/rootfs/usr/sbin" -type f \( -name '*.so*' -o -perm -u+x \) \
               -exec readelf -d {} + 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u |
             comm -23 - <(echo "$present") | grep -vE "$host_provided" || true)
[[ -z $unresolved ]] || fail "runtime: libraries needed by files of the image but not in it: $(echo $unresolved)"

# ---- 4. layers -------------------------------------------------------------------
layout=$IMAGE_CACHE/oci
if [[ ! -f $base/.layer-ready || ! -d $layout ]]; then
  say "layers: the runtime root as the base layer (log: $OUT_DIR/layers.log)"
  rm -rf "$layout"
  { umoci init --layout "$layout" &&
    umoci new --image "$layout:base" &&
    umoci insert --image "$layout:base" --no-history "$base/rootfs" / ; } >"$OUT_DIR/layers.log" 2>&1 ||
    fail "layers: base layer FAILED ($OUT_DIR/layers.log)"
  touch "$base/.layer-ready"
fi
tag=protocol-$revision
umoci rm --image "$layout:$tag" 2>/dev/null || true
{ umoci tag --image "$layout:base" "$tag" &&
  umoci insert --image "$layout:$tag" --history.comment "protocol $revision" "$root$stage" / &&
  umoci config --image "$layout:$tag" \
    --config.entrypoint /usr/local/bin/protocol-entrypoint \
    --config.workingdir /work \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env NVIDIA_VISIBLE_DEVICES=all \
    --config.env NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    --config.env LANG=C.UTF-8 \
    --config.label org.opencontainers.image.title=protocol \
    --config.label org.opencontainers.image.revision="$revision" \
    --config.label protocol.libtorch="$libtorch" \
    --config.label protocol.cuda="$cuda" \
    --config.label protocol.nccl="$nccl" \
    --config.label protocol.build="$version" ; } >>"$OUT_DIR/layers.log" 2>&1 ||
  fail "layers: protocol layer FAILED ($OUT_DIR/layers.log)"
umoci gc --layout "$layout" >>"$OUT_DIR/layers.log" 2>&1 || true

# ---- 5. archive ------------------------------------------------------------------
archive=$OUT_DIR/protocol-$revision.tar
rm -f "$archive"
skopeo copy --quiet "oci:$layout:$tag" "docker-archive:$archive:protocol:$revision" >"$OUT_DIR/archive.log" 2>&1 ||
  { tail -5 "$OUT_DIR/archive.log"; fail "archive: skopeo copy FAILED"; }
uncompressed=$(tar -tvf "$archive" | awk '{s += $3} END {printf "%.2f", s / 2^30}')
say "image: $archive, tagged protocol:$revision"
say "size: archive $(du -h --apparent-size "$archive" | cut -f1), layers $uncompressed GiB uncompressed; $((SECONDS - started)) s"
say "ok"
