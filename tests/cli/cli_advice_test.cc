// `protocol validate` and `protocol run --dry-run` show the backends' advice:
// warnings located at the case (exit 0) and each case's memory note. The real
// binary in a temporary directory.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.h"

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
  CHECK(v.out.find(" of 1 GB; FSDP FULL_SHARD over W = 8, bf16, 4-bit NF4 + LoRA rank 8; micro-batch 1 x 128 "
                   "tokens, checkpoint_every 1\n      ") != std::string::npos);
  Output d = Protocol({"run", "p.yaml", "--dry-run"}, dir.path);
  INFO(d.err);
  CHECK(d.exit_code == 0);
  CHECK(d.err.find("would run p pretrain fsdp nodes=1 3 steps (repeat 1/1)") != std::string::npos);
  CHECK(d.err.find("  warning: cannot check the weights of model 'm7' here") != std::string::npos);
  CHECK(d.err.find("  expected peak memory per GPU: ") != std::string::npos);
}
