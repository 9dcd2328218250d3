// Rendering: Markdown golden files, HTML structure and escaping, JSON, CSV,
// templates (custom, invalid, FindTemplate order).

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "report/collect.h"
#include "report/formats/csv.h"
#include "report/render.h"
#include "report/report.h"
#include "report/report_data.h"
#include "report/formats/report_json.h"
#include "report/formats/svg.h"
#include "report/verify.h"
#include "report_fixtures.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

using namespace report_test;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Template(const std::string& name) {
  return ReadText(std::string(PROTOCOL_SOURCE_DIR) + "/templates/" + name);
}

std::string RenderMd(const ReportData& data) {
  auto out = RenderTemplate(Template("report.md.mustache"), "report.md.mustache", ReportView(data), Escape::kMarkdown);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return out.value();
}

std::string RenderHtml(const ReportData& data) {
  auto out = RenderTemplate(Template("report.html.mustache"), "report.html.mustache", ReportView(data), Escape::kHtml);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return out.value();
}

// Compares `actual` with tests/golden/<name> byte for byte; rewrites the file
// instead when PROTOCOL_UPDATE_GOLDEN=1.
void CheckGolden(const std::string& name, const std::string& actual) {
  std::string path = std::string(PROTOCOL_SOURCE_DIR) + "/tests/golden/" + name;
  const char* update = std::getenv("PROTOCOL_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    MESSAGE("rewrote " << path);
    return;
  }
  std::string expected = ReadText(path);
  REQUIRE_MESSAGE(!expected.empty(), path << " is missing; run with PROTOCOL_UPDATE_GOLDEN=1");
  CHECK(actual == expected);
}

ReportData Methodology() { return ComputeReport(MethodologyInput(), ReportOptions()); }

TEST_CASE("report render: markdown of the methodology layout matches the golden file") {
  CheckGolden("methodology.md", RenderMd(Methodology()));
}

TEST_CASE("report render: markdown of an empty store matches the golden file") {
  CheckGolden("empty.md", RenderMd(ComputeReport(ReportInput(), ReportOptions())));
}

// The efficiency block of the table titled `title`, as rendered lines.
std::vector<std::string> EfficiencyLines(const std::string& md, const std::string& title) {
  std::vector<std::string> out;
  size_t at = md.find("### " + title + "\n");
  REQUIRE_MESSAGE(at != std::string::npos, title);
  at = md.find("| **efficiency coefficient** |", at);
  REQUIRE(at != std::string::npos);
  for (const std::string& line : Split(md.substr(md.find('\n', at) + 1), '\n')) {
    if (!StartsWith(line, "|")) break;
    out.push_back(line);
  }
  return out;
}

TEST_CASE("report render: an empty candidate cell gives no number in its efficiency row") {
  // Baseline figures everywhere; the candidate (share) has a training figure
  // for one row only and no single-stream inference result at all.
  auto data = Compute({RunWith(
      MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 600),
                   TrainCase("b", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 1200),
                   TrainCase("c", "m", "pretrain", "share", 1, "", "steps", 1000, 600),
                   WithInferenceFigures(InferenceCase("i", "m", "fsdp", 1, "", "single-stream"), 10, 0.1, 10)})});
  const std::string md = RenderMd(data);
  CHECK(EfficiencyLines(md, "Training (minutes)") ==
        std::vector<std::string>{"| pretrain 100 steps | – | – |", "| pretrain 1000 steps | 2.00 | 1 |"});
  CHECK(EfficiencyLines(md, "Inference, single-stream") ==
        std::vector<std::string>{"| total generation time (s) | – | – |", "| seconds per token | – | – |",
                                 "| tokens per second | – | – |"});
}

