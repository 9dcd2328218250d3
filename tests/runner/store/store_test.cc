// Tests of the SQLite store (src/runner/store/store.cc): round trips in memory,
// migrations and refusals on temp files, concurrent writers (threads and a
// fork()ed process), crash survival, integrity check.
//
// sqlite3.h is included only by store.cc, so the tests that need a particular
// file header (a newer schema version, user_version 0) patch the header bytes
// directly: user_version is the big-endian 32-bit integer at offset 60 of a
// SQLite file (https://www.sqlite.org/fileformat.html#user_version_number).

#include <doctest/doctest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "runner/base/text.h"
#include "runner/store/store.h"
#include "store_fixtures.h"
#include "test_files.h"

using namespace protocol;
using namespace protocol::testing;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<Store> MustOpen(const std::string& path) {
  auto store = OpenStore(path);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return std::move(store).value();
}

uint32_t ReadUserVersion(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char b[4] = {0, 0, 0, 0};
  in.seekg(60);
  in.read(reinterpret_cast<char*>(b), 4);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

void WriteUserVersion(const std::string& path, uint32_t v) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  REQUIRE(f.good());
  unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                        static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  f.seekp(60);
  f.write(reinterpret_cast<const char*>(b), 4);
}

// Writes `n` runs, each with one context fact, one finished case, two
// measurements and two steps; plan names are "<tag>-<i>". Returns the first error.
Status WriteRuns(Store& store, const std::string& tag, int n) {
  for (int i = 0; i < n; ++i) {
    RunRecord run;
    run.plan_name = fmt::format("{}-{}", tag, i);
    run.status = "running";
    auto id = store.CreateRun(run);
    if (!id.ok()) return id.status();
    if (Status s = store.PutContext(*id, {{"writer", tag}}); !s.ok()) return s;
    CaseRecord c;
    c.run_id = *id;
    c.case_id = "2.1.1.1";
    c.workload = "pretrain";
    auto row = store.BeginCase(c);
    if (!row.ok()) return row.status();
    CaseResult result;
    result.measurements = {{"wall_seconds", double(i), "s", Provenance::kMeasured, "", "", ""},
                           {"final_loss", i + 0.5, "", Provenance::kMeasured, "", "", ""}};
    result.steps = {{1, 0.25, 2.0, 512}, {2, 0.5, 1.5, 512}};
    if (Status s = store.FinishCase(*row, result); !s.ok()) return s;
    if (Status s = store.FinishRun(*id, "ok", "2024-05-01T11:00:00Z"); !s.ok()) return s;
  }
  return Status::Ok();
}

