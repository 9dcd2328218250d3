#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_SUPERVISOR_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_SUPERVISOR_H_

// Runs the rank processes of one distributed case to their common end, on
// the one process layer (runner/exec/process.h ProcessRunner::RunGroup): each
// rank is a child of one group, in its own process group under a guardian, so
// it dies with the runner, grandchildren included. Every output line is
// appended to the case log prefixed "[rank N] " and handed to the callback;
// rank 0's rendezvous line is relayed to the other ranks' standard input
// (rendezvous.h).
// The ranks end together:
//   - all exit 0                       → kOk
//   - one exits non-zero / is killed   → every other rank's group gets SIGTERM,
//                                        then SIGKILL after kill_grace_seconds;
//                                        kRankFailed, reason names the FIRST one:
//                                        "rank 1 (node rig1) exited with code 3",
//                                        "rank 1 (node rig1) was killed by signal 9"
//   - the case's timeout passes        → the same stop; kTimedOut
//   - the StopFlag is raised           → the same stop; kStopped
//   - a rank cannot be started         → the same stop; kFailedToStart,
//                                        "rank 1 (node rig1) failed to start: cannot run 'x': ..."
// When Supervise returns, every rank has been reaped and every group SIGKILLed:
// no process of the case is left behind (one that escaped its group with
// setsid is out of reach, as in process.h).

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/native/launch/launcher.h"
#include "runner/base/stop_flag.h"
#include "runner/exec/process.h"

namespace protocol {
namespace native {

struct SuperviseOptions {
  std::string log_path;           // every rank's output, prefixed; empty: not written
  std::string workdir;            // empty: the current directory
  double timeout_seconds = 0;     // 0: none
  double kill_grace_seconds = 3;  // SIGTERM → SIGKILL
  // When set, a line for which it returns false is handed to the callback but
  // not written to the log (the ranks' heartbeats).
  std::function<bool(std::string_view line)> keep_in_log;
};

struct RankEnd {
  int rank = 0;
  std::string node;
  int pid = 0;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool started = false;
  // Its end as a shell reports it: the exit code, or 128+N for signal N; -1 when it never started.
  int Code() const { return !started ? -1 : signal ? 128 + signal : exit_code; }
};

struct SuperviseResult {
  enum class Outcome { kOk, kRankFailed, kTimedOut, kStopped, kFailedToStart };
  Outcome outcome = Outcome::kOk;
  std::string reason;          // empty for kOk
  int failed_rank = -1;        // kRankFailed: the rank the reason names (its code: ranks[...].Code())
  std::vector<RankEnd> ranks;  // in the order given
  double seconds = 0;
};

// Called on the calling thread with each complete output line of a rank.
using RankLineCallback = std::function<void(int rank, std::string_view line)>;

// Starts every rank through `processes` (the runner's ProcessRunner; a fake in tests).
SuperviseResult Supervise(ProcessRunner& processes, const std::vector<RankLaunch>& ranks,
                          const SuperviseOptions& options, const StopFlag& stop, const RankLineCallback& on_line);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_SUPERVISOR_H_
