// /proc/net/dev as Linux prints it (net_dev.h), and the samples of the
// interfaces' counters since a case began (telemetry.h NetSamples).

#include <doctest/doctest.h>

#include <map>

#include "runner/exec/net_dev.h"
#include "runner/exec/telemetry.h"

using namespace protocol;

namespace {

// Linux 6.1's /proc/net/dev, as read on a host with a loopback and one Ethernet.
const char* kProcNetDev =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
    "carrier compressed\n"
    "    lo: 7216451   41205    0    0    0     0          0         0  7216451   41205    0    0    0     0 "
    "      0          0\n"
    "  eth0: 1893745721 1304662    0    0    0     0          0         0 90311200  644122    0    0    0     0 "
    "      0          0\n";

std::map<std::string, double> ByName(const std::vector<TelemetrySample>& samples, const std::string& quantity) {
  std::map<std::string, double> out;
  for (const TelemetrySample& s : samples)
    if (s.quantity == quantity) out[s.device] = s.value;
  return out;
}

}  // namespace

TEST_CASE("net dev: received bytes are the first number, sent bytes the ninth") {
  const std::vector<InterfaceCounters> c = ParseProcNetDev(kProcNetDev);
  REQUIRE(c.size() == 2);
  CHECK(c[0].name == "lo");
  CHECK(c[1].name == "eth0");
  CHECK(c[1].received_bytes == 1893745721u);
  CHECK(c[1].sent_bytes == 90311200u);
  CHECK(ParseProcNetDev("no interfaces here\n").empty());
}

TEST_CASE("net dev: this host's file is readable and has its loopback") {
  ProcNetMeter meter;
  auto read = meter.Read();
  REQUIRE(read);
  bool lo = false;
  for (const InterfaceCounters& c : *read) lo = lo || c.name == "lo";
  CHECK(lo);
  CHECK_FALSE(ProcNetMeter("/nonexistent/net/dev").Read());
}

TEST_CASE("net dev: samples count from the case's start, loopback left out, idle interfaces only at the start") {
  std::map<std::string, InterfaceCounters> baseline;
  auto first = NetSamples({{"lo", 100, 100}, {"eth0", 1000, 5000}, {"eth1", 7, 7}}, 0.0, true, baseline);
  CHECK(first.size() == 4);  // eth0 and eth1, sent and received, all 0
  for (const TelemetrySample& s : first) {
    CHECK(s.value == 0);
    CHECK(s.device != "lo");
  }
  // eth0 moved, eth1 did not, docker0 appeared mid-case.
  auto later = NetSamples({{"lo", 900, 900}, {"eth0", 1600, 9000}, {"eth1", 7, 7}, {"docker0", 50, 60}}, 1.0, false,
                          baseline);
  CHECK(ByName(later, quantity::kNetSent) == std::map<std::string, double>{{"eth0", 4000}});
  CHECK(ByName(later, quantity::kNetReceived) == std::map<std::string, double>{{"eth0", 600}});
  for (const TelemetrySample& s : later) CHECK(s.seconds == 1.0);
  // docker0 counts from where it was first seen; eth0's counters reset (the interface came back).
  auto last = NetSamples({{"eth0", 10, 20}, {"eth1", 7, 7}, {"docker0", 150, 60}}, 2.0, false, baseline);
  CHECK(ByName(last, quantity::kNetReceived) == std::map<std::string, double>{{"docker0", 100}});
  CHECK(ByName(last, quantity::kNetSent) == std::map<std::string, double>{{"docker0", 0}});
  auto after_reset = NetSamples({{"eth0", 30, 20}}, 3.0, false, baseline);
  CHECK(ByName(after_reset, quantity::kNetReceived) == std::map<std::string, double>{{"eth0", 20}});
}
