// The resolved plan (plan_emit.h): parse → resolved text → parse gives the
// same plan, field by field, for every shipped plan; and every setting a
// backend reads is written with its value, defaults included, for every
// workload.

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "runner/base/text.h"
#include "runner/plan/plan_parser.h"
#include "training_field_checks.h"

using namespace protocol;

namespace {

// ---- a field-by-field comparison of two plans ---------------------------------
// Every field of the plan model is compared except where a value was read from
// (SourceLocation, Plan::file) and the resolved text itself. A field added to
// plan.h must be added here: the mutation test below fails for a field that is
// compared by nobody only if it is listed there, so list it there too.

class Diff {
 public:
  std::vector<std::string> out;

  template <typename T>
  void Same(const std::string& path, const T& a, const T& b) {
    if (!(a == b)) out.push_back(path);
  }
  void Same(const std::string& path, double a, double b) {
    if (a != b) out.push_back(fmt::format("{} ({} vs {})", path, a, b));
  }
  void Same(const std::string& path, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(fmt::format("{} ('{}' vs '{}')", path, a, b));
  }
  void Same(const std::string& path, const std::vector<std::string>& a, const std::vector<std::string>& b) {
    if (a != b) out.push_back(fmt::format("{} (['{}'] vs ['{}'])", path, Join(a, "', '"), Join(b, "', '")));
  }

  void Training(const std::string& p, const TrainingSettings& a, const TrainingSettings& b) {
    for (const std::string& field : protocol::testing::DifferentFields(a, b)) out.push_back(p + "." + field);
  }

  void Command(const std::string& p, const CommandSpec& a, const CommandSpec& b) {
    Same(p + ".argv", a.argv, b.argv);
    Same(p + ".shell", a.shell, b.shell);
    Same(p + ".env", a.env, b.env);
    Same(p + ".workdir", a.workdir, b.workdir);
    Same(p + ".metrics.size", a.metrics.size(), b.metrics.size());
    for (size_t i = 0; i < std::min(a.metrics.size(), b.metrics.size()); ++i) {
      std::string q = fmt::format("{}.metrics[{}]", p, i);
      Same(q + ".name", a.metrics[i].name, b.metrics[i].name);
      Same(q + ".regex", a.metrics[i].regex, b.metrics[i].regex);
      Same(q + ".unit", a.metrics[i].unit, b.metrics[i].unit);
    }
    Same(p + ".step_regex", a.step_regex, b.step_regex);
    Same(p + ".request_regex", a.request_regex, b.request_regex);
    Same(p + ".log_format", a.log_format, b.log_format);
  }

  void Case(const std::string& p, const CaseSpec& a, const CaseSpec& b) {
    Same(p + ".id", a.id, b.id);
    Same(p + ".title", a.title, b.title);
    Same(p + ".stage", a.stage, b.stage);
    Same(p + ".workload", a.workload, b.workload);
    Same(p + ".backend", a.backend, b.backend);
    Same(p + ".system", a.system, b.system);
    Same(p + ".model", a.model, b.model);
    Same(p + ".dataset", a.dataset, b.dataset);
    Same(p + ".nodes", a.nodes, b.nodes);
    Same(p + ".topology", a.topology.ToString(), b.topology.ToString());
    Same(p + ".network", a.network, b.network);
    Same(p + ".variant", a.variant, b.variant);
    Same(p + ".length", a.length, b.length);
    Same(p + ".report_as", a.report_as, b.report_as);
    Same(p + ".not_provided", a.not_provided, b.not_provided);
    Same(p + ".inference.prompt", a.inference.prompt, b.inference.prompt);
    Same(p + ".inference.max_new_tokens", a.inference.max_new_tokens, b.inference.max_new_tokens);
    Same(p + ".inference.ignore_eos", a.inference.ignore_eos, b.inference.ignore_eos);
    Same(p + ".inference.decode_step", NameOf(a.inference.decode_step), NameOf(b.inference.decode_step));
    Same(p + ".timeout_seconds", a.timeout_seconds, b.timeout_seconds);
    Same(p + ".repeats", a.repeats, b.repeats);
    Same(p + ".warmup_steps", a.warmup_steps, b.warmup_steps);
    Same(p + ".output_dir", a.output_dir, b.output_dir);
    Command(p + ".command", a.command, b.command);
    Training(p + ".training", a.training, b.training);
    Same(p + ".references.size", a.references.size(), b.references.size());
    for (size_t i = 0; i < std::min(a.references.size(), b.references.size()); ++i) {
      std::string q = fmt::format("{}.references[{}]", p, i);
      Same(q + ".metric", a.references[i].metric, b.references[i].metric);
      Same(q + ".value", a.references[i].value, b.references[i].value);
      Same(q + ".lower", a.references[i].lower, b.references[i].lower);
      Same(q + ".upper", a.references[i].upper, b.references[i].upper);
    }
  }

