// The native backends' plan rules that Check, Advise and Run share
// (native_check.h): errors fail validate, refusals are validate warnings and
// the very text Run stores, the memory note and its warning come from the
// plan's cluster.
#include "native_test_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/native/fsdp_backend.h"
#include "backends/native/model/model_resolve.h"
#include "backends/native/check/native_check.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/share_backend.h"
#include "fake_process_runner.h"
#include "runner/base/text.h"
#include "runner/plan/plan_parser.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using protocol::testing::FakeProcessRunner;

struct NullEvents : CaseEvents {
  void OnStep(const StepSample&) override {}
  void OnRequest(const RequestSample&) override {}
  void OnStatusLine(const std::string&) override {}
};
struct StillClock : Clock {
  double NowSeconds() override { return 0; }
  std::string NowIso8601() override { return "2026-01-01T00:00:00Z"; }
};

// A plan on two 8-GPU nodes of `memory_gb` (0: not stated) with `model` and `cases`.
Plan ParsePlan(const std::string& model, const std::string& cases, const std::string& memory_gb = "80") {
  const std::string mem = memory_gb == "0" ? "" : ", gpu_memory_gb: " + memory_gb;
  const std::string text =
      "protocol: 1\nname: t\n"
      "models:\n  m: " + model + "\n"
      "datasets:\n  web: {format: text, path: /nowhere/web.txt}\n"
      "cluster:\n  nodes:\n"
      "    - {name: rig0, host: rig0, gpus: 8" + mem + "}\n"
      "    - {name: rig1, host: rig1, gpus: 8" + mem + "}\n"
      "defaults: {model: m, dataset: web, training: {batch_size: 16, seq_len: 128}}\n"
      "stages:\n  - name: s\n    cases:\n" + cases;
  PlanParseResult r = ParsePlanString(text, "<string>");
  INFO(text);
  std::string errors;
  for (const auto& e : r.errors) errors += e.ToString() + "\n";
  INFO(errors);
  REQUIRE(r.ok());
  return *r.plan;
}

// The quick start's tokenizer: a model directory needs one (model_resolve.h).
const fs::path kTokenizer = fs::path(PROTOCOL_SOURCE_DIR) / "data/quickstart/tokenizer.model";
const std::string kQuickstartModel = (fs::path(PROTOCOL_SOURCE_DIR) / "data/quickstart").string();

// Makes `dir` a model directory with a tokenizer (and nothing else).
void MakeModelDir(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(kTokenizer, dir / "tokenizer.model", fs::copy_options::overwrite_existing);
}

BackendOutcome RunCase(Backend& backend, const Plan& plan, const CaseSpec& spec) {
  StopFlag stop;
  FakeProcessRunner processes;  // no process is started
  StillClock clock;
  NullEvents events;
  BackendContext ctx{plan, spec, 0, "", "", stop, processes, clock, events};
  return backend.Run(ctx);
}

}  // namespace

TEST_CASE("native check: a training topology needs a GPU per rank; inference replicas may share them") {
  Plan plan = ParsePlan("{preset: tiny, init: random, path: " + kQuickstartModel + "}",
                        "      - {id: t, backend: share, workload: pretrain, steps: 5, topology: 'rig0:2x8'}\n"
                        "      - {id: c, backend: share, workload: pretrain, steps: 5, topology: 'rig0:2x8',\n"
                        "         training: {device: cpu}}\n"
                        "      - {id: i, backend: share, workload: inference, topology: 'rig0:5x2',\n"
                        "         inference: {prompt: hi, max_new_tokens: [4]}}\n");
  auto share = MakeNativeShareBackend();
  CHECK(share->Check(plan, *plan.FindCase("t")) ==
        std::vector<std::string>{"topology part 'rig0:2x8' needs 16 GPUs but node 'rig0' has 8 (a training rank runs "
                                 "on one GPU of its own; inference may share them)"});
  CHECK(share->Check(plan, *plan.FindCase("c")).empty());  // CPU ranks use no GPU
  CHECK(share->Check(plan, *plan.FindCase("i")).empty());
  CaseAdvice advice = share->Advise(plan, *plan.FindCase("i"));
  REQUIRE(advice.notes.size() == 1);
  CHECK(advice.notes[0].find("up to 2 replicas share a GPU") != std::string::npos);
  CHECK(advice.warnings.empty());
}

