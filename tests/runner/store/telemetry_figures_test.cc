// The figures of a case's hardware samples (telemetry_figures.h), checked
// exactly on samples written by hand.

#include <doctest/doctest.h>

#include "runner/store/telemetry_figures.h"

using namespace protocol;

namespace {

TelemetrySample At(double seconds, const std::string& device, const char* quantity, double value,
                   const std::string& node = "") {
  return {seconds, node, device, quantity, value};
}

const Measurement* Find(const std::vector<Measurement>& ms, const std::string& name) {
  for (const Measurement& m : ms)
    if (m.name == name) return &m;
  return nullptr;
}

// One busy GPU at 300 W for 2 s, one idle GPU beside it at 60 W.
std::vector<TelemetrySample> TwoGpus() {
  std::vector<TelemetrySample> s;
  for (double t : {0.0, 1.0, 2.0}) {
    s.push_back(At(t, "gpu0", quantity::kGpuUtilization, t == 0 ? 40 : 100));
    s.push_back(At(t, "gpu0", quantity::kGpuPower, 300));
    s.push_back(At(t, "gpu0", quantity::kGpuMemoryUsed, 1e9 * (1 + t)));
    s.push_back(At(t, "gpu1", quantity::kGpuUtilization, 0));
    s.push_back(At(t, "gpu1", quantity::kGpuPower, 60));
    s.push_back(At(t, "gpu1", quantity::kGpuMemoryUsed, 5e8));
  }
  return s;
}

}  // namespace

TEST_CASE("telemetry figures: 300 W for 2 s is 600 J, per token and per step; an idle GPU is not the case's") {
  const std::vector<Measurement> ms = TelemetryFigures(TwoGpus(), {1200, 4});
  REQUIRE(Find(ms, metric::kEnergy));
  CHECK(*Find(ms, metric::kEnergy)->value == 600.0);
  CHECK(Find(ms, metric::kEnergy)->unit == "J");
  CHECK(Find(ms, metric::kEnergy)->method.find("1 GPU used (busy in at least one sample) of 2 sampled") !=
        std::string::npos);
  CHECK(Find(ms, metric::kEnergy)->method.find("trapezoid rule over 0–2 s (3 readings)") != std::string::npos);
  CHECK(*Find(ms, metric::kEnergyPerToken)->value == 0.5);
  CHECK(Find(ms, metric::kEnergyPerToken)->unit == "J/token");
  CHECK(*Find(ms, metric::kEnergyPerStep)->value == 150.0);
  CHECK(*Find(ms, metric::kGpuUtilizationMean)->value == 80.0);  // (40 + 100 + 100) / 3
  CHECK(*Find(ms, metric::kGpuUtilizationPeak)->value == 100.0);
  CHECK(*Find(ms, metric::kGpuMemoryPeakDriver)->value == 3e9);
  for (const Measurement& m : ms) CHECK(m.how == Provenance::kMeasured);
}

TEST_CASE("telemetry figures: the trapezoid follows the power between uneven readings; GPUs add up") {
  std::vector<TelemetrySample> s;
  // gpu0: 100 W at 0 s, 300 W at 1 s, 300 W at 4 s → 200 + 900 = 1100 J.
  // gpu0 of node b: 50 W for 1 s → 50 J.
  for (auto [t, w] : {std::pair{0.0, 100.0}, {1.0, 300.0}, {4.0, 300.0}}) {
    s.push_back(At(t, "gpu0", quantity::kGpuPower, w));
    s.push_back(At(t, "gpu0", quantity::kGpuUtilization, 90));
  }
  s.push_back(At(0, "gpu0", quantity::kGpuPower, 50, "b"));
  s.push_back(At(1, "gpu0", quantity::kGpuPower, 50, "b"));
  s.push_back(At(1, "gpu0", quantity::kGpuUtilization, 10, "b"));
  const std::vector<Measurement> ms = TelemetryFigures(s, {});
  CHECK(*Find(ms, metric::kEnergy)->value == 1150.0);
  CHECK_FALSE(Find(ms, metric::kEnergyPerToken));  // no tokens known
  CHECK_FALSE(Find(ms, metric::kEnergyPerStep));
}

TEST_CASE("telemetry figures: no busy GPU, no GPU figure; no samples, no figure") {
  std::vector<TelemetrySample> idle;
  for (double t : {0.0, 1.0}) {
    idle.push_back(At(t, "gpu0", quantity::kGpuUtilization, 0));
    idle.push_back(At(t, "gpu0", quantity::kGpuPower, 70));
  }
  CHECK(TelemetryFigures(idle, {100, 1}).empty());
  CHECK(TelemetryFigures({}, {100, 1}).empty());
}