ReportData Injected() {
  const std::string evil = "<b>x</b>";
  auto c = WithInferenceFigures(InferenceCase("2.1.1.5", evil, "fsdp", 1, "", ""), 10, 0.1, 10);
  c.requests = {Req(0, 100, 4.0, evil), Req(1, 200, 6.0, "ok")};
  auto f = Failed(TrainCase("2.1.1.1", evil, "pretrain", "fsdp", 1, "", "steps", 10, 0), CaseStatus::kFailed, evil);
  ReportInput in;
  in.runs.push_back(RunWith(MakeRun(1), {c, f}));
  return ComputeReport(in, ReportOptions());
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST_CASE("report render: html is self-contained, escapes data and draws the chart") {
  std::string html = RenderHtml(Injected());
  CHECK(html.find("<table>") != std::string::npos);
  CHECK(html.find("<svg ") != std::string::npos);
  CHECK(html.find("<polyline ") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("<img") == std::string::npos);
  CHECK(html.find("<b>x</b>") == std::string::npos);
  CHECK(html.find("<h2>&lt;b&gt;x&lt;/b&gt;</h2>") != std::string::npos);                      // model
  CHECK(html.find("<td class=\"answer\">&lt;b&gt;x&lt;/b&gt;</td>") != std::string::npos);       // answer
  CHECK(html.find("failed — &lt;b&gt;x&lt;/b&gt;</li>") != std::string::npos);                  // reason
  CHECK(Count(html, "<circle ") == 2);
  CHECK(html.find(">answer length (tokens)</text>") != std::string::npos);
  CHECK(html.find(">fsdp 1 node single-stream</text>") != std::string::npos);  // legend
}

TEST_CASE("report render: html cell titles carry the spread of repeats") {
  ReportInput in;
  in.runs.push_back(RunWith(MakeRun(3), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 600, 0),
                                         TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 720, 1),
                                         TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 660, 2)}));
  std::string html = RenderHtml(ComputeReport(in, ReportOptions()));
  CHECK(html.find("<td title=\"run 3, case a (repeats 3: median 11.0 min, spread 10.0–12.0)\" data-marker=\"\">11.0</td>") !=
        std::string::npos);
}

// A report of one model whose verdict is two hand-filled lines.
ReportData HandVerdict(const std::string& equal_quality, const std::string& expected) {
  ReportData data;
  data.baseline_system = "fsdp";
  data.candidate_system = "share";
  ModelReport m;
  m.model = "m";
  VerdictLine a;
  a.compared = "pretrain 100 steps, 1 node: share vs fsdp";
  a.speedup = "1.50× (n=1)";
  a.loss_difference = "+2.0 %";
  a.caveats = {"one host", "random weights"};
  a.conclusion = "share is 1.50× faster.";
  a.equal_quality = equal_quality;
  a.equal_quality_cell = equal_quality;  // the table shows the cell
  a.expected = expected;
  a.expected_cell = expected;  // the table shows the cell
  VerdictLine b;  // never filled: its cells of those columns stay empty
  b.compared = "inference, single-stream on 1 node: share vs fsdp";
  b.speedup = "1.10× (n=1)";
  b.conclusion = "share is 1.10× faster.";
  m.verdict = {a, b};
  m.verdict_legend = {{"one host", "one machine"}, {"random weights", "untrained"}};
  data.models.push_back(m);
  return data;
}