TEST_CASE("native check: a decode step off the host's position needs one GPU per replica; a graph needs a GPU") {
  Plan plan = ParsePlan(
      "{preset: tiny, init: random, path: " + kQuickstartModel + "}",
      "      - {id: all, backend: fsdp, workload: inference, inference: {prompt: hi, max_new_tokens: [4], decode_step: device}}\n"
      "      - {id: one, backend: fsdp, workload: inference, training: {ranks_per_node: 1},\n"
      "         inference: {prompt: hi, max_new_tokens: [4], decode_step: graph}}\n"
      "      - {id: cpu, backend: fsdp, workload: inference, training: {device: cpu},\n"
      "         inference: {prompt: hi, max_new_tokens: [4], decode_step: graph}}\n"
      "      - {id: cpu-device, backend: fsdp, workload: inference, training: {device: cpu},\n"
      "         inference: {prompt: hi, max_new_tokens: [4], decode_step: device}}\n"
      "      - {id: pairs, backend: share, workload: inference, topology: 'rig0:2x4',\n"
      "         inference: {prompt: hi, max_new_tokens: [4], decode_step: graph}}\n"
      "      - {id: singles, backend: share, workload: inference, topology: 'rig0:8x1',\n"
      "         inference: {prompt: hi, max_new_tokens: [4], decode_step: graph}}\n");
  auto fsdp = MakeNativeFsdpBackend();
  auto share = MakeNativeShareBackend();
  CHECK(fsdp->Check(plan, *plan.FindCase("all")) ==
        std::vector<std::string>{"inference.decode_step: device decodes with the model on one GPU, and this case "
                                 "places each replica over 8 GPUs (one per rank of a replica on its node); use "
                                 "decode_step: host, or one rank per replica (training.ranks_per_node: 1)"});
  CHECK(fsdp->Check(plan, *plan.FindCase("one")).empty());
  CHECK(fsdp->Check(plan, *plan.FindCase("cpu")) ==
        std::vector<std::string>{"inference.decode_step: graph replays a CUDA graph, and this case runs on CPUs "
                                 "(training.device: cpu); use decode_step: device (the same step, not recorded) or "
                                 "host"});
  CHECK(fsdp->Check(plan, *plan.FindCase("cpu-device")).empty());
  CHECK(share->Check(plan, *plan.FindCase("pairs")) ==
        std::vector<std::string>{"inference.decode_step: graph decodes with the model on one GPU, and this case "
                                 "places each replica over 4 GPUs (one per rank of a replica on its node); use "
                                 "decode_step: host, or one rank per replica (a topology of Gx1 parts)"});
  CHECK(share->Check(plan, *plan.FindCase("singles")).empty());
  // The memory note counts the decode buckets the requests keep.
  CaseAdvice advice = fsdp->Advise(plan, *plan.FindCase("one"));
  REQUIRE_FALSE(advice.notes.empty());
  CHECK(advice.notes[0].find("KV cache for 256 positions (the decode buckets of decode_step graph, kept between "
                             "requests)") != std::string::npos);
}

TEST_CASE("native check: 4-bit pretrain weights: not on this machine, no weights, present") {
  const fs::path root = fs::temp_directory_path() / ("protocol_native_check_" + std::to_string(getpid()));
  fs::remove_all(root);
  MakeModelDir(root / "empty");
  MakeModelDir(root / "full");
  std::ofstream(root / "full" / "model.safetensors") << "x";  // presence is what is checked here
  const std::string cases =
      "      - {id: p, backend: fsdp, workload: pretrain, steps: 5, nodes: 1, training: {ranks_per_node: 1}}\n";
  {
    Plan plan = ParsePlan("{preset: tiny, quantization: nf4, path: " + (root / "absent").string() + "}", cases);
    auto fsdp = MakeNativeFsdpBackend();
    const CaseSpec& spec = *plan.FindCase("p");
    CHECK(fsdp->Check(plan, spec).empty());
    CaseAdvice advice = fsdp->Advise(plan, spec);
    const std::string message = "cannot check the weights of model 'm' here: its path '" + (root / "absent").string() +
                                "' is not on this machine; a 4-bit pretrain (QLoRA continued pretraining of the "
                                "model's own weights) needs model.safetensors or model.safetensors.index.json there";
    CHECK(advice.warnings == std::vector<std::string>{message});
    BackendOutcome out = RunCase(*fsdp, plan, spec);
    CHECK(out.status == CaseStatus::kFailed);
    CHECK(out.reason == message + "; nothing was run");
  }
  {
    Plan plan = ParsePlan("{preset: tiny, quantization: nf4, path: " + (root / "empty").string() + "}", cases);
    auto fsdp = MakeNativeFsdpBackend();
    const CaseSpec& spec = *plan.FindCase("p");
    const std::string message =
        "a 4-bit pretrain is QLoRA continued pretraining of the model's own weights, but model 'm' has no "
        "model.safetensors or model.safetensors.index.json in its path '" + (root / "empty").string() +
        "' (or say `init: random` on the model to measure on seeded random weights)";
    CHECK(fsdp->Advise(plan, spec).warnings == std::vector<std::string>{"a run fails: " + message});
    CHECK(RunCase(*fsdp, plan, spec).reason == message + "; nothing was run");
  }
  {
    Plan plan = ParsePlan("{preset: tiny, quantization: nf4, path: " + (root / "full").string() + "}", cases);
    CHECK(native::native_run_refusal(plan, *plan.FindCase("p"), native::NativeRole::kFsdp).empty());
    CHECK(MakeNativeFsdpBackend()->Advise(plan, *plan.FindCase("p")).warnings.empty());
  }
  fs::remove_all(root);
}

