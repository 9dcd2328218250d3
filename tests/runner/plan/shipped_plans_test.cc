// Every plan shipped in plans/ must validate, and the methodology plans must
// hold exactly the methodology's cases (docs/methodology.md) and fit the rigs'
// GPUs by the memory estimate (docs/estimates.md).

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "backends/native/case/eval_curve.h"
#include "backends/native/fsdp_backend.h"
#include "backends/native/training/training_data.h"
#include "backends/native/share_backend.h"
#include "runner/base/text.h"
#include "runner/plan/coverage.h"
#include "runner/plan/plan_parser.h"

using namespace protocol;

namespace {

std::string PlanPath(const std::string& name) { return std::string(PROTOCOL_SOURCE_DIR) + "/plans/" + name; }

Plan Load(const std::string& name) {
  PlanParseResult r = ParsePlanFile(PlanPath(name));
  std::vector<std::string> errors;
  for (const auto& e : r.errors) errors.push_back(e.ToString());
  INFO(Join(errors, "\n"));
  REQUIRE(r.ok());
  return *r.plan;
}

// What a methodology row fixes about a case.
struct Row {
  std::string id, model, workload, system;
  int nodes;
  std::string topology, network, length, variant;
};

std::string Describe(const CaseSpec& c) {
  return fmt::format("{} {} {} {} {} [{}] [{}] [{}] [{}]", c.id, c.model, WorkloadName(c.workload), c.system,
                     c.nodes, c.topology.ToString(), c.network, c.length ? c.length->ToString() : "", c.variant);
}
std::string Describe(const Row& r) {
  return fmt::format("{} {} {} {} {} [{}] [{}] [{}] [{}]", r.id, r.model, r.workload, r.system, r.nodes, r.topology,
                     r.network, r.length, r.variant);
}

const std::vector<Row> k70b = {
    {"2.1.1.1", "llama2-70b", "pretrain", "fsdp", 1, "", "", "1000 steps", ""},
    {"2.1.1.2", "llama2-70b", "pretrain", "fsdp", 2, "", "80G", "100 steps", ""},
    {"2.1.1.2-hybrid", "llama2-70b", "pretrain", "fsdp-hybrid", 2, "", "10G", "100 steps", ""},
    {"2.1.1.3", "llama2-70b", "finetune", "fsdp", 1, "", "", "500 steps", ""},
    {"2.1.1.4", "llama2-70b", "finetune", "fsdp", 2, "", "80G", "100 steps", ""},
    {"2.1.1.4-hybrid", "llama2-70b", "finetune", "fsdp-hybrid", 2, "", "10G", "100 steps", ""},
    {"2.1.1.5", "llama2-70b", "inference", "fsdp", 1, "", "", "", ""},
    {"2.2.1.1", "llama2-70b", "pretrain", "share", 2, "rig0:2x4 rig1:2x4", "10G", "1000 steps", ""},
    {"2.2.1.1-1n", "llama2-70b", "pretrain", "share", 1, "rig0:2x4", "", "1000 steps", ""},
    {"2.2.1.2", "llama2-70b", "finetune", "share", 2, "rig0:2x4 rig1:2x4", "10G", "500 steps", ""},
    {"2.2.1.2-1n", "llama2-70b", "finetune", "share", 1, "rig0:2x4", "", "500 steps", ""},
    {"2.2.1.3", "llama2-70b", "inference", "share", 2, "rig0:4x2 rig1:4x2", "10G", "", "multi-inference"},
    {"2.2.1.3-1n", "llama2-70b", "inference", "share", 1, "rig0:1x8", "", "", "single-stream"},
};

const std::vector<Row> k7b = {
    {"2.1.2.1", "llama2-7b", "pretrain", "fsdp", 1, "", "", "1000 steps", ""},
    {"2.1.2.2", "llama2-7b", "pretrain", "fsdp", 2, "", "80G", "100 steps", ""},
    {"2.1.2.2-hybrid", "llama2-7b", "pretrain", "fsdp-hybrid", 2, "", "10G", "100 steps", ""},
    {"2.1.2.3", "llama2-7b", "finetune", "fsdp", 1, "", "", "1 epoch", ""},
    {"2.1.2.3-2n", "llama2-7b", "finetune", "fsdp", 2, "", "80G", "1 epoch", ""},
    {"2.1.2.3-2n-hybrid", "llama2-7b", "finetune", "fsdp-hybrid", 2, "", "10G", "1 epoch", ""},
    {"2.1.2.4", "llama2-7b", "inference", "fsdp", 1, "", "", "", ""},
    {"2.2.2.1", "llama2-7b", "pretrain", "share", 2, "rig0:4x2 rig1:4x2", "10G", "2000 steps", ""},
    {"2.2.2.1-1n", "llama2-7b", "pretrain", "share", 1, "rig0:4x2", "", "2000 steps", ""},
    {"2.2.2.2", "llama2-7b", "finetune", "share", 2, "rig0:4x2 rig1:4x2", "10G", "1 epoch", ""},
    {"2.2.2.2-1n", "llama2-7b", "finetune", "share", 1, "rig0:4x2", "", "1 epoch", ""},
    {"2.2.2.3", "llama2-7b", "inference", "share", 2, "rig0:5x2 rig1:5x2", "10G", "", "multi-inference"},
    {"2.2.2.3-1n", "llama2-7b", "inference", "share", 1, "rig0:1x8", "", "", "single-stream"},
};

// The system a case of the native plans reports as: its backend, or
// fsdp-hybrid for an fsdp case with hybrid sharding.
std::string SystemOfBackend(const CaseSpec& c) {
  return c.backend == "fsdp" && c.training.sharding == Sharding::kHybrid ? kHybridFsdpSystem : c.backend;
}

// Checks the plan's cases against the rows, in order, and what all share.
void CheckRows(const Plan& plan, const std::vector<Row>& rows) {
  std::vector<std::string> got, want;
  for (const auto* c : plan.Cases()) got.push_back(Describe(*c));
  for (const auto& r : rows) want.push_back(Describe(r));
  CHECK(Join(got, "\n") == Join(want, "\n"));
  for (const auto* c : plan.Cases()) {
    CAPTURE(c->id);
    CHECK(c->stage == (StartsWith(c->id, "2.1.") ? "stage1" : "stage2"));
    if (c->workload == Workload::kInference) {
      CHECK(c->inference.prompt == "Can there be life somewhere in the Solar System outside Earth?");
      REQUIRE(c->inference.max_new_tokens.size() == 31);
      CHECK(c->inference.max_new_tokens.front() == 100);
      CHECK(c->inference.max_new_tokens.back() == 400);
      CHECK(c->inference.TotalTokens() == 7750);
      CHECK(c->inference.ignore_eos);
      CHECK(c->dataset == "");
    } else {
      CHECK(c->dataset == (c->workload == Workload::kPretrain ? "fineweb-edu" : "dolly"));
    }
  }
}

}  // namespace

