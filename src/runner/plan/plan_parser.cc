// Plan format v1 (docs/plan-format.md): YAML tree → overrides → inheritance →
// validated, resolved Plan. Every problem is collected; nothing throws.
//
// Order of work:
//   1. ParseYaml (syntax, duplicate keys, empty/binary files).
//   2. --set overrides edit the tree; their nodes carry negative line numbers
//      so diagnostics point at the override (NodeReader out-of-file labels).
//   3. Top-level sections: models, datasets, cluster.
//   4. Each case: plan defaults ⊕ stage defaults ⊕ case (maps training,
//      inference, command, env merge key by key; everything else replaces),
//      then typed reading and cross-field rules, located at the node that
//      was written — an inherited mistake points at its defaults line.
//   5. Diagnostics sorted into file order and de-duplicated.
//   6. resolved_text: EmitYaml of the resolved plan (no defaults blocks).
//
// The steps live in their own files: overrides.h (2), inheritance.h (the
// merge of step 4), plan_emit.h (6); this file reads and validates.

#include "runner/plan/plan_parser.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "runner/base/placeholders.h"
#include "runner/base/text.h"
#include "runner/plan/case_placeholders.h"
#include "runner/plan/inheritance.h"
#include "runner/plan/networks.h"
#include "runner/plan/overrides.h"
#include "runner/plan/plan_emit.h"
#include "runner/plan/plan_reader.h"
#include "runner/plan/training_fields.h"
#include "runner/plan/yaml_tree.h"

