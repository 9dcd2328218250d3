// A database the runner wrote is read by Python's sqlite3 (and so pandas),
// whose default text factory fails on invalid UTF-8 ("Could not decode to
// UTF-8 column 'answer'"). The inputs carry bytes that are not UTF-8: the
// answers of a seeded random model (byte-fallback pieces), a plan directory
// and a log directory named with such a byte, a command whose failure reason
// names that directory. A file of its own: without python3 it is skipped.

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "regression_fixtures.h"
#include "skip.h"
#include "store_fixtures.h"
#include "runner/base/text.h"
#include "runner/store/store.h"

using namespace protocol;
using namespace protocol::testing;
namespace fs = std::filesystem;

namespace {

bool HavePython() { return std::system("python3 -c 'import sqlite3, json' >/dev/null 2>&1") == 0; }

// Reads every row of every table with Python's default text factory and
// checks what the test expects; prints "ok <rows>" or the failure.
const char* const kReader = R"py(
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = 0
for (table,) in db.execute("select name from sqlite_master where type = 'table'"):
    for row in db.execute("select * from " + table):
        rows += 1
answers = [r[0] for r in db.execute("select answer from request_samples")]
ids = [r for r in db.execute("select token_ids, generated_tokens from request_samples")]
reasons = [r[0] for r in db.execute("select reason from cases")]
paths = [r[0] for r in db.execute("select log_path from cases")] + [r[0] for r in db.execute("select plan_file from runs")]
want_ids = sys.argv[2] == "ids"
for token_ids, generated in ids:
    if want_ids:
        assert token_ids is not None, "token_ids missing"
        assert len(json.loads(token_ids)) == generated, (token_ids, generated)
    else:
        assert token_ids is None, token_ids
assert answers, "no answers"
assert any("\ufffd" in p for p in paths), paths
print("ok", rows, len(answers), sum("\ufffd" in r for r in reasons))
)py";

std::string ReadWithPython(const fs::path& dir, const fs::path& db, const char* ids) {
  WriteText(dir / "reader.py", kReader);
  const std::string out = (dir / "python.out").string();
  const std::string cmd = "python3 " + ShellQuote((dir / "reader.py").string()) + " " + ShellQuote(db.string()) +
                          " " + ids + " >" + ShellQuote(out) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string text = ReadText(out);
  return rc == 0 ? text : "exit " + std::to_string(rc) + ": " + text;
}

}  // namespace

TEST_CASE("python3's sqlite3 reads every row of a database the runner wrote, and of a migrated one") {
  if (!HavePython()) SKIP_TEST("python3 with sqlite3 is not installed");
  TempDir dir;
  const fs::path plans = dir.path / "plans\xff";
  fs::create_directories(plans / "model");
  fs::copy_file(std::string(PROTOCOL_SOURCE_DIR) + "/data/quickstart/tokenizer.model", plans / "model/tokenizer.model");
  WriteText(plans / "p.yaml", R"yaml(protocol: 1
name: p
models:
  tiny: {preset: tiny, path: model, init: random}
stages:
  - name: s
    cases:
      - {id: i, workload: inference, backend: fsdp, model: tiny, training: {device: cpu, seed: 3},
         inference: {prompt: "Can there be life", max_new_tokens: [6, 8]}}
      - {id: c, workload: pretrain, backend: command, system: fsdp, model: tiny, steps: 1,
         command: {argv: ["{plan_dir}/no-such-program"]}}
)yaml");
  Output run = Protocol({"run", "plans\xff/p.yaml", "--db", "r.db", "--logs", "logs\xfe"}, dir.path);
  INFO(run.out << run.err);
  CHECK(run.exit_code == 1);  // case c fails to start, and says where
  {
    auto store = OpenStore((dir.path / "r.db").string());
    REQUIRE(store.ok());
    auto cases = (*store)->CasesOfRun(1);
    REQUIRE(cases.ok());
    REQUIRE(cases->size() == 2);
    CHECK(cases->at(0).status == CaseStatus::kOk);
    CHECK(cases->at(1).status == CaseStatus::kFailed);
    CHECK(cases->at(1).reason.find("plans\xEF\xBF\xBD/no-such-program") != std::string::npos);
    auto requests = (*store)->RequestsOfCase(cases->at(0).row_id);
    REQUIRE(requests.ok());
    REQUIRE(requests->size() == 2);
    for (const RequestSample& r : *requests) {
      REQUIRE(r.token_ids.has_value());
      CHECK(static_cast<int>(r.token_ids->size()) == r.generated_tokens);
      CHECK(IsValidUtf8(r.answer));
    }
  }
  std::string read = ReadWithPython(dir.path, dir.path / "r.db", "ids");
  CHECK(read.substr(0, 3) == "ok ");
  CHECK(read.find(" 1\n") != std::string::npos);  // the failure reason with U+FFFD was read

  // A database of the previous schema, with invalid bytes in it, after migration.
  const fs::path old = dir.path / "old.db";
  fs::copy_file(std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/store/schema-v2.db", old);
  CHECK(ReadWithPython(dir.path, old, "none").substr(0, 5) == "exit ");  // as it was: unreadable
  REQUIRE(OpenStore(old.string()).ok());                                  // migrates
  CHECK(ReadWithPython(dir.path, old, "none").substr(0, 3) == "ok ");
}

TEST_CASE("the CSV export has every column of the cases table, and docs/database.md's python3 example reads it") {
  if (!HavePython()) SKIP_TEST("python3 with sqlite3 is not installed");
  TempDir dir;
  WriteText(dir.path / "p.yaml", R"yaml(protocol: 1
name: p
models:
  m: {preset: tiny}
defaults: {model: m, backend: command, system: fsdp}
stages:
  - name: s
    cases:
      - {id: ok, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},
         command: {argv: [sh, -c, "echo tokens_per_second 42"],
                   metrics: [{name: tokens_per_second, regex: 'tokens_per_second (\S+)', unit: tokens/s}]}}
      - {id: slow, workload: inference, nodes: 1, timeout: 1, inference: {prompt: hi, max_new_tokens: [2]},
         command: {argv: [sleep, "30"]}}
)yaml");
  Output run = Protocol({"run", "p.yaml", "--db", "r.db", "--logs", "logs"}, dir.path);
  INFO(run.out << run.err);
  CHECK(run.exit_code == 1);
  Output exported = Protocol({"export", "--db", "r.db", "--out", "all.csv"}, dir.path);
  REQUIRE(exported.exit_code == 0);

  // The example, as the documentation prints it.
  const std::string doc = ReadText(fs::path(PROTOCOL_SOURCE_DIR) / "docs/database.md");
  const size_t begin = doc.find("python3 -c 'import csv");
  REQUIRE(begin != std::string::npos);
  const size_t end = doc.find("' all.csv\n", begin);
  REQUIRE(end != std::string::npos);
  WriteText(dir.path / "example.py", doc.substr(begin + 12, end - begin - 12));
  const std::string cmd = "cd " + ShellQuote(dir.path.string()) + " && python3 example.py all.csv >example.out 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  // The timed-out case keeps its status, exit code and reason in the CSV.
  const std::string printed = ReadText(dir.path / "example.out");
  CHECK(StartsWith(printed, "slow timeout "));
  CHECK(printed.find(" timed out after 1 s; process group killed\n") != std::string::npos);
  CHECK(EndsWith(printed, " rows\n"));

  // Every column of the cases table (as SQLite lists it; `id` as row_id) is a CSV column.
  WriteText(dir.path / "columns.py", R"py(
import csv, sqlite3, sys
header = next(csv.reader(open("all.csv", newline="", encoding="utf-8")))
columns = [r[1] for r in sqlite3.connect("r.db").execute("pragma table_info(cases)")]
missing = [c for c in columns if ("row_id" if c == "id" else c) not in header]
print("missing:", missing, "plan_sha256" in header, len(columns))
)py");
  const std::string cmd2 = "cd " + ShellQuote(dir.path.string()) + " && python3 columns.py >columns.out 2>&1";
  REQUIRE(std::system(cmd2.c_str()) == 0);
  CHECK(ReadText(dir.path / "columns.out") == "missing: [] True 24\n");
}

