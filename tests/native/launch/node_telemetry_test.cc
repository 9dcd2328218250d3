// A multi-node case's other nodes sampled by their first rank
// (node_telemetry.h): which ranks are asked to, and what they send.

#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <mutex>
#include <thread>

#include "backends/native/launch/node_telemetry.h"
#include "runner/exec/net_dev.h"

using namespace protocol;
using namespace protocol::native;

TEST_CASE("node telemetry: only a node's first rank of a multi-node case with sampling on is asked") {
  CHECK(NodeTelemetryEnv(1.0, 2, 0, false) == std::map<std::string, std::string>{{kTelemetryIntervalVariable, "1"}});
  CHECK(NodeTelemetryEnv(0.5, 3, 0, true) ==
        std::map<std::string, std::string>{{kTelemetryIntervalVariable, "0.5"}, {kTelemetryGpusVariable, "1"}});
  CHECK(NodeTelemetryEnv(1.0, 2, 1, false).empty());  // not the node's first rank
  CHECK(NodeTelemetryEnv(1.0, 1, 0, false).empty());  // one node: the runner samples its host
  CHECK(NodeTelemetryEnv(0.0, 2, 0, false).empty());  // sampling off
}

TEST_CASE("node telemetry: the node's interfaces are read and sent with its name, from start to end") {
  std::mutex mutex;
  std::vector<TelemetrySample> sent;
  auto send = [&](const TelemetrySample& s) {
    std::lock_guard<std::mutex> lock(mutex);
    sent.push_back(s);
  };
  SUBCASE("asked") {
    ::setenv(kTelemetryIntervalVariable, "0.1", 1);
    { NodeTelemetry telemetry("rig1", send); }
    ::unsetenv(kTelemetryIntervalVariable);
    // The start's zeros and the end's reading, at the least, of every interface but loopback.
    std::lock_guard<std::mutex> lock(mutex);
    std::optional<std::vector<InterfaceCounters>> here = ProcNetMeter().Read();
    REQUIRE(here);
    const bool beside_loopback = std::any_of(here->begin(), here->end(), [](const auto& c) { return c.name != "lo"; });
    CHECK(sent.empty() != beside_loopback);
    for (const TelemetrySample& s : sent) {
      CHECK(s.node == "rig1");
      CHECK(s.device != "lo");
      CHECK((s.quantity == quantity::kNetSent || s.quantity == quantity::kNetReceived));
    }
  }
  SUBCASE("not asked") {
    ::unsetenv(kTelemetryIntervalVariable);
    { NodeTelemetry telemetry("rig1", send); }
    CHECK(sent.empty());
  }
}
