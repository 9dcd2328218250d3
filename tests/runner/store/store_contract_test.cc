// The Store contract (src/runner/store/store.h), one suite run against every
// implementation: the SQLite store in memory, the SQLite store on a file
// (closed and reopened between writing and reading back), and the fake
// (tests/support/fake_store.h). SQLite-only behaviour (migrations, refusals of
// foreign files, WAL with concurrent writers, crash survival) is in
// store_test.cc; the fake's test extras (call log, fault injection) in
// fake_store_test.cc.

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fake_store.h"
#include "runner/store/store.h"
#include "store_fixtures.h"

using namespace protocol;
using namespace protocol::testing;

namespace {

std::unique_ptr<Store> MustOpen(const std::string& path) {
  auto store = OpenStore(path);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return std::move(store).value();
}

struct SqliteInMemory {
  std::unique_ptr<Store> store = MustOpen(":memory:");
  Store* Reopen() { return store.get(); }  // nothing to reopen: the database lives in the connection
};

struct SqliteFile {
  StoreTempDir dir;
  std::unique_ptr<Store> store = MustOpen(dir.File("contract.db"));
  Store* Reopen() {
    store.reset();
    store = MustOpen(dir.File("contract.db"));
    return store.get();
  }
};

struct Fake {
  std::unique_ptr<Store> store = std::make_unique<FakeStore>();
  Store* Reopen() { return store.get(); }
};

}  // namespace

TYPE_TO_STRING(SqliteInMemory);
TYPE_TO_STRING(SqliteFile);
TYPE_TO_STRING(Fake);

#define ALL_STORES SqliteInMemory, SqliteFile, Fake

