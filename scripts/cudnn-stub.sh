#!/usr/bin/env bash
# Builds nvidia-cudnn-stub.deb: a package named nvidia-cudnn (which Debian's
# libtorch-cuda depends on) holding a stub libcudnn.so.9. Run inside a Debian
# trixie root with gcc, binutils and dpkg-dev and the archive reachable.
#
#   scripts/cudnn-stub.sh OUT.deb
#
# Why a stub. Debian's nvidia-cudnn is an installer: its post-install script
# downloads cuDNN from outside the archive. protocol needs no cuDNN function:
# the model has no convolution, and every program turns libtorch's cuDNN use
# off at start (torch_compat.h: TurnOffCudnn), attention's cuDNN backend
# included. The stub holds one function per cudnn* symbol libtorch_cuda
# imports, so the programs load; each one that libtorch could only call to do
# work prints its own name and aborts: a call is caught at once, never a silent
# wrong result. The version queries libtorch makes while loading answer.
set -euo pipefail
out=${1:?usage: cudnn-stub.sh OUT.deb}
work=$(mktemp -d)
chmod 755 "$work"  # apt-get download writes as the _apt user
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get download -qq libtorch-cuda-2.6 2>/dev/null
dpkg -x libtorch-cuda-2.6_*.deb torch
# The archive's version (not a stub installed before), so the stub satisfies
# libtorch-cuda's dependency on it.
version=$(apt-cache madison nvidia-cudnn | awk -F' [|] ' '$2 !~ /protocol[.]stub/ {print $2; exit}')
[[ -n $version ]] || { echo "cudnn-stub: nvidia-cudnn is not in the archive (contrib, non-free)" >&2; exit 1; }
# Answered without aborting: what libtorch asks while loading or describing itself.
printf '%s\n' cudnnGetVersion cudnnGetCudartVersion cudnnGetErrorString cudnnGetLastErrorString >answered.txt
{
  echo "/* Stub of libcudnn.so.9 (scripts/cudnn-stub.sh): cuDNN is not in this build. */"
  echo "#include <stddef.h>"
  echo "#include <stdio.h>"
  echo "#include <stdlib.h>"
  echo "static void called(const char* name) {"
  echo "  fprintf(stderr, \"protocol: libtorch called %s, but cuDNN is not in this build (libcudnn.so.9 is a stub):\""
  echo "          \" protocol turns cuDNN off at start, so this call is a bug; aborting\\n\", name);"
  echo "  abort();"
  echo "}"
  echo "size_t cudnnGetVersion(void) { return 90000; }"
  echo "size_t cudnnGetCudartVersion(void) { return 12040; }"
  echo "const char* cudnnGetErrorString(int status) { (void)status; return \"cuDNN is not in this build\"; }"
  echo "void cudnnGetLastErrorString(char* message, size_t max) { if (max) { snprintf(message, max, \"cuDNN is not in this build\"); } }"
  nm -D --undefined-only torch/usr/lib/x86_64-linux-gnu/libtorch_cuda.so.* |
    awk '{print $2}' | grep '^cudnn' | sed 's/@.*//' | sort -u |
    grep -vxF -f answered.txt |
    sed 's/.*/int &(void) { called("&"); return 4; }/'
} >stub.c
printf 'libcudnn.so.9 {\n  global: *;\n};\n' >stub.map
mkdir -p pkg/DEBIAN pkg/usr/lib/x86_64-linux-gnu
gcc -shared -fPIC -O1 -Wl,-soname,libcudnn.so.9 -Wl,--version-script,stub.map \
  -o pkg/usr/lib/x86_64-linux-gnu/libcudnn.so.9 stub.c
cat >pkg/DEBIAN/control <<CONTROL
Package: nvidia-cudnn
Version: ${version}+protocol.stub
Architecture: amd64
Maintainer: protocol <protocol@localhost>
Provides: libcudnn.so.9
Description: stub libcudnn.so.9: cuDNN is not in this build
 Every cudnn* function libtorch_cuda imports prints its name and aborts,
 but for the version queries libtorch makes while loading.
CONTROL
dpkg-deb --build --root-owner-group pkg "$out" >/dev/null
echo "cudnn stub: $(grep -c '^int cudnn' stub.c) aborting functions, version ${version}+protocol.stub"
