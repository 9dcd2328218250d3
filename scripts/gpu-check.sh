#!/usr/bin/env bash
# The GPU path, end to end, on a machine with an NVIDIA GPU and a PyTorch
# wheel (whose libtorch has CUDA and NCCL):
#
#   1. configure with the wheel's libtorch (python3 -c 'import torch;
#      print(torch.utils.cmake_prefix_path)') and build the programs, the
#      CUDA kernels and the GPU-only tests (protocol_gpu_tests);
#   2. run the GPU-only tests (tests/backends/gpu_test.cc), which are
#      reported as skipped everywhere else;
#   3. run the GPU benchmarks (and one case with its hardware sampled: GPU use, energy per token): the NF4 dequantization and optimizer proxies,
#      training MFU of a ~1B Llama shape in bf16, single-stream decode of the
#      Llama-2-7B shape in bf16 with the KV cache (composite ops, the fused
#      ops' CUDA kernels, and those replayed from a CUDA graph), and a QLoRA
#      step and 4-bit decode of the 7B shape (dequantize + GEMM, then the
#      batch-1 GEMV); the plain PyTorch peer on the same shapes, and the ratios;
#      then the targets read back from those logs (the best 7B decode's share
#      of the card's memory bandwidth, 4-bit decode against bf16, the 1B MFU);
#   4. build and run the whole test suite;
#   every figure, with the device, driver, CUDA, NCCL and libtorch versions,
#   goes to OUT_DIR/gpu-check.txt (logs beside it).
#
#   scripts/gpu-check.sh                         # deps installed system-wide
#   scripts/gpu-check.sh --deps .gpu-deps        # Debian .debs made by scripts/gpu-deps.sh
#   OUT_DIR=/tmp/out scripts/gpu-check.sh --quick  # suite + one short benchmark each
#   scripts/gpu-check.sh --deps .gpu-deps --quick --budget 480   # a short lease
#
# --budget SECONDS orders the work by what only a GPU can show and stops
# starting steps once the time is spent: the GPU-only tests first (a small
# build: protocol_gpu_tests), then decode, training and 4-bit benchmarks each
# beside its PyTorch peer, the NF4 and optimizer proxies, and the whole suite
# last (its ~130 test files are the longest build). A step left out is
# printed as "not run (budget)"; each step run prints its seconds.
#
# --only REGEX runs only the steps whose names match (bash's =~, extended
# regular expressions): each benchmark and its peer by the name of its log,
# OUT_DIR/bench-NAME.log and peer-NAME.log (decode-7b, mfu-1b, nf4-7b-gemv,
# ...), "sampled" for the sampled case, "tests" for the whole suite. The
# build and the GPU-only tests always run. For a second call that finishes
# what the first one's budget left out:
#   scripts/gpu-check.sh --deps .gpu-deps --budget 420 --only 'tests|sampled'
#
# --rehearse runs every step on this machine's CPU build instead (BUILD_DIR,
# build by default; nothing is configured or built): the tiny preset and short
# runs stand in for the 7B and 1B shapes, the device is the CPU, and the
# CUDA-only flags are dropped (--cuda-fused-ops) or replaced (--decode-step
# graph by device). No GPU-only tests, no test suite. It checks this script's
# own steps (each program's flags, the sampled case's --set paths, the ratio
# and speedup lines) before a lease spends minutes on them; none of its
# figures is a GPU's. tests/packaging/gpu_check_rehearsal_test.cc runs it.
# The peer runs with PEER_PYTHON (python3 by default; Debian's python3-torch
# is /usr/bin/python3's).
#   scripts/gpu-check.sh --rehearse
#   PEER_PYTHON=/usr/bin/python3 scripts/gpu-check.sh --rehearse
#
# --deps DIR unpacks DIR/*.deb with dpkg -x into a private prefix (never into
# /) for machines that have no package registry. The benchmark numbers are
# measurements of this machine as found; record them in docs/performance.md
# with the command and the versions this script prints.
set -euo pipefail
cd "$(dirname "$0")/.."

deps=""
quick=0
budget=0  # seconds; 0: no limit
only=""   # a regular expression over step names; empty: every step
rehearse=0
while (($#)); do
  case $1 in
    --deps) deps=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --budget) budget=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --rehearse) rehearse=1; shift ;;
    -h|--help) sed -n '2,/^set -euo pipefail/{/^set/!p}' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if ((rehearse)); then
  OUT_DIR=${OUT_DIR:-results/gpu-check-rehearsal}
  BUILD_DIR=${BUILD_DIR:-build}
