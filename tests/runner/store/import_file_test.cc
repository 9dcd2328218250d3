#include <doctest/doctest.h>

#include "test_files.h"

#include <cstdio>
#include <map>

#include "runner/base/text.h"
#include "runner/store/import_file.h"

using namespace protocol;

namespace {

std::string ErrorsOf(const ImportParseResult& r) {
  std::vector<std::string> lines;
  for (const auto& e : r.errors) lines.push_back(e.ToString());
  return Join(lines, "\n");
}

std::string Errors(const std::string& text) {
  ImportParseResult r = ParseImportString(text, "fig.yaml");
  return r.ok() ? "(ok)" : ErrorsOf(r);
}

const char* kFile =
    "source: \"Methodology report, table 1 (other-cloud column)\"\n"
    "results:\n"
    "  - model: llama2-70b\n"
    "    workload: pretrain\n"
    "    steps: 1000\n"
    "    backend: fsdp\n"
    "    nodes: 2\n"
    "    network: IB-other-cloud\n"
    "    metric: wall_minutes\n"
    "    value: 93.5\n"
    "    marker: extrapolated\n"
    "  - {model: llama2-7b, workload: finetune, epochs: 1, backend: share, nodes: 1, metric: wall_minutes,\n"
    "     marker: not-provided}\n"
    "  - {model: llama2-7b, workload: inference, backend: share, variant: multi-inference,\n"
    "     metric: tokens_per_second, value: 41.2}\n"
    "  - {model: llama2-7b, workload: inference, backend: fsdp, metric: total_generation_seconds, value: 300}\n"
    "  - {model: llama2-7b, workload: inference, backend: fsdp, metric: seconds_per_token, value: 0.04}\n"
    "  - {model: llama2-7b, workload: inference, backend: fsdp, metric: gpu_count, value: 8}\n";

class FakeClock : public Clock {
 public:
  double NowSeconds() override { return 0; }
  std::string NowIso8601() override { return "2026-01-02T03:04:05Z"; }
};

// Records what StoreImport writes; other methods are not needed.
class FakeStore : public Store {
 public:
  RunRecord run;
  std::string finished_status, finished_at;
  std::vector<CaseRecord> cases;
  std::map<int64_t, CaseResult> results;
  int fail_case_at = -1;  // BeginCase fails for this 0-based case

  Result<int64_t> CreateRun(const RunRecord& r) override {
    run = r;
    return int64_t{7};
  }
  Status FinishRun(int64_t run_id, const std::string& status, const std::string& at) override {
    if (run_id != 7) return Status::Internal("wrong run");
    finished_status = status;
    finished_at = at;
    return Status::Ok();
  }
  Result<int64_t> BeginCase(const CaseRecord& record) override {
    if (static_cast<int>(cases.size()) == fail_case_at) return Status::IoError("disk full");
    cases.push_back(record);
    return static_cast<int64_t>(100 + cases.size());
  }
  Status AppendTelemetry(int64_t, const std::vector<TelemetrySample>&) override { return No(); }
  Status FinishCase(int64_t row_id, const CaseResult& result) override {
    results[row_id] = result;
    return Status::Ok();
  }
  Status PutContext(int64_t, const std::vector<std::pair<std::string, std::string>>&) override { return No(); }
  Status AppendSteps(int64_t, const std::vector<StepSample>&) override { return No(); }
  Status AppendRequests(int64_t, const std::vector<RequestSample>&) override { return No(); }
  Result<int> InterruptRunningCases(int64_t, const std::string&) override { return No(); }
  Result<std::vector<RunRecord>> ListRuns() override { return No(); }
  Result<RunRecord> GetRun(int64_t) override { return No(); }
  Result<std::vector<std::pair<std::string, std::string>>> GetContext(int64_t) override { return No(); }
  Result<std::vector<CaseRecord>> CasesOfRun(int64_t) override { return No(); }
  Result<std::vector<Measurement>> MeasurementsOfCase(int64_t) override { return No(); }
  Result<std::vector<StepSample>> StepsOfCase(int64_t) override { return No(); }
  Result<std::vector<RequestSample>> RequestsOfCase(int64_t) override { return No(); }
  Result<std::vector<std::pair<std::string, std::string>>> FactsOfCase(int64_t) override { return No(); }

 private:
  static Status No() { return Status::Internal("not used by StoreImport"); }
};

}  // namespace

