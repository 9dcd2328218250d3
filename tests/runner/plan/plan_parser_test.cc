#include <doctest/doctest.h>

#include "test_files.h"

#include <cstdio>
#include <filesystem>
#include <numeric>

#include "runner/base/text.h"
#include "runner/plan/plan_emit.h"
#include "runner/plan/plan_parser.h"
#include "runner/plan/training_fields.h"

using namespace protocol;

namespace {

const std::string kExample = std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/plans/example.yaml";

// A valid plan head; the cases given to Errors() start at line 15, their keys
// at column 9 ("      - {id: ..." puts `id` at column 10).
const std::string kHead =
    "protocol: 1\n"                                //  1
    "name: t\n"                                    //  2
    "models:\n"                                    //  3
    "  m7: {preset: llama2-7b}\n"                  //  4
    "datasets:\n"                                  //  5
    "  web: {format: text, path: /d/web.txt}\n"    //  6
    "cluster:\n"                                   //  7
    "  network: 10G\n"                             //  8
    "  nodes:\n"                                   //  9
    "    - {name: rig0, gpus: 8}\n"                // 10
    "    - {name: rig1, gpus: 8}\n"                // 11
    "stages:\n"                                    // 12
    "  - name: s1\n"                               // 13
    "    cases:\n";                                // 14

std::string ErrorsOf(const PlanParseResult& r) {
  std::vector<std::string> lines;
  for (const auto& e : r.errors) lines.push_back(e.ToString());
  return Join(lines, "\n");
}

// Errors of kHead + `cases`, one per line.
std::string Errors(const std::string& cases, const PlanParseOptions& options = {}) {
  PlanParseResult r = ParsePlanString(kHead + cases, "<string>", options);
  if (r.ok()) return "(ok)";
  return ErrorsOf(r);
}

PlanParseResult Good(const std::string& cases, const PlanParseOptions& options = {}) {
  PlanParseResult r = ParsePlanString(kHead + cases, "<string>", options);
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  return r;
}

const char* kPretrain = "      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10}\n";

}  // namespace

TEST_CASE("plan: the documented example resolves inheritance, ranges and topologies") {
  PlanParseResult r = ParsePlanFile(kExample);
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const Plan& plan = *r.plan;
  CHECK(plan.name == "llama70b");
  CHECK(plan.title == "Llama-2-70B (4-bit): FSDP baseline vs share protocol");
  CHECK(plan.file == kExample);
  REQUIRE(plan.models.count("llama2-70b") == 1);
  CHECK(plan.models.at("llama2-70b").quantization == Quantization::kNf4);
  CHECK(plan.models.at("llama2-70b").path == "/models/Llama-2-70b-chat-hf");
  CHECK(plan.datasets.at("dolly").format == "dolly");
  CHECK(plan.cluster.network == "10G");
  REQUIRE(plan.cluster.nodes.size() == 2);
  CHECK(plan.cluster.nodes[1].host == "rig1.example");
  CHECK(plan.cluster.nodes[1].gpus == 8);
  REQUIRE(plan.cluster.emulate.has_value());
  CHECK(plan.cluster.emulate->bandwidth == "100mbit");
  CHECK(plan.cluster.emulate->delay == "2ms");
  REQUIRE(plan.stages.size() == 2);
  CHECK(plan.stages[0].title == "Open source (FSDP baseline)");
  REQUIRE(plan.Cases().size() == 7);

  const CaseSpec* c1 = plan.FindCase("2.1.1.1");
  REQUIRE(c1 != nullptr);
  CHECK(c1->stage == "stage1");
  CHECK(c1->backend == "fsdp");
  CHECK(c1->system == "fsdp");
  CHECK(c1->model == "llama2-70b");
  CHECK(c1->dataset == "fineweb-edu");
  CHECK(c1->nodes == 1);
  CHECK(c1->network == "");
  CHECK(*c1->length == Length{Length::Unit::kSteps, 1000});
  CHECK(c1->report_as.empty());
  CHECK(c1->timeout_seconds == 21600);
  CHECK(c1->repeats == 1);
  CHECK(c1->warmup_steps == 2);
  CHECK(c1->output_dir == "results/models/{plan}/{case_id}");
  CHECK(c1->training.batch_size == 16);
  CHECK(c1->training.learning_rate == doctest::Approx(3.0e-4));
  CHECK(c1->where.ToString() == kExample + ":33:9");

  CHECK(plan.FindCase("2.1.1.2")->network == "80G");
  CHECK(plan.FindCase("2.1.1.2")->nodes == 2);

  // Maps merge key by key: batch_size from the case, the rest from defaults.
  const CaseSpec* c3 = plan.FindCase("2.1.1.3");
  CHECK(c3->training.batch_size == 8);
  CHECK(c3->training.seq_len == 128);
  CHECK(c3->training.seed == 1234);
  CHECK(c3->workload == Workload::kFinetune);
  CHECK(c3->dataset == "dolly");

  const CaseSpec* inf = plan.FindCase("2.1.1.5");
  CHECK(inf->workload == Workload::kInference);
  CHECK_FALSE(inf->length.has_value());
  CHECK(inf->dataset == "");
  CHECK(inf->timeout_seconds == 5400);
  CHECK(inf->inference.prompt == "Can there be life somewhere in the Solar System outside Earth?");
  REQUIRE(inf->inference.max_new_tokens.size() == 31);
  CHECK(inf->inference.max_new_tokens.front() == 100);
  CHECK(inf->inference.max_new_tokens[1] == 110);
  CHECK(inf->inference.max_new_tokens.back() == 400);
  CHECK(inf->inference.TotalTokens() == 7750);
  CHECK(inf->inference.ignore_eos);

  const CaseSpec* s1 = plan.FindCase("2.2.1.1");
  CHECK(s1->backend == "share");
  CHECK(s1->system == "share");
  REQUIRE(s1->topology.parts.size() == 2);
  CHECK(s1->topology.parts[0].node == "rig0");
  CHECK(s1->topology.parts[0].groups == 2);
  CHECK(s1->topology.parts[0].ranks_per_group == 4);
  CHECK(s1->topology.parts[1].node == "rig1");
  CHECK(s1->topology.TotalRanks() == 16);
  CHECK(s1->nodes == 2);
  CHECK(s1->network == "10G");  // cluster.network for a multi-node case
  CHECK(s1->timeout_seconds == 90);  // stage defaults over plan defaults
  CHECK(*s1->length == Length{Length::Unit::kSteps, 100});
  CHECK(s1->report_as == std::vector<Length>{Length{Length::Unit::kSteps, 1000}});

  const CaseSpec* one = plan.FindCase("2.2.1.1-1n");
  CHECK(one->nodes == 1);
  CHECK(one->network == "");
  CHECK(one->topology.ToString() == "rig0:2x4");

  // A list replaces the inherited range; the prompt is still inherited.
  const CaseSpec* multi = plan.FindCase("2.2.1.3");
  CHECK(multi->variant == "multi-inference");
  CHECK(multi->inference.max_new_tokens == std::vector<int>{100, 200});
  CHECK(multi->inference.prompt == inf->inference.prompt);
  CHECK(multi->topology.TotalRanks() == 16);
}