TEST_CASE("shipped plans: every plans/*.yaml validates and its resolved text parses back") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(PROTOCOL_SOURCE_DIR) + "/plans"))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 3);
  for (const auto& name : files) {
    CAPTURE(name);
    Plan plan = Load(name);
    CHECK_FALSE(plan.Cases().empty());
    PlanParseResult again = ParsePlanString(plan.resolved_text, "resolved-" + name);
    CHECK(again.ok());
    if (again.ok()) CHECK(again.plan->resolved_text == plan.resolved_text);
  }
}

TEST_CASE("shipped plans: llama70b.yaml holds the methodology's 70B cases") {
  Plan plan = Load("llama70b.yaml");
  CheckRows(plan, k70b);
  CHECK(plan.models.at("llama2-70b").quantization == Quantization::kNf4);
  for (const auto* c : plan.Cases()) CHECK(c->system == SystemOfBackend(*c));
}

TEST_CASE("shipped plans: llama7b.yaml holds the methodology's 7B cases") {
  Plan plan = Load("llama7b.yaml");
  CheckRows(plan, k7b);
  CHECK(plan.models.at("llama2-7b").quantization == Quantization::kNone);
  for (const auto* c : plan.Cases()) CHECK(c->system == SystemOfBackend(*c));
}

namespace {

// The methodology's training tables as two 8-GPU rigs can fill them: per row,
// the cells baseline 1 node | share 1 node | baseline 2 nodes (80G) | the
// further baseline, hybrid sharding, 2 nodes (10G) | share 2 nodes ("m"
// measured, "*" computed, "X" not provided — the methodology's X, the share
// protocol on two nodes at few steps). The other-cloud column needs another
// cloud.
struct ExpectedRow {
  std::string label;
  std::vector<std::string> cells;
};

std::string FillText(const CoverageCell& cell) {
  if (!cell.fill) return "\u2013 (" + cell.why_empty + ")";
  switch (*cell.fill) {
    case CellFill::kMeasured: return "m";
    case CellFill::kPrefix:
    case CellFill::kExtrapolated: return "*";
    case CellFill::kNotProvided: return "X";
  }
  return "?";
}

void CheckCoverage(const Plan& plan, const std::vector<ExpectedRow>& rows) {
  std::vector<CoverageTable> tables = TrainingCoverage(plan, "fsdp", "share", {"fsdp-hybrid"});
  REQUIRE(tables.size() == 1);
  std::vector<std::string> columns;
  for (const TableColumn& c : tables[0].columns) columns.push_back(c.label);
  CHECK(columns == std::vector<std::string>{"fsdp 1 node", "share 1 node", "fsdp 2 nodes (80G)",
                                            "fsdp-hybrid 2 nodes (10G)", "share 2 nodes"});
  std::vector<std::string> got, want;
  for (const CoverageRow& r : tables[0].rows) {
    std::vector<std::string> cells;
    for (const CoverageCell& c : r.cells) cells.push_back(FillText(c));
    got.push_back(r.Label() + ": " + Join(cells, " | "));
  }
  for (const ExpectedRow& r : rows) want.push_back(r.label + ": " + Join(r.cells, " | "));
  CHECK(Join(got, "\n") == Join(want, "\n"));
}

}  // namespace