  void Plans(const Plan& a, const Plan& b) {
    Same("format_version", a.format_version, b.format_version);
    Same("name", a.name, b.name);
    Same("title", a.title, b.title);
    Same("models.size", a.models.size(), b.models.size());
    for (const auto& [name, m] : a.models) {
      auto it = b.models.find(name);
      if (it == b.models.end()) {
        out.push_back("models." + name + " (missing)");
        continue;
      }
      const ModelSpec& n = it->second;
      Same("models." + name + ".name", m.name, n.name);
      Same("models." + name + ".preset", m.preset, n.preset);
      Same("models." + name + ".path", m.path, n.path);
      Same("models." + name + ".quantization", m.quantization, n.quantization);
      Same("models." + name + ".double_quant", m.double_quant, n.double_quant);
    }
    Same("datasets.size", a.datasets.size(), b.datasets.size());
    for (const auto& [name, d] : a.datasets) {
      auto it = b.datasets.find(name);
      if (it == b.datasets.end()) {
        out.push_back("datasets." + name + " (missing)");
        continue;
      }
      Same("datasets." + name + ".name", d.name, it->second.name);
      Same("datasets." + name + ".format", d.format, it->second.format);
      Same("datasets." + name + ".path", d.path, it->second.path);
    }
    Same("cluster.launcher", a.cluster.launcher, b.cluster.launcher);
    Same("cluster.network", a.cluster.network, b.cluster.network);
    Same("cluster.nodes.size", a.cluster.nodes.size(), b.cluster.nodes.size());
    for (size_t i = 0; i < std::min(a.cluster.nodes.size(), b.cluster.nodes.size()); ++i) {
      std::string q = fmt::format("cluster.nodes[{}]", i);
      Same(q + ".name", a.cluster.nodes[i].name, b.cluster.nodes[i].name);
      Same(q + ".host", a.cluster.nodes[i].host, b.cluster.nodes[i].host);
      Same(q + ".gpus", a.cluster.nodes[i].gpus, b.cluster.nodes[i].gpus);
      Same(q + ".gpu_memory_gb", a.cluster.nodes[i].gpu_memory_gb, b.cluster.nodes[i].gpu_memory_gb);
      Same(q + ".gpu_model", a.cluster.nodes[i].gpu_model, b.cluster.nodes[i].gpu_model);
      Same(q + ".gpu_mfu", a.cluster.nodes[i].gpu_mfu, b.cluster.nodes[i].gpu_mfu);
    }
    Same("cluster.emulate", a.cluster.emulate.has_value(), b.cluster.emulate.has_value());
    if (a.cluster.emulate && b.cluster.emulate) {
      Same("cluster.emulate.bandwidth", a.cluster.emulate->bandwidth, b.cluster.emulate->bandwidth);
      Same("cluster.emulate.delay", a.cluster.emulate->delay, b.cluster.emulate->delay);
      Same("cluster.emulate.bits_per_second", a.cluster.emulate->bits_per_second, b.cluster.emulate->bits_per_second);
      Same("cluster.emulate.delay_seconds", a.cluster.emulate->delay_seconds, b.cluster.emulate->delay_seconds);
    }
    Same("stages.size", a.stages.size(), b.stages.size());
    for (size_t s = 0; s < std::min(a.stages.size(), b.stages.size()); ++s) {
      std::string q = fmt::format("stages[{}]", s);
      Same(q + ".name", a.stages[s].name, b.stages[s].name);
      Same(q + ".title", a.stages[s].title, b.stages[s].title);
      Same(q + ".cases.size", a.stages[s].cases.size(), b.stages[s].cases.size());
      for (size_t c = 0; c < std::min(a.stages[s].cases.size(), b.stages[s].cases.size()); ++c)
        Case(fmt::format("{}.cases[{}]", q, c), a.stages[s].cases[c], b.stages[s].cases[c]);
    }
    Same("interleave", a.interleave, b.interleave);
  }
};

std::vector<std::string> Differences(const Plan& a, const Plan& b) {
  Diff d;
  d.Plans(a, b);
  return d.out;
}

std::string ErrorsOf(const PlanParseResult& r) {
  std::vector<std::string> lines;
  for (const auto& e : r.errors) lines.push_back(e.ToString());
  return Join(lines, "\n");
}

// Parses `text`, its resolved text, and checks the two plans are equal and
// the second resolved text is the first.
void CheckRoundTrip(const PlanParseResult& first, const std::string& label) {
  INFO(label << "\n" << ErrorsOf(first));
  REQUIRE(first.ok());
  PlanParseResult again = ParsePlanString(first.plan->resolved_text, "resolved-" + label);
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(Join(Differences(*first.plan, *again.plan), "\n") == "");
  CHECK(again.plan->resolved_text == first.plan->resolved_text);
}

const std::string kHead =
    "protocol: 1\n"
    "name: t\n"
    "models:\n"
    "  m7: {preset: llama2-7b}\n"
    "  q: {preset: tiny, quantization: nf4, double_quant: true}\n"
    "datasets:\n"
    "  web: {format: text, path: c.txt}\n"
    "cluster:\n"
    "  nodes:\n"
    "    - {name: rig0, gpus: 8, gpu_memory_gb: 80}\n"
    "    - {name: rig1, host: 10.0.0.2, gpus: 8}\n"
    "stages:\n"
    "  - name: s\n"
    "    cases:\n";

PlanParseResult Parse(const std::string& cases) { return ParsePlanString(kHead + cases, "<string>"); }

}  // namespace

