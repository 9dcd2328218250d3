// A ratio only between the same work (src/report/work_settings.h): the two
// sides' cases are read from the resolved plans their runs stored; a ratio
// between cases that differ in a setting that decides the work is refused
// ("–", the sentence says what differs). One test per setting.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report/report_data.h"
#include "report/tables/work_settings.h"
#include "report_fixtures.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

using namespace report_test;

// A resolved plan: the fsdp case 2.1.1.1 and the share case 2.2.1.1 (pretrain),
// the fsdp inference 2.1.1.5 and the share multi-inference 2.2.1.6. `share`
// and `share_inference` are the share cases' own keys.
std::string PlanText(const std::string& share = "", const std::string& share_inference = "",
                     const std::string& share_model = "m", const std::string& share_dataset = "corpus") {
  return R"yaml(protocol: 1
name: w
models:
  m: {preset: tiny}
  m4: {preset: tiny, quantization: nf4}
  m4b: {preset: tiny, quantization: nf4}
datasets:
  corpus: {format: text, path: corpus.txt}
  other: {format: text, path: other.txt}
cluster:
  launcher: local
  nodes:
    - {name: n0, host: localhost, gpus: 0}
defaults:
  training: {batch_size: 8, seq_len: 128, device: cpu}
  inference: {prompt: "Hello", max_new_tokens: [100, 110]}
stages:
  - name: s
    cases:
      - {id: 2.1.1.1, workload: pretrain, backend: fsdp, model: )yaml" +
         std::string(share_model == "m4b" ? "m4" : "m") + R"yaml(, dataset: corpus, nodes: 1, steps: 1000}
      - {id: 2.2.1.1, workload: pretrain, backend: share, model: )yaml" +
         share_model + ", dataset: " + share_dataset + R"yaml(, topology: "n0:2x1", steps: 1000)yaml" + share + R"yaml(}
      - {id: 2.1.1.5, workload: inference, backend: fsdp, model: m, nodes: 1}
      - {id: 2.2.1.6, workload: inference, backend: share, model: m, topology: "n0:2x1", variant: multi-inference)yaml" +
         share_inference + R"yaml(}
)yaml";
}

ReportData ComputeWith(const std::string& plan_text) {
  RunRecord run = MakeRun(1);
  run.plan_text = plan_text;
  ReportCaseInput fsdp = TrainCase("2.1.1.1", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 7200);
  ReportCaseInput share = TrainCase("2.2.1.1", "m", "pretrain", "share", 1, "", "steps", 1000, 2400);
  ReportCaseInput fsdp_inf = WithInferenceFigures(InferenceCase("2.1.1.5", "m", "fsdp", 1, "", ""), 30, 0.1, 10);
  ReportCaseInput share_inf =
      WithInferenceFigures(InferenceCase("2.2.1.6", "m", "share", 1, "", "multi-inference"), 10, 0.05, 20);
  return Compute({RunWith(run, {fsdp, share, fsdp_inf, share_inf})});
}

const ReportCell& TrainingRatio(const ReportData& data) {
  const ReportTable* t = FindTable(data.models.at(0), "training");
  REQUIRE(t);
  REQUIRE(!t->efficiency.empty());
  return t->efficiency[0].cells[0];
}

// The sentences about inference ratios (total generation time).
std::vector<std::string> InferenceSentences(const ReportData& data) {
  std::vector<std::string> out;
  for (const std::string& s : data.models.at(0).sentences)
    if (s.find("total generation time") != std::string::npos) out.push_back(s);
  return out;
}

// The training ratio is refused, naming exactly this difference.
void CheckTrainingRefused(const std::string& share, const std::string& difference, const std::string& model = "m",
                          const std::string& dataset = "corpus") {
  ReportData data = ComputeWith(PlanText(share, "", model, dataset));
  const ReportCell& ratio = TrainingRatio(data);
  CHECK(ratio.text == "\u2013");
  CHECK(ratio.refused == "no ratio: the sides did different work (" + difference + ")");
  CHECK(data.models[0].sentences.at(0) ==
        "No ratio of share to fsdp on 1 node for pretrain 1000 steps: the sides did different work (" + difference +
            ").");
}

void CheckInferenceRefused(const std::string& share_inference, const std::string& difference) {
  ReportData data = ComputeWith(PlanText("", share_inference));
  CHECK(TrainingRatio(data).text == "3.00");  // the training cases did the same work
  const std::vector<std::string> sentences = InferenceSentences(data);
  REQUIRE(sentences.size() == 1);
  CHECK(StartsWith(sentences[0], "No ratio of share multi-inference"));
  CHECK(EndsWith(sentences[0], ": the sides did different work (" + difference + ")."));
}

}  // namespace