TEST_CASE("shipped plans: one run of llama70b.yaml fills every cell of the methodology's 70B training table") {
  CheckCoverage(Load("llama70b.yaml"), {{"pretrain 100 steps", {"*", "*", "m", "m", "X"}},
                                        {"pretrain 1000 steps", {"m", "m", "*", "*", "m"}},
                                        {"finetune 100 steps", {"*", "*", "m", "m", "X"}},
                                        {"finetune 500 steps", {"m", "m", "*", "*", "m"}}});
}

TEST_CASE("shipped plans: one run of llama7b.yaml fills every cell of the methodology's 7B training table") {
  CheckCoverage(Load("llama7b.yaml"), {{"pretrain 100 steps", {"*", "*", "m", "m", "X"}},
                                       {"pretrain 1000 steps", {"m", "*", "*", "*", "*"}},
                                       {"pretrain 2000 steps", {"*", "m", "*", "*", "m"}},
                                       {"finetune 1 epoch", {"m", "m", "m", "m", "m"}}});
}

TEST_CASE("shipped plans: methodology-commands.yaml runs the same cases through the command backend") {
  Plan plan = Load("methodology-commands.yaml");
  std::vector<Row> rows;
  // The methodology's launch commands have no hybrid-sharded baseline, nor a 2-node 7B finetune.
  for (const auto& r : k70b)
    if (StartsWith(r.id, "2.1.") && !EndsWith(r.id, "-hybrid")) rows.push_back(r);
  for (const auto& r : k7b)
    if (StartsWith(r.id, "2.1.") && r.id != "2.1.2.3-2n" && !EndsWith(r.id, "-hybrid")) rows.push_back(r);
  for (const auto& r : k70b)
    if (StartsWith(r.id, "2.2.")) rows.push_back(r);
  for (const auto& r : k7b)
    if (StartsWith(r.id, "2.2.")) rows.push_back(r);
  CheckRows(plan, rows);
  for (const auto* c : plan.Cases()) {
    CAPTURE(c->id);
    CHECK(c->backend == "command");
    CHECK_FALSE(c->command.shell);
    REQUIRE(c->command.argv.size() > 20);
    CHECK(c->command.argv[0] == "docker");
    std::string argv = Join(c->command.argv, " ");
    CHECK(argv.find("{output_dir}") != std::string::npos);
    if (c->workload == Workload::kInference) {
      CHECK(argv.find("--max_new_tokens {max_new_tokens}") != std::string::npos);
      CHECK(argv.find("--prompt {prompt}") != std::string::npos);
      REQUIRE(c->command.metrics.size() == 4);
      CHECK(c->command.metrics[0].name == "total_generation_seconds");
      CHECK(c->command.log_format == "");
    } else {
      CHECK(argv.find(c->length->unit == Length::Unit::kSteps ? "--max_steps {steps}" : "--num_train_epochs {epochs}") !=
            std::string::npos);
      if (c->system == "fsdp") {
        // The baseline's Trainer output is read by its log format, not by hand-written regexes.
        CHECK(c->command.log_format == "hf-trainer");
        CHECK(c->command.metrics.empty());
        CHECK(c->command.step_regex == "");
      } else {
        REQUIRE(c->command.metrics.size() == 2);
        CHECK(c->command.step_regex != "");
        CHECK(c->command.log_format == "");
      }
    }
    if (c->system == "fsdp" && c->workload != Workload::kInference)
      CHECK(argv.find("accelerate launch --config_file") != std::string::npos);
    if (c->system == "share") CHECK(argv.find("share-launch --topology {topology}") != std::string::npos);
  }
}

