#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_RENDEZVOUS_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_RENDEZVOUS_H_

// The rendezvous port of a distributed case, which nothing can take between
// being chosen and being bound (docs/distributed.md, "Rendezvous"):
//   1. the runner starts every rank with MASTER_PORT=0;
//   2. rank 0's store binds port 0, so the kernel picks a free port and the
//      store holds it from that moment; rank 0 announces it as one event line
//      on its stdout: {"event":"rendezvous","port":P};
//   3. the supervisor relays that line to the standard input of every other
//      rank (process.h GroupOptions::relay), through whatever the launcher
//      put in between (ssh forwards stdin, so does srun, so does ip netns exec);
//   4. every other rank reads its standard input until that line, within the
//      case's collective timeout, then connects to MASTER_ADDR:P.
// A rank started with a fixed MASTER_PORT (by hand, or by another launcher)
// uses that port as it is.

#include <string>
#include <string_view>

#include "runner/base/status.h"

namespace protocol {
namespace native {

// MASTER_PORT's value that asks for the announced port.
inline constexpr int kAnnouncedPort = 0;

// The line rank 0 writes once its store listens on `port` (no newline).
std::string RendezvousLine(int port);

// The supervisor's relay: `line` itself when it is the rendezvous event of
// rank 0, "" for every other line and rank.
std::string RelayRendezvous(int rank, std::string_view line);

// The port announced on `fd` (a rank's standard input): reads lines until the
// rendezvous event. Errors: nothing within `timeout_seconds` (kIoError),
// end of input first: the runner is gone or relays nothing (kIoError).
Result<int> ReadAnnouncedPort(int fd, double timeout_seconds);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_RENDEZVOUS_H_