TEST_CASE("native check: weights are explicit: a finetune or inference without them is an error unless init: random") {
  const fs::path root = fs::temp_directory_path() / ("protocol_native_weights_" + std::to_string(getpid()));
  fs::remove_all(root);
  MakeModelDir(root / "empty");
  MakeModelDir(root / "full");
  std::ofstream(root / "full" / "model.safetensors") << "x";
  const std::string cases =
      "      - {id: p, backend: fsdp, workload: pretrain, steps: 5, nodes: 1, training: {ranks_per_node: 1}}\n"
      "      - {id: f, backend: fsdp, workload: finetune, steps: 5, nodes: 1, training: {ranks_per_node: 1}}\n"
      "      - {id: i, backend: share, workload: inference, topology: 'rig0:1x1',\n"
      "         inference: {prompt: hi, max_new_tokens: [4]}}\n";
  const std::string hint = " (or say `init: random` on the model to measure on seeded random weights)";
  auto errors = [](const Plan& plan, const char* id) {
    const CaseSpec& spec = *plan.FindCase(id);
    return (spec.backend == "fsdp" ? MakeNativeFsdpBackend() : MakeNativeShareBackend())->Check(plan, spec);
  };
  {  // A preset without a path: a full-precision pretrain trains from scratch, but has no tokenizer; the others
     // have nothing to measure either (one error each: the missing path is said once).
    Plan plan = ParsePlan("{preset: tiny}", cases);
    CHECK(errors(plan, "p") == std::vector<std::string>{"model 'm' has no path: the native backends need "
                                                        "<path>/tokenizer.model to turn text into tokens"});
    CHECK(errors(plan, "f") ==
          std::vector<std::string>{"a finetune measures the model's own weights, but model 'm' has no path" + hint});
    CHECK(errors(plan, "i") ==
          std::vector<std::string>{"inference measures the model's own weights, but model 'm' has no path" + hint});
    CHECK(native::native_weights_source(Workload::kPretrain, false, false, "") ==
          native::WeightsSource::kRandomFromScratch);
  }
  {  // A path without a tokenizer: what the run refuses (ResolveModel) is validate's error too.
    fs::create_directories(root / "bare");
    Plan plan = ParsePlan("{preset: tiny, path: " + (root / "bare").string() + "}", cases);
    CHECK(errors(plan, "p") ==
          std::vector<std::string>{(root / "bare" / "tokenizer.model").string() +
                                   ": no tokenizer model here (a SentencePiece tokenizer.model is needed to turn text "
                                   "into tokens; put one in the model's directory)"});
    Plan away = ParsePlan("{preset: tiny, path: " + (root / "absent").string() + "}", cases);
    CHECK(errors(away, "p").empty());
    CHECK(MakeNativeFsdpBackend()->Advise(away, *away.FindCase("p")).warnings ==
          std::vector<std::string>{"cannot check the tokenizer of model 'm' here: its path '" +
                                   (root / "absent").string() +
                                   "' is not on this machine; the native backends need tokenizer.model there"});
  }
  {  // A path without weights: an error naming the files; a path not on this machine: a warning.
    Plan plan = ParsePlan("{preset: tiny, path: " + (root / "empty").string() + "}", cases);
    CHECK(errors(plan, "f") ==
          std::vector<std::string>{"a finetune measures the model's own weights, but model 'm' has no model.safetensors "
                                   "or model.safetensors.index.json in its path '" + (root / "empty").string() + "'" + hint});
    Plan away = ParsePlan("{preset: tiny, path: " + (root / "absent").string() + "}", cases);
    CHECK(errors(away, "i").empty());
    CHECK(MakeNativeShareBackend()->Advise(away, *away.FindCase("i")).warnings ==
          std::vector<std::string>{"cannot check the weights of model 'm' here: its path '" + (root / "absent").string() +
                                   "' is not on this machine; inference (of the model's own weights) needs "
                                   "model.safetensors or model.safetensors.index.json there"});
  }
  {  // init: random asks for seeded random weights, even where the path has weights.
    Plan plan = ParsePlan("{preset: tiny, path: " + (root / "full").string() + ", init: random}", cases);
    for (const char* id : {"p", "f", "i"}) CHECK(errors(plan, id).empty());
    CHECK(native::native_weights_source(Workload::kFinetune, false, true, (root / "full").string()) ==
          native::WeightsSource::kRandomDeclared);
    // A full-precision pretrain trains its random start either way: not "measured on random weights".
    CHECK(native::native_weights_source(Workload::kPretrain, false, true, "") ==
          native::WeightsSource::kRandomFromScratch);
    CHECK(native::native_weights_note(native::WeightsSource::kRandomDeclared, 7) ==
          "random weights (init: random, seed 7)");
    Plan weights = ParsePlan("{preset: tiny, path: " + (root / "full").string() + "}", cases);
    CHECK(native::native_weights_source(Workload::kFinetune, false, false, (root / "full").string()) ==
          native::WeightsSource::kPath);
    for (const char* id : {"p", "f", "i"}) CHECK(errors(weights, id).empty());
  }
  fs::remove_all(root);
}