TEST_CASE("shipped plans: every methodology case fits 80 GB GPUs by the memory estimate") {
  for (const char* name : {"llama70b.yaml", "llama7b.yaml"}) {
    CAPTURE(name);
    Plan plan = Load(name);
    REQUIRE(plan.cluster.nodes.size() == 2);
    for (const NodeSpec& n : plan.cluster.nodes) {
      CHECK(n.gpus == 8);
      CHECK(n.gpu_memory_gb == 80);
      CHECK(n.gpu_model == "H100 SXM");  // the time estimate's device row
    }
    for (const CaseSpec* c : plan.Cases()) {
      CAPTURE(c->id);
      std::unique_ptr<Backend> backend = c->backend == "fsdp" ? MakeNativeFsdpBackend() : MakeNativeShareBackend();
      CHECK(backend->Check(plan, *c).empty());
      CaseAdvice advice = backend->Advise(plan, *c);
      // The memory, for a training case over two nodes what crosses between them, and for
      // every case over two nodes its network: the label's rate and the ranks' environment.
      const bool two_node_training = c->nodes > 1 && c->workload != Workload::kInference;
      REQUIRE(advice.notes.size() == 1u + (two_node_training ? 1u : 0u) + (c->nodes > 1 ? 1u : 0u));
      CHECK(StartsWith(advice.notes[0], "expected peak memory per GPU: "));
      CHECK(advice.notes[0].find(" of 80 GB (fits); ") != std::string::npos);
      if (two_node_training) CHECK(StartsWith(advice.notes[1], "between nodes"));
      if (c->nodes > 1) {
        const std::string& network = advice.notes.back();
        CHECK(StartsWith(network, "network '" + c->network + "': "));
        CHECK(network.find(c->network == "80G" ? "80gbit nominal" : "10gbit nominal") != std::string::npos);
        CHECK(network.find(c->network == "80G" ? "NCCL_IB_HCA=mlx5_0" : "NCCL_IB_DISABLE=1") != std::string::npos);
      }
      for (const std::string& w : advice.warnings) CHECK(w.find("expected peak memory") == std::string::npos);
      // Each system on its own network is the methodology's comparison, and the plans say so.
      for (const std::string& w : advice.warnings) CHECK(w.find("compares the networks") == std::string::npos);
    }
  }
}

TEST_CASE("shipped plans: every two-node fsdp training row has a hybrid-sharded twin doing the same work") {
  // plans/quickstart.yaml stays cheap: its pretrain only.
  for (const char* name : {"llama70b.yaml", "llama7b.yaml", "rehearsal-methodology.yaml", "rehearsal.yaml",
                           "quickstart.yaml"}) {
    CAPTURE(name);
    Plan plan = Load(name);
    int twins = 0;
    for (const CaseSpec* c : plan.Cases()) {
      if (c->system != "fsdp" || c->nodes != 2 || c->workload == Workload::kInference) continue;
      CAPTURE(c->id);
      const CaseSpec* h = plan.FindCase(c->id + "-hybrid");
      if (std::string(name) == "quickstart.yaml" && c->workload == Workload::kFinetune) {
        CHECK(h == nullptr);
        continue;
      }
      REQUIRE(h != nullptr);
      ++twins;
      CHECK(h->system == kHybridFsdpSystem);
      CHECK(h->backend == "fsdp");
      CHECK(h->training.sharding == Sharding::kHybrid);
      CHECK(c->training.sharding == Sharding::kFull);
      CHECK(h->title.find("HYBRID_SHARD") != std::string::npos);
      CHECK(h->stage == c->stage);
      // The same work (the report's "Ratios between the same work") and the same lengths.
      CHECK(h->model == c->model);
      CHECK(WorkloadName(h->workload) == std::string(WorkloadName(c->workload)));
      CHECK(h->dataset == c->dataset);
      CHECK(h->nodes == c->nodes);
      REQUIRE(h->length.has_value());
      CHECK(*h->length == *c->length);
      CHECK(h->report_as == c->report_as);
      CHECK(h->not_provided == c->not_provided);
      CHECK(h->training.batch_size == c->training.batch_size);
      CHECK(h->training.seq_len == c->training.seq_len);
      CHECK(h->training.grad_accum == c->training.grad_accum);
      CHECK(h->training.ranks_per_node == c->training.ranks_per_node);
      // On the rigs: the share protocol's link (the cluster's 10G), not the baseline's 80G fabric.
      if (c->network == "80G") CHECK(h->network == "10G");
      else CHECK(h->network == c->network);
    }
    CHECK(twins > 0);
  }
}

