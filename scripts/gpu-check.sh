#!/usr/bin/env bash
# The GPU path, end to end, on a machine with an NVIDIA GPU and a PyTorch
# wheel (whose libtorch has CUDA and NCCL):
#
#   1. configure with the wheel's libtorch (python3 -c 'import torch;
#      print(torch.utils.cmake_prefix_path)') and build;
#   2. run the whole test suite — the GPU-only tests (tests/backends/gpu_test.cc) run
#      here instead of being reported as skipped;
#   3. run the GPU benchmarks (build/protocol_bench): training MFU of a ~1B
#      Llama shape in bf16, single-stream decode of the Llama-2-7B shape in
#      bf16 with the KV cache, and a QLoRA step and 4-bit decode of the 7B
#      shape;
#   4. write every figure, with the device, driver, CUDA, NCCL and libtorch
#      versions, to OUT_DIR/gpu-check.txt (logs beside it).
#
#   scripts/gpu-check.sh                         # deps installed system-wide
#   scripts/gpu-check.sh --deps .gpu-deps        # Debian .debs made by scripts/gpu-deps.sh
#   OUT_DIR=/tmp/out scripts/gpu-check.sh --quick  # suite + one short benchmark each
#
# --deps DIR unpacks DIR/*.deb with dpkg -x into a private prefix (never into
# /) for machines that have no package registry. The benchmark numbers are
# measurements of this machine as found; record them in docs/performance.md
# with the command and the versions this script prints.
set -euo pipefail
cd "$(dirname "$0")/.."

deps=""
quick=0
while (($#)); do
  case $1 in
    --deps) deps=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

OUT_DIR=${OUT_DIR:-results/gpu-check}
BUILD_DIR=${BUILD_DIR:-build-gpu}
mkdir -p "$OUT_DIR"
summary="$OUT_DIR/gpu-check.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

command -v nvidia-smi >/dev/null || { echo "gpu-check: no nvidia-smi: not a GPU machine" >&2; exit 2; }
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
say "# protocol GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "git revision: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "$(python3 -c 'import torch; print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| NCCL", ".".join(map(str, torch.cuda.nccl.version())), "| cuda available", torch.cuda.is_available())')"

prefix_path="$torch_prefix"
if [[ -n $deps ]]; then
  prefix="${TMPDIR:-/tmp}/protocol-deps"
  mkdir -p "$prefix"
  torch_include=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
  for deb in "$deps"/*.deb; do
    # The wheel's own gloo headers match its libtorch; Debian's are only a fallback.
    if [[ $(basename "$deb") == libgloo-dev_* && -d $torch_include/gloo ]]; then continue; fi
    dpkg -x "$deb" "$prefix"
  done
  prefix_path="$torch_prefix;$prefix/usr"
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
  say "dependencies: unpacked $(ls "$deps"/*.deb | wc -l) packages from $deps into $prefix"
fi

# ---- 1. build -----------------------------------------------------------------
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  # The CUDA build's settings are cmake/cuda.cmake's, as in scripts/cuda-build-check.sh.
  cmake -S . -B "$BUILD_DIR" -G Ninja -C cmake/cuda.cmake -DCMAKE_PREFIX_PATH="$prefix_path" \
    >"$OUT_DIR/configure.log" 2>&1 ||
    { tail -30 "$OUT_DIR/configure.log"; say "configure: FAILED (configure.log)"; exit 1; }
fi
if ! cmake --build "$BUILD_DIR" -j "$(nproc)" >"$OUT_DIR/build.log" 2>&1; then
  grep -E "error|Error" "$OUT_DIR/build.log" | head -30
  say "build: FAILED (build.log)"
  exit 1
fi
say "build: ok ($(grep -m1 -o 'libtorch [0-9.a-z+]*' "$OUT_DIR/build.log" || echo "libtorch from $torch_prefix"))"

# ---- 2. the test suite, GPU-only tests included -------------------------------
set +e
ctest --test-dir "$BUILD_DIR" -j 4 --output-on-failure >"$OUT_DIR/ctest.log" 2>&1
ctest_rc=$?
set -e
say "tests: $(grep -E 'tests passed|tests failed' "$OUT_DIR/ctest.log" | tail -1) (exit $ctest_rc)"
grep -E "\*\*\*(Failed|Skipped|Timeout)|Not Run" "$OUT_DIR/ctest.log" | tee -a "$summary" || true

# ---- 3. benchmarks --------------------------------------------------------------
# bench NAME [PROGRAM] ARGS...: PROGRAM is protocol_bench unless the first argument names another.
bench() {
  local name=$1; shift
  local program=protocol_bench
  if [[ $1 == protocol_* ]]; then program=$1; shift; fi
  say ""
  say "\$ build/$program $*"
  if ! "$BUILD_DIR/$program" "$@" >"$OUT_DIR/bench-$name.log" 2>&1; then
    tail -5 "$OUT_DIR/bench-$name.log" | tee -a "$summary"
    say "bench $name: FAILED"
    return 0
  fi
  grep -vE "^(BLAS loaded|load average)" "$OUT_DIR/bench-$name.log" | tee -a "$summary"
}
steps=10
[[ $quick == 1 ]] && steps=3
# Training MFU, ~1B Llama shape, bf16 (torchtitan formula; H100 SXM dense bf16 peak 989 TFLOP/s).
bench mfu-1b --device cuda --presets llama-1b --batch 4 --seq 2048 --warmup 2 --steps "$steps" --decode 0
# Single-stream decode, Llama-2-7B shape, bf16 random weights, KV cache
# (HBM roofline: 13.5 GB of weights per token at 3.35 TB/s ≈ 248 tokens/s).
bench decode-7b --device cuda --presets llama2-7b --no-train --decode 256
# 4-bit: a QLoRA step and 4-bit decode of the 7B shape.
bench nf4-7b --device cuda --presets llama2-7b --quant nf4 --batch 4 --seq 512 --warmup 1 --steps "$steps" --decode 128
# The waste proxies of docs/performance.md: NF4 dequantization against a copy of its output,
# and the 70B LoRA adapters' optimizer step per tensor against multi-tensor (host reads per step).
bench nf4-dequant protocol_nf4_bench --device cuda --shapes 8192x28672 --reps 5
bench optimizer-70b-lora protocol_optimizer_bench --device cuda --steps "$steps"

say ""
say "logs: $OUT_DIR"
exit $ctest_rc