else
  OUT_DIR=${OUT_DIR:-results/gpu-check}
  BUILD_DIR=${BUILD_DIR:-build-gpu}
fi
mkdir -p "$OUT_DIR"
summary="$OUT_DIR/gpu-check.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
failed=0  # steps that ran and failed
# step_failed LABEL LOG: a step that ran and failed: the end of its log, and it is counted.
step_failed() {
  tail -5 "$2" | tee -a "$summary"
  say "$1: FAILED"
  failed=$((failed + 1))
}

# device_args ARGS...: the arguments a step runs with, in the array run_args: ARGS themselves,
# or in a rehearsal their CPU stand-ins (the tiny preset, short runs, no CUDA-only flag).
device_args() {
  run_args=("$@")
  ((rehearse)) || return 0
  run_args=()
  while (($#)); do
    case $1 in
      --device) run_args+=(--device cpu); shift 2 ;;
      --presets|--preset) run_args+=("$1" tiny); shift 2 ;;
      --batch) run_args+=(--batch 2); shift 2 ;;
      --seq) run_args+=(--seq 64); shift 2 ;;
      --steps) run_args+=(--steps 2); shift 2 ;;
      --warmup) run_args+=(--warmup 1); shift 2 ;;
      --decode) run_args+=(--decode "$(($2 > 0 ? 8 : 0))"); shift 2 ;;
      --shapes) run_args+=(--shapes 256x256); shift 2 ;;
      --reps) run_args+=(--reps 2); shift 2 ;;
      --cuda-fused-ops) shift ;;
      --decode-step) run_args+=(--decode-step "${2/graph/device}"); shift 2 ;;
      --set)
        local value=${2/=cuda/=cpu}
        [[ $value == *.steps=* ]] && value="${value%=*}=10"
        run_args+=(--set "$value"); shift 2 ;;
      *) run_args+=("$1"); shift ;;
    esac
  done
}

if ((rehearse)); then
  say "# protocol GPU check: REHEARSAL on this machine's CPU, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  say "# every step with CPU stand-ins (tiny preset, short runs): no figure below is a GPU's"
  say "git revision: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  for program in protocol protocol_bench protocol_nf4_bench protocol_optimizer_bench; do
    [[ -x $BUILD_DIR/$program ]] ||
      { echo "gpu-check: --rehearse needs $BUILD_DIR/$program (scripts/setup.sh builds it)" >&2; exit 2; }
  done
fi

start=$SECONDS
# left: seconds of the budget still unspent (a large number without one).
left() { if ((budget > 0)); then echo $((budget - (SECONDS - start))); else echo 1000000; fi; }
gpu_rc=0

