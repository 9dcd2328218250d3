// The native one-rank fsdp backend: pretrain / finetune / inference end to end
// on a tiny model, and every way a case ends (failed, interrupted, timed out).
#include "native_test_support.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/native/training/data.h"
#include "backends/native/launch/events.h"
#include "backends/native/fsdp_backend.h"
#include "backends/native/quant/lora.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/tokenizer.h"
#include "dist_test_support.h"
#include "fake_process_runner.h"
#include "runner/base/text.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using protocol::testing::FakeProcessRunner;

struct RecordingEvents : CaseEvents {
  std::vector<StepSample> steps;
  std::vector<RequestSample> requests;
  std::vector<std::string> lines;
  void OnStep(const StepSample& s) override { steps.push_back(s); }
  void OnRequest(const RequestSample& r) override { requests.push_back(r); }
  void OnStatusLine(const std::string& t) override { lines.push_back(t); }
};

// Each reading is one second later than the one before.
struct TickingClock : Clock {
  double now = 0;
  double NowSeconds() override { return now += 1.0; }
  std::string NowIso8601() override { return "2026-01-01T00:00:00Z"; }
};

// A model directory (config.json of a tiny config + tokenizer.model) and data,
// made once for all cases of this file.
struct Fixture {
  fs::path root;
  Fixture() {
    root = fs::temp_directory_path() / ("protocol_fsdp_" + std::to_string(getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "model");
    std::ofstream corpus(root / "corpus.txt");
    for (int i = 0; i < 40; ++i)
      corpus << "Can there be life somewhere in the Solar System outside Earth? Europa has an ocean. ";
    corpus.close();
    std::ofstream dolly(root / "dolly.jsonl");
    for (int i = 0; i < 8; ++i)
      dolly << R"({"instruction": "Where is there an ocean?", "context": "", "response": "Europa has an ocean.", "category": "open_qa"})"
            << "\n";
    dolly.close();
    const std::string cmd = "spm_train --input=" + (root / "corpus.txt").string() + " --model_prefix=" +
                            (root / "model/tokenizer").string() +
                            " --vocab_size=60 --hard_vocab_limit=false --model_type=bpe --minloglevel=2 >/dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    native::ModelConfig c;
    c.dim = 32;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.hidden_dim = 64;
    c.vocab_size = 64;
    c.max_seq_len = 128;
    std::ofstream(root / "model/config.json") << c.ToHfJson();
  }
  ~Fixture() { fs::remove_all(root); }

  Plan MakePlan() const {
    Plan plan;
    plan.name = "test";
    ModelSpec m;
    m.name = "mini";
    m.path = (root / "model").string();
    plan.models["mini"] = m;
    plan.datasets["corpus"] = DatasetSpec{"corpus", "text", (root / "corpus.txt").string(), {}, {}};
    plan.datasets["dolly"] = DatasetSpec{"dolly", "dolly", (root / "dolly.jsonl").string(), {}, {}};
    return plan;
  }
};

CaseSpec TrainingCase(Workload w, const std::string& dataset, int64_t steps) {
  CaseSpec spec;
  spec.id = "t.1";
  spec.workload = w;
  spec.backend = "fsdp";
  spec.model = "mini";
  spec.dataset = dataset;
  spec.length = Length{Length::Unit::kSteps, steps};
  spec.training.batch_size = 2;
  spec.training.seq_len = 16;
  spec.training.learning_rate = 1e-2;
  spec.training.device = DeviceChoice::kCpu;
  return spec;
}

// An inference case of the mini model on the CPU: the schedule `max_new_tokens` after a fixed prompt.
CaseSpec InferenceCase(const std::string& id, std::vector<int> max_new_tokens) {
  CaseSpec spec;
  spec.id = id;
  spec.workload = Workload::kInference;
  spec.backend = "fsdp";
  spec.model = "mini";
  spec.inference.prompt = "Can there be life somewhere in the Solar System outside Earth?";
  spec.inference.max_new_tokens = std::move(max_new_tokens);
  spec.training.device = DeviceChoice::kCpu;
  return spec;
}

struct Harness {
  StopFlag stop;
  FakeProcessRunner processes;  // no process is started
  TickingClock clock;
  RecordingEvents events;
  BackendOutcome Run(const Plan& plan, const CaseSpec& spec, const std::string& output_dir = "",
                     const std::string& log_path = "") {
    auto backend = MakeNativeFsdpBackend();
    REQUIRE(backend->Check(plan, spec).empty());
    BackendContext ctx{plan, spec, 0, log_path, output_dir, stop, processes, clock, events};
    return backend->Run(ctx);
  }
};

const Measurement* Find(const BackendOutcome& out, const std::string& name) {
  for (const auto& m : out.measurements)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

TEST_CASE("native fsdp: pretrain trains, reports each step, measures, and saves the model") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  CaseSpec spec = TrainingCase(Workload::kPretrain, "corpus", 4);
  spec.warmup_steps = 1;
  Harness h;
  const std::string out_dir = (fx.root / "out").string(), log = (fx.root / "case.log").string();
  BackendOutcome out = h.Run(plan, spec, out_dir, log);
  CHECK(out.status == CaseStatus::kOk);
  CHECK(out.reason == "");
  REQUIRE(h.events.steps.size() == 4);
  CHECK(h.events.steps[3].step == 4);
  CHECK(h.events.steps[3].tokens == 2 * 16);
  CHECK(h.events.steps[3].seconds == 1.0);  // the ticking clock: one tick per step
  CHECK(h.events.lines[0].rfind("step 1/4 loss ", 0) == 0);
  REQUIRE(Find(out, metric::kFinalLoss));
  CHECK(Find(out, metric::kFinalLoss)->value == h.events.steps[3].loss);
  // One read back from the device per step: the loss and the gradient norm together.
  REQUIRE(Find(out, metric::kHostReadsPerStep));
  CHECK(Find(out, metric::kHostReadsPerStep)->value == 1);
  CHECK(Find(out, metric::kEvalLoss));
  // 3 timed steps (one warm-up) of 32 tokens, 1 s each on the ticking clock.
  REQUIRE(Find(out, metric::kTrainTokensPerSecond));
  CHECK(*Find(out, metric::kTrainTokensPerSecond)->value == doctest::Approx(32.0));
  CHECK(Find(out, metric::kTrainTokensPerSecond)->method == "96 tokens over 3 steps after 1 warm-up step(s), one process on cpu");
  CHECK(Find(out, metric::kTgs));
  CHECK(Find(out, metric::kPeakHostRss));
  CHECK_FALSE(Find(out, metric::kMfu));     // never on CPU
  CHECK_FALSE(Find(out, metric::kTflops));  // never on CPU
  CHECK_FALSE(Find(out, metric::kStepSecondsMean));  // the runner's to compute
  CHECK(fs::exists(fs::path(out_dir) / "model.safetensors"));
  CHECK(fs::exists(fs::path(out_dir) / "config.json"));
  CHECK(fs::exists(fs::path(out_dir) / "tokenizer.model"));
  std::ifstream in(log);
  std::string first;
  std::getline(in, first);
  CHECK(first.rfind("fsdp: case t.1 (pretrain), one process, device cpu, dtype Float", 0) == 0);

  // finetune from that output: loads its weights (no random-weights note).
  plan.models["mini"].path = out_dir;
  CaseSpec ft = TrainingCase(Workload::kFinetune, "dolly", 2);
  Harness h2;
  BackendOutcome tuned = h2.Run(plan, ft);
  CHECK(tuned.status == CaseStatus::kOk);
  CHECK(h2.events.steps.size() == 2);
  CHECK(Find(tuned, metric::kFinalLoss)->method == "training loss of the last step");
}

TEST_CASE("native fsdp: eval_every keeps a held-out curve whose training seconds leave the evaluations out") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  CaseSpec spec = TrainingCase(Workload::kPretrain, "corpus", 4);
  spec.training.eval_every = 2;
  Harness h;
  BackendOutcome out = h.Run(plan, spec);
  REQUIRE(out.status == CaseStatus::kOk);
  // Step 0, every 2 steps, and the last.
  REQUIRE(out.eval_curve.size() == 3);
  CHECK(out.eval_curve[0].step == 0);
  CHECK(out.eval_curve[1].step == 2);
  CHECK(out.eval_curve[2].step == 4);
  // The ticking clock gives every step and every evaluation one second: the
  // points count the steps' seconds only, the evaluations' go to eval_seconds.
  double steps_seconds = 0;
  for (const StepSample& s : h.events.steps) steps_seconds += s.seconds;
  CHECK(steps_seconds == 4.0);
  CHECK(out.eval_curve[0].training_seconds == 0.0);
  CHECK(out.eval_curve[1].training_seconds == 2.0);
  CHECK(out.eval_curve[2].training_seconds == steps_seconds);
  CHECK(out.eval_curve[2].tokens == 4 * 2 * 16);
  REQUIRE(Find(out, metric::kEvalSeconds));
  CHECK(*Find(out, metric::kEvalSeconds)->value == 3.0);
  // The case's held-out loss is the curve's last point (evaluated once).
  REQUIRE(Find(out, metric::kEvalLoss));
  CHECK(*Find(out, metric::kEvalLoss)->value == out.eval_curve[2].loss);
  CHECK(out.eval_curve[2].loss < out.eval_curve[0].loss);  // it trained
  // Still one read back per training step: the evaluations' are not counted.
  CHECK(Find(out, metric::kHostReadsPerStep)->value == 1);
  // Without eval_every: no curve, as before.
  Harness h0;
  BackendOutcome plain = h0.Run(plan, TrainingCase(Workload::kPretrain, "corpus", 4));
  CHECK(plain.eval_curve.empty());
  CHECK_FALSE(Find(plain, metric::kEvalSeconds));
}

