#!/usr/bin/env bash
# The whole test suite: set-up (packages, configure, build) then every test
# through ctest. This is what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