TEST_CASE_TEMPLATE("Store contract: every run, context, case, measurement and sample field round-trips", T, ALL_STORES) {
  T fixture;
  Store* store = fixture.store.get();

  RunRecord full = FullRun();
  full.id = 42;  // ignored: ids are assigned from 1
  auto id = store->CreateRun(full);
  REQUIRE(id.ok());
  CHECK(*id == 1);
  RunRecord empty;  // every string empty, kind "run"
  empty.plan_name = "";
  auto empty_id = store->CreateRun(empty);
  REQUIRE(empty_id.ok());
  CHECK(*empty_id == 2);

  auto got = store->GetRun(*id);
  REQUIRE(got.ok());
  CHECK(got->id == *id);
  CheckSameRun(*got, full);
  auto got_empty = store->GetRun(*empty_id);
  REQUIRE(got_empty.ok());
  CheckSameRun(*got_empty, empty);
  CHECK(got_empty->kind == "run");

  auto runs = store->ListRuns();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 2);
  CHECK((*runs)[0].id == 1);
  CHECK((*runs)[1].id == 2);

  // Context is appended across calls, in order, duplicates kept.
  REQUIRE(store->PutContext(*id, {{"host", "rig0"}, {"cuda", "12.2"}}).ok());
  REQUIRE(store->PutContext(*id, {{"host", "rig1"}, {"empty", ""}}).ok());
  auto context = store->GetContext(*id);
  REQUIRE(context.ok());
  using Facts = std::vector<std::pair<std::string, std::string>>;
  CHECK(*context == Facts{{"host", "rig0"}, {"cuda", "12.2"}, {"host", "rig1"}, {"empty", ""}});
  CHECK(store->GetContext(*empty_id)->empty());

  // A case: BeginCase stores it running, whatever the record says.
  CaseRecord full_case = FullCase(*id);
  auto row = store->BeginCase(full_case);
  REQUIRE(row.ok());
  auto cases = store->CasesOfRun(*id);
  REQUIRE(cases.ok());
  REQUIRE(cases->size() == 1);
  CHECK((*cases)[0].row_id == *row);
  CHECK((*cases)[0].status == CaseStatus::kRunning);
  CHECK((*cases)[0].exit_code == 3);
  CheckSameCaseIdentity((*cases)[0], full_case);

  // Samples appended while running, then more with FinishCase.
  REQUIRE(store->AppendSteps(*row, {{1, 1.5, 2.25, 4096}, {2, 1.25, std::nullopt, std::nullopt}})
              .ok());
  REQUIRE(store->AppendRequests(*row, {{0, 100, 17, 100, 3.5, "Yes, \"maybe\",\non Europa.", std::nullopt}})
              .ok());
  CaseResult result;
  result.status = CaseStatus::kFailed;
  result.reason = "NaN loss at step 3";
  result.exit_code = std::nullopt;
  result.finished_at = "2024-05-01T10:05:00Z";
  result.measurements = {
      {"wall_seconds", 300.25, "s", Provenance::kMeasured, "", "", ""},
      {"wall_seconds", 3002.5, "s", Provenance::kExtrapolated,
       "extrapolated from 100 steps to 1000 steps", "", "extrapolated", "steps", 1000},
      {"wall_seconds", std::nullopt, "min", Provenance::kImported, "", "paper, table 2",
       "not-provided"},
      {"wall_seconds", 30.5, "s", Provenance::kPrefix, "computed from the first 10 of 100 measured steps", "", "",
       "steps", 10},
  };
  result.facts = {{"device", "cpu"}, {"threads_per_rank", "2"}, {"dtype", "float32"}};
  result.steps = {{3, 1.0, 0.5, 4096}};
  result.requests = {{1, 110, 17, 0, 0.0, "", std::vector<int>{}}};
  REQUIRE(store->FinishCase(*row, result).ok());
  store = fixture.Reopen();  // the file store reads it back from disk

  cases = store->CasesOfRun(*id);
  REQUIRE(cases->size() == 1);
  const CaseRecord& done = (*cases)[0];
  CheckSameCaseIdentity(done, full_case);
  CHECK(done.status == CaseStatus::kFailed);
  CHECK(done.reason == "NaN loss at step 3");
  CHECK(done.exit_code == std::nullopt);
  CHECK(done.finished_at == "2024-05-01T10:05:00Z");

  auto ms = store->MeasurementsOfCase(*row);
  REQUIRE(ms.ok());
  REQUIRE(ms->size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK((*ms)[i].name == result.measurements[i].name);
    CHECK((*ms)[i].value == result.measurements[i].value);
    CHECK((*ms)[i].unit == result.measurements[i].unit);
    CHECK((*ms)[i].how == result.measurements[i].how);
    CHECK((*ms)[i].method == result.measurements[i].method);
    CHECK((*ms)[i].source == result.measurements[i].source);
    CHECK((*ms)[i].marker == result.measurements[i].marker);
    CHECK((*ms)[i].length_unit == result.measurements[i].length_unit);
    CHECK((*ms)[i].length_count == result.measurements[i].length_count);
  }
  CHECK(*store->FactsOfCase(*row) == result.facts);
  CHECK((*ms)[2].value == std::nullopt);

  auto steps = store->StepsOfCase(*row);
  REQUIRE(steps.ok());
  REQUIRE(steps->size() == 3);
  CHECK((*steps)[0].step == 1);
  CHECK((*steps)[0].seconds == 1.5);
  CHECK((*steps)[0].loss == 2.25);
  CHECK((*steps)[0].tokens == 4096);
  CHECK((*steps)[1].step == 2);
  CHECK((*steps)[1].loss == std::nullopt);
  CHECK((*steps)[1].tokens == std::nullopt);
  CHECK((*steps)[2].step == 3);

  auto requests = store->RequestsOfCase(*row);
  REQUIRE(requests.ok());
  REQUIRE(requests->size() == 2);
  CHECK((*requests)[0].index == 0);
  CHECK((*requests)[0].max_new_tokens == 100);
  CHECK((*requests)[0].prompt_tokens == 17);
  CHECK((*requests)[0].generated_tokens == 100);
  CHECK((*requests)[0].seconds == 3.5);
  CHECK((*requests)[0].answer == "Yes, \"maybe\",\non Europa.");
  CHECK((*requests)[0].token_ids == std::nullopt);  // not recorded
  CHECK((*requests)[1].index == 1);
  CHECK((*requests)[1].answer == "");
  CHECK((*requests)[1].token_ids == std::vector<int>{});  // recorded: none generated

  // A case with an exit code stored by FinishCase.
  CaseRecord minimal;
  minimal.run_id = *empty_id;
  auto row2 = store->BeginCase(minimal);
  REQUIRE(row2.ok());
  CHECK(store->CasesOfRun(*empty_id)->at(0).exit_code == std::nullopt);
  CaseResult ok;
  ok.exit_code = 0;
  REQUIRE(store->FinishCase(*row2, ok).ok());
  auto cases2 = store->CasesOfRun(*empty_id);
  CHECK(cases2->at(0).exit_code == 0);
  CHECK(cases2->at(0).status == CaseStatus::kOk);
  CHECK(store->MeasurementsOfCase(*row2)->empty());

  REQUIRE(store->FinishRun(*id, "failed", "2024-05-01T12:00:00Z").ok());
  CHECK(store->GetRun(*id)->status == "failed");
  CHECK(store->GetRun(*id)->finished_at == "2024-05-01T12:00:00Z");
}