// Checks that every run written by WriteRuns(tag, n) for each tag is complete.
void CheckAllRunsThere(Store& store, const std::vector<std::string>& tags, int n) {
  auto runs = store.ListRuns();
  REQUIRE(runs.ok());
  CHECK(runs->size() == tags.size() * n);
  std::set<std::string> names;
  for (const RunRecord& run : *runs) {
    names.insert(run.plan_name);
    CHECK(run.status == "ok");
    auto context = store.GetContext(run.id);
    REQUIRE(context.ok());
    REQUIRE(context->size() == 1);
    CHECK(StartsWith(run.plan_name, (*context)[0].second + "-"));
    auto cases = store.CasesOfRun(run.id);
    REQUIRE(cases.ok());
    REQUIRE(cases->size() == 1);
    CHECK((*cases)[0].status == CaseStatus::kOk);
    auto ms = store.MeasurementsOfCase((*cases)[0].row_id);
    REQUIRE(ms.ok());
    REQUIRE(ms->size() == 2);
    int i = std::stoi(run.plan_name.substr(run.plan_name.rfind('-') + 1));
    CHECK((*ms)[0].value == double(i));
    CHECK((*ms)[1].value == i + 0.5);
    auto steps = store.StepsOfCase((*cases)[0].row_id);
    REQUIRE(steps.ok());
    CHECK(steps->size() == 2);
  }
  std::vector<std::string> missing;
  for (const std::string& tag : tags)
    for (int i = 0; i < n; ++i)
      if (names.count(fmt::format("{}-{}", tag, i)) != 1)
        missing.push_back(fmt::format("{}-{}", tag, i));
  CHECK_MESSAGE(missing.empty(), "missing runs: " << Join(missing, ", "));
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("A fresh database file gets the current schema version; reopening keeps its data") {
  StoreTempDir dir;
  const std::string path = dir.File("deep/er/results.db");  // parents are created
  {
    auto store = MustOpen(path);
    REQUIRE(store->CreateRun(FullRun()).ok());
  }
  CHECK(StoreSchemaVersion() >= 1);
  CHECK(ReadUserVersion(path) == uint32_t(StoreSchemaVersion()));
  for (int i = 0; i < 2; ++i) {
    auto store = MustOpen(path);
    auto runs = store->ListRuns();
    REQUIRE(runs.ok());
    REQUIRE(runs->size() == 1);
    CheckSameRun((*runs)[0], FullRun());
  }
  CHECK(ReadUserVersion(path) == uint32_t(StoreSchemaVersion()));
  auto integrity = CheckStoreIntegrity(path);
  REQUIRE(integrity.ok());
  CHECK(*integrity == true);
}

TEST_CASE("A database with a newer schema version is refused with an upgrade hint") {
  StoreTempDir dir;
  const std::string path = dir.File("results.db");
  MustOpen(path).reset();
  WriteUserVersion(path, 99);
  auto store = OpenStore(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == Status::Code::kCorruption);
  CHECK(store.status().message() ==
        fmt::format("{}: database schema version 99 is newer than this protocol understands "
                    "({}); upgrade protocol",
                    path, StoreSchemaVersion()));
  CHECK(ReadUserVersion(path) == 99);  // untouched
}

TEST_CASE("A file that is not a SQLite database is refused, naming the path") {
  StoreTempDir dir;
  const std::string path = dir.File("notes.db");
  {
    std::ofstream out(path);
    for (int i = 0; i < 100; ++i) out << "these are my notes, not a database\n";
  }
  auto store = OpenStore(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == Status::Code::kCorruption);
  CHECK(store.status().message() == path + ": file is not a database");
  auto integrity = CheckStoreIntegrity(path);
  CHECK(integrity.status().code() == Status::Code::kCorruption);
  CHECK(integrity.status().message() == path + ": file is not a database");
}

TEST_CASE("A SQLite database with other tables and no schema version is refused") {
  StoreTempDir dir;
  const std::string path = dir.File("other.db");
  MustOpen(path).reset();
  WriteUserVersion(path, 0);  // now: SQLite tables, but not stamped as ours
  auto store = OpenStore(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == Status::Code::kCorruption);
  CHECK(store.status().message() ==
        path + ": not a protocol database (schema version 0, but it holds other tables, "
               "e.g. 'case_facts')");
}

TEST_CASE("CheckStoreIntegrity reports a missing file as not found") {
  StoreTempDir dir;
  auto integrity = CheckStoreIntegrity(dir.File("none.db"));
  CHECK(integrity.status().code() == Status::Code::kNotFound);
  CHECK(integrity.status().message() == dir.File("none.db") + ": no such database file");
  CHECK_FALSE(fs::exists(dir.File("none.db")));
}

TEST_CASE("OpenStore names the path when its directory cannot be created") {
  StoreTempDir dir;
  { std::ofstream(dir.File("plain")) << "x"; }
  auto store = OpenStore(dir.File("plain/results.db"));
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == Status::Code::kIoError);
  CHECK(StartsWith(store.status().message(),
                   dir.File("plain/results.db") + ": cannot create directory '" +
                       dir.File("plain") + "': "));
}

TEST_CASE("OpenStore on a directory is an I/O error naming the path and sqlite's reason") {
  StoreTempDir dir;
  fs::create_directories(dir.File("adir"));
  auto store = OpenStore(dir.File("adir"));
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == Status::Code::kIoError);
  CHECK(store.status().message() ==
        dir.File("adir") + ": cannot open database: unable to open database file");
}