TEST_CASE("plan: resolved text is canonical, stable and parses back to itself") {
  PlanParseResult a = ParsePlanFile(kExample);
  PlanParseResult b = ParsePlanFile(kExample);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const std::string& text = a.plan->resolved_text;
  CHECK(text == b.plan->resolved_text);
  CHECK(text.find("defaults") == std::string::npos);
  CHECK(text.find("      - id: \"2.1.1.3\"\n"
                  "        workload: finetune\n"
                  "        backend: fsdp\n"
                  "        system: fsdp\n"
                  "        model: llama2-70b\n"
                  "        dataset: dolly\n"
                  "        nodes: 1\n"
                  "        steps: 500\n"
                  "        timeout: 21600\n"
                  "        repeats: 1\n"
                  "        warmup_steps: 2\n"
                  "        output_dir: \"results/models/{plan}/{case_id}\"\n"
                  "        training:\n"
                  "          batch_size: 8\n"
                  "          seq_len: 128\n"
                  "          grad_accum: 1\n"
                  "          learning_rate: 0.0003\n"
                  "          seed: 1234\n"
                  "          device: auto\n") != std::string::npos);
  CHECK(text.find("        topology: rig0:2x4 rig1:2x4\n        network: 10G\n        steps: 100\n"
                  "        report_as: 1000\n") != std::string::npos);
  PlanParseResult again = ParsePlanString(text, "resolved.yaml");
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(again.plan->resolved_text == text);
}

TEST_CASE("plan: --set overrides edit the tree before inheritance") {
  PlanParseOptions options;
  options.overrides = {"defaults.training.batch_size=2", "stages[stage1].cases[2.1.1.1].steps=50",
                       "stages[1].defaults.timeout=5m", "cluster.network=25G",
                       "stages[stage2].cases[2.2.1.3].inference.max_new_tokens=[7, 8]"};
  PlanParseResult r = ParsePlanFile(kExample, options);
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const Plan& plan = *r.plan;
  CHECK(plan.FindCase("2.1.1.1")->length->count == 50);
  CHECK(plan.FindCase("2.1.1.1")->training.batch_size == 2);
  CHECK(plan.FindCase("2.1.1.3")->training.batch_size == 8);  // the case's own value still wins
  CHECK(plan.FindCase("2.2.1.1")->timeout_seconds == 300);
  CHECK(plan.FindCase("2.1.1.1")->timeout_seconds == 21600);
  CHECK(plan.FindCase("2.2.1.1")->network == "25G");
  CHECK(plan.FindCase("2.2.1.3")->inference.max_new_tokens == std::vector<int>{7, 8});
  CHECK(plan.resolved_text.find("steps: 50\n") != std::string::npos);
}

TEST_CASE("plan: bad --set overrides name the override") {
  PlanParseOptions options;
  options.overrides = {"stages[stage9].timeout=5", "stages[7].name=x", "nosuch=1", "defaults.repeats=many",
                       "justtext", "stages[stage1]..x=1", "name.deeper=1"};
  PlanParseResult r = ParsePlanFile(kExample, options);
  CHECK(ErrorsOf(r) ==
        "--set stages[stage9].timeout=5: no stage named 'stage9'\n"
        "--set stages[7].name=x: index 7 is out of range ('stages' has 2 items)\n"
        "--set justtext: expected PATH=VALUE (e.g. defaults.timeout=1h)\n"
        "--set stages[stage1]..x=1: bad path 'stages[stage1]..x'\n"
        "--set name.deeper=1: 'name' is 'llama70b', not a map\n"
        "--set nosuch=1: unknown key 'nosuch' (valid keys: protocol, name, title, models, datasets, "
        "cluster, defaults, stages, interleave, telemetry)\n"
        "--set defaults.repeats=many: expected an integer for 'repeats', got 'many'");
}

TEST_CASE("plan: the test head with one case is valid") {
  PlanParseResult r = Good(kPretrain);
  const CaseSpec& c = *r.plan->FindCase("a");
  CHECK(c.nodes == 1);
  CHECK(c.repeats == 1);
  CHECK(c.timeout_seconds == 0);
  CHECK(c.warmup_steps == 0);
  CHECK(c.where.ToString() == "<string>:15:9");
}

TEST_CASE("plan: unknown backend, workload, model and dataset suggest the close name") {
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fdsp, model: m7, dataset: web, steps: 10}\n") ==
        "<string>:15:46: unknown backend 'fdsp' (did you mean 'fsdp'?)");
  CHECK(Errors("      - {id: a, workload: pretrian, backend: fsdp, model: m7, dataset: web, steps: 10}\n") ==
        "<string>:15:27: unknown workload 'pretrian' (did you mean 'pretrain'?)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m8, dataset: web, steps: 10}\n") ==
        "<string>:15:59: unknown model 'm8' (did you mean 'm7'?)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: wbe, steps: 10}\n") ==
        "<string>:15:72: unknown dataset 'wbe' (did you mean 'web'?)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: tensorflow, model: m7, dataset: web, steps: 10}\n") ==
        "<string>:15:46: unknown backend 'tensorflow' (expected one of: fsdp, share, command)");
  PlanParseOptions options;
  options.backend_names = {"fsdp", "share", "command", "tiny"};
  CHECK(Errors("      - {id: a, workload: pretrain, backend: tiyn, model: m7, steps: 10}\n", options) ==
        "<string>:15:46: unknown backend 'tiyn' (did you mean 'tiny'?)");
}

TEST_CASE("plan: unknown keys are errors with did-you-mean over that map's keys") {
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, stpes: 10}\n") ==
        "<string>:15:9: case 'a' needs steps or epochs (pretrain)\n"
        "<string>:15:77: unknown key 'stpes' (did you mean 'steps'?)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         training: {bach_size: 4, colour: red}}\n") ==
        "<string>:16:21: unknown key 'bach_size' (did you mean 'batch_size'?)\n"
        "<string>:16:35: unknown key 'colour' (valid keys: " + Join(TrainingFieldNames(), ", ") + ")");
  PlanParseResult top = ParsePlanString("protocol: 1\nname: t\nstagez: []\n", "<string>");
  CHECK(ErrorsOf(top) ==
        "<string>:1:1: missing 'stages' (a plan runs at least one stage of cases)\n"
        "<string>:3:1: unknown key 'stagez' (did you mean 'stages'?)");
}

TEST_CASE("plan: wrong types name the key and what was found") {
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: ten}\n") ==
        "<string>:15:84: expected an integer for 'steps', got 'ten'");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         training: [1, 2]}\n") ==
        "<string>:16:20: expected a map for 'training', got a sequence");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         repeats: 1.5, timeout: soon, title: {x: 1}}\n") ==
        "<string>:16:19: expected an integer for 'repeats', got '1.5'\n"
        "<string>:16:33: expected a duration for 'timeout' (seconds, or like 90s, 15m, 6h, 1h30m), got 'soon'\n"
        "<string>:16:46: expected a string for 'title', got a map");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         training: {learning_rate: fast, device: gpu}}\n") ==
        "<string>:16:36: expected a number for 'learning_rate', got 'fast'\n"
        "<string>:16:50: unknown device 'gpu' (did you mean 'cpu'?)");
  CHECK(Errors("      - id: a\n"
               "        workload: pretrain\n"
               "        backend: fsdp\n"
               "        model: m7\n"
               "        dataset: web\n"
               "        steps:\n") ==
        "<string>:20:9: expected an integer for 'steps', got nothing");
  CHECK(Errors("      - just-a-string\n") == "<string>:15:9: expected a map for 'cases', got 'just-a-string'");
}