TEST_CASE("shipped plans: llama7b.yaml with DiLoCo's outer settings fits with the outer state on the host") {
  // DiLoCo's own settings: outer lr 0.7, Nesterov momentum 0.9, a merge every 500 steps.
  PlanParseOptions options;
  options.overrides = {"defaults.training.outer_momentum=0.9", "defaults.training.outer_lr=0.7",
                       "defaults.training.sync_every=500"};
  for (const char* state : {"host", "device"}) {
    CAPTURE(state);
    PlanParseOptions with = options;
    with.overrides.push_back(fmt::format("defaults.training.outer_state={}", state));
    PlanParseResult r = ParsePlanFile(PlanPath("llama7b.yaml"), with);
    REQUIRE(r.ok());
    const CaseSpec* c = nullptr;
    for (const CaseSpec* each : r.plan->Cases())
      if (each->id == "2.2.2.1") c = each;
    REQUIRE(c);
    CaseAdvice advice = MakeNativeShareBackend()->Advise(*r.plan, *c);
    REQUIRE(!advice.notes.empty());
    const std::string& memory = advice.notes[0];
    CAPTURE(memory);
    bool over = false, hint = false;
    for (const std::string& w : advice.warnings) {
      over = over || w.find("expected peak memory") != std::string::npos;
      hint = hint || w.find("keep the merges' outer state on the host (training.outer_state: host)") != std::string::npos;
    }
    if (std::string(state) == "host") {
      // θ_global and the momentum, float32 copies of the rank's slice, stay off the GPU.
      CHECK_FALSE(over);
      CHECK(memory.find("on the host: outer state") != std::string::npos);
      CHECK(memory.find("outer θ_global") == std::string::npos);
    } else {
      // On the device they are two float32 copies of the slice more: over 80 GB, named, and the remedy said.
      CHECK(over);
      CHECK(hint);
      CHECK(memory.find("outer θ_global (float32)") != std::string::npos);
      CHECK(memory.find("outer momentum (float32)") != std::string::npos);
    }
  }
}

TEST_CASE("shipped plans: the quick start has reference bands, so that `run --check` checks something") {
  Plan plan = Load("quickstart.yaml");
  std::vector<std::string> banded;
  for (const StageSpec& stage : plan.stages)
    for (const CaseSpec& c : stage.cases)
      for (const ReferenceBand& band : c.references) banded.push_back(c.id + " " + band.metric);
  CHECK((banded == std::vector<std::string>{"qn.1.1 eval_loss", "qn.1.3 eval_loss", "qn.2.1 eval_loss",
                                            "qn.2.3 eval_loss"}));
}

namespace {

// The evaluations of a training case's held-out curve (eval_curve.h), for a
// length in steps: the share protocol's groups at their merges.
int Evaluations(const CaseSpec& c) {
  int groups = 0;
  for (const TopologyPart& p : c.topology.parts) groups += p.groups;
  const std::optional<int64_t> merges =
      c.backend == "share" && groups > 1 ? std::optional<int64_t>(c.training.sync_every) : std::nullopt;
  int n = 0;
  for (int64_t done = 0; done <= c.length->count; ++done)
    if (native::EvalDue(done, c.length->count, c.training.eval_every, merges)) ++n;
  return n;
}

}  // namespace

