// Exit codes of the real binary for a database or file that cannot be read
// or written: 3 (internal or I/O error), never 2 (bad input), with the
// database's own reason naming the path. A database locked beyond the busy
// timeout: cli_db_locked_test.cc.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_support.h"
#include "runner/store/store.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

TEST_CASE("cli: a file that is not a database, or a directory, is an I/O error: exit 3") {
  TempDir dir;
  std::string notes;
  for (int i = 0; i < 100; ++i) notes += "these are my notes, not a database\n";
  WriteFile(dir.path / "notes.db", notes);
  for (const char* command : {"list", "export"}) {
    Output o = Protocol({command, "--db", "notes.db"}, dir.path);
    CHECK(o.exit_code == 3);
    CHECK(o.out == "");
    CHECK(o.err == "protocol: notes.db: file is not a database\n");
  }
  Output show = Protocol({"show", "1", "--db", "notes.db"}, dir.path);
  CHECK(show.exit_code == 3);
  CHECK(show.err == "protocol: notes.db: file is not a database\n");
  CHECK(ReadAll(dir.path / "notes.db") == notes);  // untouched

  fs::create_directories(dir.path / "adir");
  Output adir = Protocol({"list", "--db", "adir"}, dir.path);
  CHECK(adir.exit_code == 3);
  CHECK(adir.err == "protocol: adir: cannot open database: unable to open database file\n");
}

TEST_CASE("cli: a damaged database is refused by list, report and run, named and left unchanged") {
  TempDir dir;
  WriteFile(dir.path / "quick.yaml", kQuickPlan);
  REQUIRE(Protocol({"run", "quick.yaml", "--db", "good.db", "--logs", "logs"}, dir.path).exit_code == 0);
  const std::string good = ReadAll(dir.path / "good.db");
  REQUIRE(good.size() > 8192);
  std::string garbage = good;
  garbage.replace(0, 16, "GARBAGEGARBAGE!!");  // SQLite's magic header overwritten
  std::string notes;
  for (int i = 0; i < 100; ++i) notes += "these are my notes, not a database\n";
  const struct {
    const char* name;
    std::string bytes;
    const char* reason;
  } damaged[] = {
      {"truncated.db", good.substr(0, good.size() / 2), "database disk image is malformed"},
      {"garbage.db", garbage, "file is not a database"},
      {"notes.db", notes, "file is not a database"},
  };
  for (const auto& db : damaged) {
    for (std::vector<std::string> command : {std::vector<std::string>{"list"},
                                             std::vector<std::string>{"report", "--run", "latest"},
                                             std::vector<std::string>{"run", "quick.yaml", "--logs", "logs"}}) {
      CAPTURE(db.name);
      CAPTURE(command[0]);
      WriteFile(dir.path / db.name, db.bytes);
      command.insert(command.end(), {"--db", db.name});
      Output o = Protocol(command, dir.path);
      CHECK(o.exit_code == 3);
      CHECK(o.err.find(std::string("protocol: ") + db.name + ": " + db.reason) != std::string::npos);
      CHECK(ReadAll(dir.path / db.name) == db.bytes);  // untouched
    }
  }
}

TEST_CASE("cli: a full disk is an I/O error: exit 3") {
  // /dev/full accepts opens and fails every write with ENOSPC.
  REQUIRE(fs::is_character_file("/dev/full"));
  TempDir dir;
  Output db = Protocol({"list", "--db", "/dev/full"}, dir.path);
  CHECK(db.exit_code == 3);
  CHECK(db.out == "");
  CHECK(db.err == "protocol: /dev/full: migrating to schema version 1: no space left on device for the database "
                 "(SQLite: database or disk is full)\n");

  WriteFile(dir.path / "pub.yaml",
            "source: \"fixture\"\nresults:\n  - {model: m, workload: pretrain, steps: 10, backend: fsdp, nodes: 1, "
            "metric: wall_minutes, value: 3}\n");
  REQUIRE(Protocol({"import", "pub.yaml", "--db", "i.db"}, dir.path).exit_code == 0);
  Output out = Protocol({"export", "--db", "i.db", "--format", "csv", "--out", "/dev/full"}, dir.path);
  CHECK(out.exit_code == 3);
  CHECK(out.err == "protocol: /dev/full: no space left on device\n");
}

TEST_CASE("cli: bad input stays exit 2: an unknown subcommand, a missing plan, an unknown run") {
  TempDir dir;
  Output sub = Protocol({"frobnicate"}, dir.path);
  CHECK(sub.exit_code == 2);
  CHECK(sub.err.rfind("protocol: unknown command 'frobnicate' (commands: run, ", 0) == 0);  // cli_options_test: the text
  Output plan = Protocol({"validate", "missing.yaml"}, dir.path);
  CHECK(plan.exit_code == 2);
  REQUIRE(OpenStore((dir.path / "empty.db").string()).ok());  // an empty database, as `run` leaves it
  Output run = Protocol({"show", "1", "--db", "empty.db"}, dir.path);
  CHECK(run.exit_code == 2);
  CHECK(run.err == "protocol: unknown run '1': the database has no runs yet\n");
}

TEST_CASE("cli: --help documents the exit codes") {
  TempDir dir;
  Output help = Protocol({"--help"}, dir.path);
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("Exit codes: 0 ok · 1 a case failed or a regression was found · 2 bad input or usage ·\n"
                      "3 internal or I/O error (the database or a file cannot be read or written: unreadable,\n"
                      "not a database, locked beyond the busy timeout, disk full).\n") != std::string::npos);
}

namespace protocol {
namespace {

TEST_CASE("cli: a command that only reads refuses a database that does not exist, and creates none") {
  TempDir dir;
  const std::string message =
      "protocol: no database at results/protocl.db (`protocol run` and `protocol import` create one; name another "
      "with --db)\n";
  const std::vector<std::vector<std::string>> readers = {
      {"list"}, {"list", "--json"}, {"show", "latest"}, {"report"}, {"export"}, {"compare", "1", "2"},
      {"report", "--verify", "r.md"}};
  for (std::vector<std::string> args : readers) {
    args.insert(args.end(), {"--db", "results/protocl.db"});
    INFO(args[0]);
    Output o = Protocol(args, dir.path);
    CHECK(o.exit_code == 2);
    CHECK(o.out == "");
    CHECK(o.err == message);
  }
  CHECK_FALSE(std::filesystem::exists(dir.path / "results"));
  // `import` creates the database (and `run`, tested with the quick start's plans).
  WriteFile(dir.path / "pub.yaml",
            "source: \"fixture\"\nresults:\n  - {model: m, workload: pretrain, steps: 10, backend: fsdp, nodes: 1, "
            "metric: wall_minutes, value: 3}\n");
  CHECK(Protocol({"import", "pub.yaml", "--db", "results/protocl.db"}, dir.path).exit_code == 0);
  CHECK(Protocol({"list", "--db", "results/protocl.db"}, dir.path).exit_code == 0);
}

}  // namespace
}  // namespace protocol
