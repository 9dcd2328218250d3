#include "runner/store/export.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <optional>
#include <vector>

#include "runner/base/json.h"
#include "runner/base/text.h"
#include "runner/store/link_label.h"
#include "runner/store/metric_table.h"

namespace protocol {

namespace {

// A sample quantity's unit (metric_table.h); "" for one this binary does not know.
std::string TelemetryUnit(const std::string& quantity) {
  const TelemetryQuantity* q = FindTelemetryQuantity(quantity);
  return q ? q->unit : "";
}

// ---- text helpers ---------------------------------------------------------

// Display width of UTF-8 text: code points, not bytes (plan titles and
// answers may hold non-ASCII text).
size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

// A cell on one line: CR, LF and TAB written as \r, \n, \t (stored text,
// e.g. an import's source, may span lines; the JSON export keeps it as is).
std::string OneLine(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

// "1 step", "2 steps".
std::string Count(size_t n, const char* noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// Rows of cells printed in columns two spaces apart; `right` marks columns
// aligned right (numbers). Cells are made one-line; trailing blanks are not
// printed.
struct TextTable {
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;

  std::string Render(const std::string& indent) const {
    std::vector<size_t> width;
    std::vector<std::vector<std::string>> cells;
    for (const auto& raw : rows) {
      std::vector<std::string> row;
      for (const std::string& cell : raw) row.push_back(OneLine(cell));
      cells.push_back(std::move(row));
    }
    for (const auto& row : cells) {
      if (width.size() < row.size()) width.resize(row.size(), 0);
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], DisplayWidth(row[i]));
    }
    std::string out;
    for (const auto& row : cells) {
      std::string line = indent;
      for (size_t i = 0; i < row.size(); ++i) {
        if (i) line += "  ";
        std::string pad(width[i] - DisplayWidth(row[i]), ' ');
        bool r = i < right.size() && right[i];
        line += r ? pad + row[i] : row[i] + pad;
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }
};

// Shortest text that reads back as the same double ("3600", "0.25", "1e+20").
std::string Number(double v) { return fmt::format("{}", v); }

std::string ValueText(const std::optional<double>& v) { return v ? Number(*v) : "-"; }

// "measured", "extrapolated: <method>", "imported: <source>", then " [marker]".
std::string HowText(const Measurement& m) {
  std::string out = ProvenanceName(m.how);
  const std::string& detail = m.how == Provenance::kImported ? m.source : m.method;
  if (!detail.empty()) out += ": " + detail;
  if (m.how != Provenance::kImported && !m.source.empty()) out += " (source: " + m.source + ")";
  if (m.how == Provenance::kImported && !m.method.empty()) out += " (method: " + m.method + ")";
  if (!m.marker.empty()) out += " [" + m.marker + "]";
  if (!m.length_unit.empty()) out += " (at " + LengthText(m.length_unit, m.length_count) + ")";
  return out;
}

// Bytes in binary units: "512 B", "1.50 KiB", "3.25 MiB", "1.00 GiB".
std::string BinaryBytes(double bytes) {
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  const char* const units[] = {"KiB", "MiB", "GiB"};
  size_t i = 0;
  for (bytes /= 1024; bytes >= 1024 && i + 1 < std::size(units); ++i) bytes /= 1024;
  return fmt::format("{:.2f} {}", bytes, units[i]);
}

// A distributed training case's communication in one line, from its
// case-level figures (records.h): "12.50 MiB between nodes (1.50 MiB a
// training step); per step 0.0123 s exposed of 0.0456 s in flight (73.0 %
// hidden)". The parts not stored are left out; "" when none is.
std::string CommunicationText(const std::vector<Measurement>& ms) {
  auto find = [&ms](const char* name) -> std::optional<double> {
    for (const Measurement& m : ms)
      if (m.name == name && m.length_unit.empty()) return m.value;
    return std::nullopt;
  };
  std::vector<std::string> parts;
  if (auto bytes = find(metric::kBytesBetweenNodes)) {
    const auto per_step = find(metric::kBytesBetweenNodesPerStep);
    parts.push_back(BinaryBytes(*bytes) + " between nodes" +
                    (per_step ? " (" + BinaryBytes(*per_step) + " a training step)" : ""));
  }
  auto exposed = find(metric::kCommExposedSeconds), in_flight = find(metric::kCommInFlightSeconds);
  auto hidden = find(metric::kCommHiddenShare);
  std::string step;
  if (exposed && in_flight) step = fmt::format("per step {:.4g} s exposed of {:.4g} s in flight", *exposed, *in_flight);
  if (hidden) step += fmt::format("{}{:.1f} % hidden{}", step.empty() ? "" : " (", *hidden * 100, step.empty() ? "" : ")");
  if (!step.empty()) parts.push_back(step);
  return Join(parts, "; ");
}

// "100 steps" / "100 steps, reported as 1000 steps" / "" for inference.
std::string CaseLengthText(const CaseRecord& c) {
  std::string out = LengthText(c.length_unit, c.length_count);
  if (!c.report_as_unit.empty()) {
    if (!out.empty()) out += ", ";
    out += "reported as " + LengthText(c.report_as_unit, c.report_as_count);
  }
  return out;
}

// "failed: NaN loss (exit 3)", "ok (exit 0)", "running".
std::string StatusText(const CaseRecord& c) {
  std::string out = CaseStatusName(c.status);
  if (!c.reason.empty()) out += ": " + c.reason;
  if (c.exit_code) out += fmt::format(" (exit {})", *c.exit_code);
  return out;
}

struct CaseCounts {
  int cases = 0, ok = 0, failed = 0;
};

Result<CaseCounts> CountCases(Store& store, int64_t run_id) {
  auto cases = store.CasesOfRun(run_id);
  if (!cases.ok()) return cases.status();
  CaseCounts n;
  for (const CaseRecord& c : *cases) {
    ++n.cases;
    if (c.status == CaseStatus::kOk) ++n.ok;
    if (c.status == CaseStatus::kFailed || c.status == CaseStatus::kTimeout) ++n.failed;
  }
  return n;
}

// ---- JSON ------------------------------------------------------------------

Json OptionalJson(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json RunFieldsJson(const RunRecord& r) {
  return Json{{"id", r.id},
              {"kind", r.kind},
              {"plan_name", r.plan_name},
              {"plan_title", r.plan_title},
              {"plan_file", r.plan_file},
              {"plan_text", r.plan_text},
              {"plan_sha256", r.plan_sha256},
              {"source", r.source},
              {"started_at", r.started_at},
              {"finished_at", r.finished_at},
              {"status", r.status},
              {"protocol_version", r.protocol_version},
              {"git_revision", r.git_revision}};
}

// Every column of the cases table (store.cc's schema; `id` as row_id), in
// schema order, as JSON (null when absent). Both exports write these: JSON as
// values, CSV as text. One list, so a column added to the table is added here once.
struct CaseColumn {
  const char* name;
  Json (*value)(const CaseRecord&);
};
const CaseColumn kCaseColumns[] = {
    {"row_id", [](const CaseRecord& c) { return Json(c.row_id); }},
    {"run_id", [](const CaseRecord& c) { return Json(c.run_id); }},
    {"case_id", [](const CaseRecord& c) { return Json(c.case_id); }},
    {"repeat", [](const CaseRecord& c) { return Json(c.repeat); }},
    {"stage", [](const CaseRecord& c) { return Json(c.stage); }},
    {"model", [](const CaseRecord& c) { return Json(c.model); }},
    {"workload", [](const CaseRecord& c) { return Json(c.workload); }},
    {"backend", [](const CaseRecord& c) { return Json(c.backend); }},
    {"system", [](const CaseRecord& c) { return Json(c.system); }},
    {"nodes", [](const CaseRecord& c) { return Json(c.nodes); }},
    {"topology", [](const CaseRecord& c) { return Json(c.topology); }},
    {"network", [](const CaseRecord& c) { return Json(c.network); }},
    {"variant", [](const CaseRecord& c) { return Json(c.variant); }},
    {"length_unit", [](const CaseRecord& c) { return Json(c.length_unit); }},
    {"length_count", [](const CaseRecord& c) { return Json(c.length_count); }},
    {"report_as_unit", [](const CaseRecord& c) { return Json(c.report_as_unit); }},
    {"report_as_count", [](const CaseRecord& c) { return Json(c.report_as_count); }},
    {"status", [](const CaseRecord& c) { return Json(CaseStatusName(c.status)); }},
    {"reason", [](const CaseRecord& c) { return Json(c.reason); }},
    {"exit_code", [](const CaseRecord& c) { return c.exit_code ? Json(*c.exit_code) : Json(nullptr); }},
    {"started_at", [](const CaseRecord& c) { return Json(c.started_at); }},
    {"finished_at", [](const CaseRecord& c) { return Json(c.finished_at); }},
    {"log_path", [](const CaseRecord& c) { return Json(c.log_path); }},
    {"log_sha256", [](const CaseRecord& c) { return Json(c.log_sha256); }},
};

Json CaseFieldsJson(const CaseRecord& c) {
  Json out = Json::object();
  for (const CaseColumn& column : kCaseColumns) out[column.name] = column.value(c);
  return out;
}

// ---- a case's rows, one JSON object a row ------------------------------------

Json MeasurementJson(const Measurement& m) {
  const auto [name, rank] = SplitRankFigureName(m.name);  // a rank's own figure: its rank apart
  return Json{{"name", name},
              {"value", OptionalJson(m.value)},
              {"unit", m.unit},
              {"how", ProvenanceName(m.how)},
              {"method", m.method},
              {"source", m.source},
              {"marker", m.marker},
              {"at_length_unit", m.length_unit},
              {"at_length_count", m.length_count},
              {"rank", rank ? Json(*rank) : Json(nullptr)}};
}

Json StepJson(const StepSample& s) {
  return Json{{"step", s.step},
              {"seconds", s.seconds},
              {"loss", OptionalJson(s.loss)},
              {"tokens", s.tokens ? Json(*s.tokens) : Json(nullptr)}};
}

Json RequestJson(const RequestSample& r) {
  return Json{{"index", r.index},
              {"max_new_tokens", r.max_new_tokens},
              {"prompt_tokens", r.prompt_tokens},
              {"generated_tokens", r.generated_tokens},
              {"seconds", r.seconds},
              {"answer", r.answer},
              {"token_ids", r.token_ids ? Json(*r.token_ids) : Json(nullptr)}};
}

Json EvalPointJson(const EvalPoint& p) {
  return Json{{"step", p.step}, {"tokens", p.tokens}, {"training_seconds", p.training_seconds}, {"loss", p.loss}};
}

Json TelemetryJson(const TelemetrySample& t) {
  return Json{{"seconds", t.seconds},
              {"node", t.node},
              {"device", t.device},
              {"quantity", t.quantity},
              {"value", t.value},
              {"unit", TelemetryUnit(t.quantity)}};
}

// A store read as JSON: an array of to_json(row), or the read's error.
template <typename Rows, typename Row = typename Rows::value_type>
Result<Json> JsonOf(Result<Rows> read, Json (*to_json)(const Row&)) {
  if (!read.ok()) return read.status();
  return ArrayOf(*read, to_json);
}
// Stored (key, value) pairs (a run's context, a case's facts) as one object.
Result<Json> JsonOf(Result<std::vector<std::pair<std::string, std::string>>> read) {
  if (!read.ok()) return read.status();
  Json out = Json::object();
  for (const auto& [key, value] : *read) out[key] = value;
  return out;
}

// One run with its context and its cases, each with measurements and samples.
Result<Json> RunJson(Store& store, const RunRecord& run) {
  Json out = RunFieldsJson(run);
  auto context = JsonOf(store.GetContext(run.id));
  if (!context.ok()) return context.status();
  out["context"] = std::move(*context);

  auto cases = store.CasesOfRun(run.id);
  if (!cases.ok()) return cases.status();
  Json cases_json = Json::array();
  for (const CaseRecord& c : *cases) {
    Json cj = CaseFieldsJson(c);
    std::pair<const char*, Result<Json>> rows[] = {
        {"measurements", JsonOf(store.MeasurementsOfCase(c.row_id), MeasurementJson)},
        {"facts", JsonOf(store.FactsOfCase(c.row_id))},
        {"steps", JsonOf(store.StepsOfCase(c.row_id), StepJson)},
        {"requests", JsonOf(store.RequestsOfCase(c.row_id), RequestJson)},
        {"eval_curve", JsonOf(store.EvalCurveOfCase(c.row_id), EvalPointJson)},
        {"telemetry", JsonOf(store.TelemetryOfCase(c.row_id), TelemetryJson)},
    };
    for (auto& [key, json] : rows) {
      if (!json.ok()) return json.status();
      cj[key] = std::move(*json);
    }
    cases_json.push_back(std::move(cj));
  }
  out["cases"] = std::move(cases_json);
  return out;
}

// Invalid UTF-8 (a binary answer) is replaced, not thrown.
std::string DumpJson(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

// ---- text details --------------------------------------------------------------

// The hardware samples in brief: per node, device and quantity, how many
// readings over which span, and their mean, least and largest value. "" for none.
std::string TelemetryText(const std::vector<TelemetrySample>& samples) {
  if (samples.empty()) return "";
  struct Summary {
    size_t n = 0;
    double sum = 0, low = 0, high = 0, from = 0, to = 0;
  };
  std::vector<std::pair<std::array<std::string, 3>, Summary>> rows;  // in first-seen order
  for (const TelemetrySample& t : samples) {
    const std::array<std::string, 3> key = {t.node.empty() ? "this host" : t.node, t.device, t.quantity};
    auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == key; });
    if (it == rows.end()) {
      rows.push_back({key, Summary{0, 0, t.value, t.value, t.seconds, t.seconds}});
      it = rows.end() - 1;
    }
    Summary& s = it->second;
    ++s.n;
    s.sum += t.value;
    s.low = std::min(s.low, t.value);
    s.high = std::max(s.high, t.value);
    s.from = std::min(s.from, t.seconds);
    s.to = std::max(s.to, t.seconds);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  TextTable table;
  table.right = {false, false, false, true, true, true, true, true, true, false};
  table.rows.push_back({"node", "device", "quantity", "readings", "from s", "to s", "mean", "least", "largest", "unit"});
  for (const auto& [key, s] : rows)
    table.rows.push_back({key[0], key[1], key[2], std::to_string(s.n), fmt::format("{:.1f}", s.from),
                          fmt::format("{:.1f}", s.to), Number(s.sum / static_cast<double>(s.n)), Number(s.low),
                          Number(s.high), TelemetryUnit(key[2])});
  return "    hardware samples (every reading: export --format json or telemetry-csv)\n" + table.Render("      ");
}

Result<std::string> CaseText(Store& store, const CaseRecord& c) {
  std::string out = fmt::format("  case {} repeat {} (row {})\n", c.case_id, c.repeat, c.row_id);
  TextTable facts;
  auto add = [&facts](const std::string& key, const std::string& value) {
    if (!value.empty()) facts.rows.push_back({key, value});
  };
  std::string what = c.model;
  if (!c.workload.empty()) what += (what.empty() ? "" : " ") + c.workload;
  std::string length = CaseLengthText(c);
  if (!length.empty()) what += (what.empty() ? "" : ", ") + length;
  add("what", what);
  std::string system = c.system;
  if (!c.backend.empty()) system += " (backend " + c.backend + ")";
  system += fmt::format(", {} node{}", c.nodes, c.nodes == 1 ? "" : "s");
  if (!c.topology.empty()) system += ", topology " + c.topology;
  if (!c.network.empty()) system += ", network " + c.network;
  if (!c.variant.empty()) system += ", variant " + c.variant;
  add("system", system);
  add("stage", c.stage);
  add("status", StatusText(c));
  if (!c.finished_at.empty())
    add("time", c.started_at + " .. " + c.finished_at);
  else if (!c.started_at.empty())
    add("time", c.started_at + " .. (not finished)");
  add("log", c.log_path);

  auto steps = store.StepsOfCase(c.row_id);
  if (!steps.ok()) return steps.status();
  auto requests = store.RequestsOfCase(c.row_id);
  if (!requests.ok()) return requests.status();
  auto hardware = store.TelemetryOfCase(c.row_id);
  if (!hardware.ok()) return hardware.status();
  add("samples", Count(steps->size(), "step") + ", " + Count(requests->size(), "request") +
                     (hardware->empty() ? "" : ", " + Count(hardware->size(), "hardware sample")));
  auto ran_on = store.FactsOfCase(c.row_id);
  if (!ran_on.ok()) return ran_on.status();
  for (const auto& [key, value] : *ran_on) add(key, value);
  auto ms = store.MeasurementsOfCase(c.row_id);
  if (!ms.ok()) return ms.status();
  add("communication", CommunicationText(*ms));
  add("link", LinkBesideLabel(LinkOfCase(*ms, *ran_on)));
  out += facts.Render("    ");

  if (ms->empty()) {
    out += "    no measurements\n";
  } else {
    out += "    measurements\n";
    TextTable table;
    table.right = {false, true, false, false};
    for (const Measurement& m : *ms) table.rows.push_back({m.name, ValueText(m.value), m.unit, HowText(m)});
    out += table.Render("      ");
  }
  out += TelemetryText(*hardware);

  auto curve = store.EvalCurveOfCase(c.row_id);
  if (!curve.ok()) return curve.status();
  if (!curve->empty()) {
    out += "    held-out curve (training seconds exclude the evaluations)\n";
    TextTable points;
    points.right = {true, true, true, true};
    points.rows.push_back({"step", "tokens", "training s", "loss"});
    for (const EvalPoint& p : *curve)
      points.rows.push_back({std::to_string(p.step), std::to_string(p.tokens), fmt::format("{:.3f}", p.training_seconds),
                             fmt::format("{:.4f}", p.loss)});
    out += points.Render("      ");
  }
  return out;
}

Result<std::string> RunText(Store& store, const RunRecord& run) {
  std::string out = fmt::format("run {}: {} ({})\n", run.id, run.plan_name, run.kind);
  TextTable facts;
  auto add = [&facts](const std::string& key, const std::string& value) {
    if (!value.empty()) facts.rows.push_back({key, value});
  };
  add("title", run.plan_title);
  add("plan file", run.plan_file);
  add("sha256", run.plan_sha256);
  add("source", run.source);
  add("started", run.started_at);
  add("finished", run.finished_at);
  add("status", run.status);
  std::string version = run.protocol_version;
  if (!run.git_revision.empty()) version += (version.empty() ? "git " : ", git ") + run.git_revision;
  add("protocol", version);
  out += facts.Render("  ");

  auto context = store.GetContext(run.id);
  if (!context.ok()) return context.status();
  if (!context->empty()) {
    out += "context\n";
    TextTable table;
    for (const auto& [key, value] : *context) table.rows.push_back({key, value});
    out += table.Render("  ");
  }

  auto cases = store.CasesOfRun(run.id);
  if (!cases.ok()) return cases.status();
  out += fmt::format("cases ({})\n", cases->size());
  for (const CaseRecord& c : *cases) {
    auto text = CaseText(store, c);
    if (!text.ok()) return text.status();
    out += *text;
  }
  return out;
}

// ---- CSV ---------------------------------------------------------------------

// The CSV's columns: the run's, every case column, then the measurement's.
const char* const kCsvRunColumns[] = {"kind", "plan", "plan_sha256"};
const char* const kCsvMeasurementColumns[] = {"name",   "value",  "unit",           "how",
                                              "method", "source", "marker",         "at_length_unit",
                                              "at_length_count", "rank"};

// A JSON scalar as CSV text: strings as they are, numbers as Number(), null empty.
std::string CsvText(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return Number(v.get<double>());
  return v.dump();
}

std::vector<std::string> CsvHeader() {
  std::vector<std::string> header;
  for (const CaseColumn& column : kCaseColumns) {
    header.push_back(column.name);
    if (std::string(column.name) == "run_id") header.insert(header.end(), std::begin(kCsvRunColumns), std::end(kCsvRunColumns));
  }
  header.insert(header.end(), std::begin(kCsvMeasurementColumns), std::end(kCsvMeasurementColumns));
  return header;
}

std::string CsvRow(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    line += CsvField(fields[i]);
  }
  return line + "\r\n";
}

// The runs to export: all, or those whose ids are in `run_ids`, by id.
Result<std::vector<RunRecord>> SelectRuns(Store& store, const std::vector<int64_t>& run_ids) {
  auto runs = store.ListRuns();
  if (!runs.ok() || run_ids.empty()) return runs;
  std::vector<RunRecord> selected;
  for (RunRecord& r : *runs)
    if (std::find(run_ids.begin(), run_ids.end(), r.id) != run_ids.end()) selected.push_back(std::move(r));
  return selected;
}

Result<std::string> ExportCsv(Store& store, const std::vector<int64_t>& run_ids) {
  const std::vector<std::string> header = CsvHeader();
  std::string out = CsvRow(header);
  auto runs = SelectRuns(store, run_ids);
  if (!runs.ok()) return runs.status();
  for (const RunRecord& run : *runs) {
    auto cases = store.CasesOfRun(run.id);
    if (!cases.ok()) return cases.status();
    for (const CaseRecord& c : *cases) {
      std::vector<std::string> identity;
      for (const CaseColumn& column : kCaseColumns) {
        identity.push_back(CsvText(column.value(c)));
        if (std::string(column.name) == "run_id") identity.insert(identity.end(), {run.kind, run.plan_name, run.plan_sha256});
      }
      auto ms = store.MeasurementsOfCase(c.row_id);
      if (!ms.ok()) return ms.status();
      if (ms->empty()) {
        std::vector<std::string> row = identity;
        row.resize(header.size());
        out += CsvRow(row);
      }
      for (const Measurement& m : *ms) {
        std::vector<std::string> row = identity;
        const auto [name, rank] = SplitRankFigureName(m.name);  // a rank's own figure: its rank apart
        row.insert(row.end(), {name, m.value ? Number(*m.value) : "", m.unit,
                               ProvenanceName(m.how), m.method, m.source, m.marker, m.length_unit,
                               m.length_unit.empty() ? "" : std::to_string(m.length_count),
                               rank ? std::to_string(*rank) : ""});
        out += CsvRow(row);
      }
    }
  }
  return out;
}

Result<std::string> ExportJson(Store& store, const std::vector<int64_t>& run_ids) {
  auto runs = SelectRuns(store, run_ids);
  if (!runs.ok()) return runs.status();
  Json all = Json::array();
  for (const RunRecord& run : *runs) {
    auto j = RunJson(store, run);
    if (!j.ok()) return j.status();
    all.push_back(std::move(*j));
  }
  Json doc = Json{{"schema_version", StoreSchemaVersion()}, {"runs", std::move(all)}};
  return DumpJson(doc);
}

// One row per hardware sample: the case's identity, then the sample's
// seconds, node, device, quantity, value and unit.
Result<std::string> ExportTelemetryCsv(Store& store, const std::vector<int64_t>& run_ids) {
  std::string out = CsvRow({"run_id", "case_id", "repeat", "system", "seconds", "node", "device", "quantity",
                            "value", "unit"});
  auto runs = SelectRuns(store, run_ids);
  if (!runs.ok()) return runs.status();
  for (const RunRecord& run : *runs) {
    auto cases = store.CasesOfRun(run.id);
    if (!cases.ok()) return cases.status();
    for (const CaseRecord& c : *cases) {
      auto samples = store.TelemetryOfCase(c.row_id);
      if (!samples.ok()) return samples.status();
      for (const TelemetrySample& t : *samples)
        out += CsvRow({std::to_string(run.id), c.case_id, std::to_string(c.repeat), c.system, Number(t.seconds),
                       t.node, t.device, t.quantity, Number(t.value), TelemetryUnit(t.quantity)});
    }
  }
  return out;
}

// The export formats: a table, like every registry.
struct ExportFormat {
  const char* name;
  Result<std::string> (*write)(Store&, const std::vector<int64_t>&);
};
const ExportFormat kExportFormats[] = {
    {"json", ExportJson}, {"csv", ExportCsv}, {"telemetry-csv", ExportTelemetryCsv}};

}  // namespace

Result<std::string> RenderRunList(Store& store, bool json) {
  auto runs = store.ListRuns();
  if (!runs.ok()) return runs.status();
  if (json) {
    Json out = Json::array();
    for (const RunRecord& r : *runs) {
      auto n = CountCases(store, r.id);
      if (!n.ok()) return n.status();
      out.push_back(Json{{"id", r.id},
                         {"kind", r.kind},
                         {"plan_name", r.plan_name},
                         {"plan_title", r.plan_title},
                         {"started_at", r.started_at},
                         {"finished_at", r.finished_at},
                         {"status", r.status},
                         {"cases", n->cases},
                         {"ok", n->ok},
                         {"failed", n->failed}});
    }
    return DumpJson(out);
  }
  if (runs->empty()) return std::string("no runs stored\n");
  TextTable table;
  table.right = {true, false, false, false, false, true, true, true};
  table.rows.push_back({"ID", "KIND", "PLAN", "STARTED", "STATUS", "CASES", "OK", "FAILED"});
  for (const RunRecord& r : *runs) {
    auto n = CountCases(store, r.id);
    if (!n.ok()) return n.status();
    table.rows.push_back({std::to_string(r.id), r.kind, r.plan_name, r.started_at, r.status,
                          std::to_string(n->cases), std::to_string(n->ok),
                          std::to_string(n->failed)});
  }
  return table.Render("");
}

Result<std::string> RenderRunDetails(Store& store, int64_t run_id, bool json) {
  auto run = store.GetRun(run_id);
  if (!run.ok()) return run.status();
  if (json) {
    auto j = RunJson(store, *run);
    if (!j.ok()) return j.status();
    return DumpJson(*j);
  }
  return RunText(store, *run);
}

Result<std::string> ExportStore(Store& store, const std::string& format, const std::vector<int64_t>& run_ids) {
  std::vector<std::string> names;
  for (const ExportFormat& f : kExportFormats) {
    if (format == f.name) return f.write(store, run_ids);
    names.push_back(f.name);
  }
  std::string hint = DidYouMean(format, names);
  if (!hint.empty())
    return Status::InvalidArgument(
        fmt::format("unknown export format '{}' (did you mean '{}'?)", format, hint));
  const std::string last = names.back();
  names.pop_back();
  return Status::InvalidArgument(
      fmt::format("unknown export format '{}' (expected {} or {})", format, Join(names, ", "), last));
}

}  // namespace protocol
