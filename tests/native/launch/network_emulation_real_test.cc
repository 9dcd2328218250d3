// EmulatedNetwork on real network namespaces, shaped by a token bucket (tbf):
// a program run through Wrap reaches the other node over TCP; a shaped link's
// token bucket holds traffic back (the kernel's own qdisc counters say so)
// while an unshaped link has no qdisc at all; three nodes talk through the
// switch's shaped ports; teardown leaves no namespace, also after an error.
// Needs CAP_NET_ADMIN + CAP_SYS_ADMIN, iproute2 and sch_tbf; without them
// every case here is skipped with the reason (tests/support/skip.h). A delay (netem)
// is in network_emulation_delay_test.cc, the exact ip/tc commands without
// root in network_emulation_test.cc.

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "netns_support.h"
#include "skip.h"

using namespace protocol;
using namespace protocol::testing;
namespace fs = std::filesystem;

namespace {

// Probed once for the file, with the qdisc every case here uses, so that
// either all of them run or all are skipped for the same reason.
const std::string& Unavailable() {
  static const std::string why = NamespacesUnavailable({"10mbit", ""});
  return why;
}

}  // namespace

#define SKIP_WITHOUT_NAMESPACES() \
  do {                            \
    if (!Unavailable().empty()) SKIP_TEST(Unavailable()); \
  } while (0)

TEST_CASE("real network: a program run through Wrap reaches the other node over TCP") {
  SKIP_WITHOUT_NAMESPACES();
  auto net = MustCreate({"rig0", "rig1"}, {});
  // Node 0 answers "pong" to one line; node 1 is bash, whose /dev/tcp needs no other tool.
  const std::string address = net->nodes()[0].address;
  auto server = InNamespace<std::string>(net->nodes()[0].netns, std::function<std::string()>([&]() -> std::string {
    int listener = Listen(address, 7777);
    int fd = AcceptWithin(listener, 10000);
    ::close(listener);
    if (fd < 0) return "no connection";
    char buf[64] = {};
    ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
    ::send(fd, "pong\n", 5, MSG_NOSIGNAL);
    ::close(fd);
    return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }));
  auto runner = MakeSystemProcessRunner();
  ProcessSpec spec;
  spec.argv = net->Wrap(1, {"bash", "-c",
                            "for i in $(seq 100); do exec 3<>/dev/tcp/" + address +
                                "/7777 && break; sleep 0.05; done 2>/dev/null; "
                                "echo ping >&3; read -r reply <&3; echo \"reply=$reply\"; "
                                "ip -o -4 addr show dev eth0 | awk '{print $2, $3, $4}'"});
  spec.timeout_seconds = 15;
  StopFlag never;
  std::vector<std::string> lines;
  ProcessResult r = runner->Run(spec, never, [&](std::string_view line) { lines.emplace_back(line); });
  CHECK(r.ending == ProcessResult::Ending::kExited);
  CHECK(r.exit_code == 0);
  CHECK(server.get() == "ping\n");
  // It ran inside node 1: its only IPv4 address there is node 1's.
  CHECK(lines == std::vector<std::string>{"reply=pong", "eth0 inet 10.77.0.2/24"});
  CHECK(net->Teardown().ok());
}

TEST_CASE("real network: a 20mbit link's token bucket holds traffic back; an unshaped link has no qdisc") {
  SKIP_WITHOUT_NAMESPACES();
  const size_t kBytes = 4 << 20;  // 256 times the 16 KiB bucket: the sender must wait for tokens
  {
    auto net = MustCreate({"rig0", "rig1"}, {});
    CHECK(Transfer(*net, kBytes, 1, 0) == kBytes);
    // A veth without shaping keeps the kernel's default: no queueing discipline.
    CHECK(Kinds(Qdiscs(net->nodes()[1].netns, "eth0")) == std::vector<std::string>{"noqueue"});
  }
  auto net = MustCreate({"rig0", "rig1"}, {"20mbit", ""});
  CHECK(Transfer(*net, kBytes, 1, 0) == kBytes);
  std::vector<Qdisc> sender = Qdiscs(net->nodes()[1].netns, "eth0");
  REQUIRE(Kinds(sender) == std::vector<std::string>{"tbf"});
  CHECK(sender[0].line.find(" rate 20Mbit burst 16Kb lat 100ms") != std::string::npos);
  INFO(sender[0].line);
  CHECK(sender[0].sent_bytes >= static_cast<long long>(kBytes));  // the payload went through the shaper
  CHECK(sender[0].overlimits > 0);                                // and had to wait for tokens
}

