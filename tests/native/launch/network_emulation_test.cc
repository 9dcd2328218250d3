// EmulatedNetwork: the exact ip/tc commands through a recording runner (no
// root needed), owner markers and stale-namespace removal on a fake /run.
// The real namespaces are tested in network_emulation_real_test.cc.

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/native/launch/network_emulation.h"
#include "fake_process_runner.h"
#include "netns_support.h"
#include "test_files.h"
#include "runner/base/text.h"
#include "runner/plan/plan_parser.h"

using namespace protocol;
using protocol::testing::FakeProcessRunner;
using protocol::testing::Shape;
using protocol::testing::ReadAll;
using protocol::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The shared fake with every command exiting 0 (FakeProcessRunner keeps them all).
FakeProcessRunner AllSucceed() {
  FakeProcessRunner runner;
  runner.result = FakeProcessRunner::Exited(0);
  return runner;
}

// Then the command whose line contains `fail_on` prints `output` and exits 2.
void FailOn(FakeProcessRunner& runner, const std::string& fail_on,
            const std::string& output = "RTNETLINK answers: File exists") {
  runner.script = [fail_on, output](const ProcessSpec& spec) {
    if (Join(spec.argv, " ").find(fail_on) == std::string::npos) return FakeProcessRunner::Ends(0);
    return FakeProcessRunner::Ends(2, {output});
  };
}

NetworkEmulationOptions FakeOptions(FakeProcessRunner* runner, const std::string& prefix = "protocol-7-0") {
  NetworkEmulationOptions o;
  o.runner = runner;
  o.prefix = prefix;
  o.marker_dir = "";
  o.check_privileges = false;
  return o;
}


void Touch(const std::string& path, const std::string& content = "") { std::ofstream(path) << content; }


}  // namespace

TEST_CASE("ParseTcRate and ParseTcTime read tc units") {
  CHECK(ParseTcRate("100mbit").value() == doctest::Approx(1e8));
  CHECK(ParseTcRate("1gbit").value() == doctest::Approx(1e9));
  CHECK(ParseTcRate("2.5kbit").value() == doctest::Approx(2500));
  CHECK(ParseTcRate("10mbps").value() == doctest::Approx(8e7));  // tc: bytes per second
  CHECK(ParseTcRate("20Mbit").value() == doctest::Approx(2e7));
  CHECK(ParseTcRate("fast").status().message() == "bad bandwidth 'fast' (tc rate, e.g. 100mbit, 1gbit)");
  CHECK(ParseTcRate("0mbit").status().message() == "bad bandwidth '0mbit' (tc rate, e.g. 100mbit, 1gbit)");
  CHECK(ParseTcRate("100mb").status().message() == "bad bandwidth '100mb' (tc rate, e.g. 100mbit, 1gbit)");
  CHECK(ParseTcTime("2ms").value() == doctest::Approx(0.002));
  CHECK(ParseTcTime("500us").value() == doctest::Approx(0.0005));
  CHECK(ParseTcTime("1.5s").value() == doctest::Approx(1.5));
  CHECK(ParseTcTime("2MS").value() == doctest::Approx(0.002));  // units are case-insensitive, as tc's
  CHECK(ParseTcTime("2 ms").status().message() == "bad delay '2 ms' (tc time, e.g. 2ms, 500us)");
  CHECK(ParseTcTime("soon").status().message() == "bad delay 'soon' (tc time, e.g. 2ms, 500us)");
}