TEST_CASE("native check: what a run would refuse is a validate warning with Run's text") {
  // A 4-bit pretrain is QLoRA continued pretraining of the path's weights: a path without them is refused.
  const fs::path root = fs::temp_directory_path() / ("protocol_native_refuse_" + std::to_string(getpid()));
  MakeModelDir(root);
  Plan plan = ParsePlan("{preset: tiny, quantization: nf4, path: " + root.string() + "}",
                        "      - {id: f, backend: fsdp, workload: pretrain, steps: 5, nodes: 2}\n"
                        "      - {id: s, backend: share, workload: pretrain, steps: 5, topology: 'rig0:2x4'}\n"
                        "      - {id: i, backend: share, workload: inference, topology: 'rig0:4x2',\n"
                        "         inference: {prompt: hi, max_new_tokens: [4]}}\n");
  for (const char* id : {"f", "s"}) {
    CAPTURE(id);
    const CaseSpec& spec = *plan.FindCase(id);
    std::unique_ptr<Backend> backend = spec.backend == "fsdp" ? MakeNativeFsdpBackend() : MakeNativeShareBackend();
    const native::NativeRole role = spec.backend == "fsdp" ? native::NativeRole::kFsdp : native::NativeRole::kShare;
    CHECK(backend->Check(plan, spec).empty());  // the plan is valid
    const std::string refusal = native::native_run_refusal(plan, spec, role);
    CHECK(refusal == "a 4-bit pretrain is QLoRA continued pretraining of the model's own weights, but model 'm' has "
                     "no model.safetensors or model.safetensors.index.json in its path '" + root.string() +
                     "' (or say `init: random` on the model to measure on seeded random weights)");
    CHECK(backend->Advise(plan, spec).warnings.front() == "a run fails: " + refusal);
    BackendOutcome out = RunCase(*backend, plan, spec);
    CHECK(out.status == CaseStatus::kFailed);
    CHECK(out.reason == refusal + "; nothing was run");
  }
  // With weights there, 4-bit training on several ranks and share groups runs (FSDP-QLoRA), and
  // 4-bit inference on share replicas too.
  std::ofstream(root / "model.safetensors") << "x";
  CHECK(native::native_run_refusal(plan, *plan.FindCase("f"), native::NativeRole::kFsdp).empty());
  CHECK(native::native_run_refusal(plan, *plan.FindCase("s"), native::NativeRole::kShare).empty());
  CHECK(native::native_run_refusal(plan, *plan.FindCase("i"), native::NativeRole::kShare).empty());
  fs::remove_all(root);
}

TEST_CASE("native check: periodic merges of 4-bit share groups warn unless A is frozen (the exact variant)") {
  const fs::path root = fs::temp_directory_path() / ("protocol_native_sync_" + std::to_string(getpid()));
  fs::create_directories(root);
  std::ofstream(root / "model.safetensors") << "x";
  Plan plan = ParsePlan("{preset: tiny, quantization: nf4, path: " + root.string() + "}",
                        "      - {id: a, backend: share, workload: finetune, steps: 5, topology: 'rig0:2x1',\n"
                        "         training: {sync_every: 2}}\n"
                        "      - {id: b, backend: share, workload: finetune, steps: 5, topology: 'rig0:2x1',\n"
                        "         training: {sync_every: 2, lora_freeze_a: true}}\n"
                        "      - {id: c, backend: share, workload: finetune, steps: 5, topology: 'rig0:2x1'}\n");
  auto share = MakeNativeShareBackend();
  auto has_sync_warning = [&](const char* id) {
    for (const std::string& w : share->Advise(plan, *plan.FindCase(id)).warnings)
      if (StartsWith(w, "periodic merges (training.sync_every) of 4-bit groups average each LoRA A and B separately"))
        return true;
    return false;
  };
  CHECK(has_sync_warning("a"));
  CHECK_FALSE(has_sync_warning("b"));
  CHECK_FALSE(has_sync_warning("c"));
  fs::remove_all(root);
}

TEST_CASE("native check: a share curve asked for between merges warns that its points fall at the merges") {
  Plan plan = ParsePlan("{preset: tiny}",
                        "      - {id: a, backend: share, workload: pretrain, steps: 12, topology: 'rig0:2x1',\n"
                        "         training: {eval_every: 3, sync_every: 2}}\n"
                        "      - {id: b, backend: share, workload: pretrain, steps: 12, topology: 'rig0:2x1',\n"
                        "         training: {eval_every: 4, sync_every: 2}}\n"
                        "      - {id: c, backend: share, workload: pretrain, steps: 12, topology: 'rig0:2x1',\n"
                        "         training: {eval_every: 2}}\n"
                        "      - {id: d, backend: share, workload: pretrain, steps: 12, topology: 'rig0:2x1',\n"
                        "         training: {eval_every: 12}}\n"
                        "      - {id: e, backend: fsdp, workload: pretrain, steps: 12, nodes: 1,\n"
                        "         training: {eval_every: 3, sync_every: 2}}\n");
  auto curve_warning = [&](const char* id) -> std::string {
    const CaseSpec& c = *plan.FindCase(id);
    auto backend = c.backend == "share" ? MakeNativeShareBackend() : MakeNativeFsdpBackend();
    for (const std::string& w : backend->Advise(plan, c).warnings)
      if (w.rfind("training.eval_every", 0) == 0) return w;
    return "";
  };
  CHECK(curve_warning("a") ==
        "training.eval_every 3 is not a multiple of training.sync_every 2: the held-out curve is of the merged model, "
        "so each evaluation waits for the next merge (its points fall at multiples of 2)");
  CHECK(curve_warning("b") == "");
  CHECK(curve_warning("c") ==
        "training.eval_every 2 has no effect between step 0 and the last step: the groups are merged only at the end "
        "(training.sync_every 0), and the held-out curve is of the merged model");
  CHECK(curve_warning("d") == "");  // only step 0 and the last were asked for
  CHECK(curve_warning("e") == "");  // one model: no merges to wait for
}