TEST_CASE("plan: out-of-range numbers") {
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web,\n"
               "         steps: 99999999999999999999}\n") ==
        "<string>:16:17: 'steps' is out of range: 99999999999999999999 (at most 9223372036854775807)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 0}\n") ==
        "<string>:15:84: 'steps' must be > 0, got 0");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, epochs: -1}\n") ==
        "<string>:15:85: 'epochs' must be > 0, got -1");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         repeats: 0, warmup_steps: -1, timeout: -5, nodes: 3000000000}\n") ==
        "<string>:16:19: 'repeats' must be > 0, got 0\n"
        "<string>:16:36: 'warmup_steps' must be >= 0, got -1\n"
        "<string>:16:49: 'timeout' must be >= 0, got -5\n"
        "<string>:16:60: 'nodes' is out of range: 3000000000 (at most 2147483647)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         warmup_steps: 10}\n") ==
        "<string>:16:24: warmup_steps (10) must be less than steps (10)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         training: {batch_size: 0, seed: -1, learning_rate: 0}}\n") ==
        "<string>:16:33: 'batch_size' must be > 0, got 0\n"
        "<string>:16:42: 'seed' must be >= 0, got -1\n"
        "<string>:16:61: 'learning_rate' must be > 0, got 0");
}

TEST_CASE("plan: lora_rank and lora_alpha are read, checked where written, and emitted with the values used") {
  PlanParseResult set = Good("      - {id: a, workload: finetune, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
                             "         training: {lora_rank: 16, lora_alpha: 32}}\n");
  const TrainingSettings& t = set.plan->FindCase("a")->training;
  CHECK(t.LoraRank() == 16);
  CHECK(t.LoraAlpha() == 32.0);
  CHECK(set.plan->resolved_text.find("lora_rank: 16\n") != std::string::npos);
  CHECK(set.plan->resolved_text.find("lora_alpha: 32\n") != std::string::npos);
  PlanParseResult again = ParsePlanString(set.plan->resolved_text, "resolved.yaml");
  REQUIRE(again.ok());
  CHECK(again.plan->FindCase("a")->training.LoraRank() == 16);
  CHECK(again.plan->FindCase("a")->training.LoraAlpha() == 32.0);

  // Unset: the defaults, written as the values the backend uses.
  PlanParseResult unset = Good("      - {id: a, workload: finetune, backend: fsdp, model: m7, dataset: web, steps: 10}\n");
  const TrainingSettings& d = unset.plan->FindCase("a")->training;
  CHECK(d.LoraRank() == 8);
  CHECK(d.LoraAlpha() == 16.0);
  CHECK(unset.plan->resolved_text.find("          lora_rank: 8\n          lora_alpha: 16\n") != std::string::npos);

  CHECK(Errors("      - {id: a, workload: finetune, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         training: {lora_rank: 0, lora_alpha: -2}}\n") ==
        "<string>:16:32: 'lora_rank' must be > 0, got 0\n"
        "<string>:16:47: 'lora_alpha' must be > 0, got -2");
  CHECK(Errors("      - {id: a, workload: finetune, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
               "         training: {lora_rank: 2.5, lora_alpha: big}}\n") ==
        "<string>:16:32: expected an integer for 'lora_rank', got '2.5'\n"
        "<string>:16:49: expected a number for 'lora_alpha', got 'big'");
}

TEST_CASE("plan: durations accept seconds and h/m/s texts") {
  auto timeout = [](const std::string& value) {
    PlanParseResult r = Good("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, "
                             "timeout: " + value + "}\n");
    return r.plan->FindCase("a")->timeout_seconds;
  };
  CHECK(timeout("0") == 0);
  CHECK(timeout("90") == 90);
  CHECK(timeout("2.5") == 2.5);
  CHECK(timeout("90s") == 90);
  CHECK(timeout("15m") == 900);
  CHECK(timeout("6h") == 21600);
  CHECK(timeout("1h30m") == 5400);
  CHECK(timeout("1h30m15s") == 5415);
  CHECK(timeout("1.5h") == 5400);
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, timeout: 30m1h}\n") ==
        "<string>:15:97: expected a duration for 'timeout' (seconds, or like 90s, 15m, 6h, 1h30m), got '30m1h'");
}

TEST_CASE("plan: length rules") {
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, epochs: 1}\n") ==
        "<string>:15:96: case 'a' gives both steps and epochs (give one)");
  CHECK(Errors("      - {id: a, workload: finetune, backend: fsdp, model: m7, dataset: web}\n") ==
        "<string>:15:9: case 'a' needs steps or epochs (finetune)");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7, steps: 10,\n"
               "         inference: {prompt: hi, max_new_tokens: [5]}}\n") ==
        "<string>:15:71: an inference case has no steps or epochs (its length is inference.max_new_tokens)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 100, report_as: 100}\n") ==
        "<string>:15:100: report_as (100 steps) is the measured length itself, which the case reports anyway");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7, report_as: 100,\n"
               "         inference: {prompt: hi, max_new_tokens: [5]}}\n") ==
        "<string>:15:75: report_as applies to pretrain and finetune cases only");
  PlanParseResult epochs = Good("      - {id: a, workload: finetune, backend: fsdp, model: m7, dataset: web, epochs: 1, report_as: 3}\n");
  const CaseSpec& c = *epochs.plan->FindCase("a");
  CHECK(*c.length == Length{Length::Unit::kEpochs, 1});
  CHECK(c.report_as == std::vector<Length>{Length{Length::Unit::kEpochs, 3}});
  // A list: shorter lengths (read from the run's own steps), longer ones, and declared not-provided ones.
  PlanParseResult list = Good(
      "      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 1000,\n"
      "         report_as: [100, 2000], not_provided: [10]}\n");
  const CaseSpec& l = *list.plan->FindCase("a");
  CHECK(l.report_as == std::vector<Length>{Length{Length::Unit::kSteps, 100}, Length{Length::Unit::kSteps, 2000}});
  CHECK(l.not_provided == std::vector<Length>{Length{Length::Unit::kSteps, 10}});
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 1000,\n"
               "         report_as: [100, 2000], not_provided: [100]}\n") ==
        "<string>:16:49: not_provided repeats 100 steps (each length once, in report_as or not_provided)");
  CHECK(Errors("      - {id: a, workload: finetune, backend: fsdp, model: m7, dataset: web, epochs: 2, report_as: [1]}\n") ==
        "<string>:15:100: report_as (1 epoch) is shorter than the measured 2 epochs: a shorter length is read from "
        "per-step timings, so it needs a length in steps");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, report_as: []}\n") ==
        "<string>:15:99: report_as lists no length");
}