TEST_CASE("EmulatedNetwork with two nodes joins them by one veth pair shaped at both ends") {
  FakeProcessRunner runner = AllSucceed();
  {
    auto net = EmulatedNetwork::Create({"rig0", "rig1"}, Shape({"20mbit", "2ms"}), FakeOptions(&runner));
    REQUIRE_MESSAGE(net.ok(), net.status().message());
    REQUIRE((*net)->nodes().size() == 2);
    CHECK((*net)->nodes()[0].name == "rig0");
    CHECK((*net)->nodes()[0].netns == "protocol-7-0-rig0");
    CHECK((*net)->nodes()[0].address == "10.77.0.1");
    CHECK((*net)->nodes()[1].netns == "protocol-7-0-rig1");
    CHECK((*net)->nodes()[1].address == "10.77.0.2");
    CHECK((*net)->nodes()[1].device == "eth0");
    CHECK((*net)->Wrap(1, {"protocol", "worker", "--rank", "1"}) ==
          std::vector<std::string>{"ip", "netns", "exec", "protocol-7-0-rig1", "protocol", "worker", "--rank", "1"});
    const std::vector<std::string> expected = {
        "ip netns add protocol-7-0-rig0",
        "ip -n protocol-7-0-rig0 link set lo up",
        "ip netns add protocol-7-0-rig1",
        "ip -n protocol-7-0-rig1 link set lo up",
        "ip link add eth0 netns protocol-7-0-rig0 type veth peer name eth0 netns protocol-7-0-rig1",
        "ip -n protocol-7-0-rig0 addr add 10.77.0.1/24 dev eth0",
        "ip -n protocol-7-0-rig0 link set eth0 up",
        "ip -n protocol-7-0-rig1 addr add 10.77.0.2/24 dev eth0",
        "ip -n protocol-7-0-rig1 link set eth0 up",
        "tc -n protocol-7-0-rig0 qdisc add dev eth0 root handle 1: netem delay 2000us limit 100000",
        "tc -n protocol-7-0-rig0 qdisc add dev eth0 parent 1:1 handle 10: tbf rate 20000000bit burst 16384 latency 100ms",
        "tc -n protocol-7-0-rig1 qdisc add dev eth0 root handle 1: netem delay 2000us limit 100000",
        "tc -n protocol-7-0-rig1 qdisc add dev eth0 parent 1:1 handle 10: tbf rate 20000000bit burst 16384 latency 100ms",
    };
    CHECK(runner.commands() == expected);
    CHECK((*net)->commands() == expected);
  }
  // Destroying the object deletes the namespaces, last created first.
  REQUIRE(runner.commands().size() == 15);
  CHECK(runner.commands()[13] == "ip netns delete protocol-7-0-rig1");
  CHECK(runner.commands()[14] == "ip netns delete protocol-7-0-rig0");
}

TEST_CASE("EmulatedNetwork shapes with tbf alone without a delay, and not at all without a bandwidth") {
  FakeProcessRunner runner = AllSucceed();
  auto net = EmulatedNetwork::Create({"a", "b"}, Shape({"1gbit", ""}), FakeOptions(&runner));
  REQUIRE(net.ok());
  // 2 ms at 1 Gbit/s = 250000 bytes of bucket.
  CHECK(runner.commands()[9] == "tc -n protocol-7-0-a qdisc add dev eth0 root handle 1: tbf rate 1000000000bit burst 250000 latency 100ms");
  CHECK(runner.commands()[10] == "tc -n protocol-7-0-b qdisc add dev eth0 root handle 1: tbf rate 1000000000bit burst 250000 latency 100ms");
  CHECK(runner.commands().size() == 11);

  FakeProcessRunner plain = AllSucceed();
  auto unshaped = EmulatedNetwork::Create({"a", "b"}, Shape({"", ""}), FakeOptions(&plain, "protocol-7-1"));
  REQUIRE(unshaped.ok());
  CHECK(plain.commands().size() == 9);
  CHECK(plain.commands().back() == "ip -n protocol-7-1-b link set eth0 up");
}

