// The runner's check of a case's measured link against its network's label
// (link_label.h): a case more than 2x away either way is listed in the run's
// summary (RunSummary::link_off_label, which `protocol run` prints at the
// end); one within 2x, or one that measured no link, is not.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "fake_backend.h"
#include "fake_clock.h"
#include "fake_process_runner.h"
#include "fake_progress.h"
#include "fake_store.h"
#include "runner/exec/runner.h"

using namespace protocol;

namespace {

CaseSpec LinkCase(const std::string& id) {
  CaseSpec c = MakeCase(id);
  c.nodes = 2;
  c.network = "10G";
  return c;
}

// What a 2-node case stores: its link measured at `busbw` bytes/s, its network '10G' at 1e10 bit/s.
FakeScript MeasuredLink(double busbw) {
  FakeScript s;
  s.seconds_after = 2;
  s.measurements = {MeasuredFigure(metric::kLinkBusBandwidth, busbw, "bytes/s"),
                    MeasuredFigure(metric::kLinkLatency, 85e-6, "s")};
  s.facts = {{fact::kNetwork, "10G"}, {fact::kNetworkRate, "1e+10"}};
  return s;
}

}  // namespace

TEST_CASE("runner: a case whose measured link is more than 2x off its network's label is listed for the warning") {
  const std::string logs =
      (std::filesystem::temp_directory_path() / ("protocol_runner_link_test-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(logs);
  FakeStore store;
  FakeClock clock;
  FakeBackend backend{&clock};
  RecordingProgress progress;
  StopFlag stop;
  testing::FakeProcessRunner processes;
  Runner runner{store, clock, processes, backend.Factory(), progress, stop};
  backend.scripts["slow"] = MeasuredLink(1e8);      // 0.8 Gbit/s on a 10G label: 12.5x slower
  backend.scripts["fast"] = MeasuredLink(12.5e9);   // 100 Gbit/s: 10x faster (InfiniBand under a 10G label)
  backend.scripts["near"] = MeasuredLink(0.7e9);    // 5.6 Gbit/s: within 2x
  backend.scripts["unmeasured"] = MeasuredLink(0);  // facts only: no figure
  backend.scripts["unmeasured"].measurements.clear();
  const Plan plan = MakePlan({LinkCase("slow"), LinkCase("fast"), LinkCase("near"), LinkCase("unmeasured")});
  RunOptions options;
  options.logs_dir = logs;
  auto summary = runner.Run(plan, options);
  REQUIRE(summary.ok());
  CHECK(summary->ok == 4);
  REQUIRE(summary->link_off_label.size() == 2);
  CHECK(summary->link_off_label[0] ==
        "slow: link measured 0.8 Gbit/s bus bandwidth, its network '10G' is nominally 10 Gbit/s (12.5x slower)");
  CHECK(summary->link_off_label[1] ==
        "fast: link measured 100 Gbit/s bus bandwidth, its network '10G' is nominally 10 Gbit/s (10x faster)");
  // The figures and facts are stored as the backend gave them.
  REQUIRE(store.case_rows().size() == 4);
  CHECK(store.case_rows()[0].facts.size() == 2);
  std::filesystem::remove_all(logs);
}