TEST_CASE("native fsdp: a finetune without weights is refused unless the model says init: random, and then says so") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  CaseSpec spec = TrainingCase(Workload::kFinetune, "dolly", 1);
  spec.length = Length{Length::Unit::kEpochs, 1};
  CHECK(MakeNativeFsdpBackend()->Check(plan, spec) ==
        std::vector<std::string>{"a finetune measures the model's own weights, but model 'mini' has no model.safetensors "
                                 "or model.safetensors.index.json in its path '" + (fx.root / "model").string() +
                                 "' (or say `init: random` on the model to measure on seeded random weights)"});
  plan.models["mini"].init_random = true;
  Harness h;
  BackendOutcome out = h.Run(plan, spec);
  CHECK(out.status == CaseStatus::kOk);
  CHECK(!h.events.steps.empty());
  CHECK(Find(out, metric::kFinalLoss)->method ==
        "training loss of the last step; weights: random weights (init: random, seed 1234)");
}

TEST_CASE("native fsdp: inference runs one request per max_new_tokens, exactly that many tokens") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  CaseSpec spec = InferenceCase("i.1", {5, 7, 3});
  plan.models["mini"].init_random = true;
  Harness h;
  BackendOutcome out = h.Run(plan, spec);
  CHECK(out.status == CaseStatus::kOk);
  REQUIRE(h.events.requests.size() == 3);
  CHECK(h.events.requests[1].index == 1);
  CHECK(h.events.requests[1].max_new_tokens == 7);
  CHECK(h.events.requests[1].generated_tokens == 7);
  CHECK(h.events.requests[1].seconds == 1.0);
  CHECK(h.events.requests[0].prompt_tokens > 1);
  {  // the generated ids are kept, and the answer is their decoding (valid UTF-8)
    auto tok = native::LoadSentencePieceTokenizer((fx.root / "model/tokenizer.model").string());
    REQUIRE(tok.ok());
    for (const RequestSample& r : h.events.requests) {
      REQUIRE(r.token_ids.has_value());
      CHECK(static_cast<int>(r.token_ids->size()) == r.generated_tokens);
      CHECK(r.answer == (*tok)->Decode(*r.token_ids));
      CHECK(IsValidUtf8(r.answer));
    }
  }
  CHECK(*Find(out, metric::kGeneratedTokens)->value == 15);
  CHECK(*Find(out, metric::kTotalGenerationSeconds)->value == 3.0);
  CHECK(*Find(out, metric::kSecondsPerToken)->value == doctest::Approx(3.0 / 15));
  CHECK(*Find(out, metric::kTokensPerSecond)->value == doctest::Approx(5.0));
  CHECK(Find(out, metric::kTokensPerSecond)->method ==
        "3 greedy requests, KV cache, one process on cpu; weights: random weights (init: random, seed 1234)");
}

