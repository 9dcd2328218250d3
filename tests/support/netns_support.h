#ifndef PROTOCOL_TESTS_NETNS_SUPPORT_H_
#define PROTOCOL_TESTS_NETNS_SUPPORT_H_

// Helpers for the tests on real network namespaces
// (network_emulation_real_test.cc, network_emulation_delay_test.cc): whether
// namespaces with a given shape can be made here, TCP between nodes from
// threads that joined a node's namespace, and the kernel's qdisc counters.

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backends/native/launch/network_emulation.h"
#include "runner/base/text.h"

namespace protocol::testing {

// A shape as a plan writes it ({"20mbit", "2ms"}; "" = none), read as the plan's parser reads it.
struct ShapeText {
  std::string bandwidth;
  std::string delay;
};
inline NetworkEmulation Shape(const ShapeText& text) {
  NetworkEmulation e{text.bandwidth, text.delay};
  if (!text.bandwidth.empty()) e.bits_per_second = ParseTcRate(text.bandwidth).value();
  if (!text.delay.empty()) e.delay_seconds = ParseTcTime(text.delay).value();
  return e;
}

// Why namespaces shaped as `shape` cannot be made here, or "" when they can:
// no privileges, no iproute2, no namespaces, or a kernel without the qdisc
// the shape needs. Other failures return "" and are left for the cases to
// fail on.
inline std::string NamespacesUnavailable(const ShapeText& shape) {
  if (Status s = CheckNetworkEmulationPrivileges(); !s.ok()) return s.message();
  if (::access("/usr/sbin/ip", X_OK) != 0 && ::access("/sbin/ip", X_OK) != 0 && ::access("/usr/bin/ip", X_OK) != 0)
    return "no `ip` program (iproute2)";
  auto probe = EmulatedNetwork::Create({"probe0", "probe1"}, Shape(shape));
  if (probe.ok()) return "";
  const std::string& m = probe.status().message();
  if (m.find("`ip netns add") != std::string::npos || m.find("no such program") != std::string::npos ||
      m.find("sch_netem") != std::string::npos || m.find("sch_tbf") != std::string::npos ||
      m.find("qdisc kind is unknown") != std::string::npos)
    return m;
  return "";
}

inline std::unique_ptr<EmulatedNetwork> MustCreate(const std::vector<std::string>& nodes, const ShapeText& shape) {
  auto net = EmulatedNetwork::Create(nodes, Shape(shape));
  REQUIRE_MESSAGE(net.ok(), net.status().message());
  return std::move(net).value();
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

inline void SetTimeouts(int fd) {
  timeval tv{10, 0};  // no test hangs on a lost connection
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// A listening socket on address:port in the calling thread's namespace.
inline int Listen(const std::string& address, int port) {
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

inline int AcceptWithin(int listener, int ms) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, ms) != 1) return -1;
  int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) SetTimeouts(fd);
  return fd;
}

// Connects, retrying while the listener is not up yet (bounded: 5 s).
inline int Connect(const std::string& address, int port) {
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

inline bool NamespaceListed(const std::string& name) {
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

// Node `from` sends `bytes` to node `to`, which answers one byte once it has
// them all. Returns how many bytes node `to` received (0 on any failure).
inline size_t Transfer(const EmulatedNetwork& net, size_t bytes, size_t from, size_t to) {
  const std::string server_address = net.nodes()[to].address;
  auto server = InNamespace<size_t>(net.nodes()[to].netns, std::function<size_t()>([&]() -> size_t {
    int listener = Listen(server_address, 5201);
    if (listener < 0) return 0;
    int fd = AcceptWithin(listener, 10000);
    ::close(listener);
    if (fd < 0) return 0;
    std::vector<char> buf(1 << 16);
    size_t total = 0;
    while (total < bytes) {
      ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      total += static_cast<size_t>(n);
    }
    char ack = 'k';
    ::send(fd, &ack, 1, MSG_NOSIGNAL);
    ::close(fd);
    return total;
  }));
  auto client = InNamespace<bool>(net.nodes()[from].netns, std::function<bool()>([&]() -> bool {
    int fd = Connect(server_address, 5201);
    if (fd < 0) return false;
    std::vector<char> block(1 << 16, 'x');
    size_t sent = 0;
    while (sent < bytes) {
      ssize_t n = ::send(fd, block.data(), std::min(block.size(), bytes - sent), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char ack = 0;
    bool acked = ::recv(fd, &ack, 1, 0) == 1;
    ::close(fd);
    return acked && sent == bytes;
  }));
  CHECK(client.get());
  return server.get();
}

// The smallest of `rounds` one-byte round trips from node 1 to node 0, in s.
inline double MinRoundTrip(const EmulatedNetwork& net, int rounds) {
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

// One qdisc as `tc -s qdisc show` prints it: the kind, the rest of its first
// line (rate, burst, delay) and the counters of its "Sent ..." line.
struct Qdisc {
  std::string kind;
  std::string line;
  long long sent_bytes = -1;
  long long overlimits = -1;
};

inline std::vector<Qdisc> Qdiscs(const std::string& netns, const std::string& device) {
  auto runner = MakeSystemProcessRunner();
  ProcessSpec spec;
  spec.argv = {"tc", "-s", "-n", netns, "qdisc", "show", "dev", device};
  spec.timeout_seconds = 10;
  StopFlag never;
  std::vector<Qdisc> out;
  ProcessResult r = runner->Run(spec, never, [&](std::string_view raw) {
    std::string line = Trim(std::string(raw));
    if (StartsWith(line, "qdisc ")) {
      Qdisc q;
      q.kind = line.substr(6, line.find(' ', 6) - 6);
      q.line = line;
      out.push_back(q);
    } else if (StartsWith(line, "Sent ") && !out.empty()) {
      // "Sent 4200000 bytes 2900 pkt (dropped 0, overlimits 1234 requeues 0)"
      out.back().sent_bytes = std::atoll(line.c_str() + 5);
      size_t at = line.find("overlimits ");
      if (at != std::string::npos) out.back().overlimits = std::atoll(line.c_str() + at + 11);
    }
  });
  REQUIRE(r.ending == ProcessResult::Ending::kExited);
  REQUIRE(r.exit_code == 0);
  return out;
}

inline std::vector<std::string> Kinds(const std::vector<Qdisc>& qdiscs) {
  std::vector<std::string> kinds;
  for (const Qdisc& q : qdiscs) kinds.push_back(q.kind);
  return kinds;
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_NETNS_SUPPORT_H_