TEST_CASE("report render: the verdict table shows equal quality and expected columns only when a row has them") {
  const std::string both = RenderMd(HandVerdict("1.31× at equal quality", "fsdp 1.1× its estimate, share 0.9×"));
  CHECK(both.find("| compared | speed-up | held-out loss | bytes between nodes | at equal quality | measured / "
                  "expected | caveats |\n|---|---|---|---|---|---|---|\n") != std::string::npos);
  CHECK(both.find("| pretrain 100 steps, 1 node: share vs fsdp | 1.50× (n=1) | +2.0 % |  | 1.31× at equal quality | "
                  "fsdp 1.1× its estimate, share 0.9× | `one host` `random weights` |\n") != std::string::npos);
  CHECK(both.find("| inference, single-stream on 1 node: share vs fsdp | 1.10× (n=1) |  |  |  |  | |\n") !=
        std::string::npos);
  CHECK(both.find("Caveats: `one host`: one machine. `random weights`: untrained.") != std::string::npos);
  CHECK(both.find("- share is 1.50× faster.\n- share is 1.10× faster.\n") != std::string::npos);

  const std::string one = RenderMd(HandVerdict("", "fsdp 1.1× its estimate"));
  CHECK(one.find("| compared | speed-up | held-out loss | bytes between nodes | measured / expected | caveats |\n") !=
        std::string::npos);
  const std::string none = RenderMd(HandVerdict("", ""));
  CHECK(none.find("| compared | speed-up | held-out loss | bytes between nodes | caveats |\n|---|---|---|---|---|\n") !=
        std::string::npos);
  CHECK(none.find("at equal quality") == std::string::npos);

  const std::string html = RenderHtml(HandVerdict("1.31× at equal quality", ""));
  CHECK(Count(html, "<th>at equal quality</th>") == 1);
  CHECK(Count(html, "<td>1.31× at equal quality</td>") == 1);
  CHECK(Count(html, "measured / expected") == 0);
  CHECK(Count(html, "<span class=\"tag\">one host</span>") == 2);  // the row and the legend
  const std::string html_none = RenderHtml(HandVerdict("", ""));
  CHECK(Count(html_none, "at equal quality") == 0);

  // JSON carries every part of a line and the legend.
  const Json j = ReportToJson(HandVerdict("1.31× at equal quality", "fsdp 1.1× its estimate"));
  const Json& v = j["models"][0]["verdict"][0];
  CHECK(v["equal_quality"] == "1.31× at equal quality");
  CHECK(v["expected"] == "fsdp 1.1× its estimate");
  CHECK(v["speedup"] == "1.50× (n=1)");
  CHECK(v["caveats"] == Json::array({"one host", "random weights"}));
  CHECK(v["conclusion"] == "share is 1.50× faster.");
  CHECK(j["models"][0]["verdict_legend"][1]["tag"] == "random weights");
}

TEST_CASE("report render: markdown escapes table pipes and raw html in data") {
  ReportInput in;
  in.runs.push_back(RunWith(MakeRun(1), {TrainCase("a", "a|b<i>", "pretrain", "fsdp", 1, "", "steps", 10, 60)}));
  std::string md = RenderMd(ComputeReport(in, ReportOptions()));
  CHECK(md.find("## a\\|b&lt;i&gt;\n") != std::string::npos);
  CHECK(md.find("\n\n\n") == std::string::npos);
}

TEST_CASE("report render: json holds the whole report with schema version 1") {
  Json j = ReportToJson(Methodology());
  CHECK(j["schema_version"] == 1);
  CHECK(j["models"].size() == 2);
  CHECK(j["models"][0]["model"] == "llama2-70b");
  const Json& training = j["models"][0]["tables"][0];
  CHECK(training["id"] == "training");
  CHECK(training["rows"][0]["cells"][4]["marker"] == "X");
  CHECK(training["rows"][0]["cells"][4]["value"].is_null());
  CHECK(training["efficiency"][1]["cells"][0]["value"].get<double>() == doctest::Approx(3.0));
  CHECK(j["models"][0]["failures"][0]["reason"] == "NCCL timeout: lost rank 9");
  CHECK(Json::parse(j.dump()) == j);
}

TEST_CASE("report render: csv has one row per cell with value, marker, provenance and ratio") {
  std::string csv = ReportToCsv(Methodology());
  CHECK(csv.rfind("model,table,row,column,value,unit,marker,provenance,ratio,origin,"
                  "run_id,ratio_numerator_run,ratio_denominator_run,ratio_note\n", 0) == 0);
  CHECK(csv.find("\nllama2-70b,training,pretrain 1000 steps,fsdp 1 node,120,min,,measured,3.00,"
                 "run 1, case 2.1.1.1 (repeats 3: median 120.0 min, spread 119.0–121.0)") == std::string::npos);
  // The fsdp cell of run 1 and its ratio to share's cell of run 2: the sides are named.
  CHECK(csv.find("\nllama2-70b,training,pretrain 1000 steps,fsdp 1 node,120,min,,measured,3.00,"
                 "\"run 1, case 2.1.1.1 (repeats 3: median 120.0 min, spread 119.0–121.0)\",1,1,2,"
                 "sides from different runs\n") != std::string::npos);
  CHECK(csv.find("\nllama2-70b,training,pretrain 100 steps,share 2 nodes,,min,X,imported,X,") != std::string::npos);
  CHECK(csv.find("\nllama2-70b,inference-multi,tokens per second,fsdp,,tokens/s,no solution,,no solution,,,,,\n") !=
        std::string::npos);
  CHECK(CsvField("a,\"b\"") == "\"a,\"\"b\"\"\"");
  // 5 training rows x 5 columns (the share finetune's own 50 steps beside its 500), 5 x 6 scaling,
  // 3 x 2 + 3 x 3 inference, 3 x 5 quality, 3 x 6 metrics, 2 x 2 (7B).
  CHECK(Count(csv, "\n") == 1 + 25 + 30 + 6 + 9 + 15 + 18 + 4);
  CHECK(csv.find("\nllama2-70b,scaling,pretrain 1000 steps — share 2 nodes (10G),scaling efficiency,0.66666") !=
        std::string::npos);
}

