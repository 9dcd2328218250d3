#!/usr/bin/env bash
# The whole test suite: set-up (packages, configure, build), the daemons the
# tests need, then every test through ctest. This is what .ci/run calls.
#
# Started here, stopped at the end (only what this script started):
#   a one-node Slurm on localhost (scripts/slurm-local.sh) for tests/native/launch/slurm_test.cc.
# A test whose machinery is missing (no Slurm, no network namespaces, no GPU,
# no python3) is reported by ctest as skipped, never as passed; the reasons
# are printed after the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

scripts/setup.sh

slurm_started=0
stop_slurm() { ((slurm_started)) && scripts/slurm-local.sh stop || true; }
trap stop_slurm EXIT
slurm_err=$(mktemp)
if slurm_out=$(PROTOCOL_SLURM_INSTALL=0 scripts/slurm-local.sh 2>"$slurm_err"); then
  export SLURM_CONF=${slurm_out##*SLURM_CONF=}
  if grep -q '^slurm-local: started' "$slurm_err"; then slurm_started=1; fi
  echo "test: local Slurm up (SLURM_CONF=$SLURM_CONF)" >&2
else
  echo "test: no local Slurm, the Slurm test will be skipped: $(tail -n 1 "$slurm_err")" >&2
fi
rm -f "$slurm_err"

rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@" || rc=$?
if grep -h '^SKIPPED: ' "$BUILD_DIR/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u | grep .; then
  echo "test: the lines above say why each skipped test could not run here" >&2
fi
exit "$rc"