# The GPU machine's versions, the dependencies, the build (1) and the GPU-only tests (2).
prepare_gpu() {
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
    # Debian's CMake package files name their libraries by absolute path (/usr/lib/...): point them into the prefix.
    grep -rlZ '"/usr/' "$prefix/usr/lib/x86_64-linux-gnu/cmake" 2>/dev/null | xargs -0 -r sed -i "s|\"/usr/|\"$prefix/usr/|g"
    prefix_path="$torch_prefix;$prefix/usr"
    export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PATH="$prefix/usr/bin:$PATH"  # spm_train, for the tests' tokenizers
    export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
    say "dependencies: unpacked $(ls "$deps"/*.deb | wc -l) packages from $deps into $prefix"
  fi

  # ---- 1. build -----------------------------------------------------------------
  # The CUDA compiler for the project's kernels (CMake's check_language(CUDA) reads CUDACXX).
  if [[ -z ${CUDACXX:-} ]]; then
    CUDACXX=$(command -v nvcc || true)
    [[ -z $CUDACXX && -x /usr/local/cuda/bin/nvcc ]] && CUDACXX=/usr/local/cuda/bin/nvcc
    [[ -n $CUDACXX ]] && export CUDACXX
  fi
  if [[ ! -f $BUILD_DIR/build.ninja ]]; then
    # The CUDA build's settings are cmake/cuda.cmake's, as in scripts/cuda-build-check.sh.
    cmake -S . -B "$BUILD_DIR" -G Ninja -C cmake/cuda.cmake -DCMAKE_PREFIX_PATH="$prefix_path" \
      >"$OUT_DIR/configure.log" 2>&1 ||
      { tail -30 "$OUT_DIR/configure.log"; say "configure: FAILED (configure.log)"; exit 1; }
  fi
  say "configure: $(grep -m1 -o 'protocol: CUDA kernels [A-Z]*' "$OUT_DIR/configure.log" || echo 'CUDA kernels: unknown')"
  gpu_targets=(protocol protocol-native protocol_gpu_tests protocol_bench protocol_nf4_bench protocol_optimizer_bench)
  if ! cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${gpu_targets[@]}" >"$OUT_DIR/build.log" 2>&1; then
    grep -E "error|Error" "$OUT_DIR/build.log" | head -30
    say "build: FAILED (build.log)"
    exit 1
  fi
  say "build: ok, $((SECONDS - start)) s ($("$BUILD_DIR/protocol" --version 2>&1 | head -1))"
  if command -v cuobjdump >/dev/null && [[ -f $BUILD_DIR/libprotocol_cuda_kernels.a ]]; then
    # The NF4 kernel's memory instructions: 16-byte stores (STG.E.128) mean whole-vector writes.
    cuobjdump --dump-sass "$BUILD_DIR/libprotocol_cuda_kernels.a" >"$OUT_DIR/nf4-kernel.sass" 2>&1 || true
    say "nf4 kernel SASS: $(grep -c 'STG.E.128' "$OUT_DIR/nf4-kernel.sass") STG.E.128, $(grep -cE 'LDL|STL' "$OUT_DIR/nf4-kernel.sass") local-memory accesses"
  fi

  # ---- 2. the GPU-only tests ------------------------------------------------------
  set +e
  "$BUILD_DIR/protocol_gpu_tests" --no-version >"$OUT_DIR/gpu-tests.log" 2>&1
  gpu_rc=$?  # global: the script's exit status
  set -e
  say "gpu tests: $(grep -E '^\[doctest\] test cases' "$OUT_DIR/gpu-tests.log" | tail -1) (exit $gpu_rc)"
  ((gpu_rc == 0)) || grep -B2 -A12 -E "ERROR|FATAL" "$OUT_DIR/gpu-tests.log" | head -60 | tee -a "$summary"
}
((rehearse)) || prepare_gpu