TEST_CASE("native check: the memory note compares with the stated GPU memory") {
  // checkpoint_every set (auto adds a note of its own: the next test).
  const std::string cases =
      "      - {id: big, backend: share, workload: pretrain, steps: 5, topology: 'rig0:4x2 rig1:4x2',\n"
      "         training: {checkpoint_every: 1}}\n"
      "      - {id: cpu, backend: share, workload: pretrain, steps: 5, topology: 'rig0:4x2',\n"
      "         training: {device: cpu, checkpoint_every: 1}}\n";
  {
    // Llama-2-7B on groups of 2 GPUs: about 55 GB a GPU, more than 40.
    Plan plan = ParsePlan("{preset: llama2-7b}", cases, "40");
    CaseAdvice a = MakeNativeShareBackend()->Advise(plan, *plan.FindCase("big"));
    REQUIRE(a.warnings.size() == 1);
    CHECK(StartsWith(a.warnings[0], "expected peak memory per GPU 54.88 GB exceeds the 40 GB of node 'rig0'"));
    REQUIRE(a.notes.size() == 3);  // the memory, what crosses between the two nodes, and over which network
    CHECK(StartsWith(a.notes[1], "between nodes: nothing in a step"));
    CAPTURE(a.notes[2]);
    CHECK(StartsWith(a.notes[2], "network"));
    CHECK(a.notes[2].find("the transport picks its own") != std::string::npos);  // a label, no cluster.networks
    CHECK(StartsWith(a.notes[0], "expected peak memory per GPU: 54.88 GB of 40 GB (does not fit); FSDP FULL_SHARD over "
                                 "W = 2 (each of 8 groups), bf16; micro-batch 1 x 128 tokens, checkpoint_every 1\n"
                                 "54.88 GB = "));
    // On CPU: per rank process, float32, compared with nothing.
    CaseAdvice c = MakeNativeShareBackend()->Advise(plan, *plan.FindCase("cpu"));
    CHECK(c.warnings.empty());
    REQUIRE(c.notes.size() == 1);
    CHECK(StartsWith(c.notes[0], "expected peak memory per rank process (host memory, float32): "));
    CHECK(c.notes[0].find("(not compared: the plan states no host memory)") != std::string::npos);
  }
  {
    Plan plan = ParsePlan("{preset: llama2-7b}", cases, "80");
    CHECK(MakeNativeShareBackend()->Advise(plan, *plan.FindCase("big")).warnings.empty());
  }
  {
    Plan plan = ParsePlan("{preset: llama2-7b}", cases, "0");
    CaseAdvice a = MakeNativeShareBackend()->Advise(plan, *plan.FindCase("big"));
    CHECK(a.warnings.empty());
    REQUIRE(a.notes.size() == 3);  // memory, traffic, network
    CHECK(a.notes[0].find("(GPU memory not stated in cluster.nodes[].gpu_memory_gb: not compared)") != std::string::npos);
  }
}


TEST_CASE("native check: a preset takes the tokenizer's vocabulary; a tokenizer larger than config.json's is refused") {
  const fs::path root = fs::temp_directory_path() / ("protocol_native_vocab_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "preset");
  fs::create_directories(root / "small");
  const fs::path tokenizer = fs::path(PROTOCOL_SOURCE_DIR) / "data" / "quickstart" / "tokenizer.model";  // 512 pieces
  fs::copy_file(tokenizer, root / "preset" / "tokenizer.model");
  fs::copy_file(tokenizer, root / "small" / "tokenizer.model");
  native::ModelConfig small = *native::PresetConfig("tiny");
  small.vocab_size = 256;
  std::ofstream(root / "small" / "config.json") << small.ToHfJson();

  {  // The tiny preset has 1024 ids of its own; with this tokenizer it has 512, every one decodable.
    REQUIRE(native::PresetConfig("tiny")->vocab_size == 1024);
    Result<native::ResolvedModel> m = native::ResolveModel("m", "tiny", (root / "preset").string());
    REQUIRE(m.ok());
    CHECK(m->config.vocab_size == 512);
    CHECK(m->tokenizer->vocab_size() == 512);
    CHECK(m->config_source ==
          "preset tiny, vocabulary 512 from " + (root / "preset" / "tokenizer.model").string());
    CHECK(native::ModelDimensions("m", "tiny", (root / "preset").string())->vocab_size == 512);
    // Without the tokenizer here, the estimate keeps the preset's own.
    CHECK(native::ModelDimensions("m", "tiny", (root / "absent").string())->vocab_size == 1024);
  }
  {  // config.json says 256: 512 pieces would index past the embedding.
    Result<native::ResolvedModel> m = native::ResolveModel("m", "", (root / "small").string());
    REQUIRE_FALSE(m.ok());
    const std::string refusal = "model 'm': " + (root / "small" / "tokenizer.model").string() +
                                " has 512 pieces, more than the model's vocab_size 256 (config.json in " +
                                (root / "small").string() +
                                "): its ids would index past the embedding; use the tokenizer the model was "
                                "trained with";
    CHECK(m.status().message() == refusal);
    Plan plan = ParsePlan("{path: " + (root / "small").string() + ", init: random}",
                          "      - {id: i, backend: share, workload: inference, topology: 'rig0:1x1',\n"
                          "         inference: {prompt: hi, max_new_tokens: [4]}}\n");
    CHECK(MakeNativeShareBackend()->Check(plan, *plan.FindCase("i")) == std::vector<std::string>{refusal});
  }
  fs::remove_all(root);
}

}  // namespace protocol

