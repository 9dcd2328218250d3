// Makes a results database of N runs for timing `protocol report` at nightly
// scale (bench/report_scale.sh); a generator, not a benchmark: it times
// nothing and asserts nothing.
//
//   build/protocol_report_db --from results/protocol.db --runs 2000 --out report-2000.db
//
// Every run is a copy, through the Store API, of one real run of the
// template database (default: its newest run of kind "run", e.g. a run of
// plans/quickstart.yaml): the same resolved plan, context, cases,
// measurements, step and request samples. No figure is made up. So that the
// history holds what a nightly one does, every run but the last has one case
// failed (the i-th run the (i mod cases)-th case; status failed, no
// measurements), superseded by the ok copies of that case in later runs;
// --no-failures leaves every case ok.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "runner/store/store.h"

namespace {

using namespace protocol;

struct Options {
  std::string from;
  std::string out;
  int64_t run = 0;  // 0: the newest run of kind "run"
  int runs = 2000;
  bool failures = true;
};

// One case of the template run, everything the store holds of it.
struct TemplateCase {
  CaseRecord record;
  CaseResult result;
};

struct Template {
  RunRecord run;
  std::vector<std::pair<std::string, std::string>> context;
  std::vector<TemplateCase> cases;
};

int Usage(const char* why) {
  std::fprintf(stderr,
               "protocol_report_db: %s\n"
               "usage: protocol_report_db --from DB [--run ID] [--runs N] [--no-failures] --out DB\n",
               why);
  return 2;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--from" && has_value) o->from = argv[++i];
    else if (a == "--out" && has_value) o->out = argv[++i];
    else if (a == "--run" && has_value) o->run = std::atoll(argv[++i]);
    else if (a == "--runs" && has_value) o->runs = std::atoi(argv[++i]);
    else if (a == "--no-failures") o->failures = false;
    else return false;
  }
  return !o->from.empty() && !o->out.empty() && o->runs > 0;
}

// Reads the template run whole.
Result<Template> ReadTemplate(Store& store, int64_t run_id) {
  if (run_id == 0) {
    auto runs = store.ListRunHeaders();
    if (!runs.ok()) return runs.status();
    for (const RunRecord& r : *runs)
      if (r.kind == "run") run_id = r.id;
    if (run_id == 0) return Status::NotFound("the template database holds no run of kind 'run'");
  }
  Template t;
  auto run = store.GetRun(run_id);
  if (!run.ok()) return run.status();
  t.run = run.value();
  auto context = store.GetContext(run_id);
  if (!context.ok()) return context.status();
  t.context = context.value();
  auto cases = store.CasesOfRun(run_id);
  if (!cases.ok()) return cases.status();
  for (const CaseRecord& c : *cases) {
    TemplateCase tc;
    tc.record = c;
    tc.result.status = c.status;
    tc.result.reason = c.reason;
    tc.result.exit_code = c.exit_code;
    tc.result.finished_at = c.finished_at;
    tc.result.log_sha256 = c.log_sha256;
    auto ms = store.MeasurementsOfCase(c.row_id);
    auto steps = store.StepsOfCase(c.row_id);
    auto reqs = store.RequestsOfCase(c.row_id);
    if (!ms.ok()) return ms.status();
    if (!steps.ok()) return steps.status();
    if (!reqs.ok()) return reqs.status();
    tc.result.measurements = ms.value();
    tc.result.steps = steps.value();
    tc.result.requests = reqs.value();
    t.cases.push_back(std::move(tc));
  }
  if (t.cases.empty()) return Status::NotFound("the template run holds no cases");
  return t;
}

// Writes one copy of the template; `failed` (an index into its cases, or -1)
// is stored as failed, without its measurements and samples.
Status WriteRun(Store& store, const Template& t, int failed) {
  auto id = store.CreateRun(t.run);
  if (!id.ok()) return id.status();
  if (Status s = store.PutContext(*id, t.context); !s.ok()) return s;
  for (size_t i = 0; i < t.cases.size(); ++i) {
    CaseRecord rec = t.cases[i].record;
    rec.run_id = *id;
    auto row = store.BeginCase(rec);
    if (!row.ok()) return row.status();
    CaseResult result = t.cases[i].result;
    if (static_cast<int>(i) == failed) {
      result = CaseResult();
      result.status = CaseStatus::kFailed;
      result.reason = "copy made failed by protocol_report_db (a superseded failure)";
      result.finished_at = t.cases[i].result.finished_at;
    }
    if (Status s = store.FinishCase(*row, result); !s.ok()) return s;
  }
  return store.FinishRun(*id, failed >= 0 ? "failed" : t.run.status, t.run.finished_at);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return Usage("bad arguments");
  if (std::filesystem::exists(o.out)) return Usage("--out exists; give a new file");
  auto from = OpenStore(o.from);
  if (!from.ok()) return Usage(from.status().ToString().c_str());
  auto tmpl = ReadTemplate(**from, o.run);
  if (!tmpl.ok()) return Usage(tmpl.status().ToString().c_str());
  auto out = OpenStore(o.out);
  if (!out.ok()) return Usage(out.status().ToString().c_str());
  const int n_cases = static_cast<int>(tmpl->cases.size());
  for (int i = 0; i < o.runs; ++i) {
    const bool last = i + 1 == o.runs;
    const int failed = o.failures && !last ? i % n_cases : -1;
    if (Status s = WriteRun(**out, *tmpl, failed); !s.ok()) return Usage(s.ToString().c_str());
    if ((i + 1) % 500 == 0) std::fprintf(stderr, "%d runs written\n", i + 1);
  }
  std::printf("%s: %d runs of plan '%s' (%d cases each) copied from run %lld of %s%s\n", o.out.c_str(), o.runs,
              tmpl->run.plan_name.c_str(), n_cases, static_cast<long long>(tmpl->run.id), o.from.c_str(),
              o.failures ? "; every run but the last has one failed case" : "");
  return 0;
}
