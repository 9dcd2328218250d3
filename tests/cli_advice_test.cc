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

#include "test_files.h"

namespace fs = std::filesystem;

namespace {

using protocol::testing::TempDir;
using protocol::testing::WriteFile;

struct Output {
  int exit_code = -1;
  std::string out, err;
};

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `protocol ARGS...` in `cwd`, stdout, stderr and the exit code captured.
Output Protocol(const std::vector<std::string>& args, const fs::path& cwd) {
  std::string cmd = "cd " + Quote(cwd.string()) + " && " + Quote(PROTOCOL_BINARY);
  for (const auto& a : args) cmd += " " + Quote(a);
  cmd += " >" + Quote((cwd / "out.txt").string()) + " 2>" + Quote((cwd / "err.txt").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = protocol::testing::ReadTextFile((cwd / "out.txt").string());
  o.err = protocol::testing::ReadTextFile((cwd / "err.txt").string());
  return o;
}

}  // namespace

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
