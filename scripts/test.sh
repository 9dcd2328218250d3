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

# The suite leaves the source tree as it found it: a test that writes into a
# tracked file (a fixture database opened in place is migrated to the new
# schema) fails the run. Compared before and after, so a tree with changes of
# its own is checked too; skipped outside a git work tree.
tree_state() { git diff --binary 2>/dev/null | sha256sum; }
tree_before=""
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then tree_before=$(tree_state); fi

rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@" || rc=$?
if [[ -n $tree_before && $(tree_state) != "$tree_before" ]]; then
  echo "test: the suite changed tracked files of the source tree: $(git diff --name-only | tr '\n' ' ')" >&2
  rc=1
fi
if grep -h '^SKIPPED: ' "$BUILD_DIR/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u | grep .; then
  echo "test: the lines above say why each skipped test could not run here" >&2
fi
exit "$rc"