# ---- 3. benchmarks --------------------------------------------------------------
# bench NAME [PROGRAM] ARGS...: PROGRAM is protocol_bench unless the first argument names another.
# wanted NAME: whether --only selects step NAME.
wanted() { [[ -z $only || $1 =~ $only ]]; }
bench() {
  local name=$1; shift
  wanted "$name" || return 0
  if (($(left) < 30)); then say ""; say "bench $name: not run (budget)"; return 0; fi
  local program=protocol_bench
  if [[ $1 == protocol_* ]]; then program=$1; shift; fi
  device_args "$@"
  say ""
  step_start=$SECONDS
  say "\$ build/$program ${run_args[*]}"
  if ! timeout "$(left)" "$BUILD_DIR/$program" "${run_args[@]}" >"$OUT_DIR/bench-$name.log" 2>&1; then
    step_failed "bench $name" "$OUT_DIR/bench-$name.log"
    return 0
  fi
  grep -vE "^(BLAS loaded|load average)" "$OUT_DIR/bench-$name.log" | tee -a "$summary"
  say "($((SECONDS - step_start)) s)"
}
steps=10
[[ $quick == 1 ]] && steps=3
# The plain PyTorch peer (bench/peer/llama_peer.py) on the same card, the same shapes as mfu-1b and
# decode-7b, where this machine's Python has torch (the wheel); docs/performance.md records peer time / protocol time.
# ratio_of A B: A / B as "1.23x".
ratio_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
# tokens_per_second KIND FILE: the tokens/s figure of FILE's first "train" or "decode" line
# (protocol_bench and the peer print the same line shape).
tokens_per_second() {
  [[ -f $2 ]] || return 0  # a step not run (or not a benchmark of this kind) leaves no log
  awk -v kind=" $1 " 'index($0, kind) { for (i = 2; i <= NF; ++i) if ($i == "tokens/s") { print $(i - 1); exit } }' "$2"
}
# ratio BENCH [PEER]: protocol's tokens/s over the peer's for bench BENCH and peer PEER (BENCH
# when not given; above 1: protocol is faster).
ratio() {
  local name=$1 peer_name=${2:-$1} label=$1 kind mine theirs
  [[ $peer_name == "$name" ]] || label="$name against peer $peer_name"
  for kind in train decode; do
    mine=$(tokens_per_second "$kind" "$OUT_DIR/bench-$name.log" 2>/dev/null)
    theirs=$(tokens_per_second "$kind" "$OUT_DIR/peer-$peer_name.log" 2>/dev/null)
    [[ -n $mine && -n $theirs ]] || continue
    say "ratio $label $kind: protocol $mine tokens/s, peer $theirs tokens/s: $(ratio_of "$mine" "$theirs") (above 1: protocol is faster)"
  done
}
# speedup A B: bench A's decode tokens/s over bench B's.
speedup() {
  local a b
  a=$(tokens_per_second decode "$OUT_DIR/bench-$1.log" 2>/dev/null)
  b=$(tokens_per_second decode "$OUT_DIR/bench-$2.log" 2>/dev/null)
  [[ -n $a && -n $b ]] || return 0
  say "speedup $1 over $2: $a tokens/s against $b: $(ratio_of "$a" "$b")"
}
# The peer's interpreter: PEER_PYTHON, or python3 (on a GPU machine, the one with the wheel).
peer_python=${PEER_PYTHON:-python3}
peer() {
  local name=$1; shift
  wanted "$name" || return 0
  if (($(left) < 30)); then say ""; say "peer $name: not run (budget)"; return 0; fi
  if ! "$peer_python" -c 'import torch' >/dev/null 2>&1; then say ""; say "peer $name: not run (no torch in $peer_python)"; return 0; fi
  if [[ " $* " == *" --only-compiled "* ]] && ! "$peer_python" -c 'import torch; torch.compile' >/dev/null 2>&1; then
    say ""; say "peer $name: not run (torch $("$peer_python" -c 'import torch; print(torch.__version__)') has no torch.compile)"; return 0
  fi
  device_args "$@"
  say ""
  step_start=$SECONDS
  say "\$ $peer_python bench/peer/llama_peer.py ${run_args[*]}"
  if ! timeout "$(left)" "$peer_python" bench/peer/llama_peer.py "${run_args[@]}" >"$OUT_DIR/peer-$name.log" 2>&1; then
    step_failed "peer $name" "$OUT_DIR/peer-$name.log"
    return 0
  fi
  tee -a "$summary" <"$OUT_DIR/peer-$name.log"
  say "($((SECONDS - step_start)) s)"
  ratio "$name"
}
# In the order of what a short lease should read first: decode (composite, then the fused
# kernels) beside its peer; training without recompute (what checkpoint_every: auto picks where
# the estimate fits) beside its peers; with every layer recomputed; 4-bit; then the waste proxies
# measured in earlier leases.
# Single-stream decode, Llama-2-7B shape, bf16 random weights, KV cache; the bench prints its
# share of the card's memory bandwidth (roofline: 13.5 GB of weights per token, at an H100
# SXM's 3.35 TB/s ≈ 248 tokens/s, at an H200's 4.8 TB/s ≈ 356).
bench decode-7b --device cuda --presets llama2-7b --no-train --decode 256
# The same through the fused decode ops' CUDA kernels (fused_ops.h; off unless asked for).
# With --profile: after the timed runs, one more generation under libtorch's profiler (torch.profiler
# for the peer, 32 tokens): the longest kernels, and the share of the window the card was busy.
bench decode-7b-fused --device cuda --presets llama2-7b --no-train --decode 256 --cuda-fused-ops --profile 15
peer decode-7b --device cuda --presets llama2-7b --no-train --decode 256 --profile 15
speedup decode-7b-fused decode-7b
ratio decode-7b-fused decode-7b
# The fused kernels, each step's position on the device, every step replayed from one CUDA graph.
bench decode-7b-graph --device cuda --presets llama2-7b --no-train --decode 256 --cuda-fused-ops --decode-step graph
speedup decode-7b-graph decode-7b
ratio decode-7b-graph decode-7b
# Training MFU, ~1B Llama shape, bf16 (torchtitan formula; H100 SXM dense bf16 peak 989 TFLOP/s).
bench mfu-1b-norecompute --device cuda --presets llama-1b --batch 4 --seq 2048 --warmup 2 --steps "$steps" --decode 0 --recompute 0 --profile 20
peer mfu-1b-norecompute --device cuda --presets llama-1b --batch 4 --seq 2048 --warmup 2 --steps "$steps" --decode 0 --recompute 0 --profile 20
# The peer as many labs write it, with AdamW on the bf16 weights themselves (no float32 master
# weights: less work than protocol's step, and other numerics), against the same bench.
peer mfu-1b-norecompute-nomaster --device cuda --presets llama-1b --batch 4 --seq 2048 --warmup 2 --steps "$steps" --decode 0 --recompute 0 --master none
ratio mfu-1b-norecompute mfu-1b-norecompute-nomaster
bench mfu-1b --device cuda --presets llama-1b --batch 4 --seq 2048 --warmup 2 --steps "$steps" --decode 0
peer mfu-1b --device cuda --presets llama-1b --batch 4 --seq 2048 --warmup 2 --steps "$steps" --decode 0
# 4-bit: a QLoRA step and 4-bit decode of the 7B shape.
bench nf4-7b --device cuda --presets llama2-7b --quant nf4 --batch 4 --seq 512 --warmup 1 --steps "$steps" --decode 128
# 4-bit decode through the batch-1 GEMV (nf4_gemv.h) and the fused ops' kernels: the goal is
# faster than the bf16 decode above.
bench nf4-7b-gemv --device cuda --presets llama2-7b --quant nf4 --no-train --decode 128 --cuda-fused-ops --profile 15
speedup nf4-7b-gemv nf4-7b
speedup nf4-7b-gemv decode-7b
# The same replayed from a CUDA graph, against the bf16 graph decode.
bench nf4-7b-graph --device cuda --presets llama2-7b --quant nf4 --no-train --decode 128 --cuda-fused-ops --decode-step graph
speedup nf4-7b-graph decode-7b-graph
# The waste proxies of docs/performance.md: NF4 dequantization against a copy of its output,
# and the 70B LoRA adapters' optimizer step per tensor, multi-tensor and fused (host reads per step).
bench nf4-dequant protocol_nf4_bench --device cuda --shapes 4096x4096,8192x28672 --dtypes bf16,fp32 --reps 20
bench optimizer-70b-lora protocol_optimizer_bench --device cuda --preset llama2-70b --steps "$steps"