TEST_CASE("report render: a broken custom template is an error that names it") {
  auto out = RenderTemplate("{{#models}}x", "mine.mustache", ReportView(Methodology()), Escape::kHtml);
  REQUIRE(!out.ok());
  CHECK(out.status().code() == Status::Code::kInvalidArgument);
  CHECK(out.status().message().rfind("mine.mustache: ", 0) == 0);
  auto ok = RenderTemplate("{{#models}}[{{model}}]{{/models}}", "mine.mustache", ReportView(Methodology()),
                           Escape::kHtml);
  REQUIRE(ok.ok());
  CHECK(ok.value() == "[llama2-70b][llama2-7b]");
}

TEST_CASE("report render: format names parse from the registry") {
  ReportFormat f = ReportFormat::kJson;
  CHECK(ParseReportFormat("md", &f));
  CHECK(f == ReportFormat::kMarkdown);
  CHECK(ParseReportFormat("html", &f));
  CHECK(f == ReportFormat::kHtml);
  CHECK(ParseReportFormat("csv", &f));
  CHECK(f == ReportFormat::kCsv);
  CHECK(!ParseReportFormat("pdf", &f));
}

TEST_CASE("report render: FindTemplate prefers PROTOCOL_TEMPLATES, then the source tree") {
  unsetenv("PROTOCOL_TEMPLATES");
  auto found = FindTemplate("report.md.mustache");
  REQUIRE(found.ok());
  CHECK(found.value() == std::string(PROTOCOL_SOURCE_DIR) + "/templates/report.md.mustache");
  std::string dir = std::string(PROTOCOL_SOURCE_DIR) + "/tests/golden";
  setenv("PROTOCOL_TEMPLATES", dir.c_str(), 1);
  auto env = FindTemplate("methodology.md");
  unsetenv("PROTOCOL_TEMPLATES");
  REQUIRE(env.ok());
  CHECK(env.value() == dir + "/methodology.md");
  auto missing = FindTemplate("nope.mustache");
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK(missing.status().message().rfind("template nope.mustache not found; looked in: ", 0) == 0);
}