TEST_CASE("plan emit: every shipped plan resolves to a text that parses back to the same plan") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(PROTOCOL_SOURCE_DIR) + "/plans"))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  files.push_back(std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/plans/example.yaml");
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 8);
  for (const auto& path : files) {
    CAPTURE(path);
    CheckRoundTrip(ParsePlanFile(path), path);
  }
}

TEST_CASE("plan emit: the comparison sees a change in every field it compares") {
  PlanParseResult base = Parse(
      "      - id: a\n"
      "        workload: pretrain\n"
      "        backend: fsdp\n"
      "        model: m7\n"
      "        dataset: web\n"
      "        steps: 10\n"
      "        reference: {wall_minutes: [93, -5%, +10%]}\n"
      "        command: {argv: [x], metrics: [{name: n, regex: '(\\d+)', unit: s}]}\n");
  INFO(ErrorsOf(base));
  REQUIRE(base.ok());
  Plan plan = *base.plan;
  plan.cluster.emulate = NetworkEmulation{"1gbit", "2ms", 1e9, 0.002};
  CHECK(Differences(plan, plan).empty());
  using Edit = std::function<void(Plan&)>;
  auto c = [](Plan& p) -> CaseSpec& { return p.stages[0].cases[0]; };
  std::vector<std::pair<std::string, Edit>> edits = {
      {"format_version", [](Plan& p) { p.format_version = 2; }},
      {"name", [](Plan& p) { p.name = "u"; }},
      {"title", [](Plan& p) { p.title = "T"; }},
      {"models.m7.preset", [](Plan& p) { p.models["m7"].preset = "tiny"; }},
      {"models.m7.path", [](Plan& p) { p.models["m7"].path = "x"; }},
      {"models.q.quantization", [](Plan& p) { p.models["q"].quantization = Quantization::kNone; }},
      {"models.q.double_quant", [](Plan& p) { p.models["q"].double_quant = false; }},
      {"datasets.web.format", [](Plan& p) { p.datasets["web"].format = "jsonl"; }},
      {"datasets.web.path", [](Plan& p) { p.datasets["web"].path = "d.txt"; }},
      {"cluster.launcher", [](Plan& p) { p.cluster.launcher = "ssh"; }},
      {"cluster.network", [](Plan& p) { p.cluster.network = "10G"; }},
      {"cluster.nodes[0].host", [](Plan& p) { p.cluster.nodes[0].host = "h"; }},
      {"cluster.nodes[0].gpus", [](Plan& p) { p.cluster.nodes[0].gpus = 4; }},
      {"cluster.nodes[0].gpu_memory_gb", [](Plan& p) { p.cluster.nodes[0].gpu_memory_gb = 40; }},
      {"cluster.nodes[0].gpu_model", [](Plan& p) { p.cluster.nodes[0].gpu_model = "A100"; }},
      {"cluster.nodes[0].gpu_mfu", [](Plan& p) { p.cluster.nodes[0].gpu_mfu = 0.3; }},
      {"cluster.emulate", [](Plan& p) { p.cluster.emulate.reset(); }},
      {"cluster.emulate.bandwidth", [](Plan& p) { p.cluster.emulate->bandwidth = "1Gbit"; }},
      {"cluster.emulate.delay", [](Plan& p) { p.cluster.emulate->delay = "2MS"; }},
      {"cluster.emulate.bits_per_second", [](Plan& p) { p.cluster.emulate->bits_per_second = 1e8; }},
      {"cluster.emulate.delay_seconds", [](Plan& p) { p.cluster.emulate->delay_seconds = 0.001; }},
      {"stages[0].name", [](Plan& p) { p.stages[0].name = "t"; }},
      {"stages[0].title", [](Plan& p) { p.stages[0].title = "T"; }},
      {"interleave", [](Plan& p) { p.interleave = {{"a", "b"}}; }},
      {".id", [&](Plan& p) { c(p).id = "b"; }},
      {".title", [&](Plan& p) { c(p).title = "T"; }},
      {".stage", [&](Plan& p) { c(p).stage = "t"; }},
      {".workload", [&](Plan& p) { c(p).workload = Workload::kFinetune; }},
      {".backend", [&](Plan& p) { c(p).backend = "share"; }},
      {".system", [&](Plan& p) { c(p).system = "share"; }},
      {".model", [&](Plan& p) { c(p).model = "q"; }},
      {".dataset", [&](Plan& p) { c(p).dataset = ""; }},
      {".nodes", [&](Plan& p) { c(p).nodes = 2; }},
      {".topology", [&](Plan& p) { c(p).topology.parts = {{"rig0", 2, 4}}; }},
      {".network", [&](Plan& p) { c(p).network = "10G"; }},
      {".variant", [&](Plan& p) { c(p).variant = "v"; }},
      {".length", [&](Plan& p) { c(p).length->count = 11; }},
      {".report_as", [&](Plan& p) { c(p).report_as = {Length{Length::Unit::kSteps, 100}}; }},
      {".report_as", [&](Plan& p) { c(p).report_as = {Length{Length::Unit::kSteps, 5}, Length{Length::Unit::kSteps, 100}}; }},
      {".not_provided", [&](Plan& p) { c(p).not_provided = {Length{Length::Unit::kSteps, 3}}; }},
      {".inference.prompt", [&](Plan& p) { c(p).inference.prompt = "x"; }},
      {".inference.max_new_tokens", [&](Plan& p) { c(p).inference.max_new_tokens = {1}; }},
      {".inference.ignore_eos", [&](Plan& p) { c(p).inference.ignore_eos = false; }},
      {".inference.decode_step", [&](Plan& p) { c(p).inference.decode_step = DecodeStepChoice::kGraph; }},
      {".timeout_seconds", [&](Plan& p) { c(p).timeout_seconds = 5; }},
      {".repeats", [&](Plan& p) { c(p).repeats = 2; }},
      {".warmup_steps", [&](Plan& p) { c(p).warmup_steps = 1; }},
      {".output_dir", [&](Plan& p) { c(p).output_dir = "o"; }},
      {".command.argv", [&](Plan& p) { c(p).command.argv = {"y"}; }},
      {".command.shell", [&](Plan& p) { c(p).command.shell = true; }},
      {".command.env", [&](Plan& p) { c(p).command.env["K"] = "v"; }},
      {".command.workdir", [&](Plan& p) { c(p).command.workdir = "w"; }},
      {".command.metrics[0].name", [&](Plan& p) { c(p).command.metrics[0].name = "m"; }},
      {".command.metrics[0].regex", [&](Plan& p) { c(p).command.metrics[0].regex = "(x)"; }},
      {".command.metrics[0].unit", [&](Plan& p) { c(p).command.metrics[0].unit = "min"; }},
      {".command.step_regex", [&](Plan& p) { c(p).command.step_regex = "(x)"; }},
      {".command.request_regex", [&](Plan& p) { c(p).command.request_regex = "(x) (y)"; }},
      {".command.log_format", [&](Plan& p) { c(p).command.log_format = "tgi"; }},
      {".references[0].metric", [&](Plan& p) { c(p).references[0].metric = "wall_seconds"; }},
      {".references[0].value", [&](Plan& p) { c(p).references[0].value = 94; }},
      {".references[0].lower", [&](Plan& p) { c(p).references[0].lower = -0.06; }},
      {".references[0].upper", [&](Plan& p) { c(p).references[0].upper = 0.11; }},
  };
  for (const TrainingField& f : TrainingFields())
    edits.push_back({std::string(".training.") + f.name,
                     [&c, &f](Plan& p) { protocol::testing::ChangeField(f, &c(p).training); }});
  for (const auto& [field, edit] : edits) {
    CAPTURE(field);
    Plan changed = plan;
    edit(changed);
    std::vector<std::string> diff = Differences(plan, changed);
    REQUIRE(diff.size() == 1);
    const std::string want = field[0] == '.' ? "stages[0].cases[0]" + field : field;
    CHECK(diff[0].substr(0, want.size()) == want);
  }
}