TEST_CASE("telemetry figures: the link's bytes, mean and busiest interval from a node's interface counters") {
  std::vector<TelemetrySample> s;
  // rig1's eth0 sent 0 → 1000 → 3000 and received 0 → 0 → 1000 over 0, 1, 2 s; eth1 idle after its zeros.
  const double readings[3][3] = {{0.0, 0.0, 0.0}, {1.0, 1000.0, 0.0}, {2.0, 3000.0, 1000.0}};  // t, sent, received
  for (const auto& r : readings) {
    s.push_back(At(r[0], "eth0", quantity::kNetSent, r[1], "rig1"));
    s.push_back(At(r[0], "eth0", quantity::kNetReceived, r[2], "rig1"));
  }
  s.push_back(At(0, "eth1", quantity::kNetSent, 0, "rig1"));
  s.push_back(At(0, "eth1", quantity::kNetReceived, 0, "rig1"));
  CHECK_FALSE(Find(TelemetryFigures(s, {}), metric::kLinkBytesSent));  // one node: no link between nodes
  const std::vector<Measurement> ms = TelemetryFigures(s, {0, 0, 2});
  CHECK(*Find(ms, metric::kLinkBytesSent)->value == 3000.0);
  CHECK(*Find(ms, metric::kLinkBytesReceived)->value == 1000.0);
  CHECK(*Find(ms, metric::kLinkThroughputMean)->value == 2000.0);  // 4000 bytes over 2 s
  CHECK(*Find(ms, metric::kLinkThroughputPeak)->value == 3000.0);  // the second interval: 2000 + 1000
  CHECK(Find(ms, metric::kLinkBytesSent)->method.find("rig1:eth0, rig1:eth1 (/proc/net/dev, loopback left out; read "
                                                      "by each node's first rank)") != std::string::npos);
  // The runner's host's own interfaces (node ""): other traffic, never the link.
  for (TelemetrySample& sample : s) sample.node.clear();
  CHECK_FALSE(Find(TelemetryFigures(s, {0, 0, 2}), metric::kLinkBytesSent));
}

TEST_CASE("telemetry figures: two nodes' bytes add up; the rates are the busiest node's; the runner's host aside") {
  std::vector<TelemetrySample> s;
  // The runner's own host (node ""): left out where the nodes sent their own.
  s.push_back(At(0, "eth0", quantity::kNetSent, 0));
  s.push_back(At(2, "eth0", quantity::kNetSent, 1e9));
  for (auto [node, bytes] : {std::pair{std::string("rig0"), 4000.0}, {std::string("rig1"), 1000.0}}) {
    s.push_back(At(0, "eth0", quantity::kNetSent, 0, node));
    s.push_back(At(0, "eth0", quantity::kNetReceived, 0, node));
    s.push_back(At(2, "eth0", quantity::kNetSent, bytes, node));
    s.push_back(At(2, "eth0", quantity::kNetReceived, bytes / 2, node));
  }
  const std::vector<Measurement> ms = TelemetryFigures(s, {0, 0, 2});
  CHECK(*Find(ms, metric::kLinkBytesSent)->value == 5000.0);
  CHECK(*Find(ms, metric::kLinkBytesReceived)->value == 2500.0);
  CHECK(*Find(ms, metric::kLinkThroughputMean)->value == 3000.0);  // rig0: 6000 bytes over 2 s
  CHECK(Find(ms, metric::kLinkBytesSent)->method.find("rig0:eth0, rig1:eth0 (/proc/net/dev, loopback left out; read "
                                                      "by each node's first rank)") != std::string::npos);
}

TEST_CASE("telemetry figures: the charts' series, the GPUs used averaged, the busiest node's link per interval") {
  const auto gpu = GpuUtilizationSeries(TwoGpus());  // gpu1 idle: not averaged in
  CHECK(gpu == std::vector<std::pair<double, double>>{{0.0, 40.0}, {1.0, 100.0}, {2.0, 100.0}});
  std::vector<TelemetrySample> s;
  for (auto [t, sent] : {std::pair{0.0, 0.0}, {1.0, 1000.0}, {2.0, 3000.0}}) {
    s.push_back(At(t, "eth0", quantity::kNetSent, sent, "rig0"));
    s.push_back(At(t, "eth0", quantity::kNetReceived, 0, "rig0"));
    s.push_back(At(t, "eth0", quantity::kNetSent, sent / 10, "rig1"));
    s.push_back(At(t, "eth0", quantity::kNetReceived, 0, "rig1"));
  }
  CHECK(LinkThroughputSeries(s) == std::vector<std::pair<double, double>>{{1.0, 1000.0}, {2.0, 2000.0}});
  CHECK(GpuUtilizationSeries(s).empty());
  CHECK(LinkThroughputSeries(TwoGpus()).empty());
}
