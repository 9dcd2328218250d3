// scripts/gpu-check.sh --rehearse: every step the GPU check runs, on this
// build's CPU programs with tiny stand-ins for the 7B and 1B shapes. A GPU
// lease is a few minutes; a step whose flags, preset names or --set paths are
// wrong would spend them on a usage message. This checks the script's own
// steps, not a GPU: each benchmark and the sampled case ran and none failed,
// and where python3 has torch, the peer ran beside them and the ratio lines
// were computed from the two logs.

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "test_files.h"

namespace fs = std::filesystem;
using namespace protocol::testing;

namespace {

// The lines of TEXT that start with PREFIX.
std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("gpu-check --rehearse: every step runs on the CPU build and none fails") {
  TempDir dir;
  const fs::path src = PROTOCOL_SOURCE_DIR;
  const fs::path build = fs::path(PROTOCOL_BINARY).parent_path();
  const fs::path out = dir.path / "gpu-check";
  // The peer's interpreter: the first with torch (Debian's python3-torch is /usr/bin/python3's).
  std::string peer_python;
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (Shell(std::string(python) + " -c 'import torch'", src).exit_code == 0) {
      peer_python = python;
      break;
    }
  Output run = Shell("OUT_DIR=" + ShellQuote(out.string()) + " BUILD_DIR=" + ShellQuote(build.string()) +
                         (peer_python.empty() ? "" : " PEER_PYTHON=" + peer_python) +
                         " scripts/gpu-check.sh --rehearse",
                     src);
  const std::string summary = ReadAll(out / "gpu-check.txt");
  INFO("exit ", run.exit_code, "\nsummary:\n", summary, "\nstderr:\n", run.err);
  CHECK(run.exit_code == 0);
  CHECK(summary.find("REHEARSAL on this machine's CPU") != std::string::npos);
  CHECK(summary.find("FAILED") == std::string::npos);
  CHECK(LinesStartingWith(summary, "failed steps: 0").size() == 1);

  // Every benchmark of the GPU check ran, with the CPU stand-ins and no CUDA-only flag.
  const auto benches = LinesStartingWith(summary, "$ build/protocol_");
  CHECK(benches.size() == 10);
  for (const std::string& line : benches) {
    INFO(line);
    CHECK(line.find("--device cpu") != std::string::npos);
    CHECK(line.find("cuda") == std::string::npos);
    CHECK(line.find("llama") == std::string::npos);
  }
  CHECK(LinesStartingWith(summary, "speedup decode-7b-fused over decode-7b: ").size() == 1);
  CHECK(LinesStartingWith(summary, "speedup nf4-7b-gemv over decode-7b: ").size() == 1);
  // The three profiled benchmarks (--profile): a decode, a training step, a 4-bit decode; and,
  // where it runs, the peer's decode and training step.
  const size_t peer_profiles = peer_python.empty() ? 0 : 1;
  CHECK(LinesStartingWith(summary, "           profile: 1 step(s) in ").size() == 1 + peer_profiles);
  CHECK(LinesStartingWith(summary, "           profile: 8 token(s) in ").size() == 2 + peer_profiles);

  // The sampled case: `protocol run` took the --set paths, ran on the CPU and stored its figures.
  CHECK(LinesStartingWith(summary, "$ protocol run plans/quickstart.yaml").size() == 1);
  CHECK(summary.find("train_tokens_per_second") != std::string::npos);

  // The peer and its ratios, where a python3 has torch (scripts/setup.sh installs Debian's).
  INFO("peer interpreter: ", peer_python.empty() ? "none with torch" : peer_python);
  if (!peer_python.empty()) {
    int eager_peers = 0;  // the compiled one runs only where the torch has torch.compile
    for (const std::string& line : LinesStartingWith(summary, "$ " + peer_python + " bench/peer/llama_peer.py"))
      eager_peers += line.find("--only-compiled") == std::string::npos;
    CHECK(eager_peers == 4);
    CHECK(LinesStartingWith(summary, "ratio decode-7b decode: ").size() == 1);
    CHECK(LinesStartingWith(summary, "ratio mfu-1b-norecompute train: ").size() == 1);
    CHECK(LinesStartingWith(summary, "ratio mfu-1b train: ").size() == 1);
    CHECK(summary.find("(torch.profiler)") != std::string::npos);
  } else {
    CHECK(summary.find("not run (no torch in python3)") != std::string::npos);
  }
}

TEST_CASE("gpu-check: the targets are read from the benchmarks' GPU lines, the best decode of each kind") {
  TempDir dir;
  const fs::path src = PROTOCOL_SOURCE_DIR;
  const fs::path out = dir.path / "gpu-check";
  fs::create_directories(out);
  // Lines in the forms native_bench.cc prints on a GPU (its printf formats), figures made up.
  WriteFile(out / "bench-decode-7b.log",
            "llama2-7b  params 6738.4 M  decode prompt=16 new=256:   0.0105 s/token      95.3 tokens/s  1 host read(s), "
            "step: position on the host\n"
            "           38.3 % of the card's 3350 GB/s memory bandwidth (NVIDIA H100 80GB HBM3; datasheet)\n");
  WriteFile(out / "bench-decode-7b-graph.log",
            "llama2-7b  params 6738.4 M  decode prompt=16 new=256:   0.0050 s/token     200.0 tokens/s  1 host read(s), "
            "step: position on the device, CUDA graph\n"
            "           80.5 % of the card's 3350 GB/s memory bandwidth (NVIDIA H100 80GB HBM3; datasheet)\n");
  WriteFile(out / "bench-nf4-7b-gemv.log",
            "llama2-7b  params 6738.4 M  decode (4-bit, no adapters) prompt=16 new=128:   0.0040 s/token     250.0 "
            "tokens/s  1 host read(s), step: position on the host\n");
  WriteFile(out / "bench-mfu-1b.log",
            "llama-1b   params 1100.0 M  train B=4 T=2048:    0.261 s/step      31400 tokens/s   229000.0 GFLOP/s  "
            "(loss 10.4)\n"
            "           MFU 23.2 % of 989 TFLOP/s (NVIDIA H100 80GB HBM3; 6·(N−N_emb) + 12·L·H·Q·T FLOPs/token)\n");
  // --only that matches no step: nothing runs, the targets are read from the logs above.
  Output run = Shell("OUT_DIR=" + ShellQuote(out.string()) + " BUILD_DIR=" +
                         ShellQuote(fs::path(PROTOCOL_BINARY).parent_path().string()) +
                         " scripts/gpu-check.sh --rehearse --only '^none$'",
                     src);
  const std::string summary = ReadAll(out / "gpu-check.txt");
  INFO("exit ", run.exit_code, "\nsummary:\n", summary, "\nstderr:\n", run.err);
  CHECK(run.exit_code == 0);
  CHECK(summary.find("  7B bf16 decode at >= 70 % of the card's memory bandwidth: 80.5 % (200.0 tokens/s, "
                     "decode-7b-graph)\n") != std::string::npos);
  CHECK(summary.find("  7B NF4 decode faster than bf16: 250.0 tokens/s (nf4-7b-gemv) against 200.0 (decode-7b-graph): "
                     "1.25x\n") != std::string::npos);
  CHECK(summary.find("  llama-1b training at >= 40 % MFU (mfu-1b): MFU 23.2 %\n") != std::string::npos);
  CHECK(summary.find("  llama-1b training at >= 40 % MFU (mfu-1b-norecompute): not measured\n") != std::string::npos);
}