TEST_CASE("import: a valid file gives one figure per result") {
  ImportParseResult r = ParseImportString(kFile, "figures/cloud.yaml");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const ImportFile& f = *r.file;
  CHECK(f.path == "figures/cloud.yaml");
  CHECK(f.text == kFile);
  CHECK(f.source == "Methodology report, table 1 (other-cloud column)");
  REQUIRE(f.figures.size() == 6);
  const ImportedFigure& a = f.figures[0];
  CHECK(a.where.ToString() == "figures/cloud.yaml:3:5");
  CHECK(a.model == "llama2-70b");
  CHECK(a.workload == "pretrain");
  CHECK(*a.length == Length{Length::Unit::kSteps, 1000});
  CHECK(a.backend == "fsdp");
  CHECK(a.nodes == 2);
  CHECK(a.network == "IB-other-cloud");
  CHECK(a.metric == "wall_minutes");
  CHECK(*a.value == 93.5);
  CHECK(a.marker == "extrapolated");
  const ImportedFigure& b = f.figures[1];
  CHECK(*b.length == Length{Length::Unit::kEpochs, 1});
  CHECK_FALSE(b.value.has_value());
  CHECK(b.marker == "not-provided");
  CHECK(b.nodes == 1);
  const ImportedFigure& c = f.figures[2];
  CHECK_FALSE(c.length.has_value());
  CHECK(c.variant == "multi-inference");
  CHECK(c.nodes == 1);
  CHECK(c.marker == "");
}

TEST_CASE("import: every error is reported, located, with did-you-mean") {
  CHECK(Errors("source: x\nresults:\n  - {model: m, workload: pretrain, stpes: 10, backend: fsdp, metric: wall_minutes, value: 1}\n") ==
        "fig.yaml:3:5: a pretrain result needs steps or epochs\n"
        "fig.yaml:3:36: unknown key 'stpes' (did you mean 'steps'?)");
  CHECK(Errors("source: x\nresults:\n"
               "  - {model: m, workload: inference, steps: 10, backend: fsdp, metric: wall_seconds, value: ten}\n"
               "  - {model: m, workload: finetune, steps: 1, epochs: 1, backend: fsdp, metric: Wall-Time, value: 1}\n"
               "  - {model: m, workload: training, backend: fsdp, metric: x, marker: not-provided, value: 3}\n"
               "  - {model: m, workload: pretrain, steps: 5, backend: fsdp, metric: x}\n"
               "  - {model: m, workload: pretrain, steps: 5, backend: fsdp, metric: x, marker: guessed, nodes: 0}\n"
               "  - {workload: pretrain, steps: 0, metric: x, value: 1}\n") ==
        "fig.yaml:3:44: an inference result has no steps or epochs\n"
        "fig.yaml:3:92: expected a number for 'value', got 'ten'\n"
        "fig.yaml:4:54: a result gives both steps and epochs (give one)\n"
        "fig.yaml:4:80: metric name 'Wall-Time' may only contain a-z, 0-9 and '_' (e.g. wall_minutes)\n"
        "fig.yaml:5:26: unknown workload 'training' (expected one of: pretrain, finetune, inference)\n"
        "fig.yaml:5:91: a not-provided result has no value (remove 'value' or the marker)\n"
        "fig.yaml:6:5: a result needs 'value' (or marker: not-provided)\n"
        "fig.yaml:7:80: unknown marker 'guessed' (expected one of: extrapolated, not-provided)\n"
        "fig.yaml:7:96: 'nodes' must be > 0, got 0\n"
        "fig.yaml:8:5: a result needs 'model'\n"
        "fig.yaml:8:5: a result needs 'backend'\n"
        "fig.yaml:8:33: 'steps' must be > 0, got 0");
  CHECK(Errors("results: {a: 1}\nsorce: x\n") ==
        "fig.yaml:1:1: missing 'source' (name where the figures come from)\n"
        "fig.yaml:1:10: expected a list for 'results', got a map\n"
        "fig.yaml:2:1: unknown key 'sorce' (did you mean 'source'?)");
  CHECK(Errors("source: \" \"\nresults: []\n") ==
        "fig.yaml:1:9: 'source' is empty (name where the figures come from)\n"
        "fig.yaml:2:10: 'results' is empty");
  CHECK(Errors("[1]\n") == "fig.yaml:1:1: an import file is a map at top level, got a sequence");
  CHECK(Errors("") == "fig.yaml: file is empty");
  CHECK(ErrorsOf(ParseImportFile("/nonexistent/figures.yaml")) ==
        "/nonexistent/figures.yaml: cannot read file: No such file or directory");
}