TEST_CASE("Two stores on one file written from two threads lose nothing") {
  // Both open a fresh file at once (racing migrations), then write 2 x 100 runs.
  StoreTempDir dir;
  const std::string path = dir.File("shared.db");
  Status a_status, b_status;
  auto writer = [&path](const std::string& tag, Status* out) {
    auto store = OpenStore(path);
    if (!store.ok()) {
      *out = store.status();
      return;
    }
    *out = WriteRuns(**store, tag, 100);
  };
  std::thread a(writer, "A", &a_status);
  std::thread b(writer, "B", &b_status);
  a.join();
  b.join();
  CHECK_MESSAGE(a_status.ok(), a_status.ToString());
  CHECK_MESSAGE(b_status.ok(), b_status.ToString());
  auto store = MustOpen(path);
  CheckAllRunsThere(*store, {"A", "B"}, 100);
  CHECK(*CheckStoreIntegrity(path) == true);
}

TEST_CASE("A fork()ed process and its parent writing one file at once lose nothing") {
  StoreTempDir dir;
  const std::string path = dir.File("shared.db");
  MustOpen(path).reset();  // created and migrated before the fork
  const auto t0 = std::chrono::steady_clock::now();
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child: its own connection; never returns into doctest.
    int rc = 2;
    {
      auto store = OpenStore(path);
      if (store.ok()) rc = WriteRuns(**store, "child", 100).ok() ? 0 : 1;
    }
    _exit(rc);
  }
  Status parent_status;
  {
    auto store = MustOpen(path);
    parent_status = WriteRuns(*store, "parent", 100);
  }
  // Wait for the child, but never hang the suite on it.
  int wstatus = 0;
  pid_t done = 0;
  while ((done = waitpid(child, &wstatus, WNOHANG)) == 0 && SecondsSince(t0) < 60) usleep(10000);
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &wstatus, 0);
    FAIL("the child writer did not finish within 60 s");
  }
  CHECK_MESSAGE(parent_status.ok(), parent_status.ToString());
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  auto store = MustOpen(path);
  CheckAllRunsThere(*store, {"parent", "child"}, 100);
}

TEST_CASE("A case finished before a crash is there on reopen, its run still running") {
  StoreTempDir dir;
  const std::string path = dir.File("crash.db");
  // 1. The Store is destroyed without FinishRun.
  {
    auto store = MustOpen(path);
    RunRecord run;
    run.status = "running";
    int64_t id = *store->CreateRun(run);
    CaseRecord c;
    c.run_id = id;
    c.case_id = "2.1.1.1";
    int64_t row = *store->BeginCase(c);
    CaseResult r;
    r.measurements = {{"wall_seconds", 12.5, "s", Provenance::kMeasured, "", "", ""}};
    REQUIRE(store->FinishCase(row, r).ok());
  }
  // 2. A process killed outright: no destructor runs, the WAL is left behind.
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto store = OpenStore(path);
    if (!store.ok()) _exit(2);
    CaseRecord c;
    c.run_id = 1;
    c.case_id = "2.1.1.2";
    auto row = (*store)->BeginCase(c);
    CaseResult r;
    r.measurements = {{"wall_seconds", 20.0, "s", Provenance::kMeasured, "", "", ""}};
    bool ok = row.ok() && (*store)->FinishCase(*row, r).ok();
    c.case_id = "2.1.1.3";  // started, never finished
    ok = ok && (*store)->BeginCase(c).ok();
    store.value().release();  // leak the connection, as kill -9 would
    _exit(ok ? 0 : 1);
  }
  int wstatus = 0;
  REQUIRE(waitpid(child, &wstatus, 0) == child);
  REQUIRE(WIFEXITED(wstatus));
  REQUIRE(WEXITSTATUS(wstatus) == 0);

  auto store = MustOpen(path);
  auto run = store->GetRun(1);
  REQUIRE(run.ok());
  CHECK(run->status == "running");
  CHECK(run->finished_at == "");
  auto cases = *store->CasesOfRun(1);
  REQUIRE(cases.size() == 3);
  CHECK(cases[0].case_id == "2.1.1.1");
  CHECK(cases[0].status == CaseStatus::kOk);
  CHECK(store->MeasurementsOfCase(cases[0].row_id)->at(0).value == 12.5);
  CHECK(cases[1].case_id == "2.1.1.2");
  CHECK(cases[1].status == CaseStatus::kOk);
  CHECK(store->MeasurementsOfCase(cases[1].row_id)->at(0).value == 20.0);
  CHECK(cases[2].status == CaseStatus::kRunning);
  CHECK(*store->InterruptRunningCases(1, "runner died") == 1);
  CHECK(*CheckStoreIntegrity(path) == true);
}