TEST_CASE("plan: inference schedule rules") {
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7}\n") ==
        "<string>:15:9: case 'a' needs inference.prompt and inference.max_new_tokens");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7, inference: {max_new_tokens: [5]}}\n") ==
        "<string>:15:75: an inference case needs inference.prompt");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7, inference: {prompt: hi}}\n") ==
        "<string>:15:75: an inference case needs inference.max_new_tokens");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
               "         inference: {prompt: \"\", max_new_tokens: []}}\n") ==
        "<string>:16:30: inference.prompt is empty\n"
        "<string>:16:50: max_new_tokens is empty");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
               "         inference: {prompt: hi, max_new_tokens: [100, 0, x]}}\n") ==
        "<string>:16:56: 'max_new_tokens' must be > 0, got 0\n"
        "<string>:16:59: expected an integer for 'max_new_tokens', got 'x'");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
               "         inference: {prompt: hi, max_new_tokens: {from: 400, to: 100, step: 10}}}\n") ==
        "<string>:16:50: max_new_tokens range needs from <= to (from 400, to 100)");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
               "         inference: {prompt: hi, max_new_tokens: {from: 100, to: 400, step: 0}}}\n") ==
        "<string>:16:77: 'step' must be > 0, got 0");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
               "         inference: {prompt: hi, max_new_tokens: {from: 1, to: 2000000000, step: 1}}}\n") ==
        "<string>:16:50: max_new_tokens range has 2000000000 values (at most 100000)");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
               "         inference: {prompt: hi, max_new_tokens: {from: 1, to: 2}, ignore_eos: maybe}}\n") ==
        "<string>:16:50: max_new_tokens range needs 'step' (from, to, step)\n"
        "<string>:16:80: expected true or false for 'ignore_eos', got 'maybe'");
  PlanParseResult odd = Good("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
                             "         inference: {prompt: hi, max_new_tokens: {from: 100, to: 125, step: 10}, ignore_eos: false}}\n");
  const CaseSpec& c = *odd.plan->FindCase("a");
  CHECK(c.inference.max_new_tokens == std::vector<int>{100, 110, 120});
  CHECK_FALSE(c.inference.ignore_eos);
  CHECK(c.inference.decode_step == DecodeStepChoice::kHost);  // the default
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
               "         inference: {prompt: hi, max_new_tokens: [4], decode_step: graf}}\n") ==
        "<string>:16:68: unknown inference.decode_step 'graf' (expected one of: host, device, graph)");
  PlanParseResult graph = Good("      - {id: a, workload: inference, backend: fsdp, model: m7,\n"
                               "         inference: {prompt: hi, max_new_tokens: [4], decode_step: graph}}\n");
  CHECK(graph.plan->FindCase("a")->inference.decode_step == DecodeStepChoice::kGraph);
}

TEST_CASE("plan: share topology rules") {
  // A share case without a topology parses: that rule is the share backend's
  // Check (dist_plan_test.cc), not the generic parser's.
  Good("      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10}\n");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10,\n"
               "         topology: \"rig0:2*4 rig1:0x4 rig2:1x1 rig0:1x1 rig1:4x4\"}\n") ==
        "<string>:16:20: bad topology part 'rig0:2*4' (expected NODE:GxK, e.g. rig0:2x4)\n"
        "<string>:16:20: topology part 'rig1:0x4' needs G >= 1 groups of K >= 1 GPUs\n"
        "<string>:16:20: topology names unknown node 'rig2' (did you mean 'rig0'?)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10,\n"
               "         topology: \"rig0:1x1 rig0:1x1\"}\n") ==
        "<string>:16:20: topology names node 'rig0' twice");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10,\n"
               "         topology: \"rig0:2x4 rig1:2x4\", nodes: 1}\n") ==
        "<string>:16:48: nodes (1) disagrees with topology 'rig0:2x4 rig1:2x4' (2 nodes)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10, topology: \" \"}\n") ==
        "<string>:15:99: topology is empty (expected NODE:GxK parts, e.g. 'rig0:2x4 rig1:2x4')");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, nodes: 3}\n") ==
        "<string>:15:95: case 'a' needs 3 nodes but the cluster has 2");
  PlanParseResult r = Good("      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10,\n"
                           "         topology: \"  rig1:4x2   rig0:1x8 \", network: 1G}\n");
  const CaseSpec& c = *r.plan->FindCase("a");
  CHECK(c.topology.ToString() == "rig1:4x2 rig0:1x8");
  CHECK(c.nodes == 2);
  CHECK(c.network == "1G");
}

TEST_CASE("plan: output_dir may use {stage} and {run_id}, which the runner expands") {
  // Regression: docs/runner.md lists both and the runner expands them, but the parser refused them.
  const PlanParseResult r = Good("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
                                 "         output_dir: \"out/{stage}/run{run_id}/{case_id}\"}\n");
  CHECK(r.plan->FindCase("a")->output_dir == "out/{stage}/run{run_id}/{case_id}");
}

TEST_CASE("plan: system and command rules") {
  // The system defaults to the backend's name; the command backend's Check
  // refuses that default and an empty argv (command_backend_test.cc).
  CHECK(Good("      - {id: a, workload: pretrain, backend: command, model: m7, steps: 10, command: {argv: [run]}}\n")
            .plan->FindCase("a")->system == "command");
  CHECK(Good("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10}\n")
            .plan->FindCase("a")->system == "fsdp");
  // A hybrid-sharded case is its backend's hybrid system unless it names one; the
  // parser names no backend for it.
  CHECK(Good("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
             "         training: {sharding: hybrid}}\n")
            .plan->FindCase("a")->system == std::string(kHybridFsdpSystem));
  CHECK(Good("      - {id: a, workload: pretrain, backend: fsdp, system: mine, model: m7, dataset: web, steps: 10,\n"
             "         training: {sharding: hybrid}}\n")
            .plan->FindCase("a")->system == "mine");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: command, system: fsdp, model: m7, steps: 10,\n"
               "         command: {argv: \"run {steps}\"}}\n") ==
        "<string>:16:26: expected a list of strings for 'argv' (a single string only with shell: true)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: command, system: fsdp, model: m7, steps: 10,\n"
               "         command: {argv: [sh, -c, x], shell: true, env: {A: \"{modle}\"}, workdir: \"{nope}\"}}\n") ==
        "<string>:16:26: with shell: true, argv is one string (the shell command line)\n"
        "<string>:16:61: unknown placeholder '{modle}' in command.env (did you mean '{model}'?)\n"
        "<string>:16:82: unknown placeholder '{nope}' in command.workdir (known: case_id, repeat, model, "
        "model_path, dataset, dataset_path, output_dir, steps, epochs, nodes, topology, network, prompt, "
        "max_new_tokens, plan_dir, plan, stage, run_id)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: command, system: fsdp, model: m7, steps: 10,\n"
               "         command: {argv: [run], metrics: [{name: t, regex: \"(\"}, {name: u, regex: \"time\"},\n"
               "                                           {regex: \"x(1)\"}], step_regex: \"step\"}}\n") ==
        "<string>:16:60: metric 't' regex does not compile: "
        "Mismatched '(' and ')' in regular expression\n"
        "<string>:16:83: metric 'u' regex has no capture group (the first group is the value)\n"
        "<string>:17:44: a metric needs a name\n"
        "<string>:17:74: step_regex has no capture group (group 1 is the step, group 2 the loss)");
  PlanParseResult r = Good(
      "      - id: a\n"
      "        workload: inference\n"
      "        backend: command\n"
      "        system: share\n"
      "        model: m7\n"
      "        topology: rig0:1x8\n"
      "        inference: {prompt: hi, max_new_tokens: [1]}\n"
      "        command:\n"
      "          argv: [python3, infer.py, --max_new_tokens, \"{max_new_tokens}\", --out, \"{output_dir}\"]\n"
      "          env: {HF_HOME: /models, STEPS: \"{steps}\"}\n"
      "          workdir: /work\n"
      "          metrics:\n"
      "            - {name: total_generation_seconds, regex: \"total ([0-9.]+) s\", unit: s}\n"
      "          step_regex: \"step (\\\\d+) loss (\\\\S+)\"\n");
  const CaseSpec& c = *r.plan->FindCase("a");
  CHECK(c.system == "share");
  CHECK(c.backend == "command");
  CHECK(c.nodes == 1);
  CHECK(c.dataset == "");
  CHECK(c.command.argv == std::vector<std::string>{"python3", "infer.py", "--max_new_tokens", "{max_new_tokens}",
                                                   "--out", "{output_dir}"});
  CHECK_FALSE(c.command.shell);
  CHECK(c.command.env.at("STEPS") == "{steps}");
  CHECK(c.command.workdir == "/work");
  REQUIRE(c.command.metrics.size() == 1);
  CHECK(c.command.metrics[0].regex == "total ([0-9.]+) s");
  CHECK(c.command.metrics[0].unit == "s");
  CHECK(c.command.step_regex == "step (\\d+) loss (\\S+)");
  PlanParseResult shell = Good("      - {id: a, workload: pretrain, backend: command, system: my-lab, model: m7, steps: 10,\n"
                               "         command: {argv: \"run --steps {steps} | tee log\", shell: true}}\n");
  CHECK(shell.plan->FindCase("a")->command.argv == std::vector<std::string>{"run --steps {steps} | tee log"});
  CHECK(shell.plan->FindCase("a")->command.shell);
  CHECK(shell.plan->FindCase("a")->system == "my-lab");
}