namespace protocol {
namespace {

using Kind = YamlNode::Kind;

// ---- key tables -----------------------------------------------------------

const std::vector<std::string> kTopKeys = {"protocol", "name", "title", "models", "datasets",
                                           "cluster", "defaults", "stages", "interleave",
                                           "telemetry"};
const std::vector<std::string> kTelemetryKeys = {"interval"};
const std::vector<std::string> kCaseKeys = {
    "id",       "title",   "workload", "backend",   "system",  "model",    "dataset",
    "nodes",    "topology", "network", "variant",   "steps",   "epochs",   "report_as", "not_provided",
    "inference", "timeout", "repeats", "warmup_steps", "output_dir", "command", "training",
    "reference", "quality_target", "env"};
const std::vector<std::string> kStageKeys = {"name", "title", "defaults", "cases"};
const std::vector<std::string> kModelKeys = {"preset", "path", "from_case", "quantization", "double_quant", "init"};
const std::vector<std::string> kModelInits = {"weights", "random"};
const std::vector<std::string> kDatasetKeys = {"format", "path", "column"};
const std::vector<std::string> kClusterKeys = {"launcher", "network", "nodes", "emulate", "env", "networks",
                                               "compare_across_networks"};
const std::vector<std::string> kNodeKeys = {"name", "host", "gpus", "gpu_memory_gb", "gpu_model", "gpu_mfu", "env"};
const std::vector<std::string> kInferenceKeys = {"prompt", "max_new_tokens", "ignore_eos", "decode_step"};
const std::vector<std::string> kRangeKeys = {"from", "to", "step"};
const std::vector<std::string> kQualityTargetKeys = {"loss"};
const std::vector<std::string> kCommandKeys = {"argv", "shell", "env", "workdir", "metrics",
                                               "step_regex", "request_regex", "log_format"};
const std::vector<std::string> kMetricKeys = {"name", "regex", "unit"};
const std::vector<std::string> kDatasetFormats = {"text", "jsonl", "dolly", "tokens", "parquet"};
const std::vector<std::string> kLaunchers = {"local", "ssh", "slurm"};

// Largest inference schedule accepted (a range typo must not exhaust memory).
constexpr int64_t kMaxScheduleLength = 100000;

std::vector<std::string> Without(std::vector<std::string> keys, const std::string& drop) {
  keys.erase(std::remove(keys.begin(), keys.end(), drop), keys.end());
  return keys;
}

bool IsName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

bool IsPlanName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

template <typename Map>
std::vector<std::string> KeysOf(const Map& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

// ---- the parser ----------------------------------------------------------------

class PlanParser {
 public:
  PlanParser(const std::string& file, const PlanParseOptions& options, std::vector<Diagnostic>* errors)
      : options_(options), r_(file, errors) {}

  void SetLabels(std::vector<std::string> labels) { r_.SetOutOfFileLabels(std::move(labels)); }

  Plan Parse(const YamlNode& root);

 private:
  void ParseModels(const YamlNode& node);
  void ParseDatasets(const YamlNode& node);
  void ParseCluster(const YamlNode& node);
  void ParseTelemetry(const YamlNode& node);
  const YamlNode& Defaults(const YamlNode* node);
  void ParseStage(const YamlNode& stage, const YamlNode& plan_defaults);
  std::optional<CaseSpec> ParseCase(const YamlNode& merged, const YamlNode& case_node,
                                    const std::string& stage);
  // The parts of a case, in the order ParseCase reads them. Each reports its
  // problems and sets *ok = false on any; `who` names the case in messages.
  void ParseCaseId(const YamlNode& merged, const YamlNode& case_node, CaseSpec& c, bool* ok);
  // workload, backend, system, model, dataset; returns the workload when it is valid.
  std::optional<Workload> ParseCaseSubject(const YamlNode& merged, const YamlNode& case_node,
                                           const std::string& who, CaseSpec& c, bool* ok);
  // A model or dataset name, which must be one of `defined` (the plan's).
  void ReadDefinedName(const YamlNode& node, const char* what, const std::vector<std::string>& defined,
                       std::string* out, bool* ok);
  // nodes, topology, network, variant.
  void ParsePlacement(const YamlNode& merged, const std::string& who, CaseSpec& c, bool* ok);
  // steps / epochs, then report_as and not_provided (one length or a list, in the case's unit).
  void ParseLengths(const YamlNode& merged, const YamlNode& case_node, std::optional<Workload> workload,
                    const std::string& who, CaseSpec& c, bool* ok);
  void ParseFurtherLengths(const YamlNode& merged, const char* key, bool inference, const CaseSpec& c,
                           std::vector<Length>* out, bool* ok);
  // timeout, repeats, warmup_steps, output_dir.
  void ParseExecution(const YamlNode& merged, CaseSpec& c, bool* ok);
  // Reports `message` at `at` and sets *ok = false.
  void Fail(const YamlNode& at, std::string message, bool* ok, std::string hint = "");
  // merged[key] as a string into *out; the node, or null when the key is absent.
  const YamlNode* ReadString(const YamlNode& merged, const char* key, std::string* out, bool* ok);
  std::optional<Topology> ParseTopology(const YamlNode& node);
  void ParseInference(const YamlNode& node, bool required, CaseSpec& c, bool* ok);
  void ParseCommand(const YamlNode& node, CaseSpec& c, bool* ok);
  // A positional-group regex under `node[key]` ("" = none, overriding an
  // inherited one): it must compile and have at least `min_groups` groups.
  void ReadPattern(const YamlNode& node, const char* key, unsigned min_groups,
                   const char* groups_meaning, std::string* out, bool* ok);
  void ParseTraining(const YamlNode& node, CaseSpec& c, bool* ok);
  // One `training:` value into its member (training_fields.h): false after reporting a problem.
  bool ReadSetting(const YamlNode& node, const TrainingField& field, int64_t* out);
  bool ReadSetting(const YamlNode& node, const TrainingField& field, int* out);
  bool ReadSetting(const YamlNode& node, const TrainingField& field, double* out);
  bool ReadSetting(const YamlNode& node, const TrainingField& field, bool* out);
  template <typename E>
  bool ReadSetting(const YamlNode& node, const TrainingField& field, E* out);
  void ParseReference(const YamlNode& node, CaseSpec& c, bool* ok);
  void ParseQualityTarget(const YamlNode& node, bool training, CaseSpec& c, bool* ok);
  // `interleave:` — after the stages, so every case id is known.
  void ParseInterleave(const YamlNode& node);
  // models[].from_case — after the stages: the named case's output_dir
  // becomes the model's path (ModelSpec::from_case).
  void ResolveModelsFromCases();
  void CheckPlaceholders(const YamlNode& node, const std::string& text, const std::string& field,
                         const std::vector<std::string>& known);

  const PlanParseOptions& options_;
  NodeReader r_;
  Plan plan_;
  YamlNode empty_map_ = [] {
    YamlNode n;
    n.kind = Kind::kMap;
    return n;
  }();
  std::map<std::string, int> case_lines_;   // id → line of its first `id:`
  std::map<std::string, int> stage_lines_;  // name → line
  std::map<std::string, const YamlNode*> from_case_nodes_;  // model name → its from_case value
};

Plan PlanParser::Parse(const YamlNode& root) {
  if (root.kind != Kind::kMap) {
    r_.Error(root, fmt::format("a plan is a map at top level, got {}", NodeReader::Describe(root)));
    return plan_;
  }
  r_.CheckKeys(root, kTopKeys);

  if (const YamlNode* n = root.Find("protocol")) {
    if (auto v = r_.Integer(*n, "protocol"); v && *v != 1)
      r_.Error(*n, fmt::format("unsupported plan format version {} (this program reads version 1)", *v));
  } else {
    r_.Error(root, "missing 'protocol: 1' (the plan format version)");
  }
  if (const YamlNode* n = root.Find("name")) {
    if (auto v = r_.String(*n, "name")) {
      if (IsPlanName(*v)) plan_.name = *v;
      else r_.Error(*n, fmt::format("plan name '{}' may only contain a-z, 0-9, '.', '_' and '-'", *v));
    }
  } else {
    r_.Error(root, "missing 'name' (the plan's name, e.g. name: llama70b)");
  }
  if (const YamlNode* n = root.Find("title"))
    if (auto v = r_.String(*n, "title")) plan_.title = *v;
  if (const YamlNode* n = root.Find("models")) ParseModels(*n);
  if (const YamlNode* n = root.Find("datasets")) ParseDatasets(*n);
  if (const YamlNode* n = root.Find("cluster")) ParseCluster(*n);
  if (const YamlNode* n = root.Find("telemetry")) ParseTelemetry(*n);

  const YamlNode& defaults = Defaults(root.Find("defaults"));
  const YamlNode* stages = root.Find("stages");
  if (!stages) {
    r_.Error(root, "missing 'stages' (a plan runs at least one stage of cases)");
  } else if (r_.ExpectSequence(*stages, "stages")) {
    if (stages->items.empty()) r_.Error(*stages, "'stages' is empty (a plan runs at least one stage)");
    for (const auto& stage : stages->items) ParseStage(stage, defaults);
  }
  if (const YamlNode* n = root.Find("interleave")) ParseInterleave(*n);
  ResolveModelsFromCases();
  return plan_;
}

void PlanParser::ResolveModelsFromCases() {
  for (auto& [name, model] : plan_.models) {
    if (model.from_case.empty() || !from_case_nodes_.count(name)) continue;
    const YamlNode& at = *from_case_nodes_.at(name);
    const CaseSpec* producer = plan_.FindCase(model.from_case);
    if (producer == nullptr) {
      if (case_lines_.count(model.from_case)) continue;  // the case failed to parse: said already
      const std::string close = DidYouMean(model.from_case, KeysOf(case_lines_));
      r_.Error(at, fmt::format("model '{}': from_case names unknown case id '{}'", name, model.from_case),
               close.empty() ? "" : fmt::format("did you mean '{}'?", close));
      continue;
    }
    if (producer->output_dir.empty()) {
      r_.Error(at, fmt::format("model '{}': case '{}' saves no model (it has no output_dir)", name, producer->id),
               "give that case an output_dir (defaults.output_dir applies to every case)");
      continue;
    }
    model.path = FixedOutputDir(plan_, *producer);
    if (model.path.empty())
      r_.Error(at, fmt::format("model '{}': case '{}' saves to '{}', a folder that changes with each run or repeat "
                               "({{run_id}}, {{repeat}}): from_case needs one fixed folder",
                               name, producer->id, producer->output_dir));
  }
}

void PlanParser::ParseInterleave(const YamlNode& node) {
  if (!r_.ExpectSequence(node, "interleave")) return;
  std::vector<std::string> known = KeysOf(case_lines_);
  std::map<std::string, const YamlNode*> grouped;  // case id → the group that has it
  for (const YamlNode& group : node.items) {
    if (group.kind != Kind::kSequence) {
      r_.Error(group,
               fmt::format("an interleave group is a list of case ids, got {}", NodeReader::Describe(group)),
               "e.g. interleave: [[2.1.1.1, 2.2.1.1]]");
      continue;
    }
    std::vector<std::string> ids;
    bool ok = true;
    for (const YamlNode& item : group.items) {
      std::optional<std::string> id = r_.String(item, "interleave");
      if (!id) {
        ok = false;
        continue;
      }
      if (!case_lines_.count(*id)) {
        std::string close = DidYouMean(*id, known);
        r_.Error(item, fmt::format("interleave names unknown case id '{}'", *id),
                 close.empty() ? "" : fmt::format("did you mean '{}'?", close));
        ok = false;
      } else if (auto it = grouped.find(*id); it != grouped.end()) {
        r_.Error(item, it->second == &group
                           ? fmt::format("case '{}' is listed twice in this interleave group", *id)
                           : fmt::format("case '{}' is already in an interleave group{}", *id,
                                         it->second->line > 0
                                             ? fmt::format(" (line {})", it->second->line)
                                             : std::string()));
        ok = false;
      } else {
        grouped[*id] = &group;
        ids.push_back(*id);
      }
    }
    if (!ok) continue;
    if (ids.size() < 2) {
      r_.Error(group, fmt::format("an interleave group needs at least two cases, got {}", ids.size()));
      continue;
    }
    // Equal repeats, so every round holds every member (cases that failed
    // to parse are absent here; their errors are reported already).
    const CaseSpec* first = nullptr;
    for (const std::string& id : ids) {
      const CaseSpec* c = plan_.FindCase(id);
      if (c == nullptr) continue;
      if (first == nullptr) first = c;
      else if (c->repeats != first->repeats) {
        r_.Error(group, fmt::format("the cases of an interleave group need the same repeats: '{}' has {}, "
                                    "'{}' has {}",
                                    first->id, first->repeats, c->id, c->repeats));
        ok = false;
        break;
      }
    }
    if (ok) plan_.interleave.push_back(std::move(ids));
  }
}

void PlanParser::ParseModels(const YamlNode& node) {
  if (!r_.ExpectMap(node, "models")) return;
  for (const auto& [key, value] : node.entries) {
    ModelSpec m;
    m.name = key.scalar;
    m.where = r_.Where(key);
    if (!IsName(m.name))
      r_.Error(key, fmt::format("model name '{}' may only contain letters, digits, '.', '_' and '-'", m.name));
    if (!r_.ExpectMap(value, m.name)) continue;
    r_.CheckKeys(value, kModelKeys);
    if (const YamlNode* n = value.Find("preset"))
      if (auto v = r_.String(*n, "preset")) m.preset = *v;
    if (const YamlNode* n = value.Find("path"))
      if (auto v = r_.String(*n, "path")) m.path = *v;
    if (const YamlNode* n = value.Find("quantization"))
      if (auto v = r_.OneOf<Quantization>(*n, "quantization", "quantization")) m.quantization = *v;
    if (const YamlNode* n = value.Find("double_quant")) {
      if (auto v = r_.Bool(*n, "double_quant")) m.double_quant = *v;
      if (m.double_quant && m.quantization != Quantization::kNf4)
        r_.Error(*n, fmt::format("model '{}': double_quant applies to quantization: nf4 only", m.name));
    }
    if (const YamlNode* n = value.Find("init"))
      if (auto v = r_.OneOf(*n, "init", "init", kModelInits)) m.init_random = *v == "random";
    if (const YamlNode* n = value.Find("from_case")) {
      if (auto v = r_.String(*n, "from_case")) m.from_case = *v;
      if (value.Find("path"))
        r_.Error(*n, fmt::format("model '{}' has both a path and from_case: give one", m.name),
                 "from_case: ID reads the model that case saves, from its output_dir");
      from_case_nodes_[m.name] = n;
    }
    if (!value.Find("preset") && !value.Find("path") && !value.Find("from_case"))
      r_.Error(key, fmt::format("model '{}' needs a preset, a path or from_case", m.name));
    plan_.models[m.name] = m;
  }
}

void PlanParser::ParseDatasets(const YamlNode& node) {
  if (!r_.ExpectMap(node, "datasets")) return;
  for (const auto& [key, value] : node.entries) {
    DatasetSpec d;
    d.name = key.scalar;
    d.where = r_.Where(key);
    if (!IsName(d.name))
      r_.Error(key, fmt::format("dataset name '{}' may only contain letters, digits, '.', '_' and '-'", d.name));
    if (!r_.ExpectMap(value, d.name)) continue;
    r_.CheckKeys(value, kDatasetKeys);
    if (const YamlNode* n = value.Find("format")) {
      if (auto v = r_.OneOf(*n, "format", "dataset format", kDatasetFormats)) d.format = *v;
    } else {
      r_.Error(key, fmt::format("dataset '{}' needs a format ({})", d.name, Join(kDatasetFormats, " | ")));
    }
    if (const YamlNode* n = value.Find("path")) {
      if (auto v = r_.String(*n, "path")) d.path = *v;
    } else {
      r_.Error(key, fmt::format("dataset '{}' needs a path", d.name));
    }
    if (const YamlNode* n = value.Find("column")) {
      if (auto v = r_.String(*n, "column")) d.column = *v;
      if (!d.format.empty() && d.format != "parquet")
        r_.Error(*n, fmt::format("dataset '{}': column applies to format parquet (a {} dataset's text is its {})",
                                 d.name, d.format, d.format == "text" ? "files" : "records' fields"));
      else if (d.column.empty())
        r_.Error(*n, fmt::format("dataset '{}': column is empty (the default is text)", d.name));
    }
    plan_.datasets[d.name] = d;
  }
}

void PlanParser::ParseTelemetry(const YamlNode& node) {
  if (!r_.ExpectMap(node, "telemetry")) return;
  r_.CheckKeys(node, kTelemetryKeys);
  if (const YamlNode* n = node.Find("interval")) {
    std::optional<double> v = r_.Duration(*n, "interval");
    if (v && *v > 0 && *v < 0.1)
      r_.Error(*n, fmt::format("telemetry.interval {} s is below 0.1 s", *v),
               "nvidia-smi and /proc are read once per interval: 1s is the default, 0 turns sampling off");
    else if (v)
      plan_.telemetry.interval_seconds = *v;
  }
}

void PlanParser::ParseCluster(const YamlNode& node) {
  if (!r_.ExpectMap(node, "cluster")) return;
  r_.CheckKeys(node, kClusterKeys);
  ClusterSpec& c = plan_.cluster;
  if (const YamlNode* n = node.Find("launcher"))
    if (auto v = r_.OneOf(*n, "launcher", "launcher", kLaunchers)) c.launcher = *v;
  if (const YamlNode* n = node.Find("network"))
    if (auto v = r_.String(*n, "network")) c.network = *v;
  if (const YamlNode* n = node.Find("nodes"); n && r_.ExpectSequence(*n, "nodes")) {
    std::map<std::string, int> lines;
    for (const auto& item : n->items) {
      if (!r_.ExpectMap(item, "nodes")) continue;
      r_.CheckKeys(item, kNodeKeys);
      NodeSpec spec;
      const YamlNode* name = item.Find("name");
      if (!name) {
        r_.Error(item, "a cluster node needs a name");
        continue;
      }
      if (auto v = r_.String(*name, "name")) spec.name = *v;
      else continue;
      if (!IsName(spec.name)) {
        r_.Error(*name, fmt::format("node name '{}' may only contain letters, digits, '.', '_' and '-'", spec.name));
        continue;
      }
      if (auto it = lines.find(spec.name); it != lines.end()) {
        r_.Error(*name, fmt::format("duplicate node name '{}' (first at line {})", spec.name, it->second));
        continue;
      }
      lines[spec.name] = name->line;
      spec.host = spec.name;
      if (const YamlNode* h = item.Find("host"))
        if (auto v = r_.String(*h, "host")) spec.host = *v;
      if (const YamlNode* g = item.Find("gpus"))
        if (auto v = r_.IntegerIn(*g, "gpus", 0, 1 << 20)) spec.gpus = static_cast<int>(*v);
      if (const YamlNode* g = item.Find("gpu_memory_gb")) {
        if (auto v = r_.Number(*g, "gpu_memory_gb")) {
          // 0 = not stated, as the resolved plan writes an unstated value.
          if (*v < 0 || *v > 1e6) r_.Error(*g, fmt::format("'gpu_memory_gb' must be >= 0 and <= 1e6, got {}", g->scalar));
          else spec.gpu_memory_gb = *v;
        }
      }
      if (const YamlNode* g = item.Find("gpu_model"))
        if (auto v = r_.String(*g, "gpu_model")) {
          if (v->empty()) r_.Error(*g, "'gpu_model' must name a device, e.g. \"H100 SXM\" (docs/estimates.md)");
          else spec.gpu_model = *v;
        }
      if (const YamlNode* g = item.Find("gpu_mfu")) {
        if (auto v = r_.Number(*g, "gpu_mfu")) {
          // 0 = not stated, as the resolved plan would write it.
          if (!(*v > 0 && *v <= 1))
            r_.Error(*g, fmt::format("'gpu_mfu' must be a fraction > 0 and <= 1 (e.g. 0.4 for 40 % MFU), got {}",
                                     g->scalar));
          else spec.gpu_mfu = *v;
        }
      }
      if (const YamlNode* e = item.Find("env"))
        if (auto env = ReadEnv(r_, *e)) spec.env = *env;
      c.nodes.push_back(spec);
    }
  }
  if (const YamlNode* n = node.Find("emulate"))
    if (auto e = ReadEmulation(r_, *n)) c.emulate = *e;
  if (const YamlNode* n = node.Find("env"))
    if (auto e = ReadEnv(r_, *n)) c.env = *e;
  if (const YamlNode* n = node.Find("networks")) ReadNetworks(r_, *n, c);
  if (const YamlNode* n = node.Find("compare_across_networks"))
    if (auto v = r_.Bool(*n, "compare_across_networks")) c.compare_across_networks = *v;
  // The default label must mean something where networks are defined.
  if (const YamlNode* n = node.Find("network"); n && !c.networks.empty() && !c.network.empty() &&
                                                 !c.FindNetwork(c.network))
    r_.Error(*n, fmt::format("cluster.network '{}' names no network of cluster.networks", c.network),
             "networks: " + Join(KeysOf(c.networks), ", "));
}

// Checks a `defaults:` block (plan or stage) and returns it, or an empty map.
const YamlNode& PlanParser::Defaults(const YamlNode* node) {
  if (!node || !r_.ExpectMap(*node, "defaults")) return empty_map_;
  YamlNode others = *node;
  others.entries.clear();
  for (const auto& entry : node->entries) {
    if (entry.first.scalar == "id") r_.Error(entry.first, "'id' belongs to each case, not to defaults");
    else others.entries.push_back(entry);
  }
  r_.CheckKeys(others, Without(kCaseKeys, "id"));
  return *node;
}

void PlanParser::ParseStage(const YamlNode& node, const YamlNode& plan_defaults) {
  if (!r_.ExpectMap(node, "stages")) return;
  r_.CheckKeys(node, kStageKeys);
  StageSpec stage;
  if (const YamlNode* n = node.Find("name")) {
    if (auto v = r_.String(*n, "name")) {
      stage.name = *v;
      if (!IsName(*v))
        r_.Error(*n, fmt::format("stage name '{}' may only contain letters, digits, '.', '_' and '-'", *v));
      else if (auto it = stage_lines_.find(*v); it != stage_lines_.end())
        r_.Error(*n, fmt::format("duplicate stage name '{}' (first at line {})", *v, it->second));
      else stage_lines_[*v] = n->line;
    }
  } else {
    r_.Error(node, "a stage needs a name (e.g. name: stage1)");
  }
  if (const YamlNode* n = node.Find("title"))
    if (auto v = r_.String(*n, "title")) stage.title = *v;
  YamlNode defaults = MergeDefaults(plan_defaults, Defaults(node.Find("defaults")));
  const std::string who = stage.name.empty() ? std::string("a stage") : fmt::format("stage '{}'", stage.name);
  const YamlNode* cases = node.Find("cases");
  if (!cases) {
    r_.Error(node, fmt::format("{} has no cases", who));
  } else if (r_.ExpectSequence(*cases, "cases")) {
    if (cases->items.empty()) r_.Error(*cases, fmt::format("{} has no cases", who));
    for (const auto& item : cases->items) {
      if (!r_.ExpectMap(item, "cases")) continue;
      r_.CheckKeys(item, kCaseKeys);
      YamlNode merged = MergeDefaults(defaults, item);
      merged.line = item.line;
      merged.column = item.column;
      if (auto c = ParseCase(merged, item, stage.name)) stage.cases.push_back(std::move(*c));
    }
  }
  plan_.stages.push_back(std::move(stage));
}

std::optional<Topology> PlanParser::ParseTopology(const YamlNode& node) {
  auto text = r_.String(node, "topology");
  if (!text) return std::nullopt;
  Topology t;
  std::vector<std::string> parts;
  for (const auto& p : Split(*text, ' '))
    if (!Trim(p).empty()) parts.push_back(Trim(p));
  if (parts.empty()) {
    r_.Error(node, "topology is empty (expected NODE:GxK parts, e.g. 'rig0:2x4 rig1:2x4')");
    return std::nullopt;
  }
  static const std::regex kPart(R"(^([A-Za-z0-9._-]+):([0-9]{1,6})x([0-9]{1,6})$)");
  bool ok = true;
  for (const auto& p : parts) {
    std::smatch m;
    if (!std::regex_match(p, m, kPart)) {
      r_.Error(node, fmt::format("bad topology part '{}' (expected NODE:GxK, e.g. rig0:2x4)", p));
      ok = false;
      continue;
    }
    TopologyPart part{m[1].str(), std::stoi(m[2].str()), std::stoi(m[3].str())};
    if (part.groups < 1 || part.ranks_per_group < 1) {
      r_.Error(node, fmt::format("topology part '{}' needs G >= 1 groups of K >= 1 GPUs", p));
      ok = false;
      continue;
    }
    bool twice = std::any_of(t.parts.begin(), t.parts.end(),
                             [&](const TopologyPart& q) { return q.node == part.node; });
    if (twice) {
      r_.Error(node, fmt::format("topology names node '{}' twice", part.node));
      ok = false;
      continue;
    }
    const auto& nodes = plan_.cluster.nodes;
    if (!nodes.empty()) {
      auto it = std::find_if(nodes.begin(), nodes.end(), [&](const NodeSpec& n) { return n.name == part.node; });
      if (it == nodes.end()) {
        std::vector<std::string> names;
        for (const auto& n : nodes) names.push_back(n.name);
        std::string close = DidYouMean(part.node, names);
        r_.Error(node, fmt::format("topology names unknown node '{}'", part.node),
                 close.empty() ? "cluster nodes: " + Join(names, ", ") : fmt::format("did you mean '{}'?", close));
        ok = false;
        continue;
      }
      // Whether G·K ranks fit the node's GPUs is the backend's rule (the native share
      // backend: training ranks need a GPU each, inference replicas may share them).
    }
    t.parts.push_back(part);
  }
  if (!ok) return std::nullopt;
  return t;
}

void PlanParser::CheckPlaceholders(const YamlNode& node, const std::string& text,
                                   const std::string& field, const std::vector<std::string>& known) {
  for (const auto& name : UnknownPlaceholders(text, known)) {
    std::string close = DidYouMean(name, known);
    r_.Error(node, fmt::format("unknown placeholder '{{{}}}' in {}", name, field),
             close.empty() ? "known: " + Join(known, ", ") : fmt::format("did you mean '{{{}}}'?", close));
  }
}

void PlanParser::ParseInference(const YamlNode& node, bool required, CaseSpec& c, bool* ok) {
  if (!r_.ExpectMap(node, "inference")) {
    *ok = false;
    return;
  }
  r_.CheckKeys(node, kInferenceKeys);
  InferenceSchedule s;
  if (const YamlNode* n = node.Find("prompt")) {
    if (auto v = r_.String(*n, "prompt")) {
      s.prompt = *v;
      if (required && v->empty()) {
        r_.Error(*n, "inference.prompt is empty");
        *ok = false;
      }
    } else {
      *ok = false;
    }
  } else if (required) {
    r_.Error(node, "an inference case needs inference.prompt");
    *ok = false;
  }
  if (const YamlNode* n = node.Find("max_new_tokens")) {
    auto tokens = [&](const YamlNode& v, const std::string& name) {
      return r_.IntegerIn(v, name, 1, INT_MAX);
    };
    if (n->kind == Kind::kSequence) {
      if (n->items.empty()) {
        r_.Error(*n, "max_new_tokens is empty");
        *ok = false;
      }
      for (const auto& item : n->items) {
        if (auto v = tokens(item, "max_new_tokens")) s.max_new_tokens.push_back(static_cast<int>(*v));
        else *ok = false;
      }
    } else if (n->kind == Kind::kMap) {
      r_.CheckKeys(*n, kRangeKeys);
      std::optional<int64_t> from, to, step;
      for (const char* key : {"from", "to", "step"}) {
        const YamlNode* k = n->Find(key);
        if (!k) {
          r_.Error(*n, fmt::format("max_new_tokens range needs '{}' (from, to, step)", key));
          *ok = false;
          continue;
        }
        auto v = tokens(*k, key);
        if (!v) *ok = false;
        if (std::string(key) == "from") from = v;
        else if (std::string(key) == "to") to = v;
        else step = v;
      }
      if (from && to && step) {
        if (*from > *to) {
          r_.Error(*n, fmt::format("max_new_tokens range needs from <= to (from {}, to {})", *from, *to));
          *ok = false;
        } else if ((*to - *from) / *step + 1 > kMaxScheduleLength) {
          r_.Error(*n, fmt::format("max_new_tokens range has {} values (at most {})",
                                   (*to - *from) / *step + 1, kMaxScheduleLength));
          *ok = false;
        } else {
          for (int64_t v = *from; v <= *to; v += *step) s.max_new_tokens.push_back(static_cast<int>(v));
        }
      }
    } else {
      r_.Error(*n, fmt::format("expected a list or a {{from, to, step}} range for 'max_new_tokens', got {}",
                               NodeReader::Describe(*n)));
      *ok = false;
    }
  } else if (required) {
    r_.Error(node, "an inference case needs inference.max_new_tokens");
    *ok = false;
  }
  if (const YamlNode* n = node.Find("ignore_eos")) {
    if (auto v = r_.Bool(*n, "ignore_eos")) s.ignore_eos = *v;
    else *ok = false;
  }
  if (const YamlNode* n = node.Find("decode_step")) {
    if (auto v = r_.OneOf<DecodeStepChoice>(*n, "decode_step", "inference.decode_step")) s.decode_step = *v;
    else *ok = false;
  }
  if (required) c.inference = s;
}

void PlanParser::ReadPattern(const YamlNode& node, const char* key, unsigned min_groups,
                             const char* groups_meaning, std::string* out, bool* ok) {
  const YamlNode* n = node.Find(key);
  if (!n) return;
  auto v = r_.String(*n, key);
  if (!v) {
    *ok = false;
    return;
  }
  *out = *v;
  if (v->empty()) return;
  try {
    std::regex re(*v, std::regex::ECMAScript);
    if (re.mark_count() < min_groups) {
      r_.Error(*n, min_groups == 1
                       ? fmt::format("{} has no capture group ({})", key, groups_meaning)
                       : fmt::format("{} needs {} capture groups ({})", key, min_groups, groups_meaning));
      *ok = false;
    }
  } catch (const std::regex_error& e) {
    r_.Error(*n, fmt::format("{} does not compile: {}", key, e.what()));
    *ok = false;
  }
}

void PlanParser::ParseCommand(const YamlNode& node, CaseSpec& c, bool* ok) {
  if (!r_.ExpectMap(node, "command")) {
    *ok = false;
    return;
  }
  r_.CheckKeys(node, kCommandKeys);
  const std::vector<std::string> names = PlaceholderNames(PlaceholderField::kCommand);
  CommandSpec cmd;
  if (const YamlNode* n = node.Find("shell")) {
    if (auto v = r_.Bool(*n, "shell")) cmd.shell = *v;
    else *ok = false;
  }
  if (const YamlNode* n = node.Find("argv")) {
    if (n->kind == Kind::kScalar && cmd.shell) {
      cmd.argv.push_back(n->scalar);
    } else if (n->kind == Kind::kSequence) {
      for (const auto& item : n->items) {
        if (auto v = r_.String(item, "argv")) cmd.argv.push_back(*v);
        else *ok = false;
      }
      if (n->items.empty()) {
        r_.Error(*n, "command.argv is empty");
        *ok = false;
      } else if (cmd.shell && n->items.size() > 1) {
        r_.Error(*n, "with shell: true, argv is one string (the shell command line)");
        *ok = false;
      }
    } else if (n->kind == Kind::kScalar) {
      r_.Error(*n, "expected a list of strings for 'argv' (a single string only with shell: true)");
      *ok = false;
    } else {
      r_.Error(*n, fmt::format("expected a list of strings for 'argv', got {}", NodeReader::Describe(*n)));
      *ok = false;
    }
    for (size_t i = 0; i < cmd.argv.size(); ++i)
      CheckPlaceholders(n->kind == Kind::kSequence ? n->items[i] : *n, cmd.argv[i], "command.argv", names);
  }
  if (const YamlNode* n = node.Find("env"); n && r_.ExpectMap(*n, "env")) {
    for (const auto& [key, value] : n->entries) {
      if (auto v = r_.String(value, key.scalar)) {
        cmd.env[key.scalar] = *v;
        CheckPlaceholders(value, *v, "command.env", names);
      } else {
        *ok = false;
      }
    }
  } else if (n) {
    *ok = false;
  }
  if (const YamlNode* n = node.Find("workdir")) {
    if (auto v = r_.String(*n, "workdir")) {
      cmd.workdir = *v;
      CheckPlaceholders(*n, *v, "command.workdir", names);
    } else {
      *ok = false;
    }
  }
  if (const YamlNode* n = node.Find("metrics"); n && r_.ExpectSequence(*n, "metrics")) {
    std::set<std::string> names;
    for (const auto& item : n->items) {
      if (!r_.ExpectMap(item, "metrics")) {
        *ok = false;
        continue;
      }
      r_.CheckKeys(item, kMetricKeys);
      MetricPattern m;
      const YamlNode* name = item.Find("name");
      const YamlNode* regex = item.Find("regex");
      if (!name) r_.Error(item, "a metric needs a name");
      if (!regex) r_.Error(item, "a metric needs a regex (its first capture group is the value)");
      if (!name || !regex) {
        *ok = false;
        continue;
      }
      auto name_text = r_.String(*name, "name");
      auto regex_text = r_.String(*regex, "regex");
      if (!name_text || !regex_text) {
        *ok = false;
        continue;
      }
      m.name = *name_text;
      m.regex = *regex_text;
      if (!names.insert(m.name).second) {
        r_.Error(*name, fmt::format("duplicate metric '{}'", m.name));
        *ok = false;
      }
      try {
        std::regex re(m.regex, std::regex::ECMAScript);
        if (re.mark_count() < 1) {
          r_.Error(*regex, fmt::format("metric '{}' regex has no capture group (the first group is the value)", m.name));
          *ok = false;
        }
      } catch (const std::regex_error& e) {
        r_.Error(*regex, fmt::format("metric '{}' regex does not compile: {}", m.name, e.what()));
        *ok = false;
      }
      if (const YamlNode* u = item.Find("unit")) {
        if (auto v = r_.String(*u, "unit")) m.unit = *v;
        else *ok = false;
      }
      cmd.metrics.push_back(m);
    }
  } else if (n) {
    *ok = false;
  }
  ReadPattern(node, "step_regex", 1, "group 1 is the step, group 2 the loss", &cmd.step_regex, ok);
  ReadPattern(node, "request_regex", 2, "group 1 is the generated tokens, group 2 the seconds",
              &cmd.request_regex, ok);
  if (const YamlNode* n = node.Find("log_format")) {
    if (auto v = r_.String(*n, "log_format")) cmd.log_format = *v;
    else *ok = false;
  }
  c.command = cmd;
}

void PlanParser::ParseTraining(const YamlNode& node, CaseSpec& c, bool* ok) {
  if (!r_.ExpectMap(node, "training")) {
    *ok = false;
    return;
  }
  r_.CheckKeys(node, TrainingFieldNames());
  for (const TrainingField& field : TrainingFields()) {
    const YamlNode* n = node.Find(field.name);
    if (n && !VisitField(field, c.training, [&](auto& value) { return ReadSetting(*n, field, &value); }))
      *ok = false;
  }
}

bool PlanParser::ReadSetting(const YamlNode& node, const TrainingField& field, int64_t* out) {
  const TrainingBounds& b = field.bounds;
  if (b.or_auto && node.kind == YamlNode::Kind::kScalar) {
    if (node.scalar == "auto") {
      *out = kSettingAuto;
      return true;
    }
    static const std::regex kInteger("^[+-]?[0-9]+$");
    if (!std::regex_match(node.scalar, kInteger)) {
      r_.Error(node, fmt::format("expected an integer or auto for '{}', got '{}'", field.name, node.scalar));
      return false;
    }
  }
  auto v = r_.IntegerIn(node, field.name, std::isinf(b.min) ? INT64_MIN : static_cast<int64_t>(b.min),
                        std::isinf(b.max) ? INT64_MAX : static_cast<int64_t>(b.max));
  if (v) *out = *v;
  return v.has_value();
}

bool PlanParser::ReadSetting(const YamlNode& node, const TrainingField& field, int* out) {
  int64_t wide = 0;
  TrainingField narrow = field;
  narrow.bounds.min = std::max(field.bounds.min, static_cast<double>(INT_MIN));
  narrow.bounds.max = std::min(field.bounds.max, static_cast<double>(INT_MAX));
  if (!ReadSetting(node, narrow, &wide)) return false;
  *out = static_cast<int>(wide);
  return true;
}

// A number in [min, max], or (min, max] when open_min: "'outer_lr' must be > 0
// and <= 10, got 11"; without a max: "'learning_rate' must be > 0, got 0".
bool PlanParser::ReadSetting(const YamlNode& node, const TrainingField& field, double* out) {
  const TrainingBounds& b = field.bounds;
  auto v = r_.Number(node, field.name);
  if (!v) return false;
  if (*v < b.min || *v > b.max || (b.open_min && *v == b.min)) {
    const std::string least = fmt::format("{} {}", b.open_min ? ">" : ">=", b.min);
    r_.Error(node, std::isinf(b.max) ? fmt::format("'{}' must be {}, got {}", field.name, least, node.scalar)
                                     : fmt::format("'{}' must be {} and <= {}, got {}", field.name, least, b.max,
                                                   node.scalar));
    return false;
  }
  *out = *v;
  return true;
}

bool PlanParser::ReadSetting(const YamlNode& node, const TrainingField& field, bool* out) {
  auto v = r_.Bool(node, field.name);
  if (v) *out = *v;
  return v.has_value();
}

// A closed vocabulary (plan.h): one of its names.
template <typename E>
bool PlanParser::ReadSetting(const YamlNode& node, const TrainingField& field, E* out) {
  static_assert(kIsVocabularySetting<E>);
  auto v = r_.OneOf<E>(node, field.name, field.name);
  if (v) *out = *v;
  return v.has_value();
}

// `reference: {METRIC: [VALUE, -LOW%, +HIGH%], ...}`; METRIC is wall_minutes or
// a measurement name (lower case, digits, '_').
void PlanParser::ParseReference(const YamlNode& node, CaseSpec& c, bool* ok) {
  if (!r_.ExpectMap(node, "reference")) {
    *ok = false;
    return;
  }
  static const std::regex kMetricName("^[a-z][a-z0-9_]*$");
  static const std::regex kTolerance(R"(^([+-]?)([0-9]+(\.[0-9]+)?)\s*%$)");
  for (const auto& [key, value] : node.entries) {
    const std::string& name = key.scalar;
    if (!std::regex_match(name, kMetricName)) {
      r_.Error(key, fmt::format("'{}' is not a metric name (e.g. wall_minutes, tokens_per_second)", name));
      *ok = false;
      continue;
    }
    const std::string where = "reference." + name;
    if (value.kind != Kind::kSequence || value.items.size() != 3) {
      r_.Error(value, fmt::format("expected [value, -lower%, +upper%] for '{}', got {}", where,
                                  NodeReader::Describe(value)),
               "e.g. wall_minutes: [93, -5%, +10%]");
      *ok = false;
      continue;
    }
    ReferenceBand band;
    band.metric = name;
    band.where = r_.Where(key);
    if (auto v = r_.Number(value.items[0], where)) {
      if (*v <= 0) {
        r_.Error(value.items[0], fmt::format("the reference value of '{}' must be > 0, got {}", where,
                                             value.items[0].scalar));
        *ok = false;
      }
      band.value = *v;
    } else {
      *ok = false;
    }
    for (int side = 0; side < 2; ++side) {
      const YamlNode& t = value.items[1 + side];
      std::smatch m;
      const std::string text = t.kind == Kind::kScalar ? t.scalar : "";
      bool good = t.kind == Kind::kScalar && std::regex_match(text, m, kTolerance);
      double fraction = good ? std::stod(m[2].str()) / 100 : 0;
      // The sign is required (except for 0%) and must point away from the value.
      if (good && fraction != 0 && m[1].str() != (side == 0 ? "-" : "+")) good = false;
      if (!good) {
        r_.Error(t, fmt::format("expected {} tolerance like '{}' for '{}', got {}",
                                side == 0 ? "a lower" : "an upper", side == 0 ? "-5%" : "+10%", where,
                                NodeReader::Describe(t)));
        *ok = false;
        continue;
      }
      (side == 0 ? band.lower : band.upper) = side == 0 ? -fraction : fraction;
    }
    c.references.push_back(band);
  }
}

// `quality_target: {loss: X}`: the held-out loss the report's time to target
// aims at instead of the baseline's (docs/report.md); X > 0, training only.
void PlanParser::ParseQualityTarget(const YamlNode& node, bool training, CaseSpec& c, bool* ok) {
  if (!r_.ExpectMap(node, "quality_target")) {
    *ok = false;
    return;
  }
  r_.CheckKeys(node, kQualityTargetKeys);
  const YamlNode* loss = node.Find("loss");
  if (!loss) {
    Fail(node, "quality_target needs a loss", ok, "e.g. quality_target: {loss: 5.5}");
    return;
  }
  std::optional<double> v = r_.Number(*loss, "quality_target.loss");
  if (!v) {
    *ok = false;
    return;
  }
  if (!(*v > 0)) {
    Fail(*loss, fmt::format("quality_target.loss must be > 0, got {}", loss->scalar), ok);
    return;
  }
  if (!training) {
    Fail(node, "quality_target applies to training workloads only (a held-out loss to reach)", ok);
    return;
  }
  c.quality_target_loss = *v;
}

std::optional<CaseSpec> PlanParser::ParseCase(const YamlNode& m, const YamlNode& case_node,
                                              const std::string& stage) {
  CaseSpec c;
  c.stage = stage;
  c.where = r_.Where(case_node);
  bool ok = true;
  ParseCaseId(m, case_node, c, &ok);
  const std::string who = c.id.empty() ? std::string("a case") : fmt::format("case '{}'", c.id);
  ReadString(m, "title", &c.title, &ok);
  const std::optional<Workload> workload = ParseCaseSubject(m, case_node, who, c, &ok);
  ParsePlacement(m, who, c, &ok);
  ParseLengths(m, case_node, workload, who, c, &ok);

  // Workload settings.
  const bool inference = workload && *workload == Workload::kInference;
  if (const YamlNode* n = m.Find("inference")) {
    ParseInference(*n, inference, c, &ok);
  } else if (inference) {
    Fail(case_node, fmt::format("{} needs inference.prompt and inference.max_new_tokens", who), &ok);
  }
  if (const YamlNode* n = m.Find("command")) ParseCommand(*n, c, &ok);
  if (const YamlNode* n = m.Find("training")) ParseTraining(*n, c, &ok);
  if (const YamlNode* n = m.Find("env")) {
    if (auto e = ReadEnv(r_, *n)) c.env = *e;
    else ok = false;
  }  // a backend that takes no case-level env says so in its Check
  // A hybrid-sharded case is another system than its backend's plain one (for
  // fsdp: kHybridFsdpSystem, a further baseline than the methodology's): its
  // own column unless the plan names its system.
  if (!m.Find("system") && c.training.sharding != Sharding::kFull)
    c.system = fmt::format("{}-{}", c.backend, NameOf(c.training.sharding));
  if (const YamlNode* n = m.Find("reference")) ParseReference(*n, c, &ok);
  if (const YamlNode* n = m.Find("quality_target")) ParseQualityTarget(*n, workload && !inference, c, &ok);

  ParseExecution(m, c, &ok);
  if (!ok) return std::nullopt;
  return c;
}

void PlanParser::Fail(const YamlNode& at, std::string message, bool* ok, std::string hint) {
  r_.Error(at, std::move(message), std::move(hint));
  *ok = false;
}

const YamlNode* PlanParser::ReadString(const YamlNode& m, const char* key, std::string* out, bool* ok) {
  const YamlNode* n = m.Find(key);
  if (!n) return nullptr;
  if (auto v = r_.String(*n, key)) *out = *v;
  else *ok = false;
  return n;
}

void PlanParser::ParseCaseId(const YamlNode& m, const YamlNode& case_node, CaseSpec& c, bool* ok) {
  const YamlNode* id = m.Find("id");
  if (!id) {
    Fail(case_node, "a case needs an id (e.g. id: \"2.1.1.1\")", ok);
  } else if (auto v = r_.String(*id, "id")) {
    c.id = *v;
    if (!IsName(c.id)) {
      Fail(*id, fmt::format("case id '{}' may only contain letters, digits, '.', '_' and '-'", c.id), ok);
    } else if (auto it = case_lines_.find(c.id); it != case_lines_.end()) {
      Fail(*id, fmt::format("duplicate case id '{}' (first at line {})", c.id, it->second), ok);
    } else {
      case_lines_[c.id] = id->line;
    }
  } else {
    *ok = false;
  }
}

std::optional<Workload> PlanParser::ParseCaseSubject(const YamlNode& m, const YamlNode& case_node,
                                                     const std::string& who, CaseSpec& c, bool* ok) {
  std::optional<Workload> workload;
  if (const YamlNode* n = m.Find("workload")) {
    if (!(workload = r_.OneOf<Workload>(*n, "workload", "workload"))) *ok = false;
  } else {
    Fail(case_node, fmt::format("{} needs a workload (pretrain | finetune | inference)", who), ok);
  }
  if (workload) c.workload = *workload;

  const YamlNode* backend = m.Find("backend");
  if (!backend) {
    Fail(case_node, fmt::format("{} needs a backend ({})", who, Join(options_.backend_names, " | ")), ok);
  } else if (auto v = r_.OneOf(*backend, "backend", "backend", options_.backend_names)) {
    c.backend = *v;
  } else {
    *ok = false;
  }

  const YamlNode* system = ReadString(m, "system", &c.system, ok);
  // The system under test defaults to the backend's name; a backend whose name
  // is not a system (command) says so in its Check.
  if (!system && !c.backend.empty()) c.system = c.backend;
  if (system && *ok && c.system.empty()) Fail(*system, "'system' is empty", ok);

  if (const YamlNode* n = m.Find("model")) ReadDefinedName(*n, "model", KeysOf(plan_.models), &c.model, ok);
  else Fail(case_node, fmt::format("{} needs a model", who), ok);
  if (const YamlNode* n = m.Find("dataset")) ReadDefinedName(*n, "dataset", KeysOf(plan_.datasets), &c.dataset, ok);
  return workload;
}

void PlanParser::ReadDefinedName(const YamlNode& n, const char* what, const std::vector<std::string>& defined,
                                 std::string* out, bool* ok) {
  std::optional<std::string> v = r_.String(n, what);
  if (!v) {
    *ok = false;
    return;
  }
  if (std::find(defined.begin(), defined.end(), *v) != defined.end()) {
    *out = *v;
    return;
  }
  std::string close = DidYouMean(*v, defined);
  Fail(n, fmt::format("unknown {} '{}'", what, *v), ok,
       close.empty() ? (defined.empty() ? fmt::format("the plan defines no {}s", what)
                                        : fmt::format("{}s: {}", what, Join(defined, ", ")))
                     : fmt::format("did you mean '{}'?", close));
}

void PlanParser::ParsePlacement(const YamlNode& m, const std::string& who, CaseSpec& c, bool* ok) {
  std::optional<int64_t> nodes;
  const YamlNode* nodes_node = m.Find("nodes");
  if (nodes_node) {
    nodes = r_.IntegerIn(*nodes_node, "nodes", 1, INT_MAX);
    if (!nodes) *ok = false;
  }
  const YamlNode* topology_node = m.Find("topology");
  if (topology_node) {
    if (auto t = ParseTopology(*topology_node)) c.topology = *t;
    else *ok = false;
  }
  if (!c.topology.empty()) {
    c.nodes = c.topology.NodeCount();
    if (nodes && *nodes != c.nodes)
      Fail(*nodes_node, fmt::format("nodes ({}) disagrees with topology '{}' ({} {})", *nodes,
                                    c.topology.ToString(), c.nodes, c.nodes == 1 ? "node" : "nodes"),
           ok);
  } else if (nodes) {
    c.nodes = static_cast<int>(*nodes);
    const size_t cluster = plan_.cluster.nodes.size();
    if (cluster > 0 && static_cast<size_t>(c.nodes) > cluster)
      Fail(*nodes_node, fmt::format("{} needs {} nodes but the cluster has {}", who, c.nodes, cluster), ok);
  }
  const YamlNode* network = ReadString(m, "network", &c.network, ok);
  if (!network && c.nodes > 1) c.network = plan_.cluster.network;
  // Where the plan defines networks, a multi-node case's label is one of them
  // (a typo would otherwise run on whatever the transport picks).
  const auto& networks = plan_.cluster.networks;
  if (c.nodes > 1 && !networks.empty() && !c.network.empty() && !plan_.cluster.FindNetwork(c.network)) {
    const std::vector<std::string> labels = KeysOf(networks);
    const std::string close = DidYouMean(c.network, labels);
    Fail(network ? *network : m, fmt::format("{}: network '{}' is not one of cluster.networks", who, c.network), ok,
         close.empty() ? "networks: " + Join(labels, ", ") : fmt::format("did you mean '{}'?", close));
  }
  ReadString(m, "variant", &c.variant, ok);
}

void PlanParser::ParseLengths(const YamlNode& m, const YamlNode& case_node, std::optional<Workload> workload,
                              const std::string& who, CaseSpec& c, bool* ok) {
  c.length = ReadLength(r_, m, case_node, workload,
                        {fmt::format("{} gives both steps and epochs (give one)", who),
                         fmt::format("{} needs steps or epochs ({})", who, workload ? WorkloadName(*workload) : ""),
                         "an inference case has no steps or epochs (its length is inference.max_new_tokens)"},
                        ok);
  const bool inference = workload && *workload == Workload::kInference;
  ParseFurtherLengths(m, "report_as", inference, c, &c.report_as, ok);
  ParseFurtherLengths(m, "not_provided", inference, c, &c.not_provided, ok);
}

void PlanParser::ParseFurtherLengths(const YamlNode& m, const char* key, bool inference, const CaseSpec& c,
                                     std::vector<Length>* out, bool* ok) {
  const YamlNode* n = m.Find(key);
  if (!n) return;
  if (inference) {
    Fail(*n, fmt::format("{} applies to pretrain and finetune cases only", key), ok);
    return;
  }
  std::vector<const YamlNode*> items;
  if (n->kind == YamlNode::Kind::kSequence) {
    for (const YamlNode& item : n->items) items.push_back(&item);
    if (items.empty()) Fail(*n, fmt::format("{} lists no length", key), ok);
  } else {
    items.push_back(n);
  }
  for (const YamlNode* item : items) {
    std::optional<int64_t> v = r_.IntegerIn(*item, key, 1, INT64_MAX);
    if (!v) {
      *ok = false;
      continue;
    }
    if (!c.length) continue;
    const Length length{c.length->unit, *v};
    const bool taken = std::find(c.report_as.begin(), c.report_as.end(), length) != c.report_as.end() ||
                       std::find(c.not_provided.begin(), c.not_provided.end(), length) != c.not_provided.end();
    if (*v == c.length->count)
      Fail(*item, fmt::format("{} ({}) is the measured length itself, which the case reports anyway", key,
                              length.ToString()), ok);
    else if (taken)
      Fail(*item, fmt::format("{} repeats {} (each length once, in report_as or not_provided)", key,
                              length.ToString()), ok);
    else if (out == &c.report_as && *v < c.length->count && c.length->unit != Length::Unit::kSteps)
      Fail(*item, fmt::format("report_as ({}) is shorter than the measured {}: a shorter length is read from "
                              "per-step timings, so it needs a length in steps",
                              length.ToString(), c.length->ToString()), ok);
    else
      out->push_back(length);
  }
}

void PlanParser::ParseExecution(const YamlNode& m, CaseSpec& c, bool* ok) {
  if (const YamlNode* n = m.Find("timeout")) {
    if (auto v = r_.Duration(*n, "timeout")) c.timeout_seconds = *v;
    else *ok = false;
  }
  if (const YamlNode* n = m.Find("repeats")) {
    if (auto v = r_.IntegerIn(*n, "repeats", 1, INT_MAX)) c.repeats = static_cast<int>(*v);
    else *ok = false;
  }
  if (const YamlNode* n = m.Find("warmup_steps")) {
    if (auto v = r_.IntegerIn(*n, "warmup_steps", 0, INT_MAX)) {
      c.warmup_steps = static_cast<int>(*v);
      if (c.length && c.length->unit == Length::Unit::kSteps && *v >= c.length->count)
        Fail(*n, fmt::format("warmup_steps ({}) must be less than steps ({})", *v, c.length->count), ok);
    } else {
      *ok = false;
    }
  }
  if (const YamlNode* n = ReadString(m, "output_dir", &c.output_dir, ok))
    CheckPlaceholders(*n, c.output_dir, "output_dir", PlaceholderNames(PlaceholderField::kOutputDir));
}

PlanParseResult ParseTree(YamlParse parsed, std::string text, const std::string& file,
                          const PlanParseOptions& options) {
  PlanParseResult result;
  result.source_text = std::move(text);
  if (!parsed.ok) {
    result.errors.push_back(parsed.error);
    return result;
  }
  YamlNode& root = parsed.root;
  std::vector<std::string> labels;
  for (size_t i = 0; i < options.overrides.size(); ++i) {
    labels.push_back("--set " + options.overrides[i]);
    if (root.kind != Kind::kMap) break;
    std::string error = ApplyOverride(root, options.overrides[i], -static_cast<int>(i) - 1);
    if (!error.empty()) {
      Diagnostic d;
      d.where.file = labels.back();
      d.message = error;
      result.errors.push_back(std::move(d));
    }
  }
  PlanParser parser(file, options, &result.errors);
  parser.SetLabels(labels);
  Plan plan = parser.Parse(root);
  SortAndDedupe(result.errors);
  if (!result.errors.empty()) return result;
  plan.file = file;
  plan.resolved_text = ResolvedText(plan);
  result.plan = std::move(plan);
  return result;
}

}  // namespace

PlanParseResult ParsePlanFile(const std::string& path, const PlanParseOptions& options) {
  std::string text;
  YamlParse parsed = ParseYamlFile(path, &text);
  return ParseTree(std::move(parsed), std::move(text), path, options);
}

PlanParseResult ParsePlanString(const std::string& text, const std::string& file_label,
                                const PlanParseOptions& options) {
  return ParseTree(ParseYaml(text, file_label), text, file_label, options);
}

}  // namespace protocol