// ---- valid UTF-8 and token ids (schema 3) -------------------------------------

TEST_CASE("Generated token ids round-trip as a JSON array; absent ones stay absent") {
  auto store = MustOpen(":memory:");
  auto run = store->CreateRun(FullRun());
  REQUIRE(run.ok());
  auto row = store->BeginCase(FullCase(*run));
  REQUIRE(row.ok());
  RequestSample with;
  with.generated_tokens = 4;
  with.answer = "a b";
  with.token_ids = std::vector<int>{1, 31999, 0, 259};
  RequestSample without;
  without.index = 1;
  REQUIRE(store->AppendRequests(*row, {with, without}).ok());
  auto got = store->RequestsOfCase(*row);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 2);
  CHECK((*got)[0].token_ids == std::vector<int>{1, 31999, 0, 259});
  CHECK((*got)[1].token_ids == std::nullopt);
}

namespace {

// Invalid sequences of every kind, each inside some text.
const std::vector<std::pair<std::string, std::string>> kInvalid = {
    {"overlong \xC0\xAF slash", "overlong \xEF\xBF\xBD\xEF\xBF\xBD slash"},
    {"truncated \xE2\x82", "truncated \xEF\xBF\xBD"},
    {"lone \x80\xBF continuation", "lone \xEF\xBF\xBD\xEF\xBF\xBD continuation"},
    {"surrogate \xED\xA0\x80!", "surrogate \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD!"},
    {"byte-fallback answer rr\xD7\xD7Z\xD7", "byte-fallback answer rr\xEF\xBF\xBD\xEF\xBF\xBDZ\xEF\xBF\xBD"},
};

}  // namespace

TEST_CASE("Every TEXT written to the store is made valid UTF-8 (maximal invalid subparts become U+FFFD)") {
  for (const auto& [bad, fixed] : kInvalid) {
    CAPTURE(fixed);
    auto store = MustOpen(":memory:");
    RunRecord r;
    r.kind = r.plan_name = r.plan_title = r.plan_file = r.plan_text = r.plan_sha256 = r.source = bad;
    r.started_at = r.finished_at = r.status = r.protocol_version = r.git_revision = bad;
    auto id = store->CreateRun(r);
    REQUIRE(id.ok());
    auto run = store->GetRun(*id);
    REQUIRE(run.ok());
    for (const std::string* field : {&run->kind, &run->plan_name, &run->plan_title, &run->plan_file,
                                     &run->plan_text, &run->plan_sha256, &run->source, &run->started_at,
                                     &run->finished_at, &run->status, &run->protocol_version,
                                     &run->git_revision})
      CHECK(*field == fixed);
    REQUIRE(store->FinishRun(*id, bad, bad).ok());
    CHECK(store->GetRun(*id)->status == fixed);
    CHECK(store->GetRun(*id)->finished_at == fixed);

    REQUIRE(store->PutContext(*id, {{bad, bad}}).ok());
    auto context = store->GetContext(*id);
    REQUIRE(context.ok());
    CHECK(context->at(0) == std::make_pair(fixed, fixed));

    CaseRecord c;
    c.run_id = *id;
    c.case_id = c.stage = c.model = c.workload = c.backend = c.system = c.topology = c.network = bad;
    c.variant = c.length_unit = c.report_as_unit = c.reason = c.started_at = c.finished_at = c.log_path = bad;
    auto row = store->BeginCase(c);
    REQUIRE(row.ok());
    CaseResult result;
    result.status = CaseStatus::kFailed;
    result.reason = bad;
    result.finished_at = bad;
    result.log_sha256 = bad;
    result.measurements = {{bad, 1.0, bad, Provenance::kImported, bad, bad, bad}};
    result.requests = {{0, 1, 1, 1, 0.5, bad, std::vector<int>{7}}};
    REQUIRE(store->FinishCase(*row, result).ok());
    REQUIRE(store->AppendRequests(*row, {{1, 1, 1, 1, 0.5, bad, std::nullopt}}).ok());
    auto cases = store->CasesOfRun(*id);
    REQUIRE(cases.ok());
    const CaseRecord& got = cases->at(0);
    for (const std::string* field : {&got.case_id, &got.stage, &got.model, &got.workload, &got.backend,
                                     &got.system, &got.topology, &got.network, &got.variant, &got.length_unit,
                                     &got.report_as_unit, &got.reason, &got.started_at, &got.finished_at,
                                     &got.log_path, &got.log_sha256})
      CHECK(*field == fixed);
    auto measurements = store->MeasurementsOfCase(*row);
    REQUIRE(measurements.ok());
    const Measurement& m = measurements->at(0);
    for (const std::string* field : {&m.name, &m.unit, &m.method, &m.source, &m.marker}) CHECK(*field == fixed);
    auto requests = store->RequestsOfCase(*row);
    REQUIRE(requests->size() == 2);
    CHECK(requests->at(0).answer == fixed);
    CHECK(requests->at(1).answer == fixed);
    CHECK(store->InterruptRunningCases(*id, bad).ok());
  }
  // Lookups by a stored name still match: the same text is made valid the same way.
  auto store = MustOpen(":memory:");
  RunRecord r;
  r.plan_name = kInvalid[0].first;
  REQUIRE(store->CreateRun(r).ok());
  CHECK(store->ListRuns()->at(0).plan_name == kInvalid[0].second);
}