TEST_CASE("plan: a dataset is the backends' rule, not the parser's") {
  // The native backends' Check asks for it (native_fsdp_test.cc); a command case needs none.
  Good("      - {id: a, workload: pretrain, backend: fsdp, model: m7, steps: 10}\n");
  Good("      - {id: a, workload: pretrain, backend: command, system: fsdp, model: m7, steps: 10, command: {argv: [x]}}\n");
}

TEST_CASE("plan: duplicate case ids and stage names point at the first") {
  CHECK(Errors(std::string(kPretrain) + "      - {id: b, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10}\n" +
               kPretrain) ==
        "<string>:17:14: duplicate case id 'a' (first at line 15)");
  CHECK(Errors(std::string(kPretrain) + "  - name: s1\n    cases:\n" +
               "      - {id: b, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10}\n") ==
        "<string>:16:11: duplicate stage name 's1' (first at line 13)");
}

TEST_CASE("plan: plan-level fields") {
  CHECK(ErrorsOf(ParsePlanString("protocol: 2\nname: Llama 70B\nstages: []\n", "p.yaml")) ==
        "p.yaml:1:11: unsupported plan format version 2 (this program reads version 1)\n"
        "p.yaml:2:7: plan name 'Llama 70B' may only contain a-z, 0-9, '.', '_' and '-'\n"
        "p.yaml:3:9: 'stages' is empty (a plan runs at least one stage)");
  CHECK(ErrorsOf(ParsePlanString("title: x\n", "p.yaml")) ==
        "p.yaml:1:1: missing 'protocol: 1' (the plan format version)\n"
        "p.yaml:1:1: missing 'name' (the plan's name, e.g. name: llama70b)\n"
        "p.yaml:1:1: missing 'stages' (a plan runs at least one stage of cases)");
  CHECK(ErrorsOf(ParsePlanString("- a\n- b\n", "p.yaml")) == "p.yaml:1:1: a plan is a map at top level, got a sequence");
  CHECK(ErrorsOf(ParsePlanString(
            "protocol: 1\nname: t\nmodels:\n  m: {quantization: int3}\n  bad name: {preset: x}\n"
            "datasets:\n  d: {format: csv}\ncluster:\n  launcher: k8s\n  nodes: [{host: h}, {name: n, gpus: -1}]\n"
            "  emulate: {bandwidth: fast, delay: 2}\nstages:\n  - cases: []\n",
            "p.yaml")) ==
        "p.yaml:4:3: model 'm' needs a preset, a path or from_case\n"
        "p.yaml:4:21: unknown quantization 'int3' (expected one of: none, nf4)\n"
        "p.yaml:5:3: model name 'bad name' may only contain letters, digits, '.', '_' and '-'\n"
        "p.yaml:7:3: dataset 'd' needs a path\n"
        "p.yaml:7:15: unknown dataset format 'csv' (expected one of: text, jsonl, dolly, tokens, parquet)\n"
        "p.yaml:9:13: unknown launcher 'k8s' (expected one of: local, ssh, slurm)\n"
        "p.yaml:10:11: a cluster node needs a name\n"
        "p.yaml:10:38: 'gpus' must be >= 0, got -1\n"
        "p.yaml:11:24: bad bandwidth 'fast' (tc rate, e.g. 100mbit, 1gbit)\n"
        "p.yaml:11:37: bad delay '2' (tc time, e.g. 2ms, 500us)\n"
        "p.yaml:13:5: a stage needs a name (e.g. name: stage1)\n"
        "p.yaml:13:12: a stage has no cases");
}

TEST_CASE("plan: a node's gpu_model and gpu_mfu (the time estimate's device) are read and range-checked") {
  auto plan = [](const std::string& node) {
    return "protocol: 1\nname: t\nmodels:\n  m: {preset: tiny}\ncluster:\n  nodes:\n    - " + node +
           "\nstages:\n  - name: s\n    cases:\n      - {id: a, workload: inference, backend: fsdp, model: m,\n"
           "         inference: {prompt: hi, max_new_tokens: [1]}}\n";
  };
  PlanParseResult good = ParsePlanString(plan("{name: rig0, gpus: 8, gpu_model: H100 SXM, gpu_mfu: 0.35}"), "p.yaml");
  INFO(ErrorsOf(good));
  REQUIRE(good.ok());
  CHECK(good.plan->cluster.nodes[0].gpu_model == "H100 SXM");
  CHECK(good.plan->cluster.nodes[0].gpu_mfu == 0.35);
  // Not stated: empty and 0 (the device table's assumption), and left out of the resolved text.
  PlanParseResult bare = ParsePlanString(plan("{name: rig0, gpus: 8}"), "p.yaml");
  REQUIRE(bare.ok());
  CHECK(bare.plan->cluster.nodes[0].gpu_model.empty());
  CHECK(bare.plan->cluster.nodes[0].gpu_mfu == 0);
  CHECK(bare.plan->resolved_text.find("gpu_mfu") == std::string::npos);
  CHECK(good.plan->resolved_text.find("gpu_model: H100 SXM") != std::string::npos);
  CHECK(good.plan->resolved_text.find("gpu_mfu: 0.35") != std::string::npos);
  CHECK(ErrorsOf(ParsePlanString(plan("{name: rig0, gpu_mfu: 1.5}"), "p.yaml")) ==
        "p.yaml:7:29: 'gpu_mfu' must be a fraction > 0 and <= 1 (e.g. 0.4 for 40 % MFU), got 1.5");
  CHECK(ErrorsOf(ParsePlanString(plan("{name: rig0, gpu_mfu: 0}"), "p.yaml")) ==
        "p.yaml:7:29: 'gpu_mfu' must be a fraction > 0 and <= 1 (e.g. 0.4 for 40 % MFU), got 0");
  CHECK(ErrorsOf(ParsePlanString(plan("{name: rig0, gpu_mfu: high}"), "p.yaml")).find("'gpu_mfu'") !=
        std::string::npos);
  CHECK(ErrorsOf(ParsePlanString(plan("{name: rig0, gpu_modle: A100}"), "p.yaml")) ==
        "p.yaml:7:20: unknown key 'gpu_modle' (did you mean 'gpu_model'?)");
}

