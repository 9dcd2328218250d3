#ifndef PROTOCOL_RUNNER_EXEC_PROCESS_H_
#define PROTOCOL_RUNNER_EXEC_PROCESS_H_

// Running child processes, behind an interface so tests can substitute a fake.
//
// The system implementation starts the child in its own process group
// (setpgid), so that a timeout or a stop request ends the child and everything
// it started: SIGTERM to the whole group, then SIGKILL to the group after
// `kill_grace_seconds` (a child that ignores SIGTERM still dies).

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
  double seconds = 0;  // wall time from start to reaping
  std::string error;
};

// Called with each complete output line (stdout and stderr interleaved), without
// the newline, on the thread that called Run.
using LineCallback = std::function<void(std::string_view line)>;

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  // Runs `spec` to its end. Never throws; every failure is in the result.
  virtual ProcessResult Run(const ProcessSpec& spec, const StopFlag& stop,
                            const LineCallback& on_line) = 0;
};

// fork/exec with process groups, poll()-based output capture and timeouts.
std::unique_ptr<ProcessRunner> MakeSystemProcessRunner();

// Whether process `pid` on this host is alive and is a `protocol run`
// (its /proc/<pid>/cmdline: a program named protocol…, first argument "run"),
// so that a reused pid is not taken for a runner.
bool IsLiveProtocolRun(int64_t pid);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_PROCESS_H_
