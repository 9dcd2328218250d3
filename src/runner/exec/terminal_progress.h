#ifndef PROTOCOL_RUNNER_EXEC_TERMINAL_PROGRESS_H_
#define PROTOCOL_RUNNER_EXEC_TERMINAL_PROGRESS_H_

// The terminal Progress behind MakeTerminalProgress() (progress.h), with its
// outside things injected so tests can drive it: where text goes, the clock,
// and whether the output is a terminal.
//
// Output (each line ends with "\n" unless noted):
//   "[3/12] 2.1.1.3 finetune fsdp (repeat 1/1) …"          CaseStarted
//   "  step 40/500 loss 2.31 · elapsed 1m05s · ETA run 14m"   CaseStatusLine
//   "[3/12] 2.1.1.3 ok 12.4 s"  (": reason" appended when there is one)  CaseFinished
//   the text                                                   Message
// On a terminal a status line is drawn in place ("\r\x1b[K" + line, no
// newline) and cleared before the next line; elsewhere (CI logs) status lines
// are printed as plain lines, at most one per 5 s of Clock time.
// ETA run = what is left of the running case + later cases × their expected
// duration. The running case's rest: elapsed × (1 − f) / f once the runner
// reported its fraction f done (steps, requests); else the mean duration of
// the finished cases less its elapsed time, while it is below that mean. A
// later case: the mean of the finished cases, or before one finished, the
// running case's projected duration elapsed / f. "ETA unknown" when neither
// is known (never a 0 while cases remain); "ETA finishing" when only the
// last case's saving or evaluation is left.

#include <functional>
#include <memory>
#include <string>

#include "runner/base/clock.h"
#include "runner/exec/progress.h"

namespace protocol {

std::unique_ptr<Progress> MakeTerminalProgress(std::function<void(const std::string&)> write,
                                               Clock& clock, bool is_terminal);

// "42s", "1m05s", "2h03m" (elapsed); FormatEta: "45s", "14m", "2h03m".
std::string FormatElapsed(double seconds);
std::string FormatEta(double seconds);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_TERMINAL_PROGRESS_H_
