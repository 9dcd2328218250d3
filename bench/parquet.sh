#!/usr/bin/env bash
# Parquet reading against tokenizing (docs/performance.md): writes a snappy
# parquet file of SIZE_MB (default 300) of text with parquet-wasm from the
# npm registry (scripts/parquet-fixtures/make-bench.mjs), then runs
# build/protocol_parquet_bench on it with the quick start's tokenizer.
#
#   bench/parquet.sh [SIZE_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp scripts/parquet-fixtures/make-bench.mjs "$work/"
(cd "$work" && npm init -y >/dev/null &&
  npm install --no-audit --no-fund parquet-wasm@0.8.0 apache-arrow@21.2.0 >/dev/null)
node --max-old-space-size=8192 "$work/make-bench.mjs" data/quickstart/corpus.txt "$work/bench.parquet" "$size_mb"
ls -l "$work/bench.parquet"
ninja -C build protocol_parquet_bench >/dev/null
build/protocol_parquet_bench --file "$work/bench.parquet" --tokenizer data/quickstart/tokenizer.model