TEST_CASE("report work: the same settings on both sides give the ratio") {
  ReportData data = ComputeWith(PlanText());
  CHECK(TrainingRatio(data).text == "3.00");
  CHECK(TrainingRatio(data).refused == "");
  const std::vector<std::string> sentences = InferenceSentences(data);
  REQUIRE(sentences.size() == 1);
  CHECK(StartsWith(sentences[0], "share multi-inference on 1 node is 3.00\u00d7 faster than fsdp on 1 node"));
}

TEST_CASE("report work: seq_len") { CheckTrainingRefused(", training: {seq_len: 256}", "seq_len: 128 vs 256"); }

TEST_CASE("report work: batch size") { CheckTrainingRefused(", training: {batch_size: 16}", "batch_size: 8 vs 16"); }

TEST_CASE("report work: device (the compute dtype follows it)") {
  CheckTrainingRefused(", training: {device: auto}", "device: cpu vs auto");
}

TEST_CASE("report work: dataset") { CheckTrainingRefused("", "dataset: corpus.txt vs other.txt", "m", "other"); }

TEST_CASE("report work: quantization") {
  CheckTrainingRefused("", "quantization: none vs nf4; double_quant: (none) vs false; lora_rank: (none) vs 8; "
                           "lora_alpha: (none) vs 16; lora_freeze_a: (none) vs false", "m4");
}

TEST_CASE("report work: LoRA settings of a 4-bit model") {
  CheckTrainingRefused(", training: {lora_rank: 16}", "lora_rank: 8 vs 16", "m4b");
  CheckTrainingRefused(", training: {lora_alpha: 32}", "lora_alpha: 16 vs 32", "m4b");
  CheckTrainingRefused(", training: {lora_freeze_a: true}", "lora_freeze_a: false vs true", "m4b");
}

TEST_CASE("report work: the request schedule of inference") {
  CheckInferenceRefused(", inference: {max_new_tokens: [100, 110, 120]}",
                        "request schedule: 100, 110 (2 requests, 210 tokens) vs 100, 110, 120 (3 requests, 330 tokens)");
}

TEST_CASE("report work: the prompt and ignore_eos of inference") {
  CheckInferenceRefused(", inference: {prompt: Bye}", "prompt: Hello vs Bye");
  CheckInferenceRefused(", inference: {ignore_eos: false}", "ignore_eos: true vs false");
}

TEST_CASE("report work: the decode step of inference") {
  CheckInferenceRefused(", inference: {decode_step: graph}", "decode_step: host vs graph");
}

TEST_CASE("report work: settings that are a system's own way of working do not refuse a ratio") {
  ReportData data = ComputeWith(PlanText(", training: {grad_accum: 2, sync_every: 5, checkpoint_every: 0}"));
  CHECK(TrainingRatio(data).text == "3.00");
  // A stored text that is not a plan (an import's file, another format) tells nothing: no refusal.
  CHECK(PlanWorkSettings("source: a paper\nresults: []\n").empty());
  CHECK(TrainingRatio(ComputeWith("not: a plan")).text == "3.00");
}

}  // namespace protocol

namespace protocol {

TEST_CASE("report: cells measured on declared random weights are named under their table") {
  using namespace report_test;
  RunRecord run = MakeRun(1);
  ReportCaseInput fsdp = TrainCase("2.1.1.1", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 7200);
  ReportCaseInput share = TrainCase("2.2.1.1", "m", "pretrain", "share", 1, "", "steps", 1000, 2400);
  for (Measurement& m : share.measurements) m.method = "weights: random weights (init: random, seed 1234)";
  ReportData data = Compute({RunWith(run, {fsdp, share})});
  const ReportTable* t = FindTable(data.models.at(0), "training");
  REQUIRE(t);
  CHECK(t->note ==
        "Random weights: this cell was measured on seeded random weights (the plan says init: random), not on a "
        "trained model's: pretrain 1000 steps — share 1 node.");
  // Without it, no such line.
  ReportData plain = Compute({RunWith(run, {fsdp, TrainCase("2.2.1.1", "m", "pretrain", "share", 1, "", "steps", 1000, 2400)})});
  CHECK(FindTable(plain.models.at(0), "training")->note.empty());
}

}  // namespace protocol
