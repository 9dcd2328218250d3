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
