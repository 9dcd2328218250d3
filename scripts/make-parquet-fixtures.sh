#!/usr/bin/env bash
# Regenerates tests/data/parquet/*.parquet from tests/data/parquet/corpus.jsonl
# with independent parquet writers from the npm registry (pinned versions
# below); see scripts/parquet-fixtures/make.mjs for what each file covers.
# The generated files are committed: the test suite needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp scripts/parquet-fixtures/make.mjs "$work/"
(cd "$work" && npm init -y >/dev/null &&
  npm install --no-audit --no-fund parquet-wasm@0.8.0 apache-arrow@21.2.0 hyparquet-writer@0.17.0 >/dev/null)
out=tests/data/parquet
rm -rf "$out"/*.parquet "$out/folder"
node "$work/make.mjs" "$out/corpus.jsonl" "$out"
ls -l "$out" "$out/folder"
