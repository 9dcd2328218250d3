#!/bin/sh
# The peak memory of loading a 4-bit model for inference in one process, on
# this machine's CPU (a benchmark: prints figures, asserts nothing). Writes
# each preset's model once (seeded random weights, float32 safetensors), then
# loads it in a fresh process per way — `backend`: what the native backends'
# load does; `whole`: the whole model read in float32, then quantized — and
# for comparison the same model in full precision. Each line: the RSS before
# the load, the peak above it (getrusage ru_maxrss minus VmRSS before), what is
# held after it, the NF4 bytes.
#
#   bench/load_peak.sh                          # layers-100m and small-100m
#   PRESETS=layers-100m bench/load_peak.sh
#
# Environment: BENCH (default build/protocol_load_bench), OUT (default a new
# temp dir: the written models), PRESETS, OMP_NUM_THREADS (default 1),
# MALLOC_MMAP_THRESHOLD_ (default 65536: every block of 64 KiB or more is
# mapped and returned when freed, so that RSS follows what is held;
# docs/distributed.md).
set -eu
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-65536}
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH:-$root/build/protocol_load_bench}
out=${OUT:-$(mktemp -d)}
presets=${PRESETS:-"layers-100m small-100m"}
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS MALLOC_MMAP_THRESHOLD_=$MALLOC_MMAP_THRESHOLD_ models in $out; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for preset in $presets; do
  dir=$out/$preset
  [ -f "$dir/model.safetensors" ] || "$bench" write "$dir" --preset "$preset"
  for way in backend whole; do
    "$bench" load "$dir" --quant nf4 --way "$way"
  done
  "$bench" load "$dir" --quant nf4 --double-quant --way backend
  "$bench" load "$dir" --quant none
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
