// EmulatedNetwork: the exact ip/tc commands (fake runner, no root), and the
// real thing where this process may create namespaces: a TCP round trip
// through Wrap, throughput over an unshaped and a 20mbit link, round-trip time
// with a delay, and tear-down (also after an error). The real tests print why
// and return when they cannot run (not root, no netns, no sch_netem).

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "backends/native/network_emulation.h"
#include "runner/base/text.h"

using namespace protocol;
namespace fs = std::filesystem;

namespace {

// Records every argv; fails the command whose line contains `fail_on`.
class RecordingRunner : public ProcessRunner {
 public:
  std::vector<std::string> commands;
  std::string fail_on;
  std::string fail_output = "RTNETLINK answers: File exists";

  ProcessResult Run(const ProcessSpec& spec, const StopFlag&, const LineCallback& on_line) override {
    std::string line = Join(spec.argv, " ");
    commands.push_back(line);
    ProcessResult r;
    r.ending = ProcessResult::Ending::kExited;
    r.exit_code = 0;
    if (!fail_on.empty() && line.find(fail_on) != std::string::npos) {
      on_line(fail_output);
      r.exit_code = 2;
    }
    return r;
  }
};

NetworkEmulationOptions FakeOptions(RecordingRunner* runner, const std::string& prefix = "protocol-7-0") {
  NetworkEmulationOptions o;
  o.runner = runner;
  o.prefix = prefix;
  o.marker_dir = "";
  o.check_privileges = false;
  return o;
}

std::string TempDir() {
  std::string pattern = (fs::temp_directory_path() / "protocol-netem-XXXXXX").string();
  REQUIRE(mkdtemp(pattern.data()) != nullptr);
  return pattern;
}

void Touch(const std::string& path, const std::string& content = "") { std::ofstream(path) << content; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

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
  CHECK(ParseTcTime("2 ms").status().message() == "bad delay '2 ms' (tc time, e.g. 2ms, 500us)");
}

TEST_CASE("EmulatedNetwork with two nodes joins them by one veth pair shaped at both ends") {
  RecordingRunner runner;
  {
    auto net = EmulatedNetwork::Create({"rig0", "rig1"}, {"20mbit", "2ms"}, FakeOptions(&runner));
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
    CHECK(runner.commands == expected);
    CHECK((*net)->commands() == expected);
  }
  // Destroying the object deletes the namespaces, last created first.
  REQUIRE(runner.commands.size() == 15);
  CHECK(runner.commands[13] == "ip netns delete protocol-7-0-rig1");
  CHECK(runner.commands[14] == "ip netns delete protocol-7-0-rig0");
}

TEST_CASE("EmulatedNetwork shapes with tbf alone without a delay, and not at all without a bandwidth") {
  RecordingRunner runner;
  auto net = EmulatedNetwork::Create({"a", "b"}, {"1gbit", ""}, FakeOptions(&runner));
  REQUIRE(net.ok());
  // 2 ms at 1 Gbit/s = 250000 bytes of bucket.
  CHECK(runner.commands[9] == "tc -n protocol-7-0-a qdisc add dev eth0 root handle 1: tbf rate 1000000000bit burst 250000 latency 100ms");
  CHECK(runner.commands[10] == "tc -n protocol-7-0-b qdisc add dev eth0 root handle 1: tbf rate 1000000000bit burst 250000 latency 100ms");
  CHECK(runner.commands.size() == 11);

  RecordingRunner plain;
  auto unshaped = EmulatedNetwork::Create({"a", "b"}, {"", ""}, FakeOptions(&plain, "protocol-7-1"));
  REQUIRE(unshaped.ok());
  CHECK(plain.commands.size() == 9);
  CHECK(plain.commands.back() == "ip -n protocol-7-1-b link set eth0 up");
}

TEST_CASE("EmulatedNetwork with three nodes joins them through a bridge in a switch namespace") {
  RecordingRunner runner;
  auto net = EmulatedNetwork::Create({"a", "b", "c"}, {"100mbit", "1ms"}, FakeOptions(&runner));
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
  REQUIRE(runner.commands.size() == 33);
  for (size_t i = 0; i < expected.size(); ++i) CHECK(runner.commands[i] == expected[i]);
  CHECK(runner.commands[32] == "tc -n protocol-7-0-sw qdisc add dev p2 root handle 1: tbf rate 100000000bit burst 25000 latency 100ms");
  CHECK((*net)->Teardown().ok());
  CHECK(runner.commands[33] == "ip netns delete protocol-7-0-sw");
  CHECK(runner.commands.back() == "ip netns delete protocol-7-0-a");
  CHECK(runner.commands.size() == 37);
  CHECK((*net)->Teardown().ok());  // idempotent: nothing more to do
  CHECK(runner.commands.size() == 37);
}

TEST_CASE("EmulatedNetwork reports the failing command with its output and removes what it made") {
  RecordingRunner runner;
  runner.fail_on = "netem";
  runner.fail_output = "Error: Specified qdisc kind is unknown.";
  auto net = EmulatedNetwork::Create({"rig0", "rig1"}, {"20mbit", "2ms"}, FakeOptions(&runner));
  REQUIRE_FALSE(net.ok());
  CHECK(net.status().code() == Status::Code::kIoError);
  CHECK(net.status().message() ==
        "network emulation: `tc -n protocol-7-0-rig0 qdisc add dev eth0 root handle 1: netem delay 2000us limit 100000` "
        "failed (exit code 2): Error: Specified qdisc kind is unknown. (this kernel has no sch_netem, which the delay "
        "needs: `modprobe sch_netem`, or drop cluster.emulate.delay)");
  REQUIRE(runner.commands.size() == 12);
  CHECK(runner.commands[10] == "ip netns delete protocol-7-0-rig1");
  CHECK(runner.commands[11] == "ip netns delete protocol-7-0-rig0");

  RecordingRunner second;
  second.fail_on = "ip netns add protocol-7-0-b";
  auto half = EmulatedNetwork::Create({"a", "b"}, {"20mbit", ""}, FakeOptions(&second));
  REQUIRE_FALSE(half.ok());
  CHECK(half.status().message() ==
        "network emulation: `ip netns add protocol-7-0-b` failed (exit code 2): RTNETLINK answers: File exists");
  // Only the namespace it created is removed, not the one that was in the way.
  CHECK(second.commands.back() == "ip netns delete protocol-7-0-a");
  CHECK(second.commands.size() == 4);
}

TEST_CASE("EmulatedNetwork rejects bad node lists and shapes before running anything") {
  RecordingRunner runner;
  auto opts = FakeOptions(&runner);
  CHECK(EmulatedNetwork::Create({"a"}, {}, opts).status().message() == "network emulation needs 2 to 253 nodes, got 1");
  CHECK(EmulatedNetwork::Create({"a", "a"}, {}, opts).status().message() ==
        "network emulation: duplicate node name 'a'");
  CHECK(EmulatedNetwork::Create({"a", "b c"}, {}, opts).status().message() == "network emulation: bad node name 'b c'");
  CHECK(EmulatedNetwork::Create({"a", "sw"}, {}, opts).status().message() ==
        "network emulation: node name 'sw' is reserved for the switch");
  CHECK(EmulatedNetwork::Create({"a", "b"}, {"fast", ""}, opts).status().message() ==
        "bad bandwidth 'fast' (tc rate, e.g. 100mbit, 1gbit)");
  CHECK(EmulatedNetwork::Create({"a", "b"}, {"1mbit", "soon"}, opts).status().message() ==
        "bad delay 'soon' (tc time, e.g. 2ms, 500us)");
  CHECK(runner.commands.empty());
}

TEST_CASE("EmulatedNetwork writes an owner marker and removes it on teardown") {
  RecordingRunner runner;
  std::string dir = TempDir();
  auto opts = FakeOptions(&runner, "protocol-7-9");
  opts.marker_dir = dir + "/markers";
  auto net = EmulatedNetwork::Create({"a", "b"}, {}, opts);
  REQUIRE(net.ok());
  std::string marker = ReadAll(dir + "/markers/protocol-7-9");
  CHECK(StartsWith(marker, std::to_string(::getpid()) + " "));
  CHECK((*net)->Teardown().ok());
  CHECK_FALSE(fs::exists(dir + "/markers/protocol-7-9"));
  fs::remove_all(dir);
}

TEST_CASE("RemoveStaleNetworks removes the namespaces of dead or replaced owners only") {
  std::string dir = TempDir();
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

  RecordingRunner runner;
  auto removed = RemoveStaleNetworks(&runner, netns, markers);
  REQUIRE_MESSAGE(removed.ok(), removed.status().message());
  std::vector<std::string> expected = {"protocol-" + d + "-0-rig0", "protocol-" + d + "-0-rig1",
                                       "protocol-" + me + "-2-rig0"};
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> got = *removed;
  std::sort(got.begin(), got.end());
  CHECK(got == expected);
  CHECK(runner.commands.size() == 3);
  CHECK_FALSE(fs::exists(markers + "/protocol-" + d + "-0"));
  CHECK_FALSE(fs::exists(markers + "/protocol-" + d + "-5"));
  CHECK_FALSE(fs::exists(markers + "/protocol-" + me + "-2"));
  CHECK(fs::exists(markers + "/protocol-" + me + "-1"));
  fs::remove_all(dir);
}

// ---- the real thing ----------------------------------------------------------

namespace {

// Why the real tests cannot run here, or "" when they can.
std::string RealNetworkUnavailable() {
  if (Status s = CheckNetworkEmulationPrivileges(); !s.ok()) return s.message();
  if (::access("/usr/sbin/ip", X_OK) != 0 && ::access("/sbin/ip", X_OK) != 0 && ::access("/usr/bin/ip", X_OK) != 0) {
    return "no `ip` program (iproute2)";
  }
  return "";
}

// Create, or the reason to skip: failures of the very first `ip netns add`
// mean namespaces are unavailable here; anything later is a real failure.
std::unique_ptr<EmulatedNetwork> CreateOrSkip(const NetworkEmulation& shape, std::string* skip) {
  auto net = EmulatedNetwork::Create({"rig0", "rig1"}, shape);
  if (net.ok()) return std::move(net).value();
  const std::string& m = net.status().message();
  if (m.find("`ip netns add") != std::string::npos || m.find("no such program") != std::string::npos ||
      m.find("sch_netem") != std::string::npos) {
    *skip = m;
    return nullptr;
  }
  FAIL(m);
  return nullptr;
}

// Runs `fn` on a thread that has joined the network namespace `netns`
// (setns moves only the calling thread), and returns its result.
template <typename T>
std::future<T> InNamespace(const std::string& netns, std::function<T()> fn) {
  return std::async(std::launch::async, [netns, fn]() -> T {
    int fd = ::open((std::string(kNetnsRunDir) + "/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) throw std::runtime_error("setns " + netns + " failed");
    ::close(fd);
    return fn();
  });
}

void SetTimeouts(int fd) {
  timeval tv{10, 0};  // no test hangs on a lost connection
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// A listening socket on address:port in the calling thread's namespace.
int Listen(const std::string& address, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 4) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int AcceptWithin(int listener, int ms) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, ms) != 1) return -1;
  int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) SetTimeouts(fd);
  return fd;
}

// Connects, retrying while the listener is not up yet (bounded: 5 s).
int Connect(const std::string& address, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  for (int attempt = 0; attempt < 250; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    SetTimeouts(fd);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

// Node `to` receives `bytes` and answers one byte; node `from` sends them.
// Returns the sender's Mbit/s from connect to the answer (0 on any failure).
double MeasureMbits(const EmulatedNetwork& net, size_t bytes, size_t from = 1, size_t to = 0) {
  const std::string server_address = net.nodes()[to].address;
  auto server = InNamespace<size_t>(net.nodes()[to].netns, std::function<size_t()>([&]() -> size_t {
    int listener = Listen(server_address, 5201);
    if (listener < 0) return 0;
    int fd = AcceptWithin(listener, 10000);
    ::close(listener);
    if (fd < 0) return 0;
    std::vector<char> buf(1 << 16);
    size_t total = 0;
    while (true) {
      ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      total += static_cast<size_t>(n);
      if (total >= bytes) break;
    }
    char ack = 'k';
    ::send(fd, &ack, 1, MSG_NOSIGNAL);
    ::close(fd);
    return total;
  }));
  auto client = InNamespace<double>(net.nodes()[from].netns, std::function<double()>([&]() -> double {
    int fd = Connect(server_address, 5201);
    if (fd < 0) return 0;
    std::vector<char> block(1 << 16, 'x');
    auto start = std::chrono::steady_clock::now();
    size_t sent = 0;
    while (sent < bytes) {
      ssize_t n = ::send(fd, block.data(), std::min(block.size(), bytes - sent), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char ack = 0;
    bool acked = ::recv(fd, &ack, 1, 0) == 1;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::close(fd);
    return acked && sent == bytes ? bytes * 8 / seconds / 1e6 : 0;
  }));
  double mbits = client.get();
  CHECK(server.get() == bytes);
  return mbits;
}

// The smallest of `rounds` one-byte round trips from node 1 to node 0, in s.
double MinRoundTrip(const EmulatedNetwork& net, int rounds) {
  const std::string address = net.nodes()[0].address;
  auto server = InNamespace<int>(net.nodes()[0].netns, std::function<int()>([&]() -> int {
    int listener = Listen(address, 5202);
    int fd = AcceptWithin(listener, 10000);
    ::close(listener);
    int echoed = 0;
    char c;
    while (fd >= 0 && ::recv(fd, &c, 1, 0) == 1 && ::send(fd, &c, 1, MSG_NOSIGNAL) == 1) ++echoed;
    if (fd >= 0) ::close(fd);
    return echoed;
  }));
  auto client = InNamespace<double>(net.nodes()[1].netns, std::function<double()>([&]() -> double {
    int fd = Connect(address, 5202);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    double best = 1e9;
    for (int i = 0; i < rounds; ++i) {
      char c = 'p';
      auto start = std::chrono::steady_clock::now();
      if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1 || ::recv(fd, &c, 1, 0) != 1) break;
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    ::close(fd);
    return best;
  }));
  double best = client.get();
  CHECK(server.get() == rounds);
  return best;
}

bool NamespaceListed(const std::string& name) {
  auto runner = MakeSystemProcessRunner();
  ProcessSpec spec;
  spec.argv = {"ip", "netns", "list"};
  spec.timeout_seconds = 10;
  StopFlag never;
  bool found = false;
  runner->Run(spec, never, [&](std::string_view line) {
    if (line.substr(0, line.find(' ')) == name) found = true;
  });
  return found;
}

}  // namespace

TEST_CASE("real network: a program run through Wrap reaches the other node over TCP") {
  if (std::string why = RealNetworkUnavailable(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  std::string skip;
  auto net = CreateOrSkip({}, &skip);
  if (!net) {
    MESSAGE("skipped: " << skip);
    return;
  }
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
                                "echo ping >&3; read -r reply <&3; echo \"reply=$reply\"; ip -o -4 addr show dev eth0"});
  spec.timeout_seconds = 15;
  StopFlag never;
  std::vector<std::string> lines;
  ProcessResult r = runner->Run(spec, never, [&](std::string_view line) { lines.emplace_back(line); });
  CHECK(r.ending == ProcessResult::Ending::kExited);
  CHECK(r.exit_code == 0);
  CHECK(server.get() == "ping\n");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "reply=pong");
  CHECK(lines[1].find("inet 10.77.0.2/24") != std::string::npos);  // it ran inside node 1
  CHECK(net->Teardown().ok());
}

TEST_CASE("real network: a 20mbit link is clearly slower than an unshaped one") {
  if (std::string why = RealNetworkUnavailable(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  const size_t kBytes = 4 << 20;  // 32 Mbit: ~1.7 s at 20 Mbit/s
  std::string skip;
  double unshaped = 0, shaped = 0;
  {
    auto net = CreateOrSkip({}, &skip);
    if (!net) {
      MESSAGE("skipped: " << skip);
      return;
    }
    unshaped = MeasureMbits(*net, kBytes);
  }
  {
    auto net = CreateOrSkip({"20mbit", ""}, &skip);
    REQUIRE(net);
    shaped = MeasureMbits(*net, kBytes);
  }
  MESSAGE("unshaped " << unshaped << " Mbit/s, shaped at 20mbit " << shaped << " Mbit/s");
  CHECK(unshaped > 100);
  CHECK(shaped < 30);
  CHECK(shaped > 10);  // shaped to the rate, not broken
}

TEST_CASE("real network: three nodes reach each other through the shaped switch") {
  if (std::string why = RealNetworkUnavailable(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  auto net = EmulatedNetwork::Create({"a", "b", "c"}, {"20mbit", ""});
  if (!net.ok() && net.status().message().find("`ip netns add") != std::string::npos) {
    MESSAGE("skipped: " << net.status().message());
    return;
  }
  REQUIRE_MESSAGE(net.ok(), net.status().message());
  double mbits = MeasureMbits(**net, 2 << 20, /*from=*/2, /*to=*/1);
  MESSAGE("node c -> node b through the bridge at 20mbit: " << mbits << " Mbit/s");
  CHECK(mbits < 30);
  CHECK(mbits > 10);
}

TEST_CASE("real network: a round trip costs at least twice the delay") {
  if (std::string why = RealNetworkUnavailable(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  std::string skip;
  auto net = CreateOrSkip({"100mbit", "2ms"}, &skip);
  if (!net) {
    MESSAGE("skipped: " << skip);
    return;
  }
  double rtt = MinRoundTrip(*net, 10);
  MESSAGE("min RTT " << rtt * 1e3 << " ms with 2ms each way");
  CHECK(rtt >= 0.004);
  CHECK(rtt < 0.5);
}

TEST_CASE("real network: teardown removes every namespace, also after an error") {
  if (std::string why = RealNetworkUnavailable(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  std::string skip;
  std::vector<std::string> names;
  {
    auto net = CreateOrSkip({"50mbit", ""}, &skip);
    if (!net) {
      MESSAGE("skipped: " << skip);
      return;
    }
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
    auto net = CreateOrSkip({}, &skip);
    REQUIRE(net);
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
  CHECK(StartsWith(failed.status().message(), "network emulation: `ip netns add " + prefix + "-b` failed (exit code 1): "));
  CHECK_FALSE(NamespaceListed(prefix + "-a"));
  CHECK(NamespaceListed(prefix + "-b"));
  CHECK_FALSE(fs::exists("/run/protocol-netem/" + prefix));
  ProcessSpec del;
  del.argv = {"ip", "netns", "delete", prefix + "-b"};
  CHECK(runner->Run(del, never, [](std::string_view) {}).exit_code == 0);
}