TEST_CASE("plan emit: every training setting is written with its value, for every workload") {
  PlanParseResult r = Parse(
      "      - {id: p, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10}\n"
      "      - id: i\n"
      "        workload: inference\n"
      "        backend: fsdp\n"
      "        model: m7\n"
      "        inference: {prompt: hi, max_new_tokens: [4]}\n"
      "        training: {device: cpu, seed: 7, ranks_per_node: 2}\n");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const std::string& text = r.plan->resolved_text;
  // The pretrain case: the defaults, every row of training_fields.h, in its order.
  std::string defaults = "        training:\n";
  for (const TrainingField& f : TrainingFields())
    defaults += fmt::format("          {}: {}\n", f.name, protocol::testing::FieldText(f, TrainingSettings()));
  CHECK(text.find(defaults + "      - id: i\n") != std::string::npos);
  // Byte for byte as resolved texts have been stored (their sha256 names the plan of a run); a
  // setting added later is appended after these.
  CHECK(text.find("        training:\n"
                  "          batch_size: 8\n"
                  "          seq_len: 128\n"
                  "          grad_accum: 1\n"
                  "          learning_rate: 0.0003\n"
                  "          seed: 1234\n"
                  "          device: auto\n"
                  "          threads: 0\n"
                  "          ranks_per_node: 0\n"
                  "          collective_timeout: 300\n"
                  "          sync_every: 0\n"
                  "          outer_lr: 1\n"
                  "          outer_momentum: 0\n"
                  "          lora_rank: 8\n"
                  "          lora_alpha: 16\n"
                  "          checkpoint_every: auto\n"
                  "          lora_freeze_a: false\n") != std::string::npos);
  // The inference case: what its backend reads (device, seed, ranks) is there.
  CHECK(text.substr(text.find("      - id: i\n")).find("        training:\n"
                                                        "          batch_size: 8\n"
                                                        "          seq_len: 128\n"
                                                        "          grad_accum: 1\n"
                                                        "          learning_rate: 0.0003\n"
                                                        "          seed: 7\n"
                                                        "          device: cpu\n"
                                                        "          threads: 0\n"
                                                        "          ranks_per_node: 2\n") != std::string::npos);
  // Models and nodes: double_quant and gpu_memory_gb always (0 = not stated).
  CHECK(text.find("  m7:\n    preset: llama2-7b\n    double_quant: false\n") != std::string::npos);
  CHECK(text.find("  q:\n    preset: tiny\n    quantization: nf4\n    double_quant: true\n") != std::string::npos);
  CHECK(text.find("    - name: rig0\n      host: rig0\n      gpus: 8\n      gpu_memory_gb: 80\n") != std::string::npos);
  CHECK(text.find("    - name: rig1\n      host: \"10.0.0.2\"\n      gpus: 8\n      gpu_memory_gb: 0\n") != std::string::npos);
  CheckRoundTrip(r, "training");
  const CaseSpec* inference = r.plan->FindCase("i");
  CHECK(inference->training.device == DeviceChoice::kCpu);
  CHECK(inference->training.seed == 7);
  CHECK(inference->training.ranks_per_node == 2);
}