TEST_CASE("A schema-2 database is migrated: token_ids added, invalid stored bytes replaced") {
  StoreTempDir dir;
  const std::string path = dir.File("old.db");
  fs::copy_file(std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/store/schema-v2.db", path);
  REQUIRE(ReadUserVersion(path) == 2);
  {
    auto store = MustOpen(path);
    auto run = store->GetRun(1);
    REQUIRE(run.ok());
    CHECK(run->plan_file == "plans\xEF\xBF\xBD/old.yaml");
    CHECK(IsValidUtf8(run->plan_text));
    auto cases = store->CasesOfRun(1);
    REQUIRE(cases.ok());
    REQUIRE(cases->size() == 1);
    CHECK(IsValidUtf8(cases->at(0).log_path));
    CHECK(cases->at(0).log_path.find("logs\xEF\xBF\xBD/run-1/i.log") != std::string::npos);
    // The stored answers were raw bytes of byte-fallback pieces.
    auto requests = store->RequestsOfCase(cases->at(0).row_id);
    REQUIRE(requests.ok());
    REQUIRE(requests->size() == 2);
    CHECK(requests->at(0).answer == "rr\xEF\xBF\xBD\xEF\xBF\xBDZ\xEF\xBF\xBDZ\xEF\xBF\xBD");
    CHECK(requests->at(0).token_ids == std::nullopt);  // not recorded before schema 3
    CHECK(requests->at(0).generated_tokens == 12);
    auto context = store->GetContext(1);
    REQUIRE(context.ok());
    for (const auto& [k, v] : *context) CHECK(IsValidUtf8(k + v));
    auto measurements = store->MeasurementsOfCase(cases->at(0).row_id);
    REQUIRE(measurements.ok());
    for (const auto& m : *measurements) CHECK(IsValidUtf8(m.method));
    // New rows carry token ids.
    RequestSample r;
    r.index = 2;
    r.token_ids = std::vector<int>{5, 6};
    REQUIRE(store->AppendRequests(cases->at(0).row_id, {r}).ok());
  }
  CHECK(ReadUserVersion(path) == uint32_t(StoreSchemaVersion()));  // read once the file is closed (WAL)
  CHECK(StoreSchemaVersion() == 9);
  auto store = MustOpen(path);
  // The curve table came with the migration, empty for the old cases.
  auto curve = store->EvalCurveOfCase(1);
  REQUIRE(curve.ok());
  CHECK(curve->empty());
  auto requests = store->RequestsOfCase(1);
  REQUIRE(requests.ok());
  REQUIRE(requests->size() == 3);
  CHECK(requests->at(2).token_ids == std::vector<int>{5, 6});
  auto integrity = CheckStoreIntegrity(path);
  REQUIRE(integrity.ok());
  CHECK(*integrity);
}

TEST_CASE("Opening a schema-3 file gives each extrapolated time its case's report_as length") {
  // tests/data/store/schema-v3.db: case b2 measured 100 steps, extrapolated to 1000 (report_as on the case row).
  StoreTempDir dir;
  const std::string path = dir.File("v3.db");
  fs::copy_file(std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/store/schema-v3.db", path);
  REQUIRE(ReadUserVersion(path) == 3);
  auto store = MustOpen(path);
  auto ms = store->MeasurementsOfCase(1);
  REQUIRE(ms.ok());
  REQUIRE(ms->size() == 3);
  CHECK(ms->at(0).length_unit.empty());  // the measured 100 steps: the case's own length
  CHECK(ms->at(1).how == Provenance::kExtrapolated);
  CHECK(ms->at(1).length_unit == "steps");
  CHECK(ms->at(1).length_count == 1000);
  CHECK(ms->at(2).length_unit.empty());  // not a time
  CHECK(store->FactsOfCase(1)->empty());
  auto integrity = CheckStoreIntegrity(path);
  REQUIRE(integrity.ok());
  CHECK(*integrity);
}

TEST_CASE("A rank's own figure is stored with its rank apart, read back as NAME_rank<r>, never found by NAME") {
  CHECK(SplitRankFigureName("peak_host_rss_bytes_rank12") == std::pair<std::string, std::optional<int>>{"peak_host_rss_bytes", 12});
  CHECK(SplitRankFigureName("exit_code_rank0").second == 0);
  CHECK(SplitRankFigureName("x_rank01").second == std::nullopt);  // not rank 1's
  CHECK(SplitRankFigureName("x_rank").second == std::nullopt);
  CHECK(SplitRankFigureName("_rank3").second == std::nullopt);
  CHECK(SplitRankFigureName("wall_seconds").second == std::nullopt);
  CHECK(RankFigureName("exit_code", 3) == "exit_code_rank3");

  StoreTempDir dir;
  auto store = MustOpen(dir.File("ranks.db"));
  const int64_t row =
      StoreCaseWith(*store, {{"peak_host_rss_bytes", 300.0, "bytes", Provenance::kMeasured, "largest", "", ""},
                             {"peak_host_rss_bytes_rank0", 100.0, "bytes", Provenance::kMeasured, "rank 0", "", ""},
                             {"peak_host_rss_bytes_rank1", 300.0, "bytes", Provenance::kMeasured, "rank 1", "", ""},
                             {"x_rank01", 5.0, "", Provenance::kMeasured, "a name, not a rank", "", ""}});
  auto back = store->MeasurementsOfCase(row);
  REQUIRE(back.ok());
  std::vector<std::string> names;
  for (const Measurement& m : *back) names.push_back(m.name);
  CHECK(names == std::vector<std::string>{"peak_host_rss_bytes", "peak_host_rss_bytes_rank0",
                                          "peak_host_rss_bytes_rank1", "x_rank01"});
  // A lookup by the plain name finds the case's own figure only; a rank's by its name.
  CaseQuery q;
  auto found = store->FindMeasurements(q, {"peak_host_rss_bytes", "peak_host_rss_bytes_rank1"});
  REQUIRE(found.ok());
  REQUIRE(found->size() == 2);
  CHECK(found->at(0).second.name == "peak_host_rss_bytes");
  CHECK(*found->at(0).second.value == 300.0);
  CHECK(found->at(1).second.name == "peak_host_rss_bytes_rank1");
  // What the file holds (name and rank apart) is checked with Python's sqlite3 in store_python_test.cc.
}

TEST_CASE("docs/database.md states the schema version this program writes") {
  const std::string doc = testing::ReadTextFile(std::string(PROTOCOL_SOURCE_DIR) + "/docs/database.md");
  CHECK(doc.find(fmt::format("current version, now **{}**", StoreSchemaVersion())) != std::string::npos);
}
