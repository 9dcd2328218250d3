// Import files (docs/import-format.md): published figures → one stored run of
// kind "import". Same located-error treatment as plans (NodeReader).

#include "runner/store/import_file.h"

#include <algorithm>
#include <cctype>

#include "runner/base/build_info.h"
#include "runner/base/text.h"
#include "runner/plan/plan_reader.h"
#include "runner/plan/yaml_tree.h"

namespace protocol {
namespace {

const std::vector<std::string> kTopKeys = {"source", "results"};
const std::vector<std::string> kFigureKeys = {"model",   "workload", "steps",  "epochs", "backend", "nodes",
                                              "network", "variant",  "metric", "value",  "marker"};
const std::vector<std::string> kMarkers = {"extrapolated", "not-provided"};

bool IsMetricName(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::optional<ImportedFigure> ParseFigure(NodeReader& r, const YamlNode& node) {
  if (!r.ExpectMap(node, "results")) return std::nullopt;
  r.CheckKeys(node, kFigureKeys);
  ImportedFigure f;
  f.where = r.Where(node);
  bool ok = true;
  auto required_string = [&](const char* key, std::string* out) {
    const YamlNode* n = node.Find(key);
    if (!n) {
      r.Error(node, fmt::format("a result needs '{}'", key));
      ok = false;
      return;
    }
    if (auto v = r.String(*n, key)) *out = *v;
    else ok = false;
    if (ok && out->empty()) {
      r.Error(*n, fmt::format("'{}' is empty", key));
      ok = false;
    }
  };
  auto optional_string = [&](const char* key, std::string* out) {
    if (const YamlNode* n = node.Find(key)) {
      if (auto v = r.String(*n, key)) *out = *v;
      else ok = false;
    }
  };

  required_string("model", &f.model);
  if (const YamlNode* n = node.Find("workload")) {
    if (auto v = r.OneOf<Workload>(*n, "workload", "workload")) f.workload = WorkloadName(*v);
    else ok = false;
  } else {
    r.Error(node, "a result needs 'workload' (pretrain | finetune | inference)");
    ok = false;
  }
  required_string("backend", &f.backend);
  if (const YamlNode* n = node.Find("nodes")) {
    if (auto v = r.IntegerIn(*n, "nodes", 1, 1 << 20)) f.nodes = static_cast<int>(*v);
    else ok = false;
  }
  optional_string("network", &f.network);
  optional_string("variant", &f.variant);

  f.length = ReadLength(r, node, node, ParseWorkload(f.workload),
                        {"a result gives both steps and epochs (give one)",
                         fmt::format("a {} result needs steps or epochs", f.workload),
                         "an inference result has no steps or epochs"},
                        &ok);

  if (const YamlNode* n = node.Find("metric")) {
    if (auto v = r.String(*n, "metric")) {
      f.metric = *v;
      if (!IsMetricName(*v)) {
        r.Error(*n, fmt::format("metric name '{}' may only contain a-z, 0-9 and '_' (e.g. wall_minutes)", *v));
        ok = false;
      }
    } else {
      ok = false;
    }
  } else {
    r.Error(node, "a result needs 'metric' (e.g. wall_minutes, total_generation_seconds)");
    ok = false;
  }
  bool marker_ok = true;
  if (const YamlNode* n = node.Find("marker")) {
    if (auto v = r.OneOf(*n, "marker", "marker", kMarkers)) f.marker = *v;
    else ok = marker_ok = false;
  }
  const YamlNode* value = node.Find("value");
  if (!marker_ok) {
    // Whether a value is required depends on the marker; say nothing more.
  } else if (f.marker == "not-provided") {
    if (value) {
      r.Error(*value, "a not-provided result has no value (remove 'value' or the marker)");
      ok = false;
    }
  } else if (!value) {
    r.Error(node, "a result needs 'value' (or marker: not-provided)");
    ok = false;
  } else if (auto v = r.Number(*value, "value")) {
    f.value = *v;
  } else {
    ok = false;
  }
  if (!ok) return std::nullopt;
  return f;
}

ImportParseResult ParseTree(YamlParse parsed, std::string text, const std::string& path) {
  ImportParseResult result;
  result.source_text = text;
  if (!parsed.ok) {
    result.errors.push_back(parsed.error);
    return result;
  }
  NodeReader r(path, &result.errors);
  const YamlNode& root = parsed.root;
  ImportFile file;
  file.path = path;
  file.text = std::move(text);
  if (root.kind != YamlNode::Kind::kMap) {
    r.Error(root, fmt::format("an import file is a map at top level, got {}", NodeReader::Describe(root)));
    return result;
  }
  r.CheckKeys(root, kTopKeys);
  if (const YamlNode* n = root.Find("source")) {
    if (auto v = r.String(*n, "source")) {
      file.source = *v;
      if (Trim(*v).empty()) r.Error(*n, "'source' is empty (name where the figures come from)");
    }
  } else {
    r.Error(root, "missing 'source' (name where the figures come from)");
  }
  if (const YamlNode* n = root.Find("results")) {
    if (r.ExpectSequence(*n, "results")) {
      if (n->items.empty()) r.Error(*n, "'results' is empty");
      for (const auto& item : n->items)
        if (auto f = ParseFigure(r, item)) file.figures.push_back(std::move(*f));
    }
  } else {
    r.Error(root, "missing 'results' (the list of figures)");
  }
  SortAndDedupe(result.errors);
  if (result.errors.empty()) result.file = std::move(file);
  return result;
}

std::string Stem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

// The stored unit of a metric name (after wall_minutes became wall_seconds).
std::string UnitOf(const std::string& metric) {
  if (metric == "wall_seconds" || metric == "total_generation_seconds") return "s";
  if (metric == "seconds_per_token") return "s/token";
  if (metric == "tokens_per_second") return "tokens/s";
  return "";
}

}  // namespace

ImportParseResult ParseImportFile(const std::string& path) {
  std::string text;
  YamlParse parsed = ParseYamlFile(path, &text);
  return ParseTree(std::move(parsed), std::move(text), path);
}

ImportParseResult ParseImportString(const std::string& text, const std::string& file_label) {
  return ParseTree(ParseYaml(text, file_label), text, file_label);
}

Result<int64_t> StoreImport(Store& store, const ImportFile& file, Clock& clock) {
  const std::string now = clock.NowIso8601();
  RunRecord run;
  run.kind = "import";
  run.plan_name = Stem(file.path);
  run.plan_file = file.path;
  run.plan_text = file.text;
  run.source = file.source;
  run.started_at = now;
  run.status = "running";
  run.protocol_version = BuildInfo().version;
  run.git_revision = BuildInfo().git_revision;
  Result<int64_t> run_id = store.CreateRun(run);
  if (!run_id.ok()) return run_id.status();

  for (size_t i = 0; i < file.figures.size(); ++i) {
    const ImportedFigure& f = file.figures[i];
    CaseRecord record;
    record.run_id = *run_id;
    record.case_id = fmt::format("import-{}", i + 1);
    record.stage = "import";
    record.model = f.model;
    record.workload = f.workload;
    record.backend = "import";
    record.system = f.backend;
    record.nodes = f.nodes;
    record.network = f.network;
    record.variant = f.variant;
    if (f.length) {
      record.length_unit = f.length->UnitName();
      record.length_count = f.length->count;
    }
    record.started_at = now;
    record.finished_at = now;
    Result<int64_t> row = store.BeginCase(record);
    if (!row.ok()) return row.status();

    Measurement m;
    m.name = f.metric;
    m.value = f.value;
    m.how = Provenance::kImported;
    m.source = file.source;
    m.marker = f.marker;
    if (f.metric == "wall_minutes") {
      m.name = "wall_seconds";
      if (f.value) {
        m.value = *f.value * 60;
        m.method = fmt::format("converted from {} min", *f.value);
      }
    }
    m.unit = UnitOf(m.name);

    CaseResult result;
    result.status = CaseStatus::kOk;
    result.finished_at = now;
    result.measurements.push_back(m);
    Status s = store.FinishCase(*row, result);
    if (!s.ok()) return s;
  }
  Status s = store.FinishRun(*run_id, "ok", clock.NowIso8601());
  if (!s.ok()) return s;
  return run_id;
}

}  // namespace protocol