namespace protocol {

TEST_CASE("native check: hybrid sharding is an fsdp setting; a bfloat16 reduction needs a Gloo that has it") {
  Plan plan = ParsePlan("{preset: tiny, init: random, path: " + kQuickstartModel + "}",
                        "      - {id: share, backend: share, workload: pretrain, steps: 5, topology: 'rig0:2x1 rig1:2x1',\n"
                        "         training: {sharding: hybrid}}\n"
                        "      - {id: cpu, backend: fsdp, workload: pretrain, steps: 5, nodes: 2,\n"
                        "         training: {device: cpu, ranks_per_node: 2, reduce_dtype: bfloat16}}\n"
                        "      - {id: gpu, backend: fsdp, workload: pretrain, steps: 5, nodes: 2,\n"
                        "         training: {reduce_dtype: bfloat16}}\n"
                        "      - {id: merge, backend: share, workload: pretrain, steps: 5, topology: 'rig0:2x1',\n"
                        "         training: {device: cpu, merge_dtype: bfloat16}}\n");
  const std::vector<std::string> share = MakeNativeShareBackend()->Check(plan, *plan.FindCase("share"));
  REQUIRE(share.size() == 1);
  CHECK(share[0].find("training.sharding: hybrid is an fsdp setting") != std::string::npos);
  const std::string cpu = native::native_run_refusal(plan, *plan.FindCase("cpu"), native::NativeRole::kFsdp);
  if (native::compat::GlooReducesBfloat16()) CHECK(cpu.empty());
  else CHECK(StartsWith(cpu, "training.reduce_dtype: bfloat16 on CPU ranks: Gloo in this build"));
  // On the GPUs NCCL reduces bfloat16 (accelerate's policy does it there by default).
  CHECK(native::native_run_refusal(plan, *plan.FindCase("gpu"), native::NativeRole::kFsdp).empty());
  // A share case's merges in bfloat16 on CPU ranks: the same.
  const std::string merge = native::native_run_refusal(plan, *plan.FindCase("merge"), native::NativeRole::kShare);
  if (native::compat::GlooReducesBfloat16()) CHECK(merge.empty());
  else CHECK(StartsWith(merge, "training.merge_dtype: bfloat16 on CPU ranks: Gloo in this build"));
}

TEST_CASE("native check: a two-node training case says what crosses between the nodes") {
  Plan plan = ParsePlan("{preset: llama2-7b}",
                        "      - {id: full, backend: fsdp, workload: pretrain, steps: 5, nodes: 2}\n"
                        "      - {id: hybrid, backend: fsdp, workload: pretrain, steps: 5, nodes: 2,\n"
                        "         training: {sharding: hybrid}}\n"
                        "      - {id: one, backend: fsdp, workload: pretrain, steps: 5, nodes: 1}\n"
                        "      - {id: share, backend: share, workload: pretrain, steps: 10, topology: 'rig0:4x2 rig1:4x2',\n"
                        "         training: {sync_every: 4}}\n");
  CHECK(plan.FindCase("hybrid")->system == "fsdp-hybrid");
  const std::string full = native::native_case_traffic(plan, *plan.FindCase("full"), native::NativeRole::kFsdp);
  CHECK(StartsWith(full, "between nodes per step: 74.82 GB (full sharding: one ring of 16 ranks crosses between the 2 "
                         "nodes at 2 ranks, each sending 37.41 GB per step); hybrid sharding would send 26.95 GB"));
  const std::string hybrid = native::native_case_traffic(plan, *plan.FindCase("hybrid"), native::NativeRole::kFsdp);
  CHECK(StartsWith(hybrid, "between nodes per step: 26.95 GB (hybrid sharding: every rank all-reduces"));
  CHECK(native::native_case_traffic(plan, *plan.FindCase("one"), native::NativeRole::kFsdp).empty());
  const std::string share = native::native_case_traffic(plan, *plan.FindCase("share"), native::NativeRole::kShare);
  CHECK(share.find("nothing in a step") != std::string::npos);
  CHECK(share.find("3 merge(s) in 10 steps") != std::string::npos);  // after steps 4 and 8, and the last
  // validate shows it among the case's notes.
  const CaseAdvice advice = MakeNativeFsdpBackend()->Advise(plan, *plan.FindCase("full"));
  CHECK(std::find(advice.notes.begin(), advice.notes.end(), full) != advice.notes.end());
}

}  // namespace protocol

