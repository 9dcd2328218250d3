#ifndef PROTOCOL_TESTS_DIST_TEST_SUPPORT_H_
#define PROTOCOL_TESTS_DIST_TEST_SUPPORT_H_

// What the tests of the distributed native backends share: a harness that
// checks a case and runs it through a backend with real `protocol worker`
// ranks (the test binary's sibling PROTOCOL_BINARY), recording the case's
// step and request events; a training case run in one process and over
// ranks; and small readers of its outcome.

#include "native_test_support.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/native/dist_backend.h"
#include "backends/native/fsdp_backend.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/estimate/traffic.h"
#include "runner/base/text.h"
#include "runner/exec/backend.h"
#include "test_files.h"

namespace protocol {
namespace dist_test {

struct RecordingEvents : CaseEvents {
  std::vector<StepSample> steps;
  std::vector<RequestSample> requests;
  void OnStep(const StepSample& s) override { steps.push_back(s); }
  void OnRequest(const RequestSample& r) override { requests.push_back(r); }
  void OnStatusLine(const std::string&) override {}
};

inline native::DistOptions Options() {
  native::DistOptions o;
  o.worker_program = PROTOCOL_BINARY;
  o.kill_grace_seconds = 1;
  return o;
}

struct Harness {
  StopFlag stop;
  std::unique_ptr<ProcessRunner> processes = MakeSystemProcessRunner();  // the ranks are real processes
  RecordingEvents events;
  // REQUIRES (checked): the backend's Check finds no problem with the case.
  BackendOutcome Run(Backend& backend, const Plan& plan, const CaseSpec& spec, const std::string& out_dir,
                     const std::string& log) {
    auto problems = backend.Check(plan, spec);
    INFO(Join(problems, "\n"));
    REQUIRE(problems.empty());
    BackendContext ctx{plan, spec, 0, log, out_dir, stop, *processes, SystemClock(), events};
    return backend.Run(ctx);
  }
  // Run, requiring the case to succeed: its reason and its log (every rank's
  // lines) are printed when it does not.
  BackendOutcome RunOk(Backend& backend, const Plan& plan, const CaseSpec& spec, const std::string& out_dir,
                       const std::string& log) {
    BackendOutcome out = Run(backend, plan, spec, out_dir, log);
    INFO(out.reason);
    INFO(testing::ReadAll(log));
    REQUIRE(out.status == CaseStatus::kOk);
    return out;
  }
};

// How a training case is spread over ranks, for the tests that train it
// over W ranks against one process.
struct RankLayout {
  int ranks_per_node;
  int nodes;
  int64_t checkpoint_every;
  int64_t grad_accum;  // micro-batches per rank and step
  int64_t batch_size;  // sequences per micro-batch
  bool prefetch;
  bool hybrid;  // sharded within each node, replicated across nodes
  int world() const { return ranks_per_node * nodes; }
};

// An fsdp training case run twice by the fsdp backend: in one process, into
// root/one_TAG, taking the global batch in W·a micro-batches; and over
// layout's W ranks with a micro-batches each, into root/TAG (its case log
// root/TAG.log). The one process takes the partition into sequences the
// ranks' micro-batches make, so that both sum the same float32 partial
// gradients: merely splitting a batch of 8 differently in one process moves
// the weights by up to ~1e-4 after 3 AdamW steps at lr 1e-2 (AdamW's
// normalised step turns the rounding of near-zero gradient elements into
// differences of that size), which would hide what the tests check.
struct OneProcessAndRanks {
  Harness one, ranks;
  BackendOutcome one_outcome, ranks_outcome;
  std::filesystem::path one_dir, ranks_dir, ranks_log;

