// A database locked by another process for longer than the busy timeout
// (30 s) makes `protocol run` fail with exit 3 (an I/O error, not bad input)
// and the reason. The lock is held by the sqlite3 shell (Debian's sqlite3,
// installed by scripts/setup.sh); without it the test is skipped.

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "backends/gpu_probe.h"
#include "cli_support.h"
#include "skip.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

TEST_CASE("cli: a database locked beyond the busy timeout is an I/O error: exit 3") {
  const std::string sqlite3 = FindProgram("sqlite3");
  if (sqlite3.empty()) SKIP_TEST("no sqlite3 shell on PATH to hold a lock with");
  TempDir dir;
  WriteFile(dir.path / "quick.yaml", kQuickPlan);
  REQUIRE(Protocol({"run", "quick.yaml", "--db", "q.db", "--logs", "logs"}, dir.path).exit_code == 0);
  // The sqlite3 shell takes the write lock, says so through a file, then
  // sleeps holding it (killed below).
  const fs::path marker = dir.path / "locked";
  pid_t holder = fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    // Its own process group, killed whole below (the shell's `sleep` too), and
    // no inherited stdout: ctest reads ours until every writer has closed it.
    setpgid(0, 0);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (chdir(dir.path.c_str()) != 0) _exit(99);
    execl(sqlite3.c_str(), sqlite3.c_str(), "q.db", "BEGIN IMMEDIATE;", ".shell touch locked; sleep 120",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 500 && !fs::exists(marker); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool locked = fs::exists(marker);
  Output run = locked ? Protocol({"run", "quick.yaml", "--db", "q.db", "--logs", "logs"}, dir.path) : Output{};
  kill(-holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  REQUIRE_MESSAGE(locked, "the sqlite3 shell did not take the lock within 10 s");
  CHECK(run.exit_code == 3);
  // The last line (a load warning may come first on a busy machine).
  std::string err = run.err;
  if (!err.empty() && err.back() == '\n') err.pop_back();
  CHECK(err.substr(err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1) ==
        "protocol: q.db: creating run of plan 'quick': database is locked (another process held it for more than 30 s)");
}