namespace protocol {

TEST_CASE("native check: a model an earlier case writes is a note, not a warning; order and kind are checked") {
  const std::string dir = (fs::temp_directory_path() / ("protocol_produced_" + std::to_string(getpid()))).string();
  fs::remove_all(dir);  // not on this machine yet: the plan's first case writes it
  auto plan_of = [&](const std::string& cases) {
    const std::string text =
        "protocol: 1\nname: chain\n"
        "models:\n  base: {preset: tiny, path: " + kQuickstartModel + ", init: random}\n"
        "  made: {preset: tiny, path: " + dir + "}\n"
        "  made4: {preset: tiny, path: " + dir + ", quantization: nf4}\n"
        "datasets:\n  corpus: {format: text, path: " + kQuickstartModel + "/corpus.txt}\n"
        "defaults: {dataset: corpus, training: {batch_size: 4, seq_len: 16, device: cpu}}\n"
        "stages:\n  - name: s\n    cases:\n" + cases;
    PlanParseResult r = ParsePlanString(text, "<string>");
    REQUIRE(r.ok());
    return *r.plan;
  };
  const std::string writes = "      - {id: p, backend: fsdp, workload: pretrain, model: base, steps: 2, output_dir: " + dir + "}\n";
  const std::string reads = "      - {id: f, backend: fsdp, workload: finetune, model: made, steps: 2}\n"
                            "      - {id: q, backend: fsdp, workload: pretrain, model: made4, steps: 2}\n";
  {
    Plan plan = plan_of(writes + reads);
    for (const char* id : {"f", "q"}) {
      CAPTURE(id);
      auto backend = MakeNativeFsdpBackend();
      CHECK(backend->Check(plan, *plan.FindCase(id)).empty());
      CaseAdvice advice = backend->Advise(plan, *plan.FindCase(id));
      for (const std::string& w : advice.warnings) CHECK(w.find("cannot check") == std::string::npos);
      bool named = false;
      for (const std::string& n : advice.notes) named = named || n.find("written by case 'p' (its output_dir)") != std::string::npos;
      CHECK(named);
      // When it runs, the weights must be there: a case left out of the run is named.
      CHECK(native::native_run_refusal(plan, *plan.FindCase(id), native::NativeRole::kFsdp).find(
                "but its weights are not there yet: run that case first") != std::string::npos);
    }
  }
  {
    Plan plan = plan_of(reads + writes);  // the writer comes after its readers
    const auto problems = MakeNativeFsdpBackend()->Check(plan, *plan.FindCase("f"));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0] == "model 'made' is read from the output_dir of case 'p', which runs after this case: put 'p' "
                         "before it");
  }
  {
    // A 4-bit writer saves LoRA adapters there, not a model.
    Plan plan = plan_of("      - {id: p, backend: fsdp, workload: finetune, model: made4, steps: 2, output_dir: " + dir +
                        "}\n      - {id: f, backend: fsdp, workload: finetune, model: made, steps: 2}\n");
    const auto problems = MakeNativeFsdpBackend()->Check(plan, *plan.FindCase("f"));
    REQUIRE(!problems.empty());
    CHECK(problems[0].find("which trains the 4-bit model 'made4' and saves LoRA adapters there, not a model") !=
          std::string::npos);
  }
}

}  // namespace protocol

namespace protocol {

TEST_CASE("native check: two systems of one row on different networks warn, unless the plan says it is the comparison") {
  auto plan_of = [](const std::string& flag) {
    const std::string text =
        "protocol: 1\nname: rows\n"
        "models:\n  m: {preset: llama2-7b}\n"
        "datasets:\n  web: {format: text, path: /nowhere/web.txt}\n"
        "cluster:\n" + flag +
        "  networks: {80G: {rate: 80gbit}, 10G: {rate: 10gbit}}\n"
        "  nodes:\n    - {name: rig0, host: rig0, gpus: 8}\n    - {name: rig1, host: rig1, gpus: 8}\n"
        "defaults: {model: m, dataset: web, workload: pretrain, steps: 100}\n"
        "stages:\n  - name: s\n    cases:\n"
        "      - {id: f, backend: fsdp, nodes: 2, network: 80G}\n"
        "      - {id: s, backend: share, topology: 'rig0:1x8 rig1:1x8', network: 10G}\n"
        "      - {id: s-same, backend: share, topology: 'rig0:1x8 rig1:1x8', network: 80G, steps: 50}\n";
    PlanParseResult r = ParsePlanString(text, "<string>");
    REQUIRE(r.ok());
    return *r.plan;
  };
  Plan plain = plan_of("");
  CHECK(native::native_network_mismatch(plain, *plain.FindCase("f")) == "");  // the earlier case of the pair
  CHECK(native::native_network_mismatch(plain, *plain.FindCase("s")) ==
        "this case (share) runs on network '10G' and case f (fsdp) of its row on '80G': their ratio compares the "
        "networks as well as the systems; if that is the comparison (as the methodology's is), say so with "
        "cluster.compare_across_networks: true");
  CHECK(native::native_network_mismatch(plain, *plain.FindCase("s-same")) == "");  // another length: another row
  bool warned = false;
  for (const std::string& w : MakeNativeShareBackend()->Advise(plain, *plain.FindCase("s")).warnings)
    warned = warned || w.find("compares the networks as well as the systems") != std::string::npos;
  CHECK(warned);
  Plan said = plan_of("  compare_across_networks: true\n");
  CHECK(native::native_network_mismatch(said, *said.FindCase("s")) == "");
  CHECK(said.resolved_text.find("compare_across_networks: true") != std::string::npos);
}

}  // namespace protocol

