#include <doctest/doctest.h>

#include "fake_store.h"

using namespace protocol;

TEST_CASE("FakeStore assigns ids, keeps samples in order and refuses unknown parents") {
  FakeStore store;
  RunRecord run;
  run.plan_name = "p";
  run.id = 42;  // ignored
  auto id = store.CreateRun(run);
  REQUIRE(id.ok());
  CHECK(*id == 1);
  CHECK(store.GetRun(1)->plan_name == "p");
  CHECK(store.GetRun(2).status().message() == "run 2 not found");
  CHECK(store.GetRun(2).status().code() == Status::Code::kNotFound);

  CaseRecord c;
  c.run_id = 1;
  c.case_id = "2.1.1.1";
  c.status = CaseStatus::kOk;  // ignored: a begun case is running
  auto row = store.BeginCase(c);
  REQUIRE(row.ok());
  CHECK(store.CasesOfRun(1)->at(0).status == CaseStatus::kRunning);
  CHECK(store.CasesOfRun(1)->at(0).row_id == 1);

  StepSample s1;
  s1.step = 1;
  REQUIRE(store.AppendSteps(*row, {s1}).ok());
  CaseResult result;
  result.status = CaseStatus::kFailed;
  result.reason = "exit code 2";
  result.exit_code = 2;
  StepSample s2;
  s2.step = 2;
  result.steps = {s2};
  result.measurements.push_back(Measurement{"wall_seconds", 1.5, "s", Provenance::kMeasured, "", "", ""});
  REQUIRE(store.FinishCase(*row, result).ok());
  auto steps = store.StepsOfCase(*row);
  REQUIRE(steps->size() == 2);
  CHECK((*steps)[0].step == 1);
  CHECK((*steps)[1].step == 2);
  CHECK(store.CasesOfRun(1)->at(0).exit_code == 2);
  CHECK(*store.MeasurementsOfCase(*row)->at(0).value == 1.5);

  CaseRecord orphan;
  orphan.run_id = 7;
  CHECK(store.BeginCase(orphan).status().message() == "run 7 not found");
  CHECK(store.AppendSteps(99, {}).message() == "case row 99 not found");
  CHECK(store.CasesOfRun(7)->empty());
  CHECK(store.writes() == 6);
}

TEST_CASE("FakeStore interrupts only running rows of the run, and injects faults once") {
  FakeStore store;
  REQUIRE(store.CreateRun(RunRecord{}).ok());
  REQUIRE(store.CreateRun(RunRecord{}).ok());
  CaseRecord a;
  a.run_id = 1;
  CaseRecord b;
  b.run_id = 2;
  REQUIRE(store.BeginCase(a).ok());  // row 1: run 1, finished below
  REQUIRE(store.BeginCase(a).ok());  // row 2: run 1, left running
  REQUIRE(store.BeginCase(b).ok());  // row 3: run 2, left running
  REQUIRE(store.FinishCase(1, CaseResult{}).ok());
  auto changed = store.InterruptRunningCases(1, "dead runner");
  REQUIRE(changed.ok());
  CHECK(*changed == 1);
  CHECK(store.case_rows()[0].record.status == CaseStatus::kOk);
  CHECK(store.case_rows()[1].record.status == CaseStatus::kInterrupted);
  CHECK(store.case_rows()[1].record.reason == "dead runner");
  CHECK(store.case_rows()[2].record.status == CaseStatus::kRunning);

  store.FailNext("FinishRun", Status::IoError("disk full"));
  CHECK(store.FinishRun(1, "ok", "t").message() == "disk full");
  CHECK(store.GetRun(1)->status == "");  // the failed call changed nothing
  CHECK(store.FinishRun(1, "ok", "t").ok());
  CHECK(store.GetRun(1)->status == "ok");
  CHECK(store.calls().back() == "GetRun 1");
}
