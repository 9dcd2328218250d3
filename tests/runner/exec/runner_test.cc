#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "fake_backend.h"
#include "fake_clock.h"
#include "fake_cpu_meter.h"
#include "fake_process_runner.h"
#include "fake_progress.h"
#include "fake_store.h"
#include "runner/base/build_info.h"
#include "runner/base/sha256.h"
#include "runner/base/text.h"
#include "runner/exec/runner.h"
#include "runner/plan/case_placeholders.h"

using namespace protocol;
using protocol::testing::FakeProcessRunner;

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Measurement* Find(const std::vector<Measurement>& ms, const std::string& name, Provenance how) {
  for (const auto& m : ms)
    if (m.name == name && m.how == how) return &m;
  return nullptr;
}

// Everything a Runner needs, faked. Logs go to a temporary folder per test,
// emptied first.
struct Harness {
  explicit Harness(const std::string& test) {
    options.logs_dir =
        (std::filesystem::temp_directory_path() /
         ("protocol_runner_test-" + std::to_string(getpid())) / test)
            .string();
    std::filesystem::remove_all(options.logs_dir);
  }
  ~Harness() {
    std::error_code ec;
    std::filesystem::remove_all(options.logs_dir, ec);
    std::filesystem::remove(std::filesystem::path(options.logs_dir).parent_path(), ec);  // if empty
  }
  FakeStore store;
  FakeClock clock;
  FakeBackend backend{&clock};
  RecordingProgress progress;
  StopFlag stop;
  FakeProcessRunner processes;  // no process is started
  RunOptions options;
  Runner runner{store, clock, processes, backend.Factory(), progress, stop};

  Result<RunSummary> Run(const Plan& plan) { return runner.Run(plan, options); }
};

}  // namespace

TEST_CASE("A failing case is stored failed and the next case still runs") {
  Harness h("failing");
  h.options.context = {{"hostname", "rig0"}};
  Plan plan = MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.1.2")});
  FakeScript fail;
  fail.status = CaseStatus::kFailed;
  fail.reason = "exit code 1";
  fail.exit_code = 1;
  fail.seconds_after = 1.5;
  h.backend.scripts["2.1.1.1"] = fail;
  h.backend.default_script.seconds_after = 3;

  auto summary = h.Run(plan);
  REQUIRE(summary.ok());
  CHECK(summary->run_id == 1);
  CHECK(summary->failed == 1);
  CHECK(summary->ok == 1);
  CHECK(summary->ExitCode() == 1);

  const auto& rows = h.store.case_rows();
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].record.case_id == "2.1.1.1");
  CHECK(rows[0].record.status == CaseStatus::kFailed);
  CHECK(rows[0].record.reason == "exit code 1");
  CHECK(rows[0].record.exit_code == 1);
  const Measurement* wall = Find(rows[0].measurements, "wall_seconds", Provenance::kMeasured);
  REQUIRE(wall != nullptr);  // a failure's time is data too
  CHECK(*wall->value == 1.5);
  CHECK(wall->unit == "s");
  CHECK(rows[1].record.status == CaseStatus::kOk);
  CHECK(*Find(rows[1].measurements, "wall_seconds", Provenance::kMeasured)->value == 3);

  // The case row carries the spec's identity.
  const CaseRecord& r = rows[1].record;
  CHECK(r.run_id == 1);
  CHECK(r.stage == "stage1");
  CHECK(r.model == "tiny");
  CHECK(r.workload == "pretrain");
  CHECK(r.backend == "fake");
  CHECK(r.system == "fsdp");
  CHECK(r.length_unit == "steps");
  CHECK(r.length_count == 10);
  CHECK(r.report_as_unit == "");
  CHECK(r.started_at == "2026-01-01T00:00:01Z");
  CHECK(r.finished_at == "2026-01-01T00:00:04Z");
  CHECK(r.log_path == h.options.logs_dir + "/run-1/2.1.1.2.log");

  const RunRecord& run = h.store.runs()[0];
  CHECK(run.kind == "run");
  CHECK(run.plan_name == "test");
  CHECK(run.plan_title == "Runner test plan");
  CHECK(run.plan_file == "<string>");
  CHECK(run.plan_text == plan.resolved_text);
  CHECK(run.plan_sha256 == Sha256Hex(plan.resolved_text));
  CHECK(run.status == "failed");
  CHECK(run.protocol_version == std::string(BuildInfo().version));
  CHECK(run.git_revision == std::string(BuildInfo().git_revision));
  auto context = h.store.GetContext(1);
  REQUIRE(context->size() == 2);
  CHECK((*context)[0] == std::make_pair(std::string("hostname"), std::string("rig0")));
  CHECK((*context)[1] == std::make_pair(std::string("plan_sha256"), Sha256Hex(plan.resolved_text)));

  CHECK(h.progress.events == std::vector<std::string>{
                                 "started 1/2 2.1.1.1 r0",
                                 "finished 1/2 2.1.1.1 r0 failed 1.5 s: exit code 1",
                                 "started 2/2 2.1.1.2 r0",
                                 "finished 2/2 2.1.1.2 r0 ok 3 s",
                             });
  std::string log = ReadFile(h.options.logs_dir + "/run-1/2.1.1.1.log");
  CHECK(log ==
        "# protocol run 1 case 2.1.1.1 repeat 1/1 backend fake started 2026-01-01T00:00:00Z\n"
        "# protocol case 2.1.1.1 repeat 1/1 ended failed after 1.5 s: exit code 1\n");
}