TEST_CASE("plan parser: a parquet dataset's column; column on another format is an error") {
  const std::string head = "protocol: 1\nname: t\nmodels:\n  m: {preset: tiny}\ndatasets:\n";
  const std::string tail =
      "stages:\n  - name: s\n    cases: [{id: a, workload: pretrain, backend: fsdp, model: m, dataset: fw, steps: 1}]\n";
  auto ok = ParsePlanString(head + "  fw: {format: parquet, path: /d/10BT, column: content}\n" + tail, "p.yaml");
  REQUIRE_MESSAGE(ok.ok(), ErrorsOf(ok));
  CHECK(ok.plan->datasets.at("fw").column == "content");
  CHECK(ErrorsOf(ParsePlanString(head + "  fw: {format: jsonl, path: x.jsonl, column: body}\n" + tail, "p.yaml")) ==
        "p.yaml:6:46: dataset 'fw': column applies to format parquet (a jsonl dataset's text is its records' fields)");
  CHECK(ErrorsOf(ParsePlanString(head + "  fw: {format: parquet, path: d, column: ''}\n" + tail, "p.yaml")) ==
        "p.yaml:6:42: dataset 'fw': column is empty (the default is text)");
}

// kHead with `cluster.emulate` on line 9 (values from column 24) and one case.
std::string WithEmulate(const std::string& bandwidth, const std::string& delay) {
  std::string head = kHead;
  head.insert(head.find("  nodes:\n"), "  emulate: {bandwidth: " + bandwidth + ", delay: " + delay + "}\n");
  return head + kPretrain;
}

TEST_CASE("plan: an emulated bandwidth must be above zero, refused where it is written") {
  // Regression: 0mbit passed validate and failed the run (the run-time rule wants a rate > 0).
  CHECK(ErrorsOf(ParsePlanString(WithEmulate("0mbit", "2ms"), "<string>")) ==
        "<string>:9:24: bad bandwidth '0mbit' (tc rate, e.g. 100mbit, 1gbit)");
}

TEST_CASE("plan: emulated rate and time units are case-insensitive, as the run (and tc) read them") {
  // Regression: 100Mbit was refused by validate though the run accepted it.
  for (const std::string bandwidth : {"100Mbit", "1GBIT", "2.5Kbit", "10MBps"}) {
    PlanParseResult r = ParsePlanString(WithEmulate(bandwidth, "2MS"), "<string>");
    INFO(std::string(bandwidth + ": " + ErrorsOf(r)));
    REQUIRE(r.ok());
    CHECK(r.plan->cluster.emulate->bandwidth == bandwidth);  // kept as written
  }
}

TEST_CASE("plan: an error in an inherited default points at the defaults line, once") {
  PlanParseResult r = ParsePlanString(
      "protocol: 1\n"
      "name: t\n"
      "models: {m7: {preset: llama2-7b}}\n"
      "datasets: {web: {format: text, path: /d}}\n"
      "defaults:\n"
      "  backend: fsdp\n"
      "  repeats: many\n"
      "  training: {seq_len: long}\n"
      "stages:\n"
      "  - name: s1\n"
      "    defaults: {timeout: 5 minutes}\n"
      "    cases:\n"
      "      - {id: a, workload: pretrain, model: m7, dataset: web, steps: 10}\n"
      "      - {id: b, workload: pretrain, model: m7, dataset: web, steps: 10}\n",
      "p.yaml");
  CHECK(ErrorsOf(r) ==
        "p.yaml:7:12: expected an integer for 'repeats', got 'many'\n"
        "p.yaml:8:23: expected an integer for 'seq_len', got 'long'\n"
        "p.yaml:11:25: expected a duration for 'timeout' (seconds, or like 90s, 15m, 6h, 1h30m), got '5 minutes'");
  CHECK(ErrorsOf(ParsePlanString("protocol: 1\nname: t\ndefaults: {id: x, stepz: 1}\nstages: []\n", "p.yaml")) ==
        "p.yaml:3:12: 'id' belongs to each case, not to defaults\n"
        "p.yaml:3:19: unknown key 'stepz' (did you mean 'steps'?)\n"
        "p.yaml:4:9: 'stages' is empty (a plan runs at least one stage)");
}

TEST_CASE("plan: several errors are all reported, in file order") {
  PlanParseResult r = ParsePlanString(kHead +
                                          "      - {id: a, workload: pretrain, backend: fdsp, model: m7, dataset: web, steps: 10}\n"
                                          "      - {id: b, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: x}\n"
                                          "      - {id: a, workload: inference, backend: fsdp, model: m7}\n",
                                      "<string>");
  CHECK_FALSE(r.ok());
  CHECK_FALSE(r.plan.has_value());
  CHECK(ErrorsOf(r) ==
        "<string>:15:46: unknown backend 'fdsp' (did you mean 'fsdp'?)\n"
        "<string>:16:84: expected an integer for 'steps', got 'x'\n"
        "<string>:17:9: case 'a' needs inference.prompt and inference.max_new_tokens\n"
        "<string>:17:14: duplicate case id 'a' (first at line 15)");
  CHECK(r.source_text == kHead +
                             "      - {id: a, workload: pretrain, backend: fdsp, model: m7, dataset: web, steps: 10}\n"
                             "      - {id: b, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: x}\n"
                             "      - {id: a, workload: inference, backend: fsdp, model: m7}\n");
  CHECK(RenderDiagnostics({r.errors[0]}, r.source_text) ==
        "<string>:15:46: unknown backend 'fdsp' (did you mean 'fsdp'?)\n"
        "        - {id: a, workload: pretrain, backend: fdsp, model: m7, dataset: web, steps: 10}\n"
        "                                               ^\n");
}

TEST_CASE("plan: file-level failures are single diagnostics") {
  CHECK(ErrorsOf(ParsePlanString("", "p.yaml")) == "p.yaml: file is empty");
  CHECK(ErrorsOf(ParsePlanString("# only\n# comments\n", "p.yaml")) == "p.yaml: file is empty");
  CHECK(ErrorsOf(ParsePlanString(std::string("protocol: 1\n\0\0", 14), "p.yaml")) ==
        "p.yaml: file is not text (binary data at byte 12)");
  CHECK(ErrorsOf(ParsePlanFile("/nonexistent/plan.yaml")) ==
        "/nonexistent/plan.yaml: cannot read file: No such file or directory");
  CHECK(ErrorsOf(ParsePlanString("protocol: 1\nname: [t\n", "p.yaml")) ==
        "p.yaml:3:1: YAML syntax error: end of sequence flow not found");
  CHECK(ErrorsOf(ParsePlanString("protocol: 1\nname: a\nname: b\n", "p.yaml")) ==
        "p.yaml:3:1: duplicate key 'name' (first at line 2)");
}

TEST_CASE("plan: the example in docs/plan-format.md is a valid plan") {
  std::string block = testing::FirstYamlBlock(
      testing::ReadTextFile(std::string(PROTOCOL_SOURCE_DIR) + "/docs/plan-format.md"));
  REQUIRE(!block.empty());
  PlanParseResult r = ParsePlanString(block, "docs/plan-format.md");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  CHECK(r.plan->Cases().size() == 5);
  CHECK(r.plan->FindCase("2.1.1.5")->inference.TotalTokens() == 7750);
  CHECK(r.plan->FindCase("2.2.1.1")->network == "10G");
  CHECK(r.plan->interleave == std::vector<std::vector<std::string>>{{"2.1.1.5", "2.2.1.3"}});
}