TEST_CASE("native fsdp: inference.decode_step device: the host step's tokens, checked first, and said in the facts") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  plan.models["mini"].init_random = true;
  CaseSpec spec = InferenceCase("i.2", {5, 20, 3});
  Harness host;
  BackendOutcome at_host = host.Run(plan, spec);
  REQUIRE(at_host.status == CaseStatus::kOk);
  CHECK(dist_test::FactOf(at_host, fact::kDecodeCheck).empty());  // the host's step is the reference: nothing to check
  spec.inference.decode_step = DecodeStepChoice::kDevice;
  REQUIRE(MakeNativeFsdpBackend()->Check(plan, spec).empty());
  Harness device;
  BackendOutcome on_device = device.Run(plan, spec);
  INFO(on_device.reason);
  REQUIRE(on_device.status == CaseStatus::kOk);
  REQUIRE(device.events.requests.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(device.events.requests[i].token_ids == host.events.requests[i].token_ids);
    CHECK(device.events.requests[i].seconds == 1.0);  // the check before the first request is not timed
  }
  CHECK(dist_test::FactOf(on_device, fact::kDecodeCheck) == "the first 16 tokens equal the host position's");
  CHECK(dist_test::FactOf(on_device, fact::kDecoding).find("each step at a position on the device") !=
        std::string::npos);
  CHECK(Find(on_device, metric::kTokensPerSecond)->method.find(", decode_step device, one process on cpu") !=
        std::string::npos);
  // A CUDA graph on a CPU: validate refuses it where the plan says so; a run on `device: auto` that
  // finds no GPU refuses it before the first request, with the reason.
  spec.inference.decode_step = DecodeStepChoice::kGraph;
  CHECK(MakeNativeFsdpBackend()->Check(plan, spec).size() == 1);
  if (native::compat::CudaAvailable()) return;
  spec.training.device = DeviceChoice::kAuto;
  Harness graph;
  BackendOutcome refused = graph.Run(plan, spec);
  CHECK(refused.status == CaseStatus::kFailed);
  CHECK(refused.reason == "generate: a CUDA graph needs a model on a CUDA device, not cpu");
  CHECK(graph.events.requests.empty());
}

