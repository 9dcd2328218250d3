// `protocol validate` and `protocol run --dry-run` show the backends' advice:
// warnings located at the case (exit 0) and each case's memory note, with
// whether the case fits the stated GPU memory. The real binary in a
// temporary directory, or on a shipped plan.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "runner/base/text.h"

namespace fs = std::filesystem;

using protocol::testing::Output;
using protocol::testing::Protocol;
using protocol::testing::TempDir;
using protocol::testing::WriteFile;

TEST_CASE("cli: validate and run --dry-run print the backends' warnings (located) and memory notes; exit 0") {
  TempDir dir;
  WriteFile(dir.path / "p.yaml", R"yaml(protocol: 1
name: mem
models:
  m7: {preset: llama2-7b, path: /not/on/this/machine, quantization: nf4}
datasets:
  web: {format: text, path: /not/on/this/machine/web.txt}
cluster:
  nodes:
    - {name: rig0, host: rig0, gpus: 8, gpu_memory_gb: 1}
defaults: {model: m7, dataset: web, training: {batch_size: 8, seq_len: 128}}
stages:
  - name: s
    cases:
      - {id: p, backend: fsdp, workload: pretrain, nodes: 1, steps: 3}
)yaml");
  Output v = Protocol({"validate", "p.yaml"}, dir.path);
  INFO(v.err);
  INFO(v.out);
  CHECK(v.exit_code == 0);
  CHECK(v.err.find("p.yaml:14:9: warning: case p: cannot check the weights of model 'm7' here: its path "
                   "'/not/on/this/machine' is not on this machine") != std::string::npos);
  CHECK(v.err.find("a run fails") == std::string::npos);  // 4-bit training on 8 ranks runs (FSDP-QLoRA)
  CHECK(v.err.find("p.yaml:14:9: warning: case p: expected peak memory per GPU ") != std::string::npos);
  CHECK(v.err.find(" exceeds the 1 GB of node 'rig0' (cluster.nodes[].gpu_memory_gb)") != std::string::npos);
  CHECK(v.out.find("p.yaml: ok (1 stage, 1 case)\n  p: expected peak memory per GPU: ") != std::string::npos);
  CHECK(v.out.find(" of 1 GB (does not fit); FSDP FULL_SHARD over W = 8, bf16, 4-bit NF4 + LoRA rank 8; micro-batch "
                   "1 x 128 tokens, checkpoint_every 1\n      ") != std::string::npos);
  Output d = Protocol({"run", "p.yaml", "--dry-run"}, dir.path);
  INFO(d.err);
  CHECK(d.exit_code == 0);
  CHECK(d.err.find("would run p pretrain fsdp nodes=1 3 steps (repeat 1/1)") != std::string::npos);
  CHECK(d.err.find("  warning: cannot check the weights of model 'm7' here") != std::string::npos);
  CHECK(d.err.find("  expected peak memory per GPU: ") != std::string::npos);
}

TEST_CASE("cli: validate with --set gpu_memory_gb says which of llama70b.yaml's cases fit a 24 or a 12 GB GPU") {
  // A 4-bit model loads one projection at a time, quantized in chunks of 2^20
  // weights (docs/estimates.md): at 24 GB every case fits, 2.2.1.3's replicas of 2
  // GPUs (40 NF4 layers each) the tightest at 21.77 GB; at 12 GB the share
  // training cases (W = 4: 14.67 and 14.89 GB) and 2.2.1.3 do not.
  for (int gb : {24, 12}) {
    CAPTURE(gb);
    Output v = Protocol({"validate", "plans/llama70b.yaml", "--set",
                         fmt::format("cluster.nodes[rig0].gpu_memory_gb={}", gb), "--set",
                         fmt::format("cluster.nodes[rig1].gpu_memory_gb={}", gb)},
                        PROTOCOL_SOURCE_DIR);
    INFO(v.err);
    INFO(v.out);
    CHECK(v.exit_code == 0);
    std::map<std::string, std::string> verdict;  // case id -> "fits" | "does not fit"
    std::istringstream out(v.out);
    const std::string marker = ": expected peak memory per GPU: ";
    const std::string limit = fmt::format(" of {} GB (", gb);
    for (std::string line; std::getline(out, line);) {
      const size_t at = line.find(marker);
      if (line.rfind("  ", 0) != 0 || at == std::string::npos) continue;
      const std::string id = line.substr(2, at - 2);
      CHECK(line.find(limit) != std::string::npos);
      verdict[id] = line.find(limit + "fits); ") != std::string::npos ? "fits" : "does not fit";
      if (id == "2.2.1.3") CHECK(line.find(marker + "21.77 GB" + limit) != std::string::npos);
    }
    CHECK(verdict.size() == 13);
    std::set<std::string> over_limit;
    for (const auto& [id, fits] : verdict)
      if (fits != "fits") over_limit.insert(id);
    const std::set<std::string> expected =
        gb == 24 ? std::set<std::string>{}
                 : std::set<std::string>{"2.2.1.1", "2.2.1.1-1n", "2.2.1.2", "2.2.1.2-1n", "2.2.1.3"};
    CHECK(over_limit == expected);
    // Each case over is warned about, located at its line; no other.
    size_t warned = 0;
    const std::string over = fmt::format("exceeds the {} GB", gb);
    for (size_t at = v.err.find(over); at != std::string::npos; at = v.err.find(over, at + 1)) ++warned;
    CHECK(warned == expected.size());
  }
}
