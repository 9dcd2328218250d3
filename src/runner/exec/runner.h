#ifndef PROTOCOL_RUNNER_EXEC_RUNNER_H_
#define PROTOCOL_RUNNER_EXEC_RUNNER_H_

// Executes a plan: each (case, repeat) in the order of ScheduleRuns
// (schedule.h: plan order, repeats consecutive, or the ABBA rounds of an
// `interleave` group) through its backend, every outcome stored. A failed case is data; only a broken harness (unwritable
// store, unknown backend that validation missed) returns a non-OK Status.
//
// Per case and repeat:
//   1. Store::BeginCase (status running) — before anything runs.
//   2. Backend::Run, timed by the runner's Clock (wall_seconds, measured).
//   3. Step / request samples batched into the store while it runs.
//   4. Extrapolation when the case has report_as (extrapolate.h); contention
//      (cpu_meter.h) sampled while it ran, when RunOptions names a meter; the
//      hardware (telemetry.h) sampled while it ran, when RunOptions names a
//      source: samples in batches, their figures (telemetry_figures.h).
//   5. Store::FinishCase in one transaction.
// A raised StopFlag ends the running case as interrupted, marks the remaining
// ones as not run (they stay absent, so --resume runs them) and returns.
// A case log that could not be written whole (a full disk: the runner's lines
// or the processes' output) ends the run the same way, with an I/O error
// naming the log: the case is stored as interrupted, its figures kept, so that
// --resume runs it again once there is space.

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runner/base/clock.h"
#include "runner/base/status.h"
#include "runner/base/stop_flag.h"
#include "runner/exec/backend.h"
#include "runner/exec/cpu_meter.h"
#include "runner/exec/process.h"
#include "runner/exec/progress.h"
#include "runner/exec/telemetry.h"
#include "runner/plan/plan.h"
#include "runner/plan/schedule.h"
#include "runner/store/store.h"

namespace protocol {

struct RunOptions {
  std::vector<std::string> only;          // case ids to run; empty = all (others are not run at all)
  bool dry_run = false;                   // print what would run; store nothing
  std::optional<int64_t> resume_run_id;   // continue this run: run only cases without a final status
  std::string logs_dir = "results/logs";  // per-case logs: <logs_dir>/run-<id>/<case_id>[.r<repeat>].log
  // Extra run-context facts (hosts, CPU, GPU, libtorch ...) gathered by the caller.
  std::vector<std::pair<std::string, std::string>> context;
  // Where contention is read from while each case runs (cpu_meter.h); null:
  // not measured. Read every contention_interval_seconds.
  CpuMeter* cpu_meter = nullptr;
  double contention_interval_seconds = 1.0;
  // Where the hardware is read while each case runs, every plan
  // telemetry.interval (telemetry.h); every source null: nothing sampled.
  TelemetrySources telemetry;
  // This host's `protocol calibrate` figures, for the backends' time
  // estimate (estimate.h); nullopt: their CPU figures are assumed.
  std::optional<HostCalibration> calibration;
};

struct RunSummary {
  int64_t run_id = 0;
  int ok = 0, failed = 0, timeout = 0, skipped = 0, interrupted = 0;
  int contended = 0;           // cases at or above metric::kContendedShare
  double worst_contention = 0;  // the largest metric::kContention among them
  // Cases whose measured wall time left the estimate's band (estimate.h):
  // "qn.1.1: 3.1x its estimate (...; the term most likely at fault: compute 1.2 s)".
  std::vector<std::string> off_estimate;
  // Cases whose link, measured before the first step, was more than
  // metric::kLinkLabelFactor away from their network's nominal rate
  // (link_label.h): "r.1: link measured 0.8 Gbit/s bus bandwidth, its network
  // '10G' is nominally 10 Gbit/s (12.5x slower)".
  std::vector<std::string> link_off_label;
  bool stopped = false;  // the StopFlag ended the run early
  bool log_lost = false;  // a case log could not be written whole: the run stopped (Run returned the error)
  // Exit code per the CLI contract: 0 all ok, 1 any case not ok (or stopped).
  int ExitCode() const { return (failed || timeout || interrupted || stopped) ? 1 : 0; }
};

using BackendFactory = std::function<std::unique_ptr<Backend>(const std::string& name)>;

class Runner {
 public:
  // All references must outlive the Runner.
  Runner(Store& store, Clock& clock, ProcessRunner& processes, BackendFactory backends,
         Progress& progress, const StopFlag& stop);
  Result<RunSummary> Run(const Plan& plan, const RunOptions& options);

 private:
  // (case_id, repeat) of a resumed run that already have a final status.
  using DoneCases = std::set<std::pair<std::string, int>>;

  // The steps of Run, in order.
  // --resume: checks the run and its plan, marks its running cases
  // interrupted, appends the context (not for a dry run); sets summary.run_id.
  Result<DoneCases> ResumeRun(const Plan& plan, const RunOptions& options, RunSummary& summary);
  // A new run row and its context; sets summary.run_id. Nothing is done yet.
  Result<DoneCases> CreateRun(const Plan& plan, const RunOptions& options, RunSummary& summary);
  // --dry-run: what each (case, repeat) would do, and each case's advice once.
  // Each case's expected wall time too, and the plan's total of what would run.
  void DescribeDryRun(const Plan& plan, const std::vector<ScheduledRun>& work,
                      const std::optional<HostCalibration>& calibration);
  // One (case, repeat): log, BeginCase, the timed backend run, FinishCase.
  // Returns whether a stop was seen (the run ends), or the harness error.
  Result<bool> RunCase(const Plan& plan, const RunOptions& options, const ScheduledRun& item, int index,
                       int total, RunSummary& summary);
  // The run's final status: interrupted, or failed when the latest row of a
  // (case, repeat) is not a success.
  Status FinishRun(const RunSummary& summary);

  Store& store_;
  Clock& clock_;
  ProcessRunner& processes_;
  BackendFactory backends_;
  Progress& progress_;
  const StopFlag& stop_;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_RUNNER_H_