TEST_CASE("native fsdp: multi-node, stop, timeout and a missing tokenizer end the case with a reason") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  {
    Harness h;
    CaseSpec spec = TrainingCase(Workload::kPretrain, "corpus", 3);
    spec.nodes = 2;  // two ranks: `protocol worker` processes (dist_fsdp_test.cc runs real ones)
    spec.training.batch_size = 3;
    REQUIRE(MakeNativeFsdpBackend()->Check(plan, spec) ==
            std::vector<std::string>{"batch_size 3 must be divisible by ranks × grad_accum = 2 × 1 (each rank takes an "
                                     "equal slice of the global batch)"});
    spec.training.batch_size = 2;
    native::DistOptions o;
    o.worker_program = "/bin/true";  // names the program in the reason
    h.processes.result = FakeProcessRunner::Exited(0);  // every rank exits 0 without doing a rank's work
    auto backend = MakeNativeFsdpBackend(o);
    BackendContext ctx{plan, spec, 0, "", "", h.stop, h.processes, h.clock, h.events};
    BackendOutcome out = backend->Run(ctx);
    CHECK(out.status == CaseStatus::kFailed);
    CHECK(out.reason ==
          "rank 0 (node node0) exited with code 0 without reporting the end of its work (no \"bytes\" event): is "
          "'/bin/true' the protocol program with the `worker` subcommand?");
    CHECK(h.events.steps.empty());
    // The ranks went through the context's runner: one process each, told its rank and the world size.
    REQUIRE(h.processes.started.size() == 2);
    for (size_t r = 0; r < 2; ++r) {
      CHECK(h.processes.started[r].argv.at(0) == "/bin/true");
      CHECK(h.processes.started[r].env.at("RANK") == std::to_string(r));
      CHECK(h.processes.started[r].env.at("WORLD_SIZE") == "2");
    }
    // Rank 1 fails with an error event: the case names it and its error.
    native::WorkerEvent error;
    error.kind = native::WorkerEvent::Kind::kError;
    error.text = "CUDA out of memory";
    h.processes.script = [&error](const ProcessSpec& p) {
      return p.env.at("RANK") == "1" ? FakeProcessRunner::Ends(3, {native::EncodeEvent(error)})
                                     : FakeProcessRunner::Ends(0);
    };
    out = backend->Run(ctx);
    CHECK(out.status == CaseStatus::kFailed);
    // An allocator's error: the finding with the case's memory estimate, then the rank's own words.
    CHECK(out.reason ==
          "rank 1 (node node1) ran out of memory; the memory estimate expected 358.7 kB per rank process; lower "
          "training.batch_size or seq_len, checkpoint more layers (checkpoint_every: 1), or spread the model over "
          "more ranks; then rank 1 (node node1) exited with code 3: CUDA out of memory");
    CHECK(out.exit_code == 3);
  }
  {
    Harness h;
    h.stop.Request();
    BackendOutcome out = h.Run(plan, TrainingCase(Workload::kPretrain, "corpus", 3));
    CHECK(out.status == CaseStatus::kInterrupted);
    CHECK(out.reason == "stopped by request at step 0 of 3");
    CHECK(h.events.steps.empty());
  }
  {
    Harness h;
    CaseSpec spec = TrainingCase(Workload::kPretrain, "corpus", 50);
    spec.timeout_seconds = 4.5;  // the ticking clock passes it during the second step
    BackendOutcome out = h.Run(plan, spec);
    CHECK(out.status == CaseStatus::kTimeout);
    CHECK(out.reason == "exceeded the case's timeout of 4.5 s at step 2 of 50");
    CHECK(h.events.steps.size() == 2);
  }
  {
    // Without its tokenizer the model is refused by Check (validate) and by Run, with one message.
    Harness h;
    fs::remove(fx.root / "model/tokenizer.model");
    const CaseSpec spec = TrainingCase(Workload::kPretrain, "corpus", 3);
    const std::string message = (fx.root / "model/tokenizer.model").string() +
                                ": no tokenizer model here (a SentencePiece tokenizer.model is needed to turn text "
                                "into tokens; put one in the model's directory)";
    auto backend = MakeNativeFsdpBackend();
    CHECK(backend->Check(plan, spec) == std::vector<std::string>{message});
    BackendContext ctx{plan, spec, 0, "", "", h.stop, h.processes, h.clock, h.events};
    BackendOutcome out = backend->Run(ctx);
    CHECK(out.status == CaseStatus::kFailed);
    CHECK(out.reason == message + "; nothing was run");
  }
}