TEST_CASE("A timed-out case is stored with status timeout and fails the run") {
  Harness h("timeout");
  h.backend.default_script.status = CaseStatus::kTimeout;
  h.backend.default_script.reason = "timed out after 5 s; process group killed";
  auto summary = h.Run(MakePlan({MakeCase("2.1.1.1")}));
  REQUIRE(summary.ok());
  CHECK(summary->timeout == 1);
  CHECK(summary->ExitCode() == 1);
  CHECK(h.store.case_rows()[0].record.status == CaseStatus::kTimeout);
  CHECK(h.store.case_rows()[0].record.reason == "timed out after 5 s; process group killed");
  CHECK(h.store.runs()[0].status == "failed");
}

TEST_CASE("An all-ok run has status ok and exit code 0") {
  Harness h("allok");
  auto summary = h.Run(MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.1.2")}));
  REQUIRE(summary.ok());
  CHECK(summary->ok == 2);
  CHECK(summary->ExitCode() == 0);
  CHECK(h.store.runs()[0].status == "ok");
  CHECK(h.store.runs()[0].finished_at == "2026-01-01T00:00:00Z");
}

TEST_CASE("Interrupt mid-case, then resume runs exactly the absent and interrupted cases") {
  Harness h("resume");
  Plan plan = MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.1.2"), MakeCase("2.1.1.3"),
                        MakeCase("2.1.1.4")});
  FakeScript ctrl_c;
  ctrl_c.raise_stop = &h.stop;  // Ctrl-C arrives while 2.1.1.2 runs; the backend still says ok
  ctrl_c.seconds_after = 2;
  h.backend.scripts["2.1.1.2"] = ctrl_c;

  auto first = h.Run(plan);
  REQUIRE(first.ok());
  CHECK(first->stopped);
  CHECK(first->ok == 1);
  CHECK(first->interrupted == 1);
  CHECK(first->ExitCode() == 1);
  REQUIRE(h.store.case_rows().size() == 2);  // 2.1.1.3 and 2.1.1.4 never started
  const CaseRecord& interrupted = h.store.case_rows()[1].record;
  CHECK(interrupted.case_id == "2.1.1.2");
  CHECK(interrupted.status == CaseStatus::kInterrupted);
  CHECK(interrupted.reason == "stop requested (Ctrl-C / SIGTERM); backend reported ok");
  CHECK(h.store.runs()[0].status == "interrupted");

  // A runner killed with -9 while 2.1.1.3 ran would leave a "running" row.
  CaseRecord stale;
  stale.run_id = 1;
  stale.case_id = "2.1.1.3";
  REQUIRE(h.store.BeginCase(stale).ok());

  h.stop.Reset();
  h.backend.scripts.clear();
  h.backend.calls.clear();
  h.options.resume_run_id = 1;
  auto second = h.Run(plan);
  REQUIRE(second.ok());
  CHECK(second->run_id == 1);
  CHECK(second->ok == 3);
  CHECK_FALSE(second->stopped);
  REQUIRE(h.backend.calls.size() == 3);
  CHECK(h.backend.calls[0].case_id == "2.1.1.2");
  CHECK(h.backend.calls[1].case_id == "2.1.1.3");
  CHECK(h.backend.calls[2].case_id == "2.1.1.4");

  const auto& rows = h.store.case_rows();
  REQUIRE(rows.size() == 6);
  CHECK(rows[2].record.status == CaseStatus::kInterrupted);  // the stale row
  CHECK(rows[2].record.reason ==
        "runner stopped before the case finished (found running on --resume)");
  CHECK(rows[1].record.status == CaseStatus::kInterrupted);  // history is kept
  for (int i = 3; i < 6; ++i) CHECK(rows[i].record.status == CaseStatus::kOk);
  CHECK(h.store.runs().size() == 1);
  CHECK(h.store.runs()[0].status == "ok");
  CHECK(h.progress.events.back() == "finished 3/3 2.1.1.4 r0 ok 0 s");
}

TEST_CASE("Resume refuses a changed plan and an unknown run") {
  Harness h("resume_changed");
  Plan plan = MakePlan({MakeCase("2.1.1.1")});
  REQUIRE(h.Run(plan).ok());

  Plan changed = plan;
  changed.resolved_text += "# edited\n";
  h.options.resume_run_id = 1;
  auto refused = h.Run(changed);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Status::Code::kInvalidArgument);
  CHECK(refused.status().message() ==
        "plan changed since run 1 (sha256 " + Sha256Hex(plan.resolved_text).substr(0, 12) +
            "\u2026 vs " + Sha256Hex(changed.resolved_text).substr(0, 12) +
            "\u2026); --resume needs the same resolved plan");
  CHECK(h.store.case_rows().size() == 1);

  h.options.resume_run_id = 99;
  auto missing = h.Run(plan);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK(missing.status().message() == "run 99 does not exist");
}