TEST_CASE("plan emit: non-default settings, commands and references survive the round trip") {
  PlanParseResult r = Parse(
      "      - id: a\n"
      "        title: \"a: title\"\n"
      "        workload: finetune\n"
      "        backend: share\n"
      "        model: q\n"
      "        dataset: web\n"
      "        topology: \"rig0:2x4 rig1:2x4\"\n"
      "        variant: v\n"
      "        epochs: 2\n"
      "        report_as: 5\n"
      "        timeout: 1h30m\n"
      "        repeats: 3\n"
      "        output_dir: \"out/{plan}/{case_id}\"\n"
      "        training: {batch_size: 3, seq_len: 17, grad_accum: 2, learning_rate: 1.5e-5, seed: 0,\n"
      "                   device: cuda, ranks_per_node: 4, collective_timeout: 12.5, sync_every: 7,\n"
      "                   outer_lr: 0.7, outer_momentum: 0.9, lora_rank: 16, lora_alpha: 32.5,\n"
      "                   checkpoint_every: 0, lora_freeze_a: true}\n"
      "        reference: {wall_minutes: [93.5, -7%, +33.3%], tokens_per_second: [1e3, -0.1%, +0%]}\n"
      "      - id: c\n"
      "        workload: inference\n"
      "        backend: command\n"
      "        system: fsdp\n"
      "        model: m7\n"
      "        inference: {prompt: \"true\", max_new_tokens: {from: 10, to: 30, step: 10}, ignore_eos: false}\n"
      "        command:\n"
      "          argv: [\"run.sh\", \"--n\", \"{max_new_tokens}\", \"10\"]\n"
      "          env: {A: \"1\", B: \"{model}\"}\n"
      "          workdir: w\n"
      "          metrics: [{name: tps, regex: 'tps (\\S+)', unit: tokens/s}, {name: x, regex: '(x)'}]\n"
      "          step_regex: 'step (\\d+)'\n"
      "          request_regex: 'tokens (\\d+) seconds (\\S+)'\n"
      "          log_format: vllm-serving\n"
      "      - id: s\n"
      "        workload: pretrain\n"
      "        backend: command\n"
      "        system: share\n"
      "        model: m7\n"
      "        steps: 1\n"
      "        command: {argv: \"echo {steps} | cat\", shell: true}\n");
  CheckRoundTrip(r, "settings");
  const CaseSpec* a = r.plan->FindCase("a");
  CHECK(a->references[0].lower == -0.07);
  CHECK(a->training.LoraRank() == 16);
  CHECK(a->training.LoraAlpha() == 32.5);
  CHECK(r.plan->resolved_text.find("        reference:\n          wall_minutes:\n            - 93.5\n            - -7%\n            - +33.3%\n") !=
        std::string::npos);
}