# The targets, read back from the benchmarks' logs: the best 7B bf16 decode against the card's
# memory bandwidth (≥ 70 %), the best 4-bit decode against the best bf16 one (faster), the 1B
# step's MFU (≥ 40 %); the ratios to the peer (each ≥ 1.0) are the "ratio" lines above.
# best KIND NAME...: the highest KIND tokens/s among benches NAME..., as "figure name".
best() {
  local kind=$1 name figure top="" top_name=""; shift
  for name in "$@"; do
    figure=$(tokens_per_second "$kind" "$OUT_DIR/bench-$name.log")
    [[ -n $figure ]] || continue
    if [[ -z $top ]] || awk -v a="$figure" -v b="$top" 'BEGIN { exit !(a > b) }'; then top=$figure; top_name=$name; fi
  done
  [[ -n $top ]] && echo "$top $top_name"
  return 0
}
targets() {
  local bf16 nf4 name share mfu
  say ""
  if ((rehearse)); then
    say "targets (REHEARSAL: the tiny preset on the CPU stands in; none of these is a target's figure):"
  else
    say "targets (not measured where a benchmark did not run):"
  fi
  bf16=$(best decode decode-7b decode-7b-fused decode-7b-graph)
  share=""
  [[ -n $bf16 ]] && share=$(awk '/% of the card.s/ { print $1; exit }' "$OUT_DIR/bench-${bf16#* }.log")
  if [[ -n $share ]]; then
    say "  7B bf16 decode at >= 70 % of the card's memory bandwidth: $share % (${bf16%% *} tokens/s, ${bf16#* })"
  else
    say "  7B bf16 decode at >= 70 % of the card's memory bandwidth: not measured${bf16:+ (best ${bf16%% *} tokens/s, ${bf16#* }, without a card bandwidth to compare with)}"
  fi
  nf4=$(best decode nf4-7b nf4-7b-gemv nf4-7b-graph)
  if [[ -n $nf4 && -n $bf16 ]]; then
    say "  7B NF4 decode faster than bf16: ${nf4%% *} tokens/s (${nf4#* }) against ${bf16%% *} (${bf16#* }): $(ratio_of "${nf4%% *}" "${bf16%% *}")"
  else
    say "  7B NF4 decode faster than bf16: not measured"
  fi
  for name in mfu-1b-norecompute mfu-1b; do
    mfu=""
    [[ -f $OUT_DIR/bench-$name.log ]] && mfu=$(awk '$1 == "MFU" { print $2; exit }' "$OUT_DIR/bench-$name.log")
    if [[ -n $mfu ]]; then say "  llama-1b training at >= 40 % MFU ($name): MFU $mfu %"
    else say "  llama-1b training at >= 40 % MFU ($name): not measured"; fi
  done
}
targets