// A minimal in-memory Store holding runs with their cases (the reading half).
class ReportFakeStore : public Store {
 public:
  explicit ReportFakeStore(ReportInput in) : in_(std::move(in)) {
    int64_t row = 0;
    for (auto& r : in_.runs) {
      for (auto& c : r.cases) {
        c.record.row_id = ++row;
        c.record.run_id = r.run.id;
      }
    }
  }
  Result<int64_t> CreateRun(const RunRecord&) override { return Status::Internal("read-only"); }
  Status FinishRun(int64_t, const std::string&, const std::string&) override { return Status::Internal("read-only"); }
  Status PutContext(int64_t, const std::vector<std::pair<std::string, std::string>>&) override {
    return Status::Internal("read-only");
  }
  Result<int64_t> BeginCase(const CaseRecord&) override { return Status::Internal("read-only"); }
  Status AppendSteps(int64_t, const std::vector<StepSample>&) override { return Status::Internal("read-only"); }
  Status AppendRequests(int64_t, const std::vector<RequestSample>&) override { return Status::Internal("read-only"); }
  Status AppendTelemetry(int64_t, const std::vector<TelemetrySample>&) override {
    return Status::Internal("read-only");
  }
  Status FinishCase(int64_t, const CaseResult&) override { return Status::Internal("read-only"); }
  Result<int> InterruptRunningCases(int64_t, const std::string&) override { return Status::Internal("read-only"); }
  Result<std::vector<RunRecord>> ListRuns() override {
    if (fail_) return Status::IoError("disk on fire");
    std::vector<RunRecord> out;
    for (const auto& r : in_.runs) out.push_back(r.run);
    return out;
  }
  Result<RunRecord> GetRun(int64_t id) override {
    for (const auto& r : in_.runs) {
      if (r.run.id == id) return r.run;
    }
    return Status::NotFound("no run");
  }
  Result<std::vector<std::pair<std::string, std::string>>> GetContext(int64_t) override {
    return std::vector<std::pair<std::string, std::string>>{};
  }
  Result<std::vector<CaseRecord>> CasesOfRun(int64_t id) override {
    std::vector<CaseRecord> out;
    for (const auto& r : in_.runs) {
      if (r.run.id != id) continue;
      for (const auto& c : r.cases) out.push_back(c.record);
    }
    return out;
  }
  Result<std::vector<Measurement>> MeasurementsOfCase(int64_t row) override { return Find(row)->measurements; }
  Result<std::vector<StepSample>> StepsOfCase(int64_t) override { return std::vector<StepSample>{}; }
  Result<std::vector<RequestSample>> RequestsOfCase(int64_t row) override { return Find(row)->requests; }
  Result<std::vector<std::pair<std::string, std::string>>> FactsOfCase(int64_t) override {
    return std::vector<std::pair<std::string, std::string>>{};
  }
  bool fail_ = false;

 private:
  const ReportCaseInput* Find(int64_t row) const {
    for (const auto& r : in_.runs) {
      for (const auto& c : r.cases) {
        if (c.record.row_id == row) return &c;
      }
    }
    return nullptr;
  }
  ReportInput in_;
};

TEST_CASE("report render: BuildReport reads the store and renders every format") {
  ReportFakeStore store(MethodologyInput());
  auto md = BuildReport(store, ReportOptions(), ReportFormat::kMarkdown, "");
  REQUIRE_MESSAGE(md.ok(), md.status().ToString());
  CHECK(md.value() == ReadText(std::string(PROTOCOL_SOURCE_DIR) + "/tests/golden/methodology.md"));
  auto json = BuildReport(store, ReportOptions(), ReportFormat::kJson, "");
  REQUIRE(json.ok());
  CHECK(Json::parse(json.value())["models"][1]["model"] == "llama2-7b");
  ReportOptions only;
  only.run_ids = {4};
  only.model = "llama2-7b";
  auto csv = BuildReport(store, only, ReportFormat::kCsv, "");
  REQUIRE(csv.ok());
  CHECK(csv.value() ==
        "model,table,row,column,value,unit,marker,provenance,ratio,origin,"
        "run_id,ratio_numerator_run,ratio_denominator_run,ratio_note\n"
        "llama2-7b,training,pretrain 1000 steps,fsdp 1 node,25,min,,measured,–,\"run 4, case 2.1.2.1 (measured: 25.0 min)\","
        "4,,,\n");
}

TEST_CASE("report render: BuildReport returns store errors and unknown runs as values") {
  ReportFakeStore store(MethodologyInput());
  ReportOptions missing;
  missing.run_ids = {1, 42};
  auto out = BuildReport(store, missing, ReportFormat::kMarkdown, "");
  REQUIRE(!out.ok());
  CHECK(out.status().code() == Status::Code::kNotFound);
  CHECK(out.status().message() == "run 42 is not in the store");
  store.fail_ = true;
  auto broken = BuildReport(store, ReportOptions(), ReportFormat::kJson, "");
  REQUIRE(!broken.ok());
  CHECK(broken.status().message() == "disk on fire");
  auto no_file = BuildReport(store, missing, ReportFormat::kHtml, "/nonexistent/t.mustache");
  CHECK(!no_file.ok());
}