// Prints "name|rank" of every measurement, one per line; with "downgrade",
// first turns the file back into schema 7's form (NAME_rank<r>, no rank column,
// no table of hardware samples).
const char* const kRanks = R"py(
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
if len(sys.argv) > 2 and sys.argv[2] == "downgrade":
    db.execute("update measurements set name = name || '_rank' || rank where rank is not null")
    db.execute("alter table measurements drop column rank")
    db.execute("drop table if exists telemetry_samples")
    db.execute("pragma user_version = 7")
    db.commit()
else:
    for name, rank in db.execute("select name, rank from measurements order by id"):
        print(f"{name}|{'' if rank is None else rank}")
)py";

TEST_CASE("a rank's own figure is stored with its rank in a column; a schema-7 file's NAME_rank<r> rows are moved there") {
  if (!HavePython()) SKIP_TEST("python3 with sqlite3 is not installed");
  TempDir dir;
  WriteText(dir.path / "ranks.py", kRanks);
  auto python = [&](const fs::path& db, const std::string& how) {
    const std::string out = (dir.path / "ranks.out").string();
    const std::string cmd = "python3 " + ShellQuote((dir.path / "ranks.py").string()) + " " + ShellQuote(db.string()) +
                            " " + how + " >" + ShellQuote(out) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    return rc == 0 ? ReadText(out) : "exit " + std::to_string(rc) + ": " + ReadText(out);
  };
  const fs::path db = dir.path / "r.db";
  {
    auto store = OpenStore(db.string());
    REQUIRE(store.ok());
    StoreCaseWith(**store, {{"exit_code_rank0", 0.0, "", Provenance::kMeasured, "", "", ""},
                            {"exit_code_rank1", 137.0, "", Provenance::kMeasured, "", "", ""},
                            {"wall_seconds", 2.0, "s", Provenance::kMeasured, "", "", ""},
                            {"x_rank01", 5.0, "", Provenance::kMeasured, "", "", ""}});
  }
  const std::string expected = "exit_code|0\nexit_code|1\nwall_seconds|\nx_rank01|\n";
  CHECK(python(db, "read") == expected);
  CHECK(python(db, "downgrade") == "");
  CHECK(python(db, "read").substr(0, 5) == "exit ");  // schema 7: no rank column
  {
    auto store = OpenStore(db.string());  // migrates
    REQUIRE(store.ok());
    auto back = (*store)->MeasurementsOfCase(1);
    REQUIRE(back.ok());
    REQUIRE(back->size() == 4);
    CHECK(back->at(1).name == "exit_code_rank1");
    CHECK(*back->at(1).value == 137.0);
  }
  CHECK(python(db, "read") == expected);
}
