#include "backends/native/launch/rendezvous.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "backends/native/launch/events.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

std::string RendezvousLine(int port) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kRendezvous;
  e.port = port;
  return EncodeEvent(e);
}

std::string RelayRendezvous(int rank, std::string_view line) {
  if (rank != 0) return "";
  auto e = DecodeEvent(line);
  return e && e->kind == WorkerEvent::Kind::kRendezvous ? std::string(line) : "";
}

Result<int> ReadAnnouncedPort(int fd, double timeout_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  std::string pending;
  char buffer[512];
  while (true) {
    // Whole lines first: the port may arrive with other lines around it.
    for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
      auto e = DecodeEvent(std::string_view(pending).substr(0, end));
      if (e && e->kind == WorkerEvent::Kind::kRendezvous && e->port > 0 && e->port < 65536) return e->port;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      return Status::IoError(fmt::format(
          "rank 0 did not announce its rendezvous port within {:g} s (training.collective_timeout): it may still be "
          "loading, or it failed before listening",
          timeout_seconds));
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) return Status::IoError(fmt::format("waiting for the rendezvous port: {}", std::strerror(errno)));
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0)
      return Status::IoError(
          "MASTER_PORT=0 asks for the port rank 0 announces, but standard input ended before it came: the runner "
          "that relays it is gone, or this rank was started by hand (then give it rank 0's port in MASTER_PORT)");
    pending.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace native
}  // namespace protocol