TEST_CASE("native fsdp: a parquet copy of a jsonl corpus trains to the same losses; validate checks its column") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  const std::string dir = std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/parquet/";
  plan.datasets["jsonl"] = DatasetSpec{"jsonl", "jsonl", dir + "corpus.jsonl", {}, {}};
  auto losses = [&](const std::string& dataset) {
    CaseSpec spec = TrainingCase(Workload::kPretrain, dataset, 3);
    Harness h;
    BackendOutcome out = h.Run(plan, spec);
    REQUIRE(out.status == CaseStatus::kOk);
    std::vector<double> l;
    for (const auto& s : h.events.steps) l.push_back(s.loss.value_or(-1));
    l.push_back(*Find(out, metric::kEvalLoss)->value);
    return l;
  };
  const std::vector<double> jsonl = losses("jsonl");
  REQUIRE(jsonl.size() == 4);
  for (const char* copy : {"dict-snappy-v1.parquet", "plain-gzip-v2.parquet", "nulls-snappy-v1.parquet", "folder"}) {
    CAPTURE(std::string(copy));
    plan.datasets["copy"] = DatasetSpec{"copy", "parquet", dir + copy, {}, {}};
    CHECK(losses("copy") == jsonl);  // bit for bit
  }

  // validate reads the footers: a column the files lack is an error before any run.
  plan.datasets["copy"] = DatasetSpec{"copy", "parquet", dir + "folder", "body", {}};
  CaseSpec spec = TrainingCase(Workload::kPretrain, "copy", 3);
  auto problems = MakeNativeFsdpBackend()->Check(plan, spec);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "dataset 'copy': " + dir + "folder/part-00000.parquet: no column 'body' (the file has: id, text, "
                                                  "url, score, token_count); set the dataset's `column:`");
  plan.datasets["copy"] = DatasetSpec{"copy", "tokens", dir, {}, {}};
  problems = MakeNativeFsdpBackend()->Check(plan, spec);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "dataset 'copy' has format 'tokens', which the native backends cannot read (text, jsonl, parquet or dolly)");
}