# One case run by `protocol run` with the hardware sampled (docs/runner.md, "Sampling the hardware"):
# the quick start's one-node pretrain on the GPU, one rank, sampled every 0.2 s; its GPU use, the
# driver's memory peak and its energy per token go to docs/performance.md with the card's name.
sampled() {
  wanted sampled || return 0
  if (($(left) < 60)); then say ""; say "sampled case: not run (budget)"; return 0; fi
  local db="$OUT_DIR/sampled.db"
  say ""
  device_args run plans/quickstart.yaml --db "$db" --logs "$OUT_DIR/sampled-logs" --no-calibrate --only qn.1.1 \
    --set defaults.training.device=cuda --set "stages[stage1].cases[qn.1.1].training.ranks_per_node=1" \
    --set "stages[stage1].cases[qn.1.1].steps=300" --set telemetry.interval=0.2 \
    --set "defaults.output_dir=$OUT_DIR/sampled-model"
  say "\$ protocol ${run_args[*]}"
  if ! timeout "$(left)" "$BUILD_DIR/protocol" "${run_args[@]}" >"$OUT_DIR/sampled.log" 2>&1; then
    step_failed "sampled case" "$OUT_DIR/sampled.log"
    return 0
  fi
  "$BUILD_DIR/protocol" show latest --db "$db" >"$OUT_DIR/sampled-show.txt" 2>&1 || true
  grep -E "telemetry|gpu_utilization|gpu_memory_peak_driver|energy|train_tokens_per_second|wall_seconds" \
    "$OUT_DIR/sampled-show.txt" | tee -a "$summary" || true
}
sampled

# ---- 4. the whole test suite, GPU-only tests included -------------------------
ctest_rc=0
if ! wanted tests; then
  :
elif ((rehearse)); then
  say ""
  say "tests: not run (rehearsal; the suite here is scripts/test.sh)"
elif (($(left) < 150)); then
  say ""
  say "tests: not run (budget: $(left) s left)"
else
  set +e
  # The test files that touch c10d across processes first: where a libtorch release changes
  # behaviour it shows there, and a short budget should still read them.
  first='native_communicator_test|dist_fsdp_test|rehearsal_methodology_test|dist_'
  timeout "$(left)" cmake --build "$BUILD_DIR" -j "$(nproc)" >"$OUT_DIR/build-tests.log" 2>&1 &&
    { timeout "$(left)" ctest --test-dir "$BUILD_DIR" -j 8 -R "$first" --output-on-failure >"$OUT_DIR/ctest-first.log" 2>&1
      first_rc=$?
      timeout "$(left)" ctest --test-dir "$BUILD_DIR" -j 8 -E "$first" --output-on-failure >"$OUT_DIR/ctest.log" 2>&1 &&
        ((first_rc == 0)); }
  ctest_rc=$?
  set -e
  say ""
  say "tests (c10d first): $(grep -E 'tests passed|tests failed' "$OUT_DIR/ctest-first.log" 2>/dev/null | tail -1)"
  grep -E "\*\*\*(Failed|Skipped|Timeout)|Not Run" "$OUT_DIR/ctest-first.log" 2>/dev/null | tee -a "$summary" || true
  say ""
  say "tests: $(grep -E 'tests passed|tests failed' "$OUT_DIR/ctest.log" 2>/dev/null | tail -1) (exit $ctest_rc)"
  grep -E "\*\*\*(Failed|Skipped|Timeout)|Not Run" "$OUT_DIR/ctest.log" 2>/dev/null | tee -a "$summary" || true
fi

# The upper anchor, after everything else (compiling the 7B decode takes minutes): the peer's
# decode through torch.compile, where this machine's torch and its Triton compile it.
peer decode-7b-compiled --device cuda --presets llama2-7b --no-train --decode 256 --only-compiled
ratio decode-7b-graph decode-7b-compiled

say ""
say "logs: $OUT_DIR"
say "failed steps: $failed"
((gpu_rc == 0)) || exit "$gpu_rc"
((ctest_rc == 0)) || exit "$ctest_rc"
((failed == 0))
