// The runner's hardware samples (runner.h step 4, telemetry.h): stored with
// the case, their figures exact against the stored samples, the fact that
// says what was read, and a case that stays ok when nvidia-smi cannot run.

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "fake_backend.h"
#include "fake_clock.h"
#include "fake_nvidia_smi.h"
#include "fake_process_runner.h"
#include "fake_progress.h"
#include "fake_store.h"
#include "runner/exec/runner.h"
#include "test_files.h"

using namespace protocol;
using protocol::testing::FakeNvidiaSmi;
using protocol::testing::ProcessAlive;

namespace {

class FixedNetMeter : public NetMeter {
 public:
  std::optional<std::vector<InterfaceCounters>> Read() override {
    return std::vector<InterfaceCounters>{{"eth0", 0, 0}};
  }
};

const Measurement* Find(const std::vector<Measurement>& ms, const std::string& name) {
  for (const Measurement& m : ms)
    if (m.name == name) return &m;
  return nullptr;
}

std::string FactOf(const FakeStore::CaseRow& row, const std::string& key) {
  for (const auto& [k, v] : row.facts)
    if (k == key) return v;
  return "";
}

// Two requests of 100 generated tokens, lasting until nvidia-smi printed its
// readings four times (or half a second where it never does).
FakeScript Inference(const FakeNvidiaSmi* smi, StopFlag* raise = nullptr) {
  FakeScript s;
  s.hook = [smi](BackendContext&) {
    if (smi == nullptr || !smi->WaitPrinted(4)) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  };
  s.requests = {{0, 100, 5, 100, 0.2, "a", std::nullopt}, {1, 100, 5, 100, 0.2, "b", std::nullopt}};
  s.raise_stop = raise;
  return s;
}

struct Rig {
  FakeStore store;
  FakeClock clock;
  FakeBackend backend{&clock};
  RecordingProgress progress;
  StopFlag stop;
  protocol::testing::FakeProcessRunner processes;
  std::unique_ptr<ProcessRunner> gpu_reader = MakeSystemProcessRunner();
  FixedNetMeter net;
  protocol::testing::TempDir logs{"runner-telemetry"};

  Result<RunSummary> Run(const Plan& plan) {
    Runner runner{store, clock, processes, backend.Factory(), progress, stop};
    RunOptions options;
    options.logs_dir = logs.path.string();
    options.telemetry = {gpu_reader.get(), &net, nullptr};
    return runner.Run(plan, options);
  }
};

}  // namespace

TEST_CASE("runner telemetry: samples stored with the case; energy and energy per token exact against them") {
  FakeNvidiaSmi smi({"0, 90, 4096, 300.00, 1980, 60"});
  Rig rig;
  rig.backend.default_script = Inference(&smi);
  Plan plan = MakePlan({MakeCase("1.1")});
  plan.telemetry.interval_seconds = 0.1;
  auto summary = rig.Run(plan);
  REQUIRE(summary.ok());
  CHECK(summary->ok == 1);
  const FakeStore::CaseRow& row = rig.store.case_rows().at(0);
  CHECK(row.record.status == CaseStatus::kOk);
  CHECK(FactOf(row, fact::kTelemetry) ==
        "gpus: gpu0 (nvidia-smi every 0.1 s); network: eth0 (/proc/net/dev every 0.1 s, loopback left out)");
  // The power samples as stored: 300 W each, in time order.
  std::vector<std::pair<double, double>> power;
  for (const TelemetrySample& s : row.samples)
    if (s.quantity == quantity::kGpuPower) power.emplace_back(s.seconds, s.value);
  REQUIRE(power.size() >= 2);
  double joules = 0;
  for (size_t i = 1; i < power.size(); ++i) {
    CHECK(power[i].first >= power[i - 1].first);
    joules += (power[i].second + power[i - 1].second) / 2 * (power[i].first - power[i - 1].first);
  }
  const Measurement* energy = Find(row.measurements, metric::kEnergy);
  REQUIRE(energy);
  CHECK(*energy->value == doctest::Approx(joules).epsilon(1e-12));
  CHECK(*energy->value == doctest::Approx(300 * (power.back().first - power.front().first)).epsilon(1e-12));
  const Measurement* per_token = Find(row.measurements, metric::kEnergyPerToken);
  REQUIRE(per_token);
  CHECK(*per_token->value == doctest::Approx(*energy->value / 200).epsilon(1e-12));
  CHECK(*Find(row.measurements, metric::kGpuUtilizationMean)->value == 90.0);
  CHECK(*Find(row.measurements, metric::kGpuMemoryPeakDriver)->value == 4096.0 * 1024 * 1024);
  CHECK_FALSE(Find(row.measurements, metric::kLinkBytesSent));  // one node: no link between nodes
  CHECK_FALSE(row.samples.empty());
  // nvidia-smi ended with the case.
  for (int pid : smi.Pids()) CHECK_FALSE(ProcessAlive(pid));
}

TEST_CASE("runner telemetry: a failing nvidia-smi leaves the case ok, without GPU samples, the reason logged") {
  FakeNvidiaSmi smi({"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}, 9);
  Rig rig;
  rig.backend.default_script = Inference(nullptr);
  Plan plan = MakePlan({MakeCase("1.1")});
  plan.telemetry.interval_seconds = 0.1;
  auto summary = rig.Run(plan);
  REQUIRE(summary.ok());
  const FakeStore::CaseRow& row = rig.store.case_rows().at(0);
  CHECK(row.record.status == CaseStatus::kOk);
  for (const TelemetrySample& s : row.samples) CHECK(s.device == "eth0");
  CHECK_FALSE(Find(row.measurements, metric::kEnergy));
  const std::string why =
      "nvidia-smi exited with code 9 (NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.)";
  CHECK(FactOf(row, fact::kTelemetry).find("gpus: not sampled (" + why + ")") == 0);
  CHECK(protocol::testing::ReadTextFile(row.record.log_path).find("# protocol telemetry: GPUs not sampled: " + why) !=
        std::string::npos);
}

TEST_CASE("runner telemetry: nvidia-smi stops with an interrupted case; interval 0 samples nothing") {
  SUBCASE("interrupted") {
    FakeNvidiaSmi smi({"0, 90, 4096, 300.00, 1980, 60"});
    Rig rig;
    rig.backend.default_script = Inference(&smi, &rig.stop);
    Plan plan = MakePlan({MakeCase("1.1")});
    plan.telemetry.interval_seconds = 0.1;
    auto summary = rig.Run(plan);
    REQUIRE(summary.ok());
    CHECK(rig.store.case_rows().at(0).record.status == CaseStatus::kInterrupted);
    CHECK_FALSE(rig.store.case_rows().at(0).samples.empty());
    REQUIRE_FALSE(smi.Pids().empty());
    for (int pid : smi.Pids()) CHECK_FALSE(ProcessAlive(pid));
  }
  SUBCASE("off") {
    FakeNvidiaSmi smi({"0, 90, 4096, 300.00, 1980, 60"});
    Rig rig;
    Plan plan = MakePlan({MakeCase("1.1")});
    plan.telemetry.interval_seconds = 0;
    REQUIRE(rig.Run(plan).ok());
    CHECK(rig.store.case_rows().at(0).samples.empty());
    CHECK(FactOf(rig.store.case_rows().at(0), fact::kTelemetry).empty());
    CHECK(smi.Pids().empty());
  }
}