TEST_CASE("native fsdp: Check names what a case lacks") {
  Plan plan;
  plan.models["x"] = ModelSpec{"x", "llama2-8b", "", Quantization::kNone, false, false, "", {}};
  CaseSpec spec;
  spec.id = "c.1";
  spec.model = "x";
  spec.workload = Workload::kPretrain;
  auto problems = MakeNativeFsdpBackend()->Check(plan, spec);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0] == "unknown model preset 'llama2-8b' (known: llama2-7b, llama2-13b, llama2-70b, tiny, small-100m, llama-1b, layers-100m)");
  CHECK(problems[1] == "a training workload needs a dataset");
  CHECK(problems[2] == "a training workload needs a length");
}

TEST_CASE("native fsdp: a 4-bit model: pretrain is QLoRA continued pretraining, finetune is QLoRA, inference from 4 bits") {
  Fixture fx;
  Plan plan = fx.MakePlan();
  plan.models["mini"].quantization = Quantization::kNf4;
  CaseSpec pretrain = TrainingCase(Workload::kPretrain, "corpus", 30);
  CHECK(MakeNativeFsdpBackend()->Check(plan, pretrain).empty());  // the plan is valid
  {  // The fixture's model directory has a config and a tokenizer but no weights: a stored failure.
    Harness h;
    BackendContext ctx{plan, pretrain, 0, "", "", h.stop, h.processes, h.clock, h.events};
    BackendOutcome out = MakeNativeFsdpBackend()->Run(ctx);
    CHECK(out.status == CaseStatus::kFailed);
    CHECK(out.reason == "a 4-bit pretrain is QLoRA continued pretraining of the model's own weights, but model 'mini' "
                        "has no model.safetensors or model.safetensors.index.json in its path '" +
                            (fx.root / "model").string() + "'" + std::string(" (or say `init: random` on the model to measure on seeded random weights)") + "; nothing was run");
    CHECK(h.events.steps.empty());
  }

  // A base model with weights, saved by a full-precision pretrain (model_save into its output_dir).
  const std::string base_dir = (fx.root / "base").string();
  plan.models["mini"].quantization = Quantization::kNone;
  Harness pre;
  REQUIRE(pre.Run(plan, TrainingCase(Workload::kPretrain, "corpus", 10), base_dir).status == CaseStatus::kOk);
  plan.models["mini"].path = base_dir;
  plan.models["mini"].quantization = Quantization::kNf4;

  {  // 4-bit pretrain = QLoRA continued pretraining of those weights, 30 steps.
    pretrain.training.batch_size = 8;  // a smoother loss curve than batches of 2
    const std::string adapters = (fx.root / "cpt").string(), log = (fx.root / "cpt.log").string();
    Harness h;
    BackendOutcome out = h.Run(plan, pretrain, adapters, log);
    CHECK(out.status == CaseStatus::kOk);
    REQUIRE(h.events.steps.size() == 30);
    double first = 0, last = 0;
    for (int i = 0; i < 5; ++i) {
      first += *h.events.steps[static_cast<size_t>(i)].loss / 5;
      last += *h.events.steps[static_cast<size_t>(25 + i)].loss / 5;
    }
    INFO("mean loss of steps 1-5 " << first << ", of steps 26-30 " << last);
    CHECK(last < first - 0.05);  // here about 2.76 -> 2.62
    const std::string method =
        "QLoRA continued pretraining: 4-bit NF4 base (the model's weights) frozen, LoRA rank 8 alpha 16 on "
        "q,k,v,o,gate,up,down, causal-LM loss on every token";
    CHECK(Find(out, metric::kFinalLoss)->method == "training loss of the last step; " + method);
    for (const Measurement& m : out.measurements) {
      CAPTURE(m.name);
      CHECK(m.method.find(method) != std::string::npos);  // every measurement says what ran
    }
    CHECK(Find(out, metric::kPeakHostRss));
    // The output directory is a PEFT adapter directory, not a model.
    CHECK_FALSE(fs::exists(fs::path(adapters) / "model.safetensors"));
    auto config = ReadFileText((fs::path(adapters) / "adapter_config.json").string());
    REQUIRE(config.ok());
    for (const char* key : {"\"peft_type\": \"LORA\"", "\"task_type\": \"CAUSAL_LM\"", "\"r\": 8",
                            "\"lora_alpha\": 16.0", "\"target_modules\"", "\"base_model_name_or_path\""})
      CHECK(config->find(key) != std::string::npos);
    auto loaded = native::lora_load(adapters, *native::ReadHfConfig(base_dir));
    REQUIRE(loaded.ok());
    CHECK(loaded->rank == 8);
    CHECK(loaded->layers[1][6].b.abs().sum().item<double>() > 0);  // trained
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("\nweights loaded from " + base_dir + " (each projection quantized to NF4 as it is read)\n") !=
          std::string::npos);
    CHECK(text.find("\n" + method + " (10368 bytes of 4-bit projection weights)\n") != std::string::npos);
  }

  // More than one rank: tests/native/distributed/dist_qlora_test.cc (FSDP-QLoRA through the rank workers).

  const std::string adapter_dir = (fx.root / "adapters").string(), log = (fx.root / "qlora.log").string();
  Harness ft;
  BackendOutcome tuned = ft.Run(plan, TrainingCase(Workload::kFinetune, "dolly", 2), adapter_dir, log);
  CHECK(tuned.status == CaseStatus::kOk);
  CHECK(ft.events.steps.size() == 2);
  CHECK(Find(tuned, metric::kFinalLoss)->method ==
        "training loss of the last step; QLoRA: 4-bit NF4 base frozen, LoRA rank 8 alpha 16 on q,k,v,o,gate,up,down");
  CHECK(fs::exists(fs::path(adapter_dir) / "adapter_model.safetensors"));
  CHECK(fs::exists(fs::path(adapter_dir) / "adapter_config.json"));
  CHECK_FALSE(fs::exists(fs::path(adapter_dir) / "model.safetensors"));
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // 2 layers · (36 bytes per 64 weights) · (1024 + 512 + 512 + 1024 + 3·2048) weights.
  CHECK(text.find("\nQLoRA: 4-bit NF4 base frozen, LoRA rank 8 alpha 16 on q,k,v,o,gate,up,down "
                  "(10368 bytes of 4-bit projection weights)\n") != std::string::npos);
  CHECK(text.find("\nLoRA adapters saved to " + adapter_dir + "\n") != std::string::npos);

  CaseSpec ranked = TrainingCase(Workload::kFinetune, "dolly", 1);
  ranked.training.lora_rank = 4;
  ranked.training.lora_alpha = 8;
  Harness ft2;
  BackendOutcome out2 = ft2.Run(plan, ranked);
  CHECK(out2.status == CaseStatus::kOk);
  CHECK(Find(out2, metric::kFinalLoss)->method ==
        "training loss of the last step; QLoRA: 4-bit NF4 base frozen, LoRA rank 4 alpha 8 on q,k,v,o,gate,up,down");

  {  // models[].double_quant and training.lora_freeze_a: named in the method text; bytes of double quantization:
     // per projection 33 per block + 4 per group of 256 blocks + 4 (mean); 2 layers · (144·33 + 7·8) = 9616.
    Plan dq = plan;
    dq.models["mini"].double_quant = true;
    CaseSpec frozen = TrainingCase(Workload::kFinetune, "dolly", 1);
    frozen.training.lora_freeze_a = true;
    const std::string log = (fx.root / "dq.log").string();
    Harness h;
    BackendOutcome out = h.Run(dq, frozen, "", log);
    CHECK(out.status == CaseStatus::kOk);
    const std::string method =
        "QLoRA: 4-bit NF4 base (double-quantized absmax) frozen, LoRA rank 8 alpha 16 on q,k,v,o,gate,up,down (A frozen "
        "at its seeded start, B trained)";
    CHECK(Find(out, metric::kFinalLoss)->method == "training loss of the last step; " + method);
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("\n" + method + " (9616 bytes of 4-bit projection weights)\n") != std::string::npos);
  }

  CaseSpec gen = InferenceCase("i.1", {4, 6});
  gen.inference.prompt = "Where is there an ocean?";
  Harness inf;
  BackendOutcome answered = inf.Run(plan, gen);
  CHECK(answered.status == CaseStatus::kOk);
  CHECK(*Find(answered, metric::kGeneratedTokens)->value == 10);
  // The tiny model's dequantized projections fit in this machine's memory: kept, and said so.
  const std::string& how = Find(answered, metric::kTokensPerSecond)->method;
  CHECK(StartsWith(how, "2 greedy requests, KV cache, one process on cpu; 4-bit NF4 weights: decoder projections "
                        "dequantized once and kept ("));
  CHECK(EndsWith(how, "); embedding, norms, lm_head full precision"));
}

}  // namespace protocol

namespace protocol {

TEST_CASE("native quickstart: the shipped data, tokenizer and tiny preset fit together") {
  const std::string dir = std::string(PROTOCOL_SOURCE_DIR) + "/data/quickstart";
  auto tok = native::LoadSentencePieceTokenizer(dir + "/tokenizer.model");
  REQUIRE(tok.ok());
  CHECK((*tok)->vocab_size() == 512);
  CHECK((*tok)->vocab_size() <= native::PresetConfig("tiny")->vocab_size);
  auto dolly = native::data_read_dolly(dir + "/dolly.jsonl");
  REQUIRE(dolly.ok());
  CHECK(dolly->size() == 30);
  auto corpus = native::data_load({dir + "/corpus.txt", "text", ""}, **tok);
  REQUIRE(corpus.ok());
  CHECK(corpus->docs.at(0).tokens.size() > 2000);
  const std::string q = "Can there be life somewhere in the Solar System outside Earth?";
  CHECK((*tok)->Decode((*tok)->Encode(q)) == q);
}

}  // namespace protocol