TEST_CASE("BeginCase stores a running row and the log header before the backend runs") {
  Harness h("begin_first");
  bool checked = false;
  h.backend.default_script.hook = [&](BackendContext& context) {
    const FakeStore::CaseRow* row = h.store.FindCase(1, context.spec.id);
    REQUIRE(row != nullptr);
    CHECK(row->record.status == CaseStatus::kRunning);
    CHECK(row->record.log_path == context.log_path);
    CHECK(ReadFile(context.log_path) ==
          "# protocol run 1 case 2.1.1.1 repeat 1/1 backend fake started 2026-01-01T00:00:00Z\n");
    checked = true;
  };
  REQUIRE(h.Run(MakePlan({MakeCase("2.1.1.1")})).ok());
  CHECK(checked);
}

TEST_CASE("Repeats produce one row each, with their own logs and output dirs") {
  Harness h("repeats");
  CaseSpec c = MakeCase("2.1.1.1");
  c.repeats = 3;
  c.output_dir = "out/{plan}/{stage}/{model}/{case_id}/r{repeat}/run{run_id}";
  REQUIRE(h.Run(MakePlan({c})).ok());
  const auto& rows = h.store.case_rows();
  REQUIRE(rows.size() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(rows[k].record.repeat == k);
    CHECK(rows[k].record.status == CaseStatus::kOk);
  }
  CHECK(rows[0].record.log_path == h.options.logs_dir + "/run-1/2.1.1.1.log");
  CHECK(rows[1].record.log_path == h.options.logs_dir + "/run-1/2.1.1.1.r1.log");
  CHECK(rows[2].record.log_path == h.options.logs_dir + "/run-1/2.1.1.1.r2.log");
  CHECK(std::filesystem::exists(rows[2].record.log_path));
  REQUIRE(h.backend.calls.size() == 3);
  CHECK(h.backend.calls[2].output_dir == "out/test/stage1/tiny/2.1.1.1/r2/run1");
  CHECK(h.progress.events[0] == "started 1/3 2.1.1.1 r0");
  CHECK(h.progress.events[4] == "started 3/3 2.1.1.1 r2");
}

TEST_CASE("output_dir expands every case placeholder the parser lets it use") {
  // Regression: `output_dir: out/{steps}` passed validate and reached the backend literally.
  Harness h("output_dir_placeholders");
  CaseSpec c = MakeCase("2.1.1.1", 25);
  c.nodes = 2;
  c.network = "10G";
  c.output_dir = "out/{steps}/{epochs}/{nodes}/{network}/{dataset}";
  REQUIRE(h.Run(MakePlan({c})).ok());
  REQUIRE(h.backend.calls.size() == 1);
  CHECK(h.backend.calls[0].output_dir == "out/25//2/10G/text");
}

TEST_CASE("output_dir expands every name of the placeholder table that validate lets it use") {
  Harness h("output_dir_table");
  CaseSpec c = MakeCase("2.1.1.1");
  std::vector<std::string> parts;
  for (const std::string& name : PlaceholderNames(PlaceholderField::kOutputDir)) parts.push_back("{" + name + "}");
  c.output_dir = Join(parts, "|");
  REQUIRE(h.Run(MakePlan({c})).ok());
  REQUIRE(h.backend.calls.size() == 1);
  CHECK(h.backend.calls[0].output_dir.find('{') == std::string::npos);
  CHECK(Split(h.backend.calls[0].output_dir, '|').size() == parts.size());
}