// Methodology runs 1-4, and a run 5 that repeats the 7B baseline cell.
ReportInput WithRun5() {
  ReportInput in = MethodologyInput();
  in.runs.push_back(RunWith(MakeRun(5), {TrainCase("2.1.2.1", "llama2-7b", "pretrain", "fsdp", 1, "", "steps", 1000,
                                                   1800)}));
  return in;
}

TEST_CASE("report render: collect reads the selected runs for the tables, every run's figures for the history") {
  ReportFakeStore store(MethodologyInput());
  ReportOptions only;
  only.run_ids = {1};
  auto input = CollectReportInput(store, only);
  REQUIRE(input.ok());
  REQUIRE(input->runs.size() == 1);
  CHECK(input->runs[0].run.id == 1);
  // The other runs' ok cases, with only the figure a history chart plots.
  REQUIRE(input->history_only.size() == 3);
  CHECK(input->history_only[2].run.id == 4);
  REQUIRE(!input->history_only[2].cases.empty());
  for (const Measurement& m : input->history_only[2].cases[0].measurements) {
    CHECK(m.name == metric::kWallSeconds);
    CHECK(m.method.empty());
  }
  // Without the history, nothing but the selected run is read.
  only.history = false;
  auto bare = CollectReportInput(store, only);
  REQUIRE(bare.ok());
  CHECK(bare->history_only.empty());
  only.history = true;
  ReportData data = ComputeReport(input.value(), only);
  REQUIRE(data.runs.size() == 1);
  // 7B pretrain fsdp 1 node: run 1 (1000 s) and run 4 (1500 s), though only run 1 is tabulated.
  const ModelReport& m7 = data.models[1];
  CHECK(m7.tables[0].rows[0].cells[0].text == "16.7");
  REQUIRE(m7.history.size() == 1);
  CHECK(m7.history[0].identity == "pretrain 1000 steps fsdp 1 node");
  REQUIRE(m7.history[0].chart.series[0].markers.size() == 2);
  CHECK(m7.history[0].chart.series[0].markers[1].title == "run 4: 25.0 min");
}

TEST_CASE("report render: html provenance appendix and history charts are inline and escaped") {
  ReportInput in = WithRun5();
  in.runs[0].run.plan_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  in.runs[0].cases[0].record.log_sha256 = "<b>log</b>";
  std::string html = RenderHtml(ComputeReport(in, ReportOptions()));
  CHECK(html.find("<h3>Appendix: provenance of every cell</h3>") != std::string::npos);
  CHECK(html.find("<tr><td>Training (minutes)</td><td>pretrain 1000 steps</td><td>fsdp 1 node</td><td>1</td>"
                  "<td>2.1.1.1</td><td>0</td><td>120.0 min</td><td>measured</td><td class=\"text\"></td>"
                  "<td class=\"sha\">&lt;b&gt;log&lt;/b&gt;</td><td class=\"sha\">"
                  "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08</td></tr>") != std::string::npos);
  // No sha stored: a dash.
  CHECK(html.find("<td>2.1.1.1</td><td>1</td><td>121.0 min</td><td>measured</td><td class=\"text\"></td>"
                  "<td class=\"sha\">–</td>") != std::string::npos);
  CHECK(html.find("<td>extrapolated</td><td class=\"text\">wall_seconds(50 steps) + 450 × step_seconds_mean "
                  "1.933 s</td>") != std::string::npos);
  CHECK(html.find("<td>imported</td><td class=\"text\">other-cloud results, table 4</td>") != std::string::npos);
  CHECK(html.find("<b>log</b>") == std::string::npos);
  // History: the 7B baseline pretrain cell has runs 1, 4 and 5.
  CHECK(html.find("<h3>History per case over the stored runs</h3>") != std::string::npos);
  CHECK(html.find("<h4>pretrain 1000 steps fsdp 1 node</h4>") != std::string::npos);
  CHECK(html.find("<title>pretrain 1000 steps fsdp 1 node: run 5: 30.0 min</title>") != std::string::npos);
  CHECK(html.find(">run id</text>") != std::string::npos);
  CHECK(Count(html, "<svg ") == 2);  // the generation-time chart and one history chart
  CHECK(Count(html, "</svg>") == 2);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  // Markdown carries neither (HTML only).
  std::string md = RenderMd(ComputeReport(in, ReportOptions()));
  CHECK(md.find("provenance of every cell") == std::string::npos);
  CHECK(md.find("History") == std::string::npos);
}

