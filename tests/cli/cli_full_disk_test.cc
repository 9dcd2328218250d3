// A disk that fills mid-run, on a real file system: a small tmpfs mounted for
// the test (mounting needs CAP_SYS_ADMIN; without it the test is skipped with
// the reason). Whatever fills it, the run ends with exit 3 and a message that
// says "no space left on device" and names the file that could not be
// written; every earlier row stays intact; --resume completes once there is
// space again. The same without a real disk: cli_exit_codes_test.cc (/dev/full),
// runner_test.cc (a fake process runner whose log lost text).

#include <doctest/doctest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "cli_support.h"
#include "skip.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

namespace {

// A tmpfs of `size` (mount(8) units: "512k") at `where`, unmounted on scope exit.
class SmallDisk {
 public:
  SmallDisk(const fs::path& where, const std::string& size) : where_(where) {
    fs::create_directories(where);
    const std::string data = "size=" + size;
    if (::mount("tmpfs", where.c_str(), "tmpfs", 0, data.c_str()) != 0) error_ = std::strerror(errno);
  }
  ~SmallDisk() {
    if (error_.empty()) ::umount2(where_.c_str(), MNT_DETACH);
  }
  // Why it could not be mounted; "" when it is.
  const std::string& error() const { return error_; }
  bool Resize(const std::string& size) {
    const std::string data = "size=" + size;
    return ::mount("tmpfs", where_.c_str(), "tmpfs", MS_REMOUNT, data.c_str()) == 0;
  }

 private:
  fs::path where_;
  std::string error_;
};

// Three quick command cases; `b` runs `b_command` (a /bin/sh script).
std::string ThreeCases(const std::string& b_command) {
  return R"yaml(protocol: 1
name: fill
title: "a disk that fills"
models:
  m: {preset: tiny}
defaults: {model: m, backend: command, system: fsdp, inference: {prompt: hi, max_new_tokens: [1]}}
stages:
  - name: s
    cases:
      - {id: a, workload: inference, nodes: 1, command: {argv: ["echo", "hello"]}}
      - {id: b, workload: inference, nodes: 1, command: {argv: ["sh", "-c", ")yaml" +
         b_command + R"yaml("]}}
      - {id: c, workload: inference, nodes: 1, command: {argv: ["true"]}}
)yaml";
}

}  // namespace

TEST_CASE("cli: a disk that fills mid-run says which file, keeps every row, and --resume completes") {
  TempDir dir;
  SmallDisk disk(dir.path / "disk", "512k");
  if (!disk.error().empty()) SKIP_TEST("cannot mount a small tmpfs to fill (" + disk.error() + ")");

  SUBCASE("a case's log fills it (the database elsewhere)") {
    // b prints 1 MiB into a log on a 512 KiB disk.
    WriteFile(dir.path / "fill.yaml", ThreeCases("yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx | head -c 1048576"));
    Output run = Protocol({"run", "fill.yaml", "--db", "q.db", "--logs", "disk/logs"}, dir.path);
    CHECK(run.exit_code == 3);
    CAPTURE(run.err);
    CHECK(run.err.find("disk/logs/run-1/b.log: no space left on device; ") != std::string::npos);
    CHECK(run.err.find(" KiB of output not written (the case log); case b repeat 1/1 is stored as interrupted "
                       "with its figures, and the run stops: free space, then --resume 1 runs it again\n") !=
          std::string::npos);
    std::vector<CaseRecord> rows = CasesOf(dir.path / "q.db", 1);
    REQUIRE(rows.size() == 2);  // c never started
    CHECK(rows[0].status == CaseStatus::kOk);
    CHECK(rows[1].status == CaseStatus::kInterrupted);
    CHECK(rows[1].reason.rfind("the case log could not be written whole (", 0) == 0);

    REQUIRE(disk.Resize("8m"));
    Output resumed = Protocol({"run", "fill.yaml", "--db", "q.db", "--logs", "disk/logs", "--resume", "1"}, dir.path);
    CHECK(resumed.exit_code == 0);
    rows = CasesOf(dir.path / "q.db", 1);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].status == CaseStatus::kOk);  // a, as it was
    CHECK(rows[2].case_id == "b");
    CHECK(rows[2].status == CaseStatus::kOk);
    CHECK(rows[3].status == CaseStatus::kOk);
  }

  SUBCASE("a case's own file fills it (the database and the logs on it too)") {
    // b writes a 4 MiB file beside everything, once; it is removed before the resume.
    WriteFile(dir.path / "disk/fill.yaml",
              ThreeCases("[ -e once ] || { touch once; head -c 4194304 /dev/zero > fill; }; echo done"));
    const fs::path here = dir.path / "disk";
    Output run = Protocol({"run", "fill.yaml", "--db", "q.db", "--logs", "logs"}, here);
    CHECK(run.exit_code == 3);
    CAPTURE(run.err);
    // Whichever the disk refused first, the log or the database, is named.
    const bool log_named = run.err.find("logs/run-1/b.log: no space left on device") != std::string::npos;
    const bool db_named = run.err.find("protocol: q.db: ") != std::string::npos &&
                          run.err.find("no space left on device for the database") != std::string::npos;
    CHECK((log_named || db_named));
    fs::remove(here / "fill");
    std::vector<CaseRecord> rows = CasesOf(here / "q.db", 1);
    REQUIRE(rows.size() >= 1);
    CHECK(rows[0].case_id == "a");
    CHECK(rows[0].status == CaseStatus::kOk);  // the earlier row, intact

    Output resumed = Protocol({"run", "fill.yaml", "--db", "q.db", "--logs", "logs", "--resume", "1"}, here);
    CHECK(resumed.exit_code == 0);
    CAPTURE(resumed.err);
    int ok = 0;
    for (const CaseRecord& row : CasesOf(here / "q.db", 1)) ok += row.status == CaseStatus::kOk;
    CHECK(ok == 3);
  }
}
