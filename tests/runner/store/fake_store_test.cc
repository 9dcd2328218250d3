// What only the fake store offers tests: the call log, the count of writes,
// fault injection and direct views of its rows. The Store contract it shares
// with the SQLite store is checked in store_contract_test.cc.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fake_store.h"

using namespace protocol;

TEST_CASE("FakeStore logs every call in order and counts the writes") {
  FakeStore store;
  REQUIRE(store.CreateRun(RunRecord{}).ok());
  REQUIRE(store.PutContext(1, {{"a", "b"}, {"c", "d"}}).ok());
  CaseRecord c;
  c.run_id = 1;
  c.case_id = "2.1.1.1";
  c.repeat = 1;
  REQUIRE(store.BeginCase(c).ok());
  REQUIRE(store.AppendSteps(1, {StepSample{}, StepSample{}}).ok());
  REQUIRE(store.AppendRequests(1, {RequestSample{}}).ok());
  CaseResult result;
  result.status = CaseStatus::kFailed;
  REQUIRE(store.FinishCase(1, result).ok());
  REQUIRE(store.InterruptRunningCases(1, "x").ok());
  REQUIRE(store.FinishRun(1, "failed", "t").ok());
  REQUIRE(store.GetRun(1).ok());
  REQUIRE(store.CasesOfRun(1).ok());
  CHECK(store.BeginCase(CaseRecord{}).status().message() == "run 0 does not exist");  // failed writes count too
  CHECK(store.calls() == std::vector<std::string>{
                             "CreateRun", "PutContext 2", "BeginCase 2.1.1.1 r1", "AppendSteps 2", "AppendRequests 1",
                             "FinishCase 2.1.1.1 r1 failed", "InterruptRunningCases 0", "FinishRun failed", "GetRun 1",
                             "CasesOfRun 1", "BeginCase  r0"});
  CHECK(store.writes() == 9);
}

TEST_CASE("FakeStore shows its rows directly; FindCase gives the row last begun") {
  FakeStore store;
  REQUIRE(store.CreateRun(RunRecord{}).ok());
  CaseRecord c;
  c.run_id = 1;
  c.case_id = "a";
  REQUIRE(store.BeginCase(c).ok());  // row 1
  REQUIRE(store.BeginCase(c).ok());  // row 2: the same case again (a resume)
  REQUIRE(store.FinishCase(1, CaseResult{}).ok());
  REQUIRE(store.runs().size() == 1);
  REQUIRE(store.case_rows().size() == 2);
  CHECK(store.case_rows()[0].record.status == CaseStatus::kOk);
  CHECK(store.case_rows()[1].record.status == CaseStatus::kRunning);
  REQUIRE(store.FindCase(1, "a") != nullptr);
  CHECK(store.FindCase(1, "a")->record.row_id == 2);
  CHECK(store.FindCase(1, "a", 1) == nullptr);
  CHECK(store.FindCase(2, "a") == nullptr);
}

TEST_CASE("FakeStore injects a fault into the next call of one method, once, changing nothing") {
  FakeStore store;
  REQUIRE(store.CreateRun(RunRecord{}).ok());
  store.FailNext("FinishRun", Status::IoError("disk full"));
  Status failed = store.FinishRun(1, "ok", "t");
  CHECK(failed.code() == Status::Code::kIoError);
  CHECK(failed.message() == "disk full");
  CHECK(store.GetRun(1)->status == "");  // the failed call changed nothing
  CHECK(store.FinishRun(1, "ok", "t").ok());
  CHECK(store.GetRun(1)->status == "ok");
  store.FailNext("GetRun", Status::IoError("read error"));
  CHECK(store.GetRun(1).status().message() == "read error");
  CHECK(store.GetRun(1).ok());
}