  // REQUIRES (checked): both runs end ok.
  void Run(const Plan& plan, const CaseSpec& base, const RankLayout& layout, const std::filesystem::path& root,
           const std::string& tag) {
    one_dir = root / ("one_" + tag);
    ranks_dir = root / tag;
    ranks_log = root / (tag + ".log");
    CaseSpec single = base;
    single.training.batch_size = layout.batch_size;
    single.training.grad_accum = layout.world() * layout.grad_accum;
    auto backend1 = MakeNativeFsdpBackend(Options());
    one_outcome = one.Run(*backend1, plan, single, one_dir.string(), "");
    INFO(one_outcome.reason);
    REQUIRE(one_outcome.status == CaseStatus::kOk);
    CaseSpec many = single;
    many.nodes = layout.nodes;
    many.training.grad_accum = layout.grad_accum;
    many.training.ranks_per_node = layout.ranks_per_node;
    many.training.checkpoint_every = layout.checkpoint_every;
    many.training.prefetch = layout.prefetch;
    many.training.sharding = layout.hybrid ? Sharding::kHybrid : Sharding::kFull;
    auto backend2 = MakeNativeFsdpBackend(Options());
    ranks_outcome = ranks.Run(*backend2, plan, many, ranks_dir.string(), ranks_log.string());
    INFO(ranks_outcome.reason);
    INFO(testing::ReadAll(ranks_log));
    REQUIRE(ranks_outcome.status == CaseStatus::kOk);
  }
};

// The outcome's measurement `name`; null when there is none.
inline const Measurement* Find(const BackendOutcome& out, const std::string& name) {
  for (const auto& m : out.measurements)
    if (m.name == name) return &m;
  return nullptr;
}

// The outcome's fact `key` ("" when there is none).
inline std::string FactOf(const BackendOutcome& out, const std::string& key) {
  for (const auto& [k, v] : out.facts)
    if (k == key) return v;
  return "";
}

// traffic.h's shape of a step of `nodes` × `ranks_per_node` ranks of `config`
// on this build's Gloo (float32).
inline native::FsdpTrafficShape TrafficShape(const native::ModelConfig& config, int nodes, int ranks_per_node,
                                             bool hybrid, int64_t grad_accum) {
  native::FsdpTrafficShape shape;
  shape.config = config;
  shape.nodes = nodes;
  shape.ranks_per_node = ranks_per_node;
  if (hybrid && nodes > 1) {  // hybrid sharding's mesh: one copy per node (sharding.h)
    shape.shard = ranks_per_node;
    shape.replicas = nodes;
  }
  shape.grad_accum = grad_accum;
  shape.reduce_scatter_is_all_reduce = true;  // Gloo's
  return shape;
}

using protocol::testing::ReadAll;

// Writes root/corpus.txt (40 sentences of text) and trains a 60-piece BPE
// SentencePiece tokenizer on it into root/model/tokenizer.model (spm_train).
inline void WriteCorpusAndTokenizer(const std::filesystem::path& root) {
  std::filesystem::create_directories(root / "model");
  std::ofstream corpus(root / "corpus.txt");
  for (int i = 0; i < 40; ++i)
    corpus << "Can there be life somewhere in the Solar System outside Earth? Europa has an ocean. Mars " << i << ". ";
  corpus.close();
  const std::string cmd = "spm_train --input=" + (root / "corpus.txt").string() + " --model_prefix=" +
                          (root / "model/tokenizer").string() +
                          " --vocab_size=60 --hard_vocab_limit=false --model_type=bpe --minloglevel=2 >/dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
}

// A 2-layer model of 32 dimensions (config.json only: its weights start
// random) with a 60-piece tokenizer and a small corpus in a fresh temporary
// directory, and a plan naming them "mini" and "corpus".
struct MiniModelFixture {
  std::filesystem::path root;
  native::ModelConfig config;
  MiniModelFixture() {
    root = std::filesystem::temp_directory_path() / ("protocol_dist_" + std::to_string(getpid()));
    std::filesystem::remove_all(root);
    WriteCorpusAndTokenizer(root);
    config.dim = 32;
    config.n_layers = 2;
    config.n_heads = 4;
    config.n_kv_heads = 2;
    config.hidden_dim = 64;
    config.vocab_size = 64;
    config.max_seq_len = 128;
    std::ofstream(root / "model/config.json") << config.ToHfJson();
  }
  ~MiniModelFixture() { std::filesystem::remove_all(root); }

  Plan MakePlan() const {
    Plan plan;
    plan.name = "dist";
    plan.file = (root / "plan.yaml").string();
    ModelSpec m;
    m.name = "mini";
    m.path = (root / "model").string();
    plan.models["mini"] = m;
    plan.datasets["corpus"] = DatasetSpec{"corpus", "text", (root / "corpus.txt").string(), {}, {}};
    return plan;
  }
};

// A CPU-only node of the cluster on this host.
inline NodeSpec LocalNode(const std::string& name) {
  NodeSpec node;
  node.name = name;
  node.host = "localhost";
  return node;
}

// A CPU pretrain of "mini" on "corpus" by `backend` for `steps` steps (batch 4 x 16 tokens).
inline CaseSpec MiniTraining(const std::string& backend, int64_t steps) {
  CaseSpec spec;
  spec.id = "d.1";
  spec.workload = Workload::kPretrain;
  spec.backend = backend;
  spec.model = "mini";
  spec.dataset = "corpus";
  spec.length = Length{Length::Unit::kSteps, steps};
  spec.training.batch_size = 4;
  spec.training.seq_len = 16;
  spec.training.learning_rate = 1e-2;
  spec.training.device = DeviceChoice::kCpu;
  spec.training.collective_timeout = 60;
  spec.timeout_seconds = 120;
  return spec;
}

// The number in a method text like "mean loss on 8 held-out sequences".
inline int64_t HeldOut(const std::string& method) {
  const size_t at = method.find("mean loss on ");
  REQUIRE(at != std::string::npos);
  return std::stoll(method.substr(at + 13));
}

}  // namespace dist_test
}  // namespace protocol

#endif  // PROTOCOL_TESTS_DIST_TEST_SUPPORT_H_
