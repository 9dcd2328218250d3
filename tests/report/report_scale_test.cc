// The report at scale (src/report/collect.h): what is read, which runs and
// failures are named, and that reading only what is shown changes nothing
// shown. A real SQLite store (":memory:") filled through the Store API.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report/collect.h"
#include "report/report.h"
#include "report/report_data.h"
#include "report/formats/report_json.h"
#include "report/verify.h"
#include "report_fixtures.h"
#include "runner/base/text.h"
#include "runner/store/store.h"

namespace protocol {
namespace {

using namespace report_test;

std::unique_ptr<Store> MemoryStore() {
  auto store = OpenStore(":memory:");
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return std::move(store.value());
}

// Stores `runs` (ids are the store's: 1, 2, … in order), each with `context`.
void Fill(Store& store, const std::vector<ReportRunInput>& runs,
          const std::vector<std::pair<std::string, std::string>>& context = {{"cpu_cores", "8"}}) {
  for (const ReportRunInput& r : runs) {
    auto id = store.CreateRun(r.run);
    REQUIRE(id.ok());
    REQUIRE(store.PutContext(*id, context).ok());
    for (const ReportCaseInput& c : r.cases) {
      CaseRecord rec = c.record;
      rec.run_id = *id;
      auto row = store.BeginCase(rec);
      REQUIRE(row.ok());
      CaseResult result;
      result.status = c.record.status;
      result.reason = c.record.reason;
      result.measurements = c.measurements;
      result.requests = c.requests;
      REQUIRE(store.FinishCase(*row, result).ok());
    }
    REQUIRE(store.FinishRun(*id, r.run.status, "").ok());
  }
}

// Every stored record, as the report read the store before collect.h chose:
// the reference a collected input must give the same report as.
ReportInput ReadEverything(Store& store) {
  ReportInput in;
  auto runs = store.ListRuns();
  REQUIRE(runs.ok());
  for (const RunRecord& run : *runs) {
    ReportRunInput r;
    r.run = run;
    r.context = store.GetContext(run.id).value();
    for (const CaseRecord& rec : store.CasesOfRun(run.id).value()) {
      ReportCaseInput c;
      c.record = rec;
      c.measurements = store.MeasurementsOfCase(rec.row_id).value();
      c.requests = store.RequestsOfCase(rec.row_id).value();
      r.cases.push_back(std::move(c));
    }
    in.runs.push_back(std::move(r));
  }
  return in;
}

ReportCaseInput Train(const std::string& id, const std::string& system, int nodes, double seconds, int repeat = 0) {
  ReportCaseInput c = TrainCase(id, "m", "pretrain", system, nodes, "", "steps", 100, seconds, repeat);
  c.measurements.push_back(M(metric::kEvalLoss, system == "share" ? 2.31 : 2.29, Provenance::kMeasured, ""));
  return c;
}

ReportCaseInput Fail(ReportCaseInput c, const std::string& reason = "lost rank 1") {
  return Failed(std::move(c), CaseStatus::kFailed, reason);
}

ReportCaseInput MultiInference(const std::vector<int>& finish_order) {
  ReportCaseInput c = InferenceCase("i.2", "m", "share", 1, "", "multi-inference");
  for (int index : finish_order) c.requests.push_back(Req(index, 100 + 10 * index, 1.0 + index));
  return c;
}

// A nightly history: every night fsdp and share train, share also serves;
// night 1 loses its share case, night 3 its fsdp case (measured again on
// night 4), night 4 repeats fsdp 3 times, one repeat failing; a second model
// runs on night 2 only.
std::vector<ReportRunInput> Nightly() {
  std::vector<ReportRunInput> runs;
  for (int night = 1; night <= 4; ++night) {
    std::vector<ReportCaseInput> cases;
    ReportCaseInput fsdp = Train("t.1", "fsdp", 1, 600 + night);
    if (night == 3) fsdp = Fail(fsdp, "out of memory");
    cases.push_back(fsdp);
    if (night == 4) {
      cases.push_back(Train("t.1", "fsdp", 1, 610, 1));
      cases.push_back(Fail(Train("t.1", "fsdp", 1, 0, 2), "timeout"));
    }
    cases.push_back(night == 1 ? Fail(Train("t.2", "share", 1, 0)) : Train("t.2", "share", 1, 200 + night));
    cases.push_back(MultiInference({1, 0, 3, 2}));
    if (night == 2) {
      ReportCaseInput other = TrainCase("o.1", "other-model", "pretrain", "fsdp", 1, "", "steps", 100, 60);
      cases.push_back(other);
    }
    runs.push_back(RunWith(MakeRun(night), cases));
  }
  return runs;
}

std::string ReportJson(const ReportData& data) { return ReportToJson(data).dump(1); }

}  // namespace

TEST_CASE("report scale: a failure superseded by a later ok result is not listed; a newer or same-run one is") {
  ReportData data = Compute(Nightly());
  const ModelReport& m = data.models.at(0);
  std::vector<std::string> listed;
  for (const FailureEntry& f : m.failures) listed.push_back(f.text);
  // Night 1's share failure and night 3's fsdp failure were measured ok later:
  // not listed. Night 4's failed repeat sits in the run shown: listed.
  CHECK(listed == std::vector<std::string>{"run 4, case t.1 (repeat 2): failed — timeout"});
  // A failure newer than the figure shown stays listed, and the cell says so.
  std::vector<ReportRunInput> runs = Nightly();
  runs.push_back(RunWith(MakeRun(5), {Fail(Train("t.2", "share", 1, 0), "NaN loss")}));
  ReportData later = Compute(runs);
  REQUIRE(later.models.at(0).failures.size() == 2);
  CHECK(later.models[0].failures[1].text == "run 5, case t.2 (repeat 0): failed — NaN loss");
  const ReportTable* t = FindTable(later.models[0], "training");
  REQUIRE(t);
  CHECK(EndsWith(t->rows[0].cells[1].origin, "; newer, not ok: run 5, case t.2 (repeat 0): failed — NaN loss"));
}

TEST_CASE("report scale: a run that gave no figure shown and no failure listed is not among the runs read") {
  ReportData data = Compute(Nightly());
  std::vector<int64_t> read;
  for (const ReportRunSummary& r : data.runs) read.push_back(r.id);
  // Night 4 gives every cell of model m; night 2 the other model's; nights 1
  // and 3 nothing shown.
  CHECK(read == std::vector<int64_t>{2, 4});
  ReportOptions one_model;
  one_model.model = "m";
  read.clear();
  for (const ReportRunSummary& r : Compute(Nightly(), one_model).runs) read.push_back(r.id);
  CHECK(read == std::vector<int64_t>{4});
}

TEST_CASE("report scale: collect reads only what is shown, and the report is the one every record gives") {
  auto store = MemoryStore();
  Fill(*store, Nightly());
  const ReportInput everything = ReadEverything(*store);
  std::vector<ReportOptions> cases(5);
  cases[1].run_ids = {1, 2, 3};
  cases[2].model = "m";
  cases[3].history_through = 3;
  cases[4].run_ids = {3};
  for (const ReportOptions& options : cases) {
    CAPTURE(options.run_ids.size());
    CAPTURE(options.model);
    auto collected = CollectReportInput(*store, options);
    REQUIRE(collected.ok());
    CHECK(ReportJson(ComputeReport(*collected, options)) == ReportJson(ComputeReport(everything, options)));
  }
  // Whole history: the tables read night 4 (model m) and night 2 (the other
  // model) whole, no other run, no superseded failure, no run's plan text but theirs.
  auto input = CollectReportInput(*store, ReportOptions());
  REQUIRE(input.ok());
  REQUIRE(input->runs.size() == 2);
  CHECK(input->runs[0].run.id == 2);
  CHECK(input->runs[0].cases.size() == 1);  // o.1 only: night 2's other cases lost to night 4
  CHECK(input->runs[1].run.id == 4);
  CHECK(input->runs[1].cases.size() == 5);
  for (const ReportRunInput& r : input->history_only) {
    CHECK(r.run.plan_text.empty());
    for (const ReportCaseInput& c : r.cases) CHECK(c.record.status == CaseStatus::kOk);
  }
}

TEST_CASE("report scale: a report names only the runs read, and --verify re-renders it byte for byte") {
  auto store = MemoryStore();
  Fill(*store, Nightly());
  for (ReportFormat format : {ReportFormat::kMarkdown, ReportFormat::kHtml}) {
    ReportInvocation inv;
    inv.format = format;
    auto text = RenderReportFile(*store, inv);
    REQUIRE(text.ok());
    auto comment = ParseReportComment(*text);
    REQUIRE(comment.ok());
    CHECK(comment->options.run_ids == std::vector<int64_t>{2, 4});
    CHECK(text->find("- run 1 ") == std::string::npos);
    CHECK(text->find("run 3, case") == std::string::npos);  // its failure was superseded
    auto verified = VerifyReport(*store, *text, ReportInvocation());
    REQUIRE(verified.ok());
    CHECK(verified->match);
    // History charts still cover every night (HTML): t.1 has ok figures on nights 1, 2, 4.
    if (format == ReportFormat::kHtml)
      CHECK(text->find("<title>pretrain 100 steps fsdp 1 node: run 1: 10.0 min</title>") != std::string::npos);
  }
  // Later nights do not change what it re-renders to.
  ReportInvocation md;
  auto text = RenderReportFile(*store, md);
  REQUIRE(text.ok());
  Fill(*store, {RunWith(MakeRun(5), {Train("t.1", "fsdp", 1, 900)})});
  auto verified = VerifyReport(*store, *text, ReportInvocation());
  REQUIRE(verified.ok());
  CHECK(verified->match);
}

TEST_CASE("report scale: the store's report queries answer as the defaults built on the per-run calls") {
  auto sqlite = MemoryStore();
  Fill(*sqlite, Nightly());
  // The reading calls of the SQLite store, without its report queries: the
  // defaults of Store answer those.
  class Plain : public Store {
   public:
    explicit Plain(Store& s) : s_(s) {}
    Result<int64_t> CreateRun(const RunRecord& r) override { return s_.CreateRun(r); }
    Status FinishRun(int64_t id, const std::string& st, const std::string& at) override { return s_.FinishRun(id, st, at); }
    Status PutContext(int64_t id, const std::vector<std::pair<std::string, std::string>>& f) override {
      return s_.PutContext(id, f);
    }
    Result<int64_t> BeginCase(const CaseRecord& r) override { return s_.BeginCase(r); }
    Status AppendSteps(int64_t row, const std::vector<StepSample>& s) override { return s_.AppendSteps(row, s); }
    Status AppendRequests(int64_t row, const std::vector<RequestSample>& r) override {
      return s_.AppendRequests(row, r);
    }
    Status AppendTelemetry(int64_t row, const std::vector<TelemetrySample>& t) override {
      return s_.AppendTelemetry(row, t);
    }
    Status FinishCase(int64_t row, const CaseResult& r) override { return s_.FinishCase(row, r); }
    Result<int> InterruptRunningCases(int64_t id, const std::string& why) override {
      return s_.InterruptRunningCases(id, why);
    }
    Result<std::vector<RunRecord>> ListRuns() override { return s_.ListRuns(); }
    Result<RunRecord> GetRun(int64_t id) override { return s_.GetRun(id); }
    Result<std::vector<std::pair<std::string, std::string>>> GetContext(int64_t id) override {
      return s_.GetContext(id);
    }
    Result<std::vector<CaseRecord>> CasesOfRun(int64_t id) override { return s_.CasesOfRun(id); }
    Result<std::vector<Measurement>> MeasurementsOfCase(int64_t row) override { return s_.MeasurementsOfCase(row); }
    Result<std::vector<StepSample>> StepsOfCase(int64_t row) override { return s_.StepsOfCase(row); }
    Result<std::vector<RequestSample>> RequestsOfCase(int64_t row) override { return s_.RequestsOfCase(row); }
    Result<std::vector<std::pair<std::string, std::string>>> FactsOfCase(int64_t row) override {
      return s_.FactsOfCase(row);
    }

   private:
    Store& s_;
  } plain(*sqlite);

  auto runs = sqlite->ListRunHeaders();
  auto plain_runs = plain.ListRunHeaders();
  REQUIRE(runs.ok());
  REQUIRE(plain_runs.ok());
  REQUIRE(runs->size() == 4);
  for (size_t i = 0; i < runs->size(); ++i) {
    CHECK((*runs)[i].id == (*plain_runs)[i].id);
    CHECK((*runs)[i].plan_text.empty());
    CHECK((*runs)[i].plan_name == (*plain_runs)[i].plan_name);
  }
  std::vector<CaseQuery> queries(5);
  queries[1].run_ids = {2, 4};
  queries[2].through_run = 3;
  queries[3].model = "other-model";
  queries[4].ok_only = true;
  queries[4].run_ids = {1, 3, 4};
  auto key = [](const CaseRecord& c) {
    return fmt::format("{} {} {} {} {} {} {} {} {} {}", c.row_id, c.run_id, c.case_id, c.repeat, c.model, c.workload,
                       c.system, c.nodes, c.length_count, CaseStatusName(c.status));
  };
  for (const CaseQuery& q : queries) {
    auto a = sqlite->FindCases(q);
    auto b = plain.FindCases(q);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    std::vector<std::string> ka, kb;
    for (const CaseRecord& c : *a) ka.push_back(key(c));
    for (const CaseRecord& c : *b) kb.push_back(key(c));
    CHECK(ka == kb);
    CHECK(!ka.empty());
    const std::vector<std::string> names = {metric::kWallSeconds, metric::kEvalLoss};
    auto ma = sqlite->FindMeasurements(q, names);
    auto mb = plain.FindMeasurements(q, names);
    REQUIRE(ma.ok());
    REQUIRE(mb.ok());
    REQUIRE(ma->size() == mb->size());
    for (size_t i = 0; i < ma->size(); ++i) {
      CHECK((*ma)[i].first == (*mb)[i].first);
      CHECK((*ma)[i].second.name == (*mb)[i].second.name);
      CHECK((*ma)[i].second.value == (*mb)[i].second.value);
    }
  }
}

TEST_CASE("report: per-request rows come out in the request order of their case, not the order they finished") {
  ReportData data = Compute({RunWith(MakeRun(1), {MultiInference({2, 0, 3, 1})})});
  std::vector<int> order;
  for (const RequestRow& r : data.models.at(0).requests) order.push_back(r.index);
  CHECK(order == std::vector<int>{0, 1, 2, 3});
}

}  // namespace protocol
