#ifndef PROTOCOL_RUNNER_EXEC_SIGNALS_H_
#define PROTOCOL_RUNNER_EXEC_SIGNALS_H_

// Ctrl-C / SIGTERM → StopFlag, so a run ends its current case as interrupted,
// stores it, and stops (runner.h); --resume continues later.

#include "runner/base/stop_flag.h"

namespace protocol {

// Installs handlers (SA_RESTART) for the whole process:
//   SIGINT, SIGTERM → flag->Request() (async-signal-safe) and a one-line note on
//                     stderr (write(2), also async-signal-safe).
//   the second SIGINT → SIGINT goes back to the default action, so a third Ctrl-C
//                     kills the process at once (a hung backend can always be left).
//   SIGPIPE         → ignored (a closed pipe is an error value from write, not death).
// REQUIRES: `flag` outlives the handlers (until UninstallStopSignals or exit).
// Calling it again replaces the flag and resets the Ctrl-C count.
void InstallStopSignals(StopFlag* flag);

// Restores the default actions of SIGINT and SIGTERM and forgets the flag (tests).
// SIGPIPE stays ignored.
void UninstallStopSignals();

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_SIGNALS_H_