TEST_CASE("EmulatedNetwork with three nodes joins them through a bridge in a switch namespace") {
  FakeProcessRunner runner = AllSucceed();
  auto net = EmulatedNetwork::Create({"a", "b", "c"}, Shape({"100mbit", "1ms"}), FakeOptions(&runner));
  REQUIRE_MESSAGE(net.ok(), net.status().message());
  CHECK((*net)->nodes()[2].address == "10.77.0.3");
  const std::vector<std::string> expected = {
      "ip netns add protocol-7-0-a",
      "ip -n protocol-7-0-a link set lo up",
      "ip netns add protocol-7-0-b",
      "ip -n protocol-7-0-b link set lo up",
      "ip netns add protocol-7-0-c",
      "ip -n protocol-7-0-c link set lo up",
      "ip netns add protocol-7-0-sw",
      "ip -n protocol-7-0-sw link add br0 type bridge",
      "ip -n protocol-7-0-sw link set br0 up",
      "ip link add eth0 netns protocol-7-0-a type veth peer name p0 netns protocol-7-0-sw",
      "ip -n protocol-7-0-sw link set p0 master br0",
      "ip -n protocol-7-0-sw link set p0 up",
      "ip link add eth0 netns protocol-7-0-b type veth peer name p1 netns protocol-7-0-sw",
      "ip -n protocol-7-0-sw link set p1 master br0",
      "ip -n protocol-7-0-sw link set p1 up",
      "ip link add eth0 netns protocol-7-0-c type veth peer name p2 netns protocol-7-0-sw",
      "ip -n protocol-7-0-sw link set p2 master br0",
      "ip -n protocol-7-0-sw link set p2 up",
      "ip -n protocol-7-0-a addr add 10.77.0.1/24 dev eth0",
      "ip -n protocol-7-0-a link set eth0 up",
      "ip -n protocol-7-0-b addr add 10.77.0.2/24 dev eth0",
      "ip -n protocol-7-0-b link set eth0 up",
      "ip -n protocol-7-0-c addr add 10.77.0.3/24 dev eth0",
      "ip -n protocol-7-0-c link set eth0 up",
      "tc -n protocol-7-0-a qdisc add dev eth0 root handle 1: netem delay 1000us limit 100000",
      "tc -n protocol-7-0-a qdisc add dev eth0 parent 1:1 handle 10: tbf rate 100000000bit burst 25000 latency 100ms",
      "tc -n protocol-7-0-sw qdisc add dev p0 root handle 1: tbf rate 100000000bit burst 25000 latency 100ms",
      "tc -n protocol-7-0-b qdisc add dev eth0 root handle 1: netem delay 1000us limit 100000",
      "tc -n protocol-7-0-b qdisc add dev eth0 parent 1:1 handle 10: tbf rate 100000000bit burst 25000 latency 100ms",
      "tc -n protocol-7-0-sw qdisc add dev p1 root handle 1: tbf rate 100000000bit burst 25000 latency 100ms",
  };
  // Node c's shaping follows the same pattern; its switch port comes last.
  REQUIRE(runner.commands().size() == 33);
  for (size_t i = 0; i < expected.size(); ++i) CHECK(runner.commands()[i] == expected[i]);
  CHECK(runner.commands()[32] == "tc -n protocol-7-0-sw qdisc add dev p2 root handle 1: tbf rate 100000000bit burst 25000 latency 100ms");
  CHECK((*net)->Teardown().ok());
  CHECK(runner.commands()[33] == "ip netns delete protocol-7-0-sw");
  CHECK(runner.commands().back() == "ip netns delete protocol-7-0-a");
  CHECK(runner.commands().size() == 37);
  CHECK((*net)->Teardown().ok());  // idempotent: nothing more to do
  CHECK(runner.commands().size() == 37);
}

TEST_CASE("EmulatedNetwork reports the failing command with its output and removes what it made") {
  FakeProcessRunner runner = AllSucceed();
  FailOn(runner, "netem", "Error: Specified qdisc kind is unknown.");
  auto net = EmulatedNetwork::Create({"rig0", "rig1"}, Shape({"20mbit", "2ms"}), FakeOptions(&runner));
  REQUIRE_FALSE(net.ok());
  CHECK(net.status().code() == Status::Code::kIoError);
  CHECK(net.status().message() ==
        "network emulation: `tc -n protocol-7-0-rig0 qdisc add dev eth0 root handle 1: netem delay 2000us limit 100000` "
        "failed (exit code 2): Error: Specified qdisc kind is unknown. (this kernel has no sch_netem, which the delay "
        "needs: `modprobe sch_netem`, or drop cluster.emulate.delay)");
  REQUIRE(runner.commands().size() == 12);
  CHECK(runner.commands()[10] == "ip netns delete protocol-7-0-rig1");
  CHECK(runner.commands()[11] == "ip netns delete protocol-7-0-rig0");

  FakeProcessRunner second = AllSucceed();
  FailOn(second, "ip netns add protocol-7-0-b");
  auto half = EmulatedNetwork::Create({"a", "b"}, Shape({"20mbit", ""}), FakeOptions(&second));
  REQUIRE_FALSE(half.ok());
  CHECK(half.status().message() ==
        "network emulation: `ip netns add protocol-7-0-b` failed (exit code 2): RTNETLINK answers: File exists");
  // Only the namespace it created is removed, not the one that was in the way.
  CHECK(second.commands().back() == "ip netns delete protocol-7-0-a");
  CHECK(second.commands().size() == 4);
}

TEST_CASE("validate and the run take exactly the same emulated bandwidths and delays") {
  // Regression: validate and the run had a rule each (0mbit passed validate and failed the run;
  // 100Mbit was refused by validate though the run took it).
  auto plan = [](const std::string& bandwidth, const std::string& delay) {
    return "protocol: 1\nname: t\nmodels: {m: {preset: tiny}}\ncluster:\n  emulate: {bandwidth: " + bandwidth +
           ", delay: " + delay + "}\nstages:\n  - name: s\n    cases:\n      - {id: a, workload: inference, "
           "backend: fsdp, model: m, inference: {prompt: hi, max_new_tokens: [4]}}\n";
  };
  for (const std::string bandwidth : {"100mbit", "100Mbit", "1GBIT", "0mbit", "0.0kbit", "10mbps", "fast", "100mb",
                                      "1.5gbit"}) {
    for (const std::string delay : {"2ms", "2MS", "500us", "0ms", "1.5s", "2 ms", "soon"}) {
      CAPTURE(bandwidth);
      CAPTURE(delay);
      PlanParseResult r = ParsePlanString(plan(bandwidth, delay), "<string>");
      CHECK(r.ok() == (ParseTcRate(bandwidth).ok() && ParseTcTime(delay).ok()));
      if (!r.ok()) continue;
      FakeProcessRunner runner = AllSucceed();
      CHECK(EmulatedNetwork::Create({"a", "b"}, *r.plan->cluster.emulate, FakeOptions(&runner)).ok());
    }
  }
}