TEST_CASE("import: StoreImport writes one import run, one case and one imported measurement per figure") {
  ImportParseResult r = ParseImportString(kFile, "figures/cloud.yaml");
  REQUIRE(r.ok());
  FakeStore store;
  FakeClock clock;
  Result<int64_t> id = StoreImport(store, *r.file, clock);
  REQUIRE(id.ok());
  CHECK(*id == 7);
  CHECK(store.run.kind == "import");
  CHECK(store.run.plan_name == "cloud");
  CHECK(store.run.plan_file == "figures/cloud.yaml");
  CHECK(store.run.plan_text == kFile);
  CHECK(store.run.plan_sha256 == "");
  CHECK(store.run.source == "Methodology report, table 1 (other-cloud column)");
  CHECK(store.run.started_at == "2026-01-02T03:04:05Z");
  CHECK(store.finished_status == "ok");
  CHECK(store.finished_at == "2026-01-02T03:04:05Z");

  REQUIRE(store.cases.size() == 6);
  const CaseRecord& c = store.cases[0];
  CHECK(c.run_id == 7);
  CHECK(c.case_id == "import-1");
  CHECK(c.backend == "import");
  CHECK(c.system == "fsdp");
  CHECK(c.model == "llama2-70b");
  CHECK(c.workload == "pretrain");
  CHECK(c.nodes == 2);
  CHECK(c.network == "IB-other-cloud");
  CHECK(c.length_unit == "steps");
  CHECK(c.length_count == 1000);
  CHECK(store.cases[1].case_id == "import-2");
  CHECK(store.cases[1].length_unit == "epochs");
  CHECK(store.cases[1].system == "share");
  CHECK(store.cases[2].length_unit == "");
  CHECK(store.cases[2].length_count == 0);
  CHECK(store.cases[2].variant == "multi-inference");

  REQUIRE(store.results.size() == 6);
  auto only = [&](int64_t row) {
    const CaseResult& res = store.results.at(row);
    CHECK(res.status == CaseStatus::kOk);
    REQUIRE(res.measurements.size() == 1);
    return res.measurements[0];
  };
  Measurement m1 = only(101);
  CHECK(m1.name == "wall_seconds");
  CHECK(*m1.value == doctest::Approx(5610));
  CHECK(m1.unit == "s");
  CHECK(m1.how == Provenance::kImported);
  CHECK(m1.method == "converted from 93.5 min");
  CHECK(m1.source == "Methodology report, table 1 (other-cloud column)");
  CHECK(m1.marker == "extrapolated");
  Measurement m2 = only(102);
  CHECK(m2.name == "wall_seconds");
  CHECK_FALSE(m2.value.has_value());
  CHECK(m2.marker == "not-provided");
  CHECK(m2.how == Provenance::kImported);
  Measurement m3 = only(103);
  CHECK(m3.name == "tokens_per_second");
  CHECK(m3.unit == "tokens/s");
  CHECK(*m3.value == 41.2);
  CHECK(m3.method == "");
  CHECK(only(104).unit == "s");
  CHECK(only(105).unit == "s/token");
  CHECK(only(106).unit == "");
  CHECK(only(106).name == "gpu_count");
}

TEST_CASE("import: a store failure is returned, not thrown") {
  ImportParseResult r = ParseImportString(kFile, "cloud.yaml");
  REQUIRE(r.ok());
  FakeStore store;
  store.fail_case_at = 1;
  FakeClock clock;
  Result<int64_t> id = StoreImport(store, *r.file, clock);
  REQUIRE_FALSE(id.ok());
  CHECK(id.status().ToString() == "I/O error: disk full");
  CHECK(store.finished_status == "");
}

TEST_CASE("import: the example in docs/import-format.md is a valid import file") {
  std::string block = testing::FirstYamlBlock(
      testing::ReadTextFile(std::string(PROTOCOL_SOURCE_DIR) + "/docs/import-format.md"));
  REQUIRE(!block.empty());
  ImportParseResult r = ParseImportString(block, "docs/import-format.md");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  REQUIRE(r.file->figures.size() == 3);
  CHECK(r.file->figures[1].marker == "not-provided");
  CHECK(*r.file->figures[2].value == 41.2);
}