TEST_CASE("plan: mutated plans never throw, and the valid ones resolve to a stable text") {
  std::string seed;
  {
    std::FILE* f = std::fopen(kExample.c_str(), "rb");
    REQUIRE(f != nullptr);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) seed.append(buffer, n);
    std::fclose(f);
  }
  // A fixed linear congruential sequence keeps the test deterministic.
  uint64_t state = 42;
  auto next = [&state]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  const std::string alphabet = " \n:-{}[],\"'#&*!|>0123456789abcxyz.\t~?%@`";
  int valid = 0;
  for (int it = 0; it < 300; ++it) {
    std::string s = seed;
    for (size_t e = 0, edits = 1 + next() % 4; e < edits; ++e) {
      size_t pos = next() % (s.size() + 1);
      switch (next() % 3) {
        case 0: if (pos < s.size()) s.erase(pos, 1 + next() % 10); break;
        case 1: s.insert(pos, 1, alphabet[next() % alphabet.size()]); break;
        default: if (pos < s.size()) s[pos] = alphabet[next() % alphabet.size()];
      }
    }
    PlanParseResult r = ParsePlanString(s, "mutant.yaml");
    CHECK(r.errors.empty() == r.plan.has_value());
    if (!r.ok()) continue;
    ++valid;
    PlanParseResult again = ParsePlanString(r.plan->resolved_text, "resolved.yaml");
    REQUIRE(again.ok());
    CHECK(again.plan->resolved_text == r.plan->resolved_text);
  }
  CHECK(valid > 0);
}

// ---- interleave --------------------------------------------------------------

namespace {

// Two stages of two cases each, `repeats` as given; the interleave text goes
// on line 21.
std::string InterleavePlan(const std::string& interleave, int r4 = 2) {
  return kHead +
         "      - {id: \"2.1.1.1\", workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, repeats: 2}\n"  // 15
         "      - {id: \"2.1.1.2\", workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, repeats: 2}\n"  // 16
         "  - name: s2\n"                                                                                                  // 17
         "    cases:\n"                                                                                                    // 18
         "      - {id: \"2.2.1.1\", workload: pretrain, backend: share, model: m7, dataset: web, topology: \"rig0:2x4\", steps: 10, repeats: 2}\n"  // 19
         "      - {id: \"2.2.1.2\", workload: pretrain, backend: share, model: m7, dataset: web, topology: \"rig0:2x4\", steps: 10, repeats: " +
         std::to_string(r4) + "}\n" +  // 20
         interleave;                   // 21
}

std::string InterleaveErrors(const std::string& interleave, int r4 = 2,
                             const PlanParseOptions& options = {}) {
  PlanParseResult r = ParsePlanString(InterleavePlan(interleave, r4), "<string>", options);
  return r.ok() ? "(ok)" : ErrorsOf(r);
}

}  // namespace

TEST_CASE("plan: interleave groups are read as written and kept in the resolved text") {
  PlanParseResult r = ParsePlanString(
      InterleavePlan("interleave: [[\"2.2.1.1\", \"2.1.1.1\"], [2.1.1.2, 2.2.1.2]]\n"), "<string>");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  CHECK(r.plan->interleave ==
        std::vector<std::vector<std::string>>{{"2.2.1.1", "2.1.1.1"}, {"2.1.1.2", "2.2.1.2"}});
  const std::string& text = r.plan->resolved_text;
  CHECK(text.substr(text.find("interleave:")) ==
        "interleave:\n"
        "  -\n"
        "    - \"2.2.1.1\"\n"
        "    - \"2.1.1.1\"\n"
        "  -\n"
        "    - \"2.1.1.2\"\n"
        "    - \"2.2.1.2\"\n");
  PlanParseResult again = ParsePlanString(text, "resolved.yaml");
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(again.plan->resolved_text == text);
  CHECK(again.plan->interleave == r.plan->interleave);
}

TEST_CASE("plan: without interleave (or with an empty one) nothing changes in the resolved text") {
  PlanParseResult plain = ParsePlanString(InterleavePlan(""), "<string>");
  PlanParseResult empty = ParsePlanString(InterleavePlan("interleave: []\n"), "<string>");
  REQUIRE(plain.ok());
  REQUIRE(empty.ok());
  CHECK(plain.plan->interleave.empty());
  CHECK(empty.plan->interleave.empty());
  CHECK(plain.plan->resolved_text.find("interleave") == std::string::npos);
  CHECK(empty.plan->resolved_text == plain.plan->resolved_text);
  PlanParseResult example = ParsePlanFile(kExample);
  REQUIRE(example.ok());
  CHECK(example.plan->resolved_text.find("interleave") == std::string::npos);
}

TEST_CASE("plan: interleave errors are located, unknown ids with did-you-mean") {
  CHECK(InterleaveErrors("interleave: [[2.1.1.1, 2.2.1.11], [2.1.1.2, zzz]]\n") ==
        "<string>:21:24: interleave names unknown case id '2.2.1.11' (did you mean '2.2.1.1'?)\n"
        "<string>:21:45: interleave names unknown case id 'zzz'");
  CHECK(InterleaveErrors("interleave: [2.1.1.1, 2.2.1.1]\n") ==
        "<string>:21:14: an interleave group is a list of case ids, got '2.1.1.1' "
        "(e.g. interleave: [[2.1.1.1, 2.2.1.1]])\n"
        "<string>:21:23: an interleave group is a list of case ids, got '2.2.1.1' "
        "(e.g. interleave: [[2.1.1.1, 2.2.1.1]])");
  CHECK(InterleaveErrors("interleave: true\n") == "<string>:21:13: expected a list for 'interleave', got 'true'");
  CHECK(InterleaveErrors("interleave: [[2.1.1.1]]\n") ==
        "<string>:21:14: an interleave group needs at least two cases, got 1");
  CHECK(InterleaveErrors("interleave: [[2.1.1.1, 2.2.1.1, 2.1.1.1]]\n") ==
        "<string>:21:33: case '2.1.1.1' is listed twice in this interleave group");
  CHECK(InterleaveErrors("interleave:\n  - [2.1.1.1, 2.2.1.1]\n  - [2.1.1.2, 2.2.1.1]\n") ==
        "<string>:23:15: case '2.2.1.1' is already in an interleave group (line 22)");
  CHECK(InterleaveErrors("interleave: [[2.1.1.2, 2.2.1.2]]\n", 3) ==
        "<string>:21:14: the cases of an interleave group need the same repeats: '2.1.1.2' has 2, "
        "'2.2.1.2' has 3");
  CHECK(InterleaveErrors("interleave: [[2.1.1.1, 2.2.1.1, 2.2.1.2]]\n") == "(ok)");  // three-way
}

TEST_CASE("plan: interleave set by --set is checked and located at the override") {
  PlanParseOptions options;
  options.overrides = {"interleave=[[2.1.1.1, 2.2.1.1x]]"};
  CHECK(InterleaveErrors("", 2, options) ==
        "--set interleave=[[2.1.1.1, 2.2.1.1x]]: interleave names unknown case id '2.2.1.1x' "
        "(did you mean '2.2.1.1'?)");
  options.overrides = {"interleave=[[2.1.1.2, 2.2.1.2]]"};
  PlanParseResult r = ParsePlanString(InterleavePlan(""), "<string>", options);
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  CHECK(r.plan->interleave == std::vector<std::vector<std::string>>{{"2.1.1.2", "2.2.1.2"}});
}

