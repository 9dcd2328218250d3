// The rendezvous port's way from rank 0 to the other ranks (rendezvous.h):
// the event line, the supervisor's relay, and a rank reading it from its
// standard input (a pipe here), with the errors a rank meets.
#include <doctest/doctest.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "backends/native/launch/rendezvous.h"

namespace protocol {
namespace native {
namespace {

// A pipe whose ends close with it.
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { REQUIRE(::pipe(fds) == 0); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  void Write(const std::string& text) { REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size())); }
  void CloseWriter() {
    ::close(fds[1]);
    fds[1] = -1;
  }
};

}  // namespace

TEST_CASE("rendezvous: rank 0's line is relayed, nothing else is") {
  const std::string line = RendezvousLine(41234);
  CHECK(line == R"({"event":"rendezvous","port":41234})");
  CHECK(RelayRendezvous(0, line) == line);
  CHECK(RelayRendezvous(1, line).empty());  // only rank 0 serves the store
  CHECK(RelayRendezvous(0, R"({"event":"heartbeat"})").empty());
  CHECK(RelayRendezvous(0, "worker: port 41234").empty());
}

TEST_CASE("rendezvous: a rank reads the announced port among other lines, in pieces") {
  Pipe p;
  std::thread writer([&] {
    p.Write("noise\n{\"event\":\"heartbeat\"}\n{\"event\":\"rendez");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    p.Write("vous\",\"port\":40001}\n");
  });
  auto port = ReadAnnouncedPort(p.fds[0], 5);
  writer.join();
  REQUIRE(port.ok());
  CHECK(*port == 40001);
}

TEST_CASE("rendezvous: end of input or silence is an error that says what to do") {
  {
    Pipe p;
    p.Write("{\"event\":\"rendezvous\",\"port\":0}\n");  // not a port a store listens on
    p.CloseWriter();
    auto port = ReadAnnouncedPort(p.fds[0], 5);
    REQUIRE(!port.ok());
    CHECK(port.status().message().find("standard input ended before it came") != std::string::npos);
    CHECK(port.status().message().find("MASTER_PORT") != std::string::npos);
  }
  {
    Pipe p;
    const auto start = std::chrono::steady_clock::now();
    auto port = ReadAnnouncedPort(p.fds[0], 0.3);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(!port.ok());
    CHECK(port.status().message() ==
          "rank 0 did not announce its rendezvous port within 0.3 s (training.collective_timeout): it may still be "
          "loading, or it failed before listening");
    CHECK(waited >= 0.29);  // polled in whole milliseconds
    CHECK(waited < 3);
  }
}

}  // namespace native
}  // namespace protocol
