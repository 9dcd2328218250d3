// A delayed link on real network namespaces (netem under the token bucket):
// the qdisc the kernel holds says "delay 2ms", and no round trip is shorter
// than twice the delay. Needs what network_emulation_real_test.cc needs plus
// sch_netem; without it the case is skipped with the reason (tests/support/skip.h).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "netns_support.h"
#include "skip.h"

using namespace protocol;
using namespace protocol::testing;

TEST_CASE("real network: a delay sits under every round trip") {
  if (std::string why = NamespacesUnavailable({"100mbit", "2ms"}); !why.empty()) SKIP_TEST(why);
  auto net = MustCreate({"rig0", "rig1"}, {"100mbit", "2ms"});
  std::vector<Qdisc> qdiscs = Qdiscs(net->nodes()[1].netns, "eth0");
  REQUIRE(Kinds(qdiscs) == std::vector<std::string>{"netem", "tbf"});
  CHECK(qdiscs[0].line.find(" delay 2ms") != std::string::npos);
  // netem holds every packet for the delay before it leaves, on both ends, so
  // no round trip can be shorter than twice the delay however fast the
  // machine is: a floor the kernel guarantees, not a speed expectation.
  double rtt = MinRoundTrip(*net, 10);
  CHECK(rtt >= 0.004);
}