TEST_CASE_TEMPLATE("Store contract: missing runs and case rows are not found, named; writes to them change nothing", T, ALL_STORES) {
  T fixture;
  Store* store = fixture.store.get();
  auto run = store->GetRun(7);
  CHECK(run.status().code() == Status::Code::kNotFound);
  CHECK(run.status().message() == "run 7 does not exist");
  CHECK(store->FinishRun(7, "ok", "t").message() == "run 7 does not exist");
  CHECK(store->PutContext(7, {{"a", "b"}}).message() == "run 7 does not exist");
  CaseRecord c;
  c.run_id = 7;
  CHECK(store->BeginCase(c).status().message() == "run 7 does not exist");
  Status s = store->FinishCase(42, CaseResult{});
  CHECK(s.code() == Status::Code::kNotFound);
  CHECK(s.message() == "case row 42 does not exist");
  CHECK(store->AppendSteps(42, {}).message() == "case row 42 does not exist");
  CHECK(store->AppendRequests(42, {}).message() == "case row 42 does not exist");
  // The readers of lists give empty lists for ids that do not exist.
  CHECK(store->CasesOfRun(7)->empty());
  CHECK(store->GetContext(7)->empty());
  CHECK(store->MeasurementsOfCase(42)->empty());
  CHECK(store->StepsOfCase(42)->empty());
  CHECK(store->RequestsOfCase(42)->empty());
  CHECK(*store->InterruptRunningCases(7, "x") == 0);
  // None of the refused writes left anything behind.
  CHECK(store->ListRuns()->empty());
  REQUIRE(*store->CreateRun(RunRecord{}) == 1);
  CHECK(store->CasesOfRun(1)->empty());
  CHECK(store->GetContext(1)->empty());
}

TEST_CASE_TEMPLATE("Store contract: InterruptRunningCases changes only the running rows of that run", T, ALL_STORES) {
  T fixture;
  Store* store = fixture.store.get();
  int64_t run1 = *store->CreateRun(RunRecord{});
  int64_t run2 = *store->CreateRun(RunRecord{});
  CaseRecord c;
  c.run_id = run1;
  c.case_id = "a";
  int64_t running = *store->BeginCase(c);
  c.case_id = "b";
  int64_t finished = *store->BeginCase(c);
  CaseResult failed;
  failed.status = CaseStatus::kFailed;
  failed.reason = "exit 1";
  REQUIRE(store->FinishCase(finished, failed).ok());
  c.case_id = "c";
  int64_t running2 = *store->BeginCase(c);
  c.run_id = run2;
  c.case_id = "d";
  REQUIRE(store->BeginCase(c).ok());

  auto changed = store->InterruptRunningCases(run1, "runner died");
  REQUIRE(changed.ok());
  CHECK(*changed == 2);
  auto cases = *store->CasesOfRun(run1);
  REQUIRE(cases.size() == 3);
  CHECK(cases[0].row_id == running);
  CHECK(cases[0].status == CaseStatus::kInterrupted);
  CHECK(cases[0].reason == "runner died");
  CHECK(cases[1].status == CaseStatus::kFailed);
  CHECK(cases[1].reason == "exit 1");
  CHECK(cases[2].row_id == running2);
  CHECK(cases[2].status == CaseStatus::kInterrupted);
  CHECK(store->CasesOfRun(run2)->at(0).status == CaseStatus::kRunning);
  CHECK(*store->InterruptRunningCases(run1, "again") == 0);
}