TEST_CASE("real network: three nodes reach each other through the shaped switch") {
  SKIP_WITHOUT_NAMESPACES();
  const size_t kBytes = 2 << 20;
  auto net = MustCreate({"a", "b", "c"}, {"20mbit", ""});
  CHECK(Transfer(*net, kBytes, /*from=*/2, /*to=*/1) == kBytes);
  // c's own link is shaped on its way out...
  std::vector<Qdisc> c_out = Qdiscs(net->nodes()[2].netns, "eth0");
  REQUIRE(Kinds(c_out) == std::vector<std::string>{"tbf"});
  CHECK(c_out[0].sent_bytes >= static_cast<long long>(kBytes));
  CHECK(c_out[0].overlimits > 0);
  // ...and the switch port towards b carried the payload; the port towards a did not.
  const std::string sw = net->nodes()[0].netns.substr(0, net->nodes()[0].netns.rfind('-')) + "-sw";
  std::vector<Qdisc> to_b = Qdiscs(sw, "p1");
  std::vector<Qdisc> to_a = Qdiscs(sw, "p0");
  REQUIRE(Kinds(to_b) == std::vector<std::string>{"tbf"});
  REQUIRE(Kinds(to_a) == std::vector<std::string>{"tbf"});
  CHECK(to_b[0].sent_bytes >= static_cast<long long>(kBytes));
  CHECK(to_a[0].sent_bytes < static_cast<long long>(kBytes) / 100);  // only the odd broadcast (ARP)
}

TEST_CASE("real network: teardown removes every namespace, also after an error") {
  SKIP_WITHOUT_NAMESPACES();
  std::vector<std::string> names;
  {
    auto net = MustCreate({"rig0", "rig1"}, {"50mbit", ""});
    for (const auto& n : net->nodes()) {
      names.push_back(n.netns);
      CHECK(NamespaceListed(n.netns));
    }
    CHECK(net->Teardown().ok());
    for (const auto& n : names) CHECK_FALSE(NamespaceListed(n));
    CHECK(net->Teardown().ok());  // idempotent
  }
  // Destroyed without Teardown: the destructor removes everything.
  {
    auto net = MustCreate({"rig0", "rig1"}, {});
    names = {net->nodes()[0].netns, net->nodes()[1].netns};
  }
  for (const auto& n : names) CHECK_FALSE(NamespaceListed(n));

  // A failure half-way (the second namespace's name is taken): the first is
  // removed, the one in the way is not ours and stays.
  std::string prefix = "protocol-" + std::to_string(::getpid()) + "-900";
  auto runner = MakeSystemProcessRunner();
  StopFlag never;
  ProcessSpec add;
  add.argv = {"ip", "netns", "add", prefix + "-b"};
  REQUIRE(runner->Run(add, never, [](std::string_view) {}).exit_code == 0);
  NetworkEmulationOptions opts;
  opts.prefix = prefix;
  auto failed = EmulatedNetwork::Create({"a", "b"}, {}, opts);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() == "network emulation: `ip netns add " + prefix + "-b` failed (exit code 1): " +
                                         "Cannot create namespace file \"/run/netns/" + prefix +
                                         "-b\": File exists");
  CHECK_FALSE(NamespaceListed(prefix + "-a"));
  CHECK(NamespaceListed(prefix + "-b"));
  CHECK_FALSE(fs::exists("/run/protocol-netem/" + prefix));
  ProcessSpec del;
  del.argv = {"ip", "netns", "delete", prefix + "-b"};
  CHECK(runner->Run(del, never, [](std::string_view) {}).exit_code == 0);
}
