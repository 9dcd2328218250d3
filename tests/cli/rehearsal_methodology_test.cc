// plans/rehearsal-methodology.yaml through the real `protocol` binary: every
// case shape of the methodology at tiny sizes on CPU must end ok — the 4-bit
// (70B) shapes included: QLoRA continued pretraining and QLoRA finetune on the
// FSDP baseline's 2 and 4 ranks (on 4 also with hybrid sharding) and on the
// share protocol's groups, 4-bit inference in one process and on share
// replicas.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runner/base/text.h"
#include "runner/store/store.h"
#include "test_files.h"

namespace fs = std::filesystem;
using namespace protocol;

namespace {

}  // namespace

TEST_CASE("rehearsal-methodology: every methodology case shape runs at tiny sizes on CPU") {
  char tmpl[] = "/tmp/protocol-rehearsal-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const fs::path src = PROTOCOL_SOURCE_DIR;
  const std::string db = (dir / "r.db").string();
  // The shipped plan as it is, run from the test's directory; only where it writes
  // moves there. The 4-bit model (from_case: r.base) follows the base case's
  // output_dir by itself.
  const std::vector<std::string> args = {
      "run", (src / "plans/rehearsal-methodology.yaml").string(), "--db", db, "--logs", (dir / "logs").string(),
      "--set", "defaults.output_dir=" + (dir / "models/{case_id}").string(),
      "--set", "stages[base].cases[r.base].output_dir=" + (dir / "base").string()};
  std::string cmd = "cd " + testing::ShellQuote(dir.string()) + " && OMP_NUM_THREADS=1 " + testing::ShellQuote(PROTOCOL_BINARY);
  for (const std::string& a : args) cmd += " " + testing::ShellQuote(a);
  cmd += " >" + testing::ShellQuote((dir / "out.txt").string()) + " 2>" + testing::ShellQuote((dir / "err.txt").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  const std::string err = testing::ReadTextFile((dir / "err.txt").string());
  INFO(err);

  auto store = OpenStore(db);
  REQUIRE(store.ok());
  auto cases = (*store)->CasesOfRun(1);
  REQUIRE(cases.ok());
  CHECK(cases->size() == 25);
  std::map<std::string, CaseRecord> by_id;
  for (const CaseRecord& c : *cases) by_id[c.case_id] = c;
  for (const CaseRecord& c : *cases) {
    INFO(c.case_id << ": " << c.reason);
    CHECK(c.status == CaseStatus::kOk);
  }
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // Nothing warns about the plan's own content; what may warn is the machine
  // (contention, the time estimate's band: docs/runner.md, "Warnings and notes").
  for (const std::string& line : Split(err, '\n')) {
    if (line.find("warning") == std::string::npos) continue;
    CAPTURE(line);
    const bool machine = line.find("contended") != std::string::npos ||
                         line.find("its estimate") != std::string::npos ||
                         line.find("time estimate") != std::string::npos || line.find("load average") != std::string::npos;
    CHECK(machine);
  }

  // What ran says so: the 4-bit inference of one process and of the share
  // replicas measured from NF4 weights, the base's weights loaded for the 4-bit pretrain.
  for (const char* id : {"r.1.1.5", "r.2.1.3", "r.2.1.3-1n"}) {
    CAPTURE(id);
    REQUIRE(by_id.count(id));
    auto ms = (*store)->MeasurementsOfCase(by_id[id].row_id);
    REQUIRE(ms.ok());
    bool found = false;
    for (const Measurement& m : *ms)
      if (m.name == "tokens_per_second") {
        found = true;
        CHECK(m.method.find("4-bit NF4 weights") != std::string::npos);
      }
    CHECK(found);
  }
  for (const char* id : {"r.1.1.1", "r.2.1.1"}) {
    CAPTURE(id);
    REQUIRE(by_id.count(id));
    auto ms = (*store)->MeasurementsOfCase(by_id[id].row_id);
    REQUIRE(ms.ok());
    bool found = false;
    for (const Measurement& m : *ms)
      if (m.name == "final_loss") {
        found = true;
        CHECK(m.method.find("QLoRA continued pretraining") != std::string::npos);
      }
    CHECK(found);
  }
  // The hybrid-sharded twins of the two-node baseline rows (the further baseline) report as
  // fsdp-hybrid, and their gradient all-reduce crossed between the two nodes.
  for (const char* id : {"r.1.1.2-hybrid", "r.1.1.4-hybrid", "r.1.2.2-hybrid"}) {
    CAPTURE(id);
    REQUIRE(by_id.count(id));
    CHECK(by_id[id].system == "fsdp-hybrid");
    auto ms = (*store)->MeasurementsOfCase(by_id[id].row_id);
    REQUIRE(ms.ok());
    double between_nodes = -1;
    for (const Measurement& m : *ms)
      if (m.name == "bytes_between_nodes" && m.value) between_nodes = *m.value;
    CHECK(between_nodes > 0);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}
