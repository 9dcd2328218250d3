#ifndef PROTOCOL_RUNNER_EXEC_PROCESS_H_
#define PROTOCOL_RUNNER_EXEC_PROCESS_H_

// Running child processes, behind an interface so tests can substitute a fake
// (tests/support/fake_process_runner.h). This is the one place of the project that
// starts processes: a single command (Run) and the ranks of a distributed case
// (RunGroup) go through the same fork/exec, output capture and kill logic.
//
// Every child runs in its own process group, so that a timeout or a stop
// request ends the child and everything it started: SIGTERM to the whole
// group, then SIGKILL to the group after `kill_grace_seconds` (a child that
// ignores SIGTERM still dies).
//
// Every child dies with the runner, grandchildren included: the system
// implementation starts a small guardian process (a fork of the runner that
// never execs) as the group's leader; the guardian forks the command into its
// group and waits on both the command and a lifeline pipe whose write end only
// the runner holds. When the runner ends, however it ends (kill -9 too), the
// lifeline reads end-of-file and the guardian SIGKILLs the whole group. The
// guardian relays the command's end: the same exit code, or the same signal
// re-raised, so callers see the command's own result. (A process that leaves
// the group with setsid is out of reach.)

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runner/base/stop_flag.h"

namespace protocol {

struct ProcessSpec {
  std::vector<std::string> argv;            // argv[0] is searched in PATH; never passed to a shell
  std::map<std::string, std::string> env;   // set on top of the inherited environment
  std::string workdir;                      // empty: the current directory
  std::string log_path;                     // stdout and stderr are appended here; empty: discarded
  double timeout_seconds = 0;               // 0: no limit
  double kill_grace_seconds = 3;            // SIGTERM → SIGKILL delay
  // RunGroup only: written before each of this child's lines in the group's
  // log, e.g. "[rank 1] ". (RunGroup takes the log, timeout and grace from
  // GroupOptions; a child's log_path, timeout_seconds and kill_grace_seconds
  // are not used there.)
  std::string log_prefix;
};

struct ProcessResult {
  enum class Ending {
    kExited,         // exit_code is valid
    kSignaled,       // killed by `signal` (not by us)
    kTimedOut,       // we killed the group after timeout_seconds
    kStopped,        // we killed the group because the StopFlag was raised
    kFailedToStart,  // fork/exec failed; `error` says why (e.g. "no such program 'fdsp'")
  };
  Ending ending = Ending::kFailedToStart;
  int exit_code = -1;
  int signal = 0;
  double seconds = 0;  // wall time from start to the child's end
  std::string error;
  int pid = 0;         // the child's process (its group's id); 0 when it never started
  // The output's last line had no line end: it was delivered at end-of-file
  // and may be cut (a log reader must not take a value at its end as whole).
  bool ended_mid_line = false;
  // Output that could not be written to the log (LogWriteError's text, e.g. a
  // full disk); "" when the log holds everything. The child is not disturbed:
  // the callback still saw every line.
  std::string log_error;
};

// What RunGroup shares between its children.
struct GroupOptions {
  std::string log_path;           // every child's output, line by line after its log_prefix; empty: not written
  double timeout_seconds = 0;     // for the whole group; 0: none
  double kill_grace_seconds = 3;  // SIGTERM → SIGKILL delay when the group is stopped
  // When set, a line for which it returns false is handed to the callback but
  // not written to the log (e.g. the ranks' heartbeats).
  std::function<bool(std::string_view line)> keep_in_log;
  // When set, every child's standard input is a socket whose other end the
  // runner holds until the group ends (not /dev/null), and each complete line
  // of child i is offered to `relay` after the line callback: a non-empty
  // return is written, with a newline, to the standard input of every other
  // child still running (one short write each, never blocking; a child that
  // stopped reading misses it). The rendezvous of a distributed case uses it:
  // rank 0 announces the port its store listens on, the other ranks read it.
  std::function<std::string(size_t index, std::string_view line)> relay;
};

// How a group of children ended, as a whole and each.
//   - every child exits 0                 → kOk
//   - a child exits non-zero or is killed → every other child's group gets
//                                           SIGTERM, then SIGKILL after the grace;
//                                           kChildFailed, `first_failed` names it.
//                                           When several end badly in the same
//                                           look, one killed by a signal is named
//                                           before one that exited non-zero (its
//                                           peers' errors follow from its death)
//   - the group's timeout passes          → the same stop; kTimedOut
//   - the StopFlag is raised              → the same stop; kStopped
//   - a child cannot be started           → the same stop; kFailedToStart,
//                                           `first_failed` names it; children
//                                           after it are not started
struct GroupResult {
  enum class Outcome { kOk, kChildFailed, kTimedOut, kStopped, kFailedToStart };
  Outcome outcome = Outcome::kOk;
  int first_failed = -1;  // kChildFailed / kFailedToStart: index of the child that ended the group
  // In the order given. Each child's ending is kExited, kSignaled (also when
  // the group stopped it) or kFailedToStart (`error` says why; "not started"
  // for a child after one that failed to start).
  std::vector<ProcessResult> children;
  double seconds = 0;
  std::string log_error;  // as ProcessResult::log_error, for the group's log
};

// Called with each complete output line (stdout and stderr interleaved), without
// the newline, on the thread that called Run.
using LineCallback = std::function<void(std::string_view line)>;
// The same for a group: `index` is the child's position in the group.
using GroupLineCallback = std::function<void(size_t index, std::string_view line)>;

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  // Runs `spec` to its end. Never throws; every failure is in the result.
  virtual ProcessResult Run(const ProcessSpec& spec, const StopFlag& stop,
                            const LineCallback& on_line) = 0;
  // Runs `children` together to their common end (see GroupResult). When it
  // returns every child has been reaped and every child's group SIGKILLed:
  // nothing of the group is left behind. Never throws.
  virtual GroupResult RunGroup(const std::vector<ProcessSpec>& children, const GroupOptions& options,
                               const StopFlag& stop, const GroupLineCallback& on_line) = 0;
};

// "<path>: no space left on device; 12.0 KiB of output not written" for the
// errno of a failed write to the log at `path` and the bytes it lost (text.h
// CannotWrite, then the amount).
std::string LogWriteError(const std::string& path, int error, uint64_t unwritten);

// fork/exec with process groups and guardians, poll()-based output capture and timeouts.
std::unique_ptr<ProcessRunner> MakeSystemProcessRunner();

// Whether process `pid` on this host is alive and is a `protocol run`
// (its /proc/<pid>/cmdline: a program named protocol…, first argument "run"),
// so that a reused pid is not taken for a runner.
bool IsLiveProtocolRun(int64_t pid);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_PROCESS_H_
