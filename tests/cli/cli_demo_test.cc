// The command-backend demo plan (plans/demo-command.yaml) through the real
// binary: its workload is scripts/demo_workload.py, so without python3 the
// test is skipped (tests/support/skip.h); scripts/setup.sh installs python3.

#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "backends/gpu_probe.h"
#include "cli_support.h"
#include "skip.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

TEST_CASE("cli: the command-backend demo plan runs end to end") {
  if (FindProgram("python3").empty()) SKIP_TEST("no python3 on PATH (the demo workload is a Python script)");
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  Output run = Protocol({"run", (src / "plans/demo-command.yaml").string(), "--db",
                         (dir.path / "d.db").string(), "--logs", (dir.path / "logs").string(),
                         "--set", "defaults.output_dir=" + (dir.path / "models/{case_id}").string()},
                        src);
  INFO(run.err);
  CHECK(run.exit_code == 0);
  std::string out = (dir.path / "report.md").string();
  Output rep = Protocol({"report", "--db", (dir.path / "d.db").string(), "--run", "latest",
                         "--baseline-system", "demo-baseline", "--candidate-system", "demo-share",
                         "--out", out},
                        src);
  CHECK(rep.exit_code == 0);
  std::multiset<std::string> lines;
  std::istringstream text(ReadAll(out));
  for (std::string line; std::getline(text, line);) lines.insert(line);
  // Both systems in every table: training, single-stream and multi-inference.
  CHECK(lines.count("| | demo-baseline 1 node | demo-share 1 node |") == 1);
  CHECK(lines.count("| | demo-baseline 1 node | demo-share 1 node (single-stream) |") == 1);
  CHECK(lines.count("| | demo-baseline | demo-share 1 node |") == 1);
  for (const auto& c : CasesOf(dir.path / "d.db", 1)) {
    INFO(c.case_id << ": " << c.reason);
    CHECK(c.status == CaseStatus::kOk);
  }
}
