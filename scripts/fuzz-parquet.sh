#!/usr/bin/env bash
# Fuzzes the parquet reader with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, starting from the test fixtures
# (tests/data/parquet). Needs clang++ and Debian's libclang-rt-14-dev.
#
#   scripts/fuzz-parquet.sh [SECONDS]   (default 120)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=src/backends/native/training
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc \
  scripts/fuzz/parquet_fuzz.cc $src/parquet.cc $src/thrift_compact.cc $src/decompress.cc src/runner/base/status.cc \
  -lfmt -lsnappy -lzstd -lz -o "$work/parquet_fuzz"
mkdir -p "$work/corpus"
find tests/data/parquet -name '*.parquet' -exec cp {} "$work/corpus/" \;
"$work/parquet_fuzz" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=4096 -timeout=10 "$work/corpus" 2>&1 |
  grep -E '^#[0-9]+ *(DONE|pulse)|ERROR|SUMMARY|Done' | tail -5
echo "fuzz-parquet: no crash in ${seconds} s"