TEST_CASE("report render: an html report names a newer stored run for its history, and still verifies") {
  ReportFakeStore store(WithRun5());
  ReportInvocation inv;
  inv.options.run_ids = {1, 2};
  inv.format = ReportFormat::kHtml;
  auto text = RenderReportFile(store, inv);
  REQUIRE_MESSAGE(text.ok(), text.status().ToString());
  CHECK(text->find("\n<!-- protocol report: --run 1 --run 2 --history-through 5 --format html -->\n") !=
        std::string::npos);
  auto back = ParseReportComment(text.value());
  REQUIRE(back.ok());
  CHECK(back->options.history_through == 5);
  CHECK(ParseReportComment("<!-- protocol report: --run 2 --run 1 --format md -->\n")->options.history_through == 2);
  CHECK(ParseReportComment("<!-- protocol report: --run 1 --history-through x --format md -->\n").status().message() ==
        "report comment: 'x' is not a run id");
  // A later run (6) does not change what it re-renders to.
  ReportInput later = WithRun5();
  later.runs.push_back(RunWith(MakeRun(6), {TrainCase("2.1.2.1", "llama2-7b", "pretrain", "fsdp", 1, "", "steps",
                                                      1000, 2400)}));
  ReportFakeStore later_store(later);
  auto verified = VerifyReport(later_store, text.value(), ReportInvocation());
  REQUIRE(verified.ok());
  CHECK(verified->match);
  // Markdown and all-runs reports carry no --history-through.
  inv.format = ReportFormat::kMarkdown;
  CHECK(RenderReportFile(store, inv)->find("<!-- protocol report: --run 1 --run 2 --format md -->\n") == 0);
  inv.format = ReportFormat::kHtml;
  inv.options.run_ids = {};
  CHECK(RenderReportFile(store, inv)->find("--run 5 --format html -->") != std::string::npos);
}

TEST_CASE("report render: chart axes use nice steps and cover the data") {
  CHECK(NiceStep(400, 5) == doctest::Approx(100));
  CHECK(NiceStep(7.9, 5) == doctest::Approx(2));
  CHECK(NiceStep(0.9, 5) == doctest::Approx(0.2));
  CHECK(NiceStep(1000, 5) == doctest::Approx(200));
  Chart c = LayoutChart({{"a", {{100, 2.5}, {400, 7.9}}, {}}, {"empty", {}, {}}});
  REQUIRE(c.series.size() == 1);
  std::vector<std::string> xs, ys;
  for (const auto& t : c.x_ticks) xs.push_back(t.label);
  for (const auto& t : c.y_ticks) ys.push_back(t.label);
  CHECK(xs == std::vector<std::string>{"0", "100", "200", "300", "400"});
  CHECK(ys == std::vector<std::string>{"0", "2", "4", "6", "8"});
  CHECK(c.x_ticks.front().pos == doctest::Approx(c.left));
  CHECK(c.x_ticks.back().pos == doctest::Approx(c.right));
  CHECK(c.series[0].points == "180.0,219.4 540.0,23.6");
  CHECK(LayoutChart({}).series.empty());
}

TEST_CASE("report render: the chart line joins the median of repeated lengths, markers show every repeat") {
  // Three repeats at 100 tokens (1, 5, 2 s) and one at 200 tokens (4 s); axes 0..200 x, 0..5 y.
  Chart c = LayoutChart({{"a", {{100, 1}, {200, 4}, {100, 5}, {100, 2}}, {}}});
  REQUIRE(c.series.size() == 1);
  CHECK(c.series[0].markers.size() == 4);
  // Plot area x 60..540, y 310..20: median 2 s at x=100 → (300, 194); 4 s at x=200 → (540, 78).
  CHECK(c.series[0].points == "300.0,194.0 540.0,78.0");
}

}  // namespace
}  // namespace protocol