namespace protocol {

TEST_CASE("native check: checkpoint_every auto recomputes no layer where the estimate without it fits, every layer where it does not") {
  const std::string cases =
      "      - {id: seven, backend: share, workload: pretrain, steps: 5, topology: 'rig0:4x2 rig1:4x2'}\n"
      "      - {id: kept, backend: share, workload: pretrain, steps: 5, topology: 'rig0:4x2',\n"
      "         training: {checkpoint_every: 2}}\n"
      "      - {id: cpu, backend: fsdp, workload: pretrain, steps: 5, nodes: 1,\n"
      "         training: {device: cpu, ranks_per_node: 2}}\n"
      "      - {id: serve, backend: fsdp, workload: inference, nodes: 1,\n"
      "         inference: {prompt: 'hi', max_new_tokens: [4]}}\n";
  // The choice for case `id`, in its backend's role.
  auto choice = [](const Plan& plan, const char* id) {
    const CaseSpec& c = *plan.FindCase(id);
    return native::native_case_checkpointing(
        plan, c, c.backend == "share" ? native::NativeRole::kShare : native::NativeRole::kFsdp);
  };
  {
    // Llama-2-7B on groups of 2 GPUs: without recompute the estimate exceeds 90 % of 40 GB.
    Plan plan = ParsePlan("{preset: llama2-7b}", cases, "40");
    native::CheckpointChoice c = choice(plan, "seven");
    CHECK(c.every == 1);
    CAPTURE(c.why);
    CHECK(StartsWith(c.why, "checkpoint_every auto: every layer recomputed: the peak without recompute, "));
    CHECK(c.why.find(" per GPU, does not fit in 90 % of the 40 GB of node 'rig0' (36.00 GB)") != std::string::npos);
    // validate prints it beside the memory note, whose figures are of the case as it runs.
    CaseAdvice a = MakeNativeShareBackend()->Advise(plan, *plan.FindCase("seven"));
    REQUIRE(a.notes.size() == 4);
    CHECK(a.notes[0].find("checkpoint_every 1\n") != std::string::npos);
    CHECK(a.notes[1] == c.why);
    // A number in the plan is what runs, said by nobody.
    native::CheckpointChoice kept = choice(plan, "kept");
    CHECK(kept.every == 2);
    CHECK(kept.why.empty());
  }
  {
    // The tiny preset fits many times over: no layer recomputed.
    Plan plan = ParsePlan("{preset: tiny}", cases, "80");
    native::CheckpointChoice c = choice(plan, "seven");
    CHECK(c.every == 0);
    CAPTURE(c.why);
    CHECK(StartsWith(c.why, "checkpoint_every auto: no layer recomputed: the peak without recompute, "));
    CHECK(c.why.find(" per GPU, fits in 90 % of the 80 GB of node 'rig0' (72.00 GB)") != std::string::npos);
    CaseAdvice a = MakeNativeShareBackend()->Advise(plan, *plan.FindCase("seven"));
    CHECK(a.notes[0].find("checkpoint_every 0\n") != std::string::npos);
    // CPU ranks: half of this host's memory over the case's 2 rank processes on it.
    native::CheckpointChoice cpu = choice(plan, "cpu");
    CHECK(cpu.every == 0);
    CAPTURE(cpu.why);
    CHECK(cpu.why.find(" per rank process, fits in half of this host's ") != std::string::npos);
    CHECK(cpu.why.find(" over 2 rank processes (") != std::string::npos);
    // Inference recomputes nothing and says nothing.
    native::CheckpointChoice serve = choice(plan, "serve");
    CHECK(serve.every == 0);
    CHECK(serve.why.empty());
  }
  {
    // GPU memory not stated: every layer, and why.
    Plan plan = ParsePlan("{preset: tiny}", cases, "0");
    native::CheckpointChoice c = choice(plan, "seven");
    CHECK(c.every == 1);
    CHECK(c.why.find("is compared with nothing: cluster.nodes[].gpu_memory_gb is not stated") != std::string::npos);
  }
}

}  // namespace protocol
