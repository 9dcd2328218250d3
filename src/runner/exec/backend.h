#ifndef PROTOCOL_RUNNER_EXEC_BACKEND_H_
#define PROTOCOL_RUNNER_EXEC_BACKEND_H_

// The contract between the runner and a backend. A backend executes one case
// (one repeat of it) and says what happened; the runner does everything else:
// stores the row before and after, times the case (wall_seconds is measured by
// the runner around Run, not by the backend), extrapolates, shows progress.
//
// Failures are data: Run never throws and never exits the process; a crash,
// a non-zero exit, a NaN loss or a missing file is a BackendOutcome with
// status kFailed and a reason a person can act on.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/base/clock.h"
#include "runner/base/status.h"
#include "runner/base/stop_flag.h"
#include "runner/exec/estimate.h"
#include "runner/exec/process.h"
#include "runner/plan/coverage.h"
#include "runner/plan/plan.h"
#include "runner/store/records.h"

namespace protocol {

// Live events from a running case. The runner batches samples into the store
// and shows progress; backends call these as things happen.
class CaseEvents {
 public:
  virtual ~CaseEvents() = default;
  virtual void OnStep(const StepSample& step) = 0;
  virtual void OnRequest(const RequestSample& request) = 0;
  // A short live figure for the progress line, e.g. "step 12/100 loss 3.21".
  virtual void OnStatusLine(const std::string& text) = 0;
  // A reading of the hardware of one of the case's nodes, sent by a process
  // of the case (telemetry.h): its time is when it arrives. Default: dropped
  // (a sink that keeps no samples).
  virtual void OnSample(const TelemetrySample& sample) {}
};

struct BackendContext {
  const Plan& plan;
  const CaseSpec& spec;
  int repeat = 0;               // 0-based
  std::string log_path;         // the case's full log (results/logs/...); the backend appends to it
  std::string output_dir;       // placeholders already expanded; the backend creates it if it saves a model
  const StopFlag& stop;         // raised on Ctrl-C / SIGTERM: end promptly with kInterrupted
  ProcessRunner& processes;
  Clock& clock;
  CaseEvents& events;
  int64_t run_id = 0;           // the stored run ({run_id}); 0 outside a run
};

struct BackendOutcome {
  CaseStatus status = CaseStatus::kOk;  // kOk | kFailed | kTimeout | kInterrupted | kSkipped
  std::string reason;                   // empty on success
  std::optional<int> exit_code;         // when a process ran
  std::vector<Measurement> measurements;  // backend figures (tokens/s, loss, metrics parsed from output ...)
  std::vector<std::pair<std::string, std::string>> facts;  // what it ran on (records.h, namespace fact)
  std::vector<EvalPoint> eval_curve;  // the held-out loss curve (training.eval_every), by step
};

// Shorthands for backends: a measured figure, and an outcome that failed
// (or timed out, or was interrupted) for `reason` with nothing measured.
Measurement MeasuredFigure(std::string name, double value, std::string unit, std::string method = "");
BackendOutcome FailedOutcome(CaseStatus status, std::string reason);
// Appends `note` (what ran: "4-bit ...", "weights: ...") to the method of every
// measurement of `out`, after a "; " where a method is there already; an empty
// note changes nothing.
void NoteOnEveryMethod(BackendOutcome& out, const std::string& note);

// What a backend says about a case besides its problems, shown by `protocol
// validate` and `protocol run` (located at the case, like problems) and by
// `run --dry-run`. Neither fails validate nor stops a run:
//   warnings  the case may fail where it runs: the expected peak memory exceeds
//             the device's, a path this machine cannot check, a workload this
//             build refuses at run time (stored as a failed case with the same text)
//   notes     facts worth seeing before a run, e.g. the expected peak memory per
//             device and how it was estimated
struct CaseAdvice {
  std::vector<std::string> warnings;
  std::vector<std::string> notes;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Static checks of a case against this backend, run by `protocol validate` and
  // before a run starts (e.g. the command backend needs argv, knows its
  // placeholders). Returns one message per problem; empty when the case can run.
  virtual std::vector<std::string> Check(const Plan& plan, const CaseSpec& spec) const = 0;
  // Warnings and notes for a case. REQUIRES: Check() returned no problem.
  // Messages carry no location (callers add the case's). Default: none.
  virtual CaseAdvice Advise(const Plan& plan, const CaseSpec& spec) const { return {}; }
  // What the case computes on, compared between the two sides of a report
  // row (coverage.h UnequalSides). REQUIRES: Check() returned no problem.
  // Default: unknown (a command's launch line is its own business).
  virtual std::optional<CaseResources> Resources(const Plan& plan, const CaseSpec& spec) const {
    return std::nullopt;
  }
  // The expected wall time of one repeat of the case on the plan's hardware
  // (estimate.h), with `host` this host's calibration where `protocol
  // calibrate` measured it (its CPU figures; nullopt: assumed ones); or
  // why there is none (TimeEstimate::why_not). REQUIRES: Check() returned no
  // problem. Default: none (a command's launch line is its own business).
  virtual TimeEstimate EstimateTime(const Plan& plan, const CaseSpec& spec,
                                    const std::optional<HostCalibration>& host) const {
    TimeEstimate none;
    none.why_not = "this backend does not estimate time";
    return none;
  }
  // Executes one repeat of the case. REQUIRES: Check() returned no problem.
  virtual BackendOutcome Run(BackendContext& context) = 0;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_BACKEND_H_