TEST_CASE("shipped plans: the CPU plans keep a held-out curve of at least 5 points per training case") {
  for (const char* name : {"quickstart.yaml", "rehearsal.yaml", "rehearsal-methodology.yaml"}) {
    CAPTURE(name);
    Plan plan = Load(name);
    for (const CaseSpec* c : plan.Cases()) {
      if (c->workload == Workload::kInference) continue;
      CAPTURE(c->id);
      CHECK(c->training.eval_every > 0);
      // A 4-bit share case merges once, at the end, as on the rigs (plans/llama70b.yaml): its curve
      // is of the merged model, at step 0 and the last step.
      const bool merged_at_end_only = c->backend == "share" && c->training.sync_every == 0;
      if (c->length->unit == Length::Unit::kSteps) CHECK(Evaluations(*c) >= (merged_at_end_only ? 2 : 5));
      else CHECK(c->training.eval_every == 1);  // an epoch's steps are known when it runs: every one
    }
  }
}

TEST_CASE("shipped plans: the rigs' plans spend at most 5 % of a case's training time evaluating") {
  // An evaluation is a forward pass over the held-out split, kEvalFraction of
  // the sequences read = 5/95 of the training sequences, at 1/k of a training
  // step's work per sequence: k = 4 in full precision (forward, the forward
  // recomputed under checkpointing, backward ~2 forwards), 3 on a frozen
  // 4-bit base (its backward computes activation gradients only).
  const double per_sequence = native::kEvalFraction / (1 - native::kEvalFraction);
  for (const auto& [name, k] : {std::pair{"llama7b.yaml", 4.0}, std::pair{"llama70b.yaml", 3.0}}) {
    CAPTURE(name);
    Plan plan = Load(name);
    int with_curve = 0;
    for (const CaseSpec* c : plan.Cases()) {
      if (c->workload == Workload::kInference) continue;
      CAPTURE(c->id);
      REQUIRE(c->training.checkpoint_every == 1);
      CHECK(c->training.eval_every > 0);
      if (c->length->unit != Length::Unit::kSteps) continue;  // an epoch: at most 3 points below 3000 steps
      ++with_curve;
      CHECK(Evaluations(*c) * per_sequence / k <= 0.05);
    }
    CHECK(with_curve > 0);
  }
}

TEST_CASE("shipped plans: the rehearsal reads its 4-bit model from r.base, from any working directory") {
  // model tiny4 is `from_case: r.base`: validated from another directory than the
  // repository's, every case of it says r.base writes it, and none warns.
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(std::filesystem::temp_directory_path());
  Plan plan = Load("rehearsal-methodology.yaml");
  int named = 0;
  for (const CaseSpec* c : plan.Cases()) {
    CAPTURE(c->id);
    std::unique_ptr<Backend> backend = c->backend == "fsdp" ? MakeNativeFsdpBackend() : MakeNativeShareBackend();
    CHECK(backend->Check(plan, *c).empty());
    const CaseAdvice advice = backend->Advise(plan, *c);
    for (const std::string& w : advice.warnings) CHECK(w.find("cannot check") == std::string::npos);
    for (const std::string& n : advice.notes) named += n.find("written by case 'r.base'") != std::string::npos;
  }
  std::filesystem::current_path(before);
  CHECK(named == 13);  // every case of model tiny4
}

TEST_CASE("shipped plans: the quick start and the rehearsals validate without a warning") {
  // The warnings validate gives about a plan's own content (a model or dataset it
  // cannot check, a method that is not exact, a setting without effect, a row whose
  // two sides differ): none in the plans a new user runs first. The quick start's
  // finetune and inference cases read the model its one-node pretrain saves.
  for (const char* name : {"quickstart.yaml", "rehearsal.yaml", "rehearsal-methodology.yaml",
                           "rehearsal-networks.yaml"}) {
    CAPTURE(name);
    Plan plan = Load(name);
    for (const CaseSpec* c : plan.Cases()) {
      CAPTURE(c->id);
      std::unique_ptr<Backend> backend = c->backend == "fsdp" ? MakeNativeFsdpBackend() : MakeNativeShareBackend();
      CHECK(backend->Check(plan, *c).empty());
      for (const std::string& w : backend->Advise(plan, *c).warnings) CHECK(w == "");
    }
  }
  Plan quick = Load("quickstart.yaml");
  for (const CaseSpec* c : quick.Cases()) {
    if (c->workload == Workload::kPretrain) continue;
    CAPTURE(c->id);
    CHECK(c->model == "tiny-trained");
    CHECK(quick.models.at(c->model).from_case == "qn.1.1");
    CHECK_FALSE(quick.models.at(c->model).init_random);
  }
}
