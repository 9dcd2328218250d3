// Two named networks, each its own emulated link (plans/rehearsal-networks.yaml:
// the FSDP baseline at 800 Mbit/s, share and the hybrid twin at 100 Mbit/s),
// through the real binary: every two-node case measures its link before its
// first step, and the measured bus bandwidth lands within 25 % of its
// network's rate. Then the slow network deliberately mislabelled 10 Gbit/s:
// `run` warns and the report tags the case `link ≠ label`. Needs
// CAP_NET_ADMIN, iproute2 and sch_tbf (skipped otherwise, with the reason).

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "cli_support.h"
#include "netns_support.h"
#include "runner/store/records.h"
#include "runner/store/store.h"
#include "skip.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;

// Each case's measured link (bits per second), by case id.
std::map<std::string, double> MeasuredLinks(const fs::path& db, int64_t run) {
  std::map<std::string, double> out;
  auto store = OpenStore(db.string());
  REQUIRE(store.ok());
  auto cases = (*store)->CasesOfRun(run);
  REQUIRE(cases.ok());
  for (const CaseRecord& c : *cases) {
    auto figures = (*store)->MeasurementsOfCase(c.row_id);
    REQUIRE(figures.ok());
    for (const Measurement& m : *figures)
      if (m.name == metric::kLinkBusBandwidth && m.value) out[c.case_id] = *m.value * 8;
  }
  return out;
}

}  // namespace

TEST_CASE("link networks: each network's cases measure its own emulated rate; a mislabelled one is tagged") {
  const std::string why = testing::NamespacesUnavailable({"100mbit", ""});
  if (!why.empty()) SKIP_TEST(why);
  testing::TempDir dir;
  const std::string plan = (fs::path(PROTOCOL_SOURCE_DIR) / "plans/rehearsal-networks.yaml").string();
  const std::vector<std::string> common = {"run", plan, "--db", "n.db", "--logs", "logs", "--set",
                                           "defaults.output_dir=" + (dir.path / "models/{case_id}").string()};
  testing::Output run = testing::Protocol(common, dir.path, "OMP_NUM_THREADS=1");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.err.find("link measured") == std::string::npos);  // every link as labelled
  const std::map<std::string, double> links = MeasuredLinks(dir.path / "n.db", 1);
  const std::map<std::string, double> rates = {{"n.1", 800e6}, {"n.1-hybrid", 100e6}, {"n.2", 100e6}};
  for (const auto& [id, rate] : rates) {
    CAPTURE(id);
    REQUIRE(links.count(id));
    CAPTURE(links.at(id));
    CHECK(std::abs(links.at(id) / rate - 1) <= 0.25);
  }

  // The slow link labelled 10 Gbit/s: the run says so, the report tags the case.
  std::vector<std::string> mislabelled = common;
  mislabelled.insert(mislabelled.end(), {"--only", "n.2", "--set", "cluster.networks.slow.rate=10gbit"});
  testing::Output wrong = testing::Protocol(mislabelled, dir.path, "OMP_NUM_THREADS=1");
  INFO(wrong.err);
  REQUIRE(wrong.exit_code == 0);
  CHECK(wrong.err.find("n.2: link measured") != std::string::npos);
  testing::Output report = testing::Protocol({"report", "--run", "2", "--db", "n.db"}, dir.path);
  CHECK(report.exit_code == 0);
  CHECK(report.out.find("link ≠ label") != std::string::npos);
}

}  // namespace protocol