TEST_CASE("plan: training.eval_every and quality_target are read, inherited and resolved") {
  PlanParseResult r = Good(
      "      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10,\n"
      "         training: {eval_every: 2}, quality_target: {loss: 5.25}}\n"
      "      - {id: b, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10}\n");
  const CaseSpec& a = r.plan->stages[0].cases[0];
  CHECK(a.training.eval_every == 2);
  REQUIRE(a.quality_target_loss);
  CHECK(*a.quality_target_loss == 5.25);
  const CaseSpec& b = r.plan->stages[0].cases[1];
  CHECK(b.training.eval_every == 0);  // the default: only at the end
  CHECK(!b.quality_target_loss);
  // The resolved text carries both, and reads back the same.
  const std::string text = ResolvedText(*r.plan);
  CHECK(text.find("quality_target:") != std::string::npos);
  PlanParseResult again = ParsePlanString(text, "<resolved>");
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(again.plan->stages[0].cases[0].training.eval_every == 2);
  CHECK(*again.plan->stages[0].cases[0].quality_target_loss == 5.25);
  CHECK(!again.plan->stages[0].cases[1].quality_target_loss);
}

TEST_CASE("plan: a bad quality_target or eval_every is an error at the value") {
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, "
               "quality_target: {loss: 0}}\n") ==
        "<string>:15:111: quality_target.loss must be > 0, got 0");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, "
               "quality_target: {los: 5}}\n") ==
        "<string>:15:104: quality_target needs a loss (e.g. quality_target: {loss: 5.5})\n"
        "<string>:15:105: unknown key 'los' (did you mean 'loss'?)");
  CHECK(Errors("      - {id: a, workload: inference, backend: fsdp, model: m7, inference: {prompt: hi, "
               "max_new_tokens: [1]}, quality_target: {loss: 5}}\n") ==
        "<string>:15:126: quality_target applies to training workloads only (a held-out loss to reach)");
  CHECK(Errors("      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, "
               "training: {eval_every: -1}}\n") != "(ok)");
}

TEST_CASE("plan: from_case reads the model an earlier case saves, from its output_dir") {
  const std::string plan_text =
      "protocol: 1\nname: chain\n"
      "models:\n  base: {preset: tiny}\n  trained: {preset: tiny, from_case: p}\n"
      "datasets:\n  web: {format: text, path: /d/web.txt}\n"
      "cluster:\n  nodes:\n    - {name: n0, gpus: 0}\n"
      "defaults: {output_dir: \"out/{plan}/{case_id}\"}\n"
      "stages:\n  - name: s\n    cases:\n"
      "      - {id: p, workload: pretrain, backend: fsdp, model: base, dataset: web, steps: 2}\n"
      "      - {id: f, workload: finetune, backend: fsdp, model: trained, dataset: web, steps: 2}\n";
  PlanParseResult r = ParsePlanString(plan_text, "<string>");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  // The path is where p writes, from the working directory (not the plan's folder).
  const std::string expected = (std::filesystem::current_path() / "out/chain/p").lexically_normal().string();
  CHECK(r.plan->models.at("trained").path == expected);
  CHECK(r.plan->models.at("trained").from_case == "p");
  // The resolved text keeps the case id, not this machine's path, and parses back to the same.
  const std::string resolved = r.plan->resolved_text;
  CHECK(resolved.find("from_case: p") != std::string::npos);
  CHECK(resolved.find(expected) == std::string::npos);
  PlanParseResult again = ParsePlanString(resolved, "<string>");
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(again.plan->models.at("trained").path == expected);
}

TEST_CASE("plan: from_case errors name the case and say what to change") {
  auto plan_with = [](const std::string& model, const std::string& defaults) {
    return "protocol: 1\nname: chain\nmodels:\n  base: {preset: tiny}\n  trained: " + model +
           "\ndatasets:\n  web: {format: text, path: /d/web.txt}\ncluster:\n  nodes:\n    - {name: n0, gpus: 0}\n" +
           defaults + "stages:\n  - name: s\n    cases:\n"
           "      - {id: pre, workload: pretrain, backend: fsdp, model: base, dataset: web, steps: 2}\n"
           "      - {id: f, workload: finetune, backend: fsdp, model: trained, dataset: web, steps: 2}\n";
  };
  const std::string out = "defaults: {output_dir: \"out/{case_id}\"}\n";
  CHECK(ErrorsOf(ParsePlanString(plan_with("{preset: tiny, from_case: prr}", out), "<string>")) ==
        "<string>:5:38: model 'trained': from_case names unknown case id 'prr' (did you mean 'pre'?)");
  CHECK(ErrorsOf(ParsePlanString(plan_with("{preset: tiny, path: /m, from_case: pre}", out), "<string>")) ==
        "<string>:5:48: model 'trained' has both a path and from_case: give one (from_case: ID reads the model "
        "that case saves, from its output_dir)");
  CHECK(ErrorsOf(ParsePlanString(plan_with("{preset: tiny, from_case: pre}", ""), "<string>")) ==
        "<string>:5:38: model 'trained': case 'pre' saves no model (it has no output_dir) (give that case an "
        "output_dir (defaults.output_dir applies to every case))");
  CHECK(ErrorsOf(ParsePlanString(plan_with("{preset: tiny, from_case: pre}", "defaults: {output_dir: \"out/{run_id}\"}\n"),
                                 "<string>")) ==
        "<string>:5:38: model 'trained': case 'pre' saves to 'out/{run_id}', a folder that changes with each run or "
        "repeat ({run_id}, {repeat}): from_case needs one fixed folder");
}

TEST_CASE("plan: telemetry.interval is read as a duration, kept in the resolved text, 0 turns sampling off") {
  PlanParseResult plain = ParsePlanString(InterleavePlan(""), "<string>");
  REQUIRE(plain.ok());
  CHECK(plain.plan->telemetry.interval_seconds == 1.0);
  CHECK(plain.plan->resolved_text.find("telemetry") == std::string::npos);  // the default: absent
  PlanParseResult every = ParsePlanString(InterleavePlan("telemetry:\n  interval: 0.25\n"), "<string>");
  INFO(ErrorsOf(every));
  REQUIRE(every.ok());
  CHECK(every.plan->telemetry.interval_seconds == 0.25);
  const std::string& text = every.plan->resolved_text;
  CHECK(text.find("telemetry:\n  interval: 0.25\n") != std::string::npos);
  PlanParseResult again = ParsePlanString(text, "resolved.yaml");
  REQUIRE(again.ok());
  CHECK(again.plan->telemetry.interval_seconds == 0.25);
  PlanParseResult off = ParsePlanString(InterleavePlan("telemetry: {interval: 0}\n"), "<string>");
  REQUIRE(off.ok());
  CHECK(off.plan->telemetry.interval_seconds == 0);
  CHECK(ErrorsOf(ParsePlanString(InterleavePlan("telemetry: {interval: 0.01}\n"), "<string>")) ==
        "<string>:21:23: telemetry.interval 0.01 s is below 0.1 s (nvidia-smi and /proc are read once per "
        "interval: 1s is the default, 0 turns sampling off)");
  CHECK(ErrorsOf(ParsePlanString(InterleavePlan("telemetry: {every: 1}\n"), "<string>")).find(
            "unknown key 'every' (valid keys: interval)") != std::string::npos);
}