TEST_CASE("EmulatedNetwork rejects bad node lists before running anything") {
  FakeProcessRunner runner = AllSucceed();
  auto opts = FakeOptions(&runner);
  CHECK(EmulatedNetwork::Create({"a"}, {}, opts).status().message() == "network emulation needs 2 to 253 nodes, got 1");
  CHECK(EmulatedNetwork::Create({"a", "a"}, {}, opts).status().message() ==
        "network emulation: duplicate node name 'a'");
  CHECK(EmulatedNetwork::Create({"a", "b c"}, {}, opts).status().message() == "network emulation: bad node name 'b c'");
  CHECK(EmulatedNetwork::Create({"a", "sw"}, {}, opts).status().message() ==
        "network emulation: node name 'sw' is reserved for the switch");
  CHECK(runner.commands().empty());
}

TEST_CASE("EmulatedNetwork writes an owner marker and removes it on teardown") {
  FakeProcessRunner runner = AllSucceed();
  TempDir temp("netem");
  REQUIRE(!temp.path.empty());
  const std::string dir = temp.str();
  auto opts = FakeOptions(&runner, "protocol-7-9");
  opts.marker_dir = dir + "/markers";
  auto net = EmulatedNetwork::Create({"a", "b"}, {}, opts);
  REQUIRE(net.ok());
  std::string marker = ReadAll(dir + "/markers/protocol-7-9");
  CHECK(StartsWith(marker, std::to_string(::getpid()) + " "));
  CHECK((*net)->Teardown().ok());
  CHECK_FALSE(fs::exists(dir + "/markers/protocol-7-9"));
}

TEST_CASE("RemoveStaleNetworks removes the namespaces of dead or replaced owners only") {
  TempDir temp("netem");
  REQUIRE(!temp.path.empty());
  const std::string dir = temp.str();
  std::string netns = dir + "/netns", markers = dir + "/markers";
  fs::create_directories(netns);
  fs::create_directories(markers);
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  REQUIRE(dead > 0);
  REQUIRE(waitpid(dead, nullptr, 0) == dead);
  std::string me = std::to_string(::getpid());
  std::string d = std::to_string(dead);
  std::string my_start;
  {
    std::string stat = ReadAll("/proc/self/stat");
    std::istringstream fields(stat.substr(stat.rfind(')') + 1));
    for (int i = 3; i <= 22; ++i) fields >> my_start;
  }
  Touch(netns + "/protocol-" + d + "-0-rig0");
  Touch(netns + "/protocol-" + d + "-0-rig1");
  Touch(markers + "/protocol-" + d + "-0", d + " 123\n");
  Touch(netns + "/protocol-" + me + "-1-rig0");                   // alive, marker matches
  Touch(markers + "/protocol-" + me + "-1", me + " " + my_start + "\n");
  Touch(netns + "/protocol-" + me + "-2-rig0");                   // pid reused: start time differs
  Touch(markers + "/protocol-" + me + "-2", me + " 1\n");
  Touch(netns + "/protocol-" + me + "-3-rig0");                   // alive, no marker: kept
  Touch(netns + "/someone-else");
  Touch(markers + "/protocol-" + d + "-5", d + " 1\n");           // a marker alone

  FakeProcessRunner runner = AllSucceed();
  auto removed = RemoveStaleNetworks(&runner, netns, markers);
  REQUIRE_MESSAGE(removed.ok(), removed.status().message());
  std::vector<std::string> expected = {"protocol-" + d + "-0-rig0", "protocol-" + d + "-0-rig1",
                                       "protocol-" + me + "-2-rig0"};
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> got = *removed;
  std::sort(got.begin(), got.end());
  CHECK(got == expected);
  CHECK(runner.commands().size() == 3);
  CHECK_FALSE(fs::exists(markers + "/protocol-" + d + "-0"));
  CHECK_FALSE(fs::exists(markers + "/protocol-" + d + "-5"));
  CHECK_FALSE(fs::exists(markers + "/protocol-" + me + "-2"));
  CHECK(fs::exists(markers + "/protocol-" + me + "-1"));
}