TEST_CASE("--only runs the named cases and stores nothing for the others") {
  Harness h("only");
  h.options.only = {"2.1.1.2"};
  auto summary = h.Run(MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.1.2"), MakeCase("2.1.1.3")}));
  REQUIRE(summary.ok());
  REQUIRE(h.store.case_rows().size() == 1);
  CHECK(h.store.case_rows()[0].record.case_id == "2.1.1.2");
  CHECK(h.progress.events[0] == "started 1/1 2.1.1.2 r0");
  CHECK(h.store.runs()[0].status == "ok");
}

TEST_CASE("An unknown --only id is refused with a suggestion, before anything is stored") {
  Harness h("only_unknown");
  h.options.only = {"2.1.1.11", "9.9"};
  auto summary = h.Run(MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.2.4")}));
  REQUIRE_FALSE(summary.ok());
  CHECK(summary.status().code() == Status::Code::kInvalidArgument);
  CHECK(summary.status().message() ==
        "unknown case id '2.1.1.11' (did you mean '2.1.1.1'?); unknown case id '9.9'");
  CHECK(h.store.calls().empty());
}

TEST_CASE("A dry run says what would run and stores nothing") {
  Harness h("dry");
  h.options.dry_run = true;
  CaseSpec a = MakeCase("2.1.1.1", 1000);
  CaseSpec b = MakeCase("2.1.1.2", 100);
  b.nodes = 2;
  b.report_as = {Length{Length::Unit::kSteps, 1000}};
  b.repeats = 2;
  CaseSpec inf = MakeCase("2.1.1.5");
  inf.workload = Workload::kInference;
  inf.length.reset();
  inf.inference.max_new_tokens = {100, 110, 120};
  CaseSpec bad = MakeCase("2.1.1.9");
  bad.backend = "fdsp";
  h.backend.advice["2.1.1.2"] = CaseAdvice{{"the device is small"}, {"expected peak memory per GPU: 1 GB"}};
  auto summary = h.Run(MakePlan({a, b, inf, bad}));
  REQUIRE(summary.ok());
  CHECK(summary->ExitCode() == 0);
  CHECK(h.store.writes() == 0);
  CHECK(h.store.calls().empty());
  CHECK(h.backend.calls.empty());
  CHECK_FALSE(std::filesystem::exists(h.options.logs_dir));
  CHECK(h.progress.events == std::vector<std::string>{
      "message would run 2.1.1.1 pretrain fake nodes=1 1000 steps (repeat 1/1)",
      "message   no time estimate: this backend does not estimate time",
      "message would run 2.1.1.2 pretrain fake nodes=2 100 steps, reported also as 1000 steps (repeat 1/2)",
      "message   warning: the device is small",
      "message   expected peak memory per GPU: 1 GB",
      "message   no time estimate: this backend does not estimate time",
      "message would run 2.1.1.2 pretrain fake nodes=2 100 steps, reported also as 1000 steps (repeat 2/2)",
      "message would run 2.1.1.5 inference fake nodes=1 3 requests, 330 tokens (repeat 1/1)",
      "message   no time estimate: this backend does not estimate time",
      "message would fail 2.1.1.9: unknown backend 'fdsp'",
      "message plan total: 0 s of cases, 0 rig-hours (each case's time x its repeats x its nodes); 3 cases not "
      "estimated (2.1.1.1, 2.1.1.2, 2.1.1.5)",
  });
}

namespace {
TimeEstimate Expect(double startup, double compute, int nodes) {
  TimeEstimate e;
  e.terms = {{"start-up", startup, "1 rank process(es) start 1 s"}, {"compute", compute, "6 TFLOP"}};
  e.seconds = startup + compute;
  e.nodes = nodes;
  e.device = "2 x H100 SXM";
  return e;
}
}  // namespace

TEST_CASE("A dry run prints each case's expected wall time and the plan's total in rig-hours") {
  Harness h("dry-time");
  h.options.dry_run = true;
  CaseSpec a = MakeCase("a", 10);
  CaseSpec b = MakeCase("b", 10);
  b.nodes = 2;
  b.repeats = 2;
  h.backend.estimates["a"] = Expect(600, 1200, 1);   // 30 min on 1 node
  h.backend.estimates["b"] = Expect(0, 3600, 2);     // 1 h on 2 nodes, twice
  auto summary = h.Run(MakePlan({a, b}));
  REQUIRE(summary.ok());
  REQUIRE(!h.progress.events.empty());
  // 0.5 h + 2 x 1 h of cases; rig-hours 0.5 x 1 + 2 x 1 x 2 = 4.5.
  CHECK(h.progress.events.back() ==
        "message plan total: 2.5 h of cases, 4.5 rig-hours (each case's time x its repeats x its nodes)");
  CHECK(h.progress.events[1] ==
        "message   expected wall time 30 min per repeat on 1 node, 2 x H100 SXM:\n"
        "      30 min: start-up 10 min (1 rank process(es) start 1 s) + compute 20 min (6 TFLOP)");
}

TEST_CASE("A run stores each case's expected wall time as estimated and flags a case outside the band") {
  Harness h("expected");
  h.backend.estimates["fast"] = Expect(1, 3, 1);   // 4 s expected
  h.backend.estimates["slow"] = Expect(1, 3, 1);   // 4 s expected
  h.backend.scripts["fast"].seconds_after = 5;     // 1.25x: inside the band
  h.backend.scripts["slow"].seconds_after = 12;    // 3x: outside, compute is the largest term
  h.backend.scripts["none"].seconds_after = 1;     // no estimate: nothing stored, nothing flagged
  auto summary = h.Run(MakePlan({MakeCase("fast"), MakeCase("slow"), MakeCase("none")}));
  REQUIRE(summary.ok());
  const auto& rows = h.store.case_rows();
  REQUIRE(rows.size() == 3);
  const Measurement* expected = Find(rows[0].measurements, "expected_wall_seconds", Provenance::kEstimated);
  REQUIRE(expected != nullptr);
  CHECK(*expected->value == 4);
  CHECK(expected->unit == "s");
  CHECK(expected->method ==
        "estimated before the case ran on 2 x H100 SXM: 4 s: start-up 1 s (1 rank process(es) start 1 s) + "
        "compute 3 s (6 TFLOP); largest term: compute 3 s");
  CHECK(Find(rows[2].measurements, "expected_wall_seconds", Provenance::kEstimated) == nullptr);
  REQUIRE(summary->off_estimate.size() == 1);
  CHECK(summary->off_estimate[0] ==
        "slow: 3x its estimate (4 s expected, 12 s measured; outside 0.5-2x); the term most likely at fault: "
        "compute 3 s");
}

TEST_CASE("A case with report_as stores the measured and the extrapolated wall time") {
  Harness h("extrapolate");
  CaseSpec c = MakeCase("2.1.1.2", 10);
  // Reported at a shorter length (its first 4 steps), a longer one, and one declared not provided.
  c.report_as = {Length{Length::Unit::kSteps, 4}, Length{Length::Unit::kSteps, 1000}};
  c.not_provided = {Length{Length::Unit::kSteps, 2}};
  c.warmup_steps = 2;
  h.backend.default_script.seconds_before = 7.5;  // start-up before the first step
  h.backend.default_script.step_seconds = {4, 2, 1.5, 1.25, 1.25, 1.5, 1.5, 1.25, 1.25, 1.5};
  CaseSpec linear = MakeCase("2.1.1.3", 100);
  linear.report_as = {Length{Length::Unit::kSteps, 1000}};
  FakeScript no_steps;
  no_steps.seconds_after = 37.5;
  h.backend.scripts["2.1.1.3"] = no_steps;
  CaseSpec failed = MakeCase("2.1.1.4", 100);
  failed.report_as = {Length{Length::Unit::kSteps, 1000}};
  FakeScript fail;
  fail.status = CaseStatus::kFailed;
  fail.reason = "loss is NaN";
  h.backend.scripts["2.1.1.4"] = fail;
  REQUIRE(h.Run(MakePlan({c, linear, failed})).ok());

  const auto& ms = h.store.case_rows()[0].measurements;
  REQUIRE(ms.size() == 5);
  CHECK(ms[0].name == "wall_seconds");
  CHECK(ms[0].how == Provenance::kMeasured);
  CHECK(*ms[0].value == 24.5);  // 7.5 + 17: measured, kept
  CHECK(ms[0].length_unit.empty());  // the case's own length
  CHECK(ms[1].name == "step_seconds_mean");
  CHECK(*ms[1].value == 1.375);
  CHECK(ms[1].method == "mean of steps 3..10");
  CHECK(ms[2].name == "wall_seconds");
  CHECK(ms[2].how == Provenance::kPrefix);
  CHECK(*ms[2].value == 16.25);  // 7.5 + (4 + 2 + 1.5 + 1.25)
  CHECK(ms[2].length_unit == "steps");
  CHECK(ms[2].length_count == 4);
  CHECK(ms[3].how == Provenance::kExtrapolated);
  CHECK(*ms[3].value == 1385.75);  // 7.5 + 6 + 998 × 1.375
  CHECK(ms[3].length_count == 1000);
  CHECK(ms[3].method ==
        "extrapolated from 10 measured steps to 1000: overhead 7.5 s + warm-up 2 steps 6 s + "
        "(M\u2212W)=998 \u00d7 mean step 1.375 s (steps 3..10)");
  CHECK(ms[4].marker == "not-provided");
  CHECK(ms[4].how == Provenance::kDeclared);  // nothing was measured at that length
  CHECK_FALSE(ms[4].value.has_value());
  CHECK(ms[4].length_count == 2);
  CHECK(h.store.case_rows()[0].record.report_as_unit.empty());  // lengths live on the figures
  CHECK(h.store.case_rows()[0].steps.size() == 10);

  const auto& lin = h.store.case_rows()[1].measurements;
  REQUIRE(lin.size() == 2);
  CHECK(*lin[0].value == 37.5);
  CHECK(*lin[1].value == 375);
  CHECK(lin[1].how == Provenance::kExtrapolated);
  CHECK(lin[1].method == "scaled wall time linearly 100\u21921000 steps (no per-step timings)");

  const auto& failed_ms = h.store.case_rows()[2].measurements;
  REQUIRE(failed_ms.size() == 1);  // no figure is extrapolated from a failure
  CHECK(failed_ms[0].how == Provenance::kMeasured);
}

TEST_CASE("Samples are appended in batches of 64 and every 2 s of clock time") {
  Harness h("batching");
  FakeScript many;
  many.step_seconds.assign(100, 0.001);
  for (int i = 0; i < 70; ++i) {
    RequestSample r;
    r.index = i;
    many.requests.push_back(r);
  }
  h.backend.scripts["2.1.1.1"] = many;
  FakeScript slow;
  slow.step_seconds = {1.5, 1.5, 1.5};  // flush at t=3.0 (2 steps); the third goes with FinishCase
  h.backend.scripts["2.1.1.2"] = slow;
  REQUIRE(h.Run(MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.1.2")})).ok());

  std::vector<std::string> calls;
  for (const auto& c : h.store.calls())
    if (c.rfind("Append", 0) == 0 || c.rfind("FinishCase", 0) == 0 || c.rfind("BeginCase", 0) == 0)
      calls.push_back(c);
  // Steps 1-64 flush as one batch; then requests 1-28 join steps 65-100 to reach 64.
  CHECK(calls == std::vector<std::string>{
                     "BeginCase 2.1.1.1 r0",
                     "AppendSteps 64",
                     "AppendSteps 36",
                     "AppendRequests 28",
                     "FinishCase 2.1.1.1 r0 ok",
                     "BeginCase 2.1.1.2 r0",
                     "AppendSteps 2",
                     "FinishCase 2.1.1.2 r0 ok",
                 });
  const auto& rows = h.store.case_rows();
  CHECK(rows[0].steps.size() == 100);
  CHECK(rows[0].requests.size() == 70);
  CHECK(rows[0].steps[99].step == 100);
  CHECK(rows[0].requests[69].index == 69);
  CHECK(rows[1].steps.size() == 3);
}

TEST_CASE("A backend that throws, an unknown backend and failed checks are stored as failures") {
  Harness h("throws");
  FakeScript boom;
  boom.throw_what = "boom";
  h.backend.scripts["2.1.1.1"] = boom;
  CaseSpec unknown = MakeCase("2.1.1.2");
  unknown.backend = "fdsp";
  REQUIRE(h.Run(MakePlan({MakeCase("2.1.1.1"), unknown, MakeCase("2.1.1.3")})).ok());
  const auto& rows = h.store.case_rows();
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].record.status == CaseStatus::kFailed);
  CHECK(rows[0].record.reason == "backend threw: boom");
  CHECK(rows[1].record.status == CaseStatus::kFailed);
  CHECK(rows[1].record.reason == "unknown backend 'fdsp'");
  CHECK(rows[1].measurements.size() == 1);  // wall_seconds, even so
  CHECK(rows[2].record.status == CaseStatus::kOk);

  Harness checks("checks");
  checks.backend.problems = {"argv is empty", "unknown placeholder {stpes}"};
  REQUIRE(checks.Run(MakePlan({MakeCase("2.1.1.1")})).ok());
  CHECK(checks.store.case_rows()[0].record.reason ==
        "backend check failed: argv is empty; unknown placeholder {stpes}");
  CHECK(checks.backend.calls.empty());
}

TEST_CASE("A store failure aborts the run with its status") {
  Harness h("store_failure");
  h.store.FailNext("FinishCase", Status::IoError("storing case 2.1.1.1: disk I/O error"));
  auto summary = h.Run(MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.1.2")}));
  REQUIRE_FALSE(summary.ok());
  CHECK(summary.status().code() == Status::Code::kIoError);
  CHECK(summary.status().message() == "storing case 2.1.1.1: disk I/O error");
  REQUIRE(h.backend.calls.size() == 1);  // 2.1.1.2 never ran

  Harness a("append_failure");
  a.backend.default_script.step_seconds.assign(64, 0.01);
  a.store.FailNext("AppendSteps", Status::IoError("database is locked"));
  auto appended = a.Run(MakePlan({MakeCase("2.1.1.1")}));
  REQUIRE_FALSE(appended.ok());
  CHECK(appended.status().message() == "database is locked");
}

TEST_CASE("A case log the disk cannot take stops the run with its path; --resume runs the case again") {
  Harness h("log_lost");
  const std::string lost = "logs/2.1.1.2.log: no space left on device; 4.0 KiB of output not written";
  h.processes.result = FakeProcessRunner::Exited(0);
  h.processes.result.log_error = lost;
  FakeScript fills;  // runs its command (whose log lost text), then reports ok with a figure
  fills.hook = [](BackendContext& ctx) { ctx.processes.Run(ProcessSpec{}, ctx.stop, nullptr); };
  fills.measurements = {MeasuredFigure("tokens_per_second", 42, "tokens/s")};
  h.backend.scripts["2.1.1.2"] = fills;
  const Plan plan = MakePlan({MakeCase("2.1.1.1"), MakeCase("2.1.1.2"), MakeCase("2.1.1.3")});

  auto first = h.Run(plan);
  REQUIRE_FALSE(first.ok());
  CHECK(first.status().code() == Status::Code::kIoError);
  CHECK(first.status().message() == lost + " (the case log); case 2.1.1.2 repeat 1/1 is stored as interrupted "
                                           "with its figures, and the run stops: free space, then --resume 1 "
                                           "runs it again");
  REQUIRE(h.backend.calls.size() == 2);  // 2.1.1.3 never ran
  REQUIRE(h.store.case_rows().size() == 2);
  CHECK(h.store.case_rows()[0].record.status == CaseStatus::kOk);
  const auto& row = h.store.case_rows()[1];
  CHECK(row.record.status == CaseStatus::kInterrupted);
  CHECK(row.record.reason == "the case log could not be written whole (" + lost + "); backend reported ok");
  CHECK(Find(row.measurements, "tokens_per_second", Provenance::kMeasured) != nullptr);
  CHECK(h.store.runs()[0].status == "interrupted");

  // Space is back: the resume runs the interrupted case and the one after it.
  h.processes.result.log_error = "";
  h.backend.calls.clear();
  h.options.resume_run_id = 1;
  auto second = h.Run(plan);
  REQUIRE(second.ok());
  CHECK(second->ok == 2);
  REQUIRE(h.backend.calls.size() == 2);
  CHECK(h.backend.calls[0].case_id == "2.1.1.2");
  CHECK(h.store.runs()[0].status == "ok");

  // The runner's own footer line counts too (here the log became a folder while the case ran).
  Harness f("footer_lost");
  FakeScript swap;
  swap.hook = [](BackendContext& ctx) {
    std::filesystem::remove(ctx.log_path);
    std::filesystem::create_directory(ctx.log_path);
  };
  f.backend.scripts["2.1.1.1"] = swap;
  auto footer = f.Run(MakePlan({MakeCase("2.1.1.1")}));
  REQUIRE_FALSE(footer.ok());
  const std::string log_path = f.options.logs_dir + "/run-1/2.1.1.1.log";
  CHECK(footer.status().message().rfind(log_path + ": cannot write: Is a directory (the case log); case 2.1.1.1", 0) == 0);
  CHECK(f.store.case_rows()[0].record.status == CaseStatus::kInterrupted);
}

TEST_CASE("Backend status lines reach the progress display") {
  Harness h("status_lines");
  h.backend.default_script.status_lines = {"step 1/10 loss 2.5", "step 2/10 loss 2.4"};
  REQUIRE(h.Run(MakePlan({MakeCase("2.1.1.1")})).ok());
  CHECK(h.progress.events == std::vector<std::string>{
                                 "started 1/1 2.1.1.1 r0",
                                 "status step 1/10 loss 2.5",
                                 "status step 2/10 loss 2.4",
                                 "finished 1/1 2.1.1.1 r0 ok 0 s",
                             });
}

// ---- interleaved repeats -------------------------------------------------------

namespace {

// "2.1.1.1 r0" per backend call, in order.
std::vector<std::string> CallOrder(const FakeBackend& backend) {
  std::vector<std::string> out;
  for (const auto& call : backend.calls) out.push_back(call.case_id + " r" + std::to_string(call.repeat));
  return out;
}

// A baseline and a share case of 2 repeats interleaved, and an inference case
// of 1 repeat between them in plan order.
Plan InterleavedPlan() {
  CaseSpec a = MakeCase("2.1.1.1");
  a.repeats = 2;
  CaseSpec between = MakeCase("2.1.1.5");
  CaseSpec b = MakeCase("2.2.1.1");
  b.system = "share";
  b.repeats = 2;
  Plan plan = MakePlan({a, between, b});
  plan.interleave = {{"2.1.1.1", "2.2.1.1"}};
  plan.resolved_text += "interleave: [[2.1.1.1, 2.2.1.1]]\n";
  return plan;
}

}  // namespace

TEST_CASE("Interleaved repeats run in ABBA order and progress numbers follow it") {
  Harness h("interleave");
  auto summary = h.Run(InterleavedPlan());
  REQUIRE(summary.ok());
  CHECK(summary->ok == 5);
  CHECK(CallOrder(h.backend) == std::vector<std::string>{"2.1.1.1 r0", "2.2.1.1 r0", "2.2.1.1 r1",
                                                         "2.1.1.1 r1", "2.1.1.5 r0"});
  std::vector<std::string> started;
  for (const auto& e : h.progress.events)
    if (e.rfind("started", 0) == 0) started.push_back(e);
  CHECK(started == std::vector<std::string>{"started 1/5 2.1.1.1 r0", "started 2/5 2.2.1.1 r0",
                                            "started 3/5 2.2.1.1 r1", "started 4/5 2.1.1.1 r1",
                                            "started 5/5 2.1.1.5 r0"});
  // Rows, logs and output dirs still belong to their (case, repeat).
  const auto& rows = h.store.case_rows();
  REQUIRE(rows.size() == 5);
  CHECK(rows[2].record.case_id == "2.2.1.1");
  CHECK(rows[2].record.repeat == 1);
  CHECK(rows[2].record.system == "share");
  CHECK(rows[2].record.log_path == h.options.logs_dir + "/run-1/2.2.1.1.r1.log");
  CHECK(rows[3].record.log_path == h.options.logs_dir + "/run-1/2.1.1.1.r1.log");
  CHECK(h.store.runs()[0].status == "ok");
}

TEST_CASE("A dry run lists an interleaved plan in its run order") {
  Harness h("interleave_dry");
  h.options.dry_run = true;
  REQUIRE(h.Run(InterleavedPlan()).ok());
  INFO(Join(h.progress.events, "\n"));
  CHECK(h.progress.events == std::vector<std::string>{
      "message would run 2.1.1.1 pretrain fake nodes=1 10 steps (repeat 1/2)",
      "message   no time estimate: this backend does not estimate time",
      "message would run 2.2.1.1 pretrain fake nodes=1 10 steps (repeat 1/2)",
      "message   no time estimate: this backend does not estimate time",
      "message would run 2.2.1.1 pretrain fake nodes=1 10 steps (repeat 2/2)",
      "message would run 2.1.1.1 pretrain fake nodes=1 10 steps (repeat 2/2)",
      "message would run 2.1.1.5 pretrain fake nodes=1 10 steps (repeat 1/1)",
      "message   no time estimate: this backend does not estimate time",
      "message plan total: 0 s of cases, 0 rig-hours (each case's time x its repeats x its nodes); 3 cases not "
      "estimated (2.1.1.1, 2.2.1.1, 2.1.1.5)",
  });
}

TEST_CASE("Resume in the middle of an interleaved schedule runs exactly what is missing, in order") {
  Harness h("interleave_resume");
  Plan plan = InterleavedPlan();
  FakeScript ctrl_c;
  ctrl_c.raise_stop = &h.stop;  // Ctrl-C during the third run: B's second repeat
  h.backend.scripts["2.2.1.1 r1"] = ctrl_c;

  auto first = h.Run(plan);
  REQUIRE(first.ok());
  CHECK(first->stopped);
  CHECK(first->ok == 2);
  CHECK(first->interrupted == 1);
  CHECK(CallOrder(h.backend) == std::vector<std::string>{"2.1.1.1 r0", "2.2.1.1 r0", "2.2.1.1 r1"});

  h.stop.Reset();
  h.backend.scripts.clear();
  h.backend.calls.clear();
  h.progress.events.clear();
  h.options.resume_run_id = 1;
  auto second = h.Run(plan);
  REQUIRE(second.ok());
  CHECK(second->ok == 3);
  CHECK(CallOrder(h.backend) == std::vector<std::string>{"2.2.1.1 r1", "2.1.1.1 r1", "2.1.1.5 r0"});
  CHECK(h.progress.events.front() == "started 1/3 2.2.1.1 r1");
  CHECK(h.progress.events.back() == "finished 3/3 2.1.1.5 r0 ok 0 s");
  CHECK(h.store.case_rows().size() == 6);
  CHECK(h.store.runs()[0].status == "ok");
}

TEST_CASE("Without interleave the order is plan order with repeats consecutive") {
  Harness h("plan_order");
  Plan plan = InterleavedPlan();
  plan.interleave.clear();
  REQUIRE(h.Run(plan).ok());
  CHECK(CallOrder(h.backend) == std::vector<std::string>{"2.1.1.1 r0", "2.1.1.1 r1", "2.1.1.5 r0",
                                                         "2.2.1.1 r0", "2.2.1.1 r1"});
}

TEST_CASE("Contention is sampled around every case and contended cases are counted") {
  Harness h("contention");
  // Case 1: others took 5 % of 2 cores (idle enough); case 2: 50 % (contended).
  std::vector<CpuReading> readings = ScriptedCpuMeter::PerCase(1, 10, 2, 0.05);
  for (const CpuReading& r : ScriptedCpuMeter::PerCase(1, 10, 2, 0.5))
    readings.push_back({r.at_seconds + 1000, r.busy_seconds + 1000, r.own_seconds + 1000, r.cores});
  ScriptedCpuMeter meter(readings);
  h.options.cpu_meter = &meter;
  h.options.contention_interval_seconds = 3600;  // only the readings at start and end
  auto summary = h.Run(MakePlan({MakeCase("idle"), MakeCase("busy")}));
  REQUIRE(summary.ok());
  CHECK(summary->contended == 1);
  CHECK(summary->worst_contention == doctest::Approx(0.5));
  REQUIRE(h.store.FindCase(1, "idle"));
  REQUIRE(h.store.FindCase(1, "busy"));
  const auto& idle = h.store.FindCase(1, "idle")->measurements;
  const auto& busy = h.store.FindCase(1, "busy")->measurements;
  REQUIRE(Find(idle, metric::kContention, Provenance::kMeasured));
  CHECK(*Find(idle, metric::kContention, Provenance::kMeasured)->value == doctest::Approx(0.05));
  CHECK_FALSE(ContendedShare(idle).has_value());
  REQUIRE(ContendedShare(busy).has_value());
  CHECK(Find(busy, metric::kContentionPeak, Provenance::kMeasured) != nullptr);
}

TEST_CASE("Without a CPU meter no contention figure is stored") {
  Harness h("no-meter");
  auto summary = h.Run(MakePlan({MakeCase("a")}));
  REQUIRE(summary.ok());
  CHECK(summary->contended == 0);
  REQUIRE(h.store.FindCase(1, "a"));
  CHECK(Find(h.store.FindCase(1, "a")->measurements, metric::kContention, Provenance::kMeasured) ==
        nullptr);
}
