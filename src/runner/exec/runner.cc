// The execution layer: runner.h is the contract; docs/runner.md describes a run
// for users (statuses, resume, interrupts, extrapolation, logs, progress).

#include "runner/exec/runner.h"

#include <algorithm>
#include <cerrno>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "runner/base/build_info.h"
#include "runner/base/log.h"
#include "runner/base/placeholders.h"
#include "runner/base/sha256.h"
#include "runner/base/text.h"
#include "runner/exec/extrapolate.h"
#include "runner/store/telemetry_figures.h"
#include "runner/plan/case_placeholders.h"
#include "runner/plan/schedule.h"
#include "runner/store/link_label.h"

namespace protocol {
namespace {

// Samples are appended to the store in batches: every kFlushSamples samples
// or every kFlushSeconds of Clock time, whichever comes first; the rest goes
// with FinishCase. A runner killed with -9 so loses at most one batch.
constexpr size_t kFlushSamples = 64;
constexpr double kFlushSeconds = 2.0;

// The runner's CaseEvents: batches samples into the store, keeps every step's
// time for extrapolation, forwards status lines to the progress display.
// The first store error is kept (error()) and later appends are not tried:
// the run is aborted with it when the backend returns.
class CaseEventSink : public CaseEvents {
 public:
  // `steps` / `requests`: how many the case has (0: unknown), for the
  // fraction done shown by the progress display.
  CaseEventSink(Store* store, int64_t row_id, Clock& clock, Progress& progress, int64_t steps,
                int64_t requests)
      : store_(store), row_id_(row_id), clock_(clock), progress_(progress), steps_(steps),
        requests_(requests), last_flush_(clock.NowSeconds()) {}

  void OnStep(const StepSample& step) override {
    std::lock_guard<std::mutex> lock(mu_);
    steps_seen_.push_back(step);
    pending_steps_.push_back(step);
    if (steps_ > 0) progress_.CaseFractionDone(std::min(1.0, static_cast<double>(step.step) / steps_));
    MaybeFlush();
  }
  void OnRequest(const RequestSample& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_requests_.push_back(request);
    ++requests_seen_;
    generated_tokens_ += request.generated_tokens;
    if (requests_ > 0) progress_.CaseFractionDone(std::min(1.0, static_cast<double>(requests_seen_) / requests_));
    MaybeFlush();
  }
  void OnStatusLine(const std::string& text) override {
    std::lock_guard<std::mutex> lock(mu_);
    progress_.CaseStatusLine(text);
  }
  void OnSample(const TelemetrySample& sample) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (telemetry_ != nullptr) telemetry_->AddArrived(sample);
  }

  // The hardware sampler whose samples are stored with the steps' batches; null: none.
  void SetTelemetry(TelemetrySampler* sampler) { telemetry_ = sampler; }

  // REQUIRES: the backend has returned (no more events).
  std::vector<StepSample> TakePendingSteps() { return std::move(pending_steps_); }
  // Every hardware sample of the case, stored in batches or not, `last` added.
  const std::vector<TelemetrySample>& AllSamples(const std::vector<TelemetrySample>& last) {
    samples_seen_.insert(samples_seen_.end(), last.begin(), last.end());
    return samples_seen_;
  }
  // The work done, for the energy figures: training tokens, else generated ones.
  TelemetryWork Work(int nodes) const {
    TelemetryWork work;
    for (const StepSample& s : steps_seen_) work.tokens += s.tokens.value_or(0);
    if (work.tokens == 0) work.tokens = generated_tokens_;
    work.steps = static_cast<int64_t>(steps_seen_.size());
    work.nodes = nodes;
    return work;
  }
  std::vector<RequestSample> TakePendingRequests() { return std::move(pending_requests_); }
  const std::vector<StepSample>& steps() const { return steps_seen_; }
  const Status& error() const { return error_; }

 private:
  void MaybeFlush() {
    if (store_ == nullptr || !error_.ok()) return;
    double now = clock_.NowSeconds();
    if (pending_steps_.size() + pending_requests_.size() < kFlushSamples &&
        now - last_flush_ < kFlushSeconds)
      return;
    last_flush_ = now;
    if (!pending_steps_.empty()) {
      error_ = store_->AppendSteps(row_id_, pending_steps_);
      if (!error_.ok()) return;
      pending_steps_.clear();
    }
    if (!pending_requests_.empty()) {
      error_ = store_->AppendRequests(row_id_, pending_requests_);
      if (!error_.ok()) return;
      pending_requests_.clear();
    }
    if (telemetry_ != nullptr) {
      std::vector<TelemetrySample> samples = telemetry_->TakePending();
      if (samples.empty()) return;
      error_ = store_->AppendTelemetry(row_id_, samples);
      samples_seen_.insert(samples_seen_.end(), samples.begin(), samples.end());
    }
  }

  std::mutex mu_;  // backends may report from a worker thread
  Store* store_;   // nullptr: keep everything for FinishCase
  int64_t row_id_;
  Clock& clock_;
  Progress& progress_;
  const int64_t steps_, requests_;
  int64_t requests_seen_ = 0;
  int64_t generated_tokens_ = 0;
  TelemetrySampler* telemetry_ = nullptr;
  std::vector<TelemetrySample> samples_seen_;  // those stored in batches
  double last_flush_;
  std::vector<StepSample> pending_steps_;
  std::vector<RequestSample> pending_requests_;
  std::vector<StepSample> steps_seen_;  // every step, flushed or not, in order
  Status error_;
};

// "<abs>/results/logs/run-7/2.1.1.1.log", "<abs>/results/logs/run-7/2.1.1.1.r1.log".
std::string LogPath(const std::string& logs_dir, int64_t run_id, const std::string& case_id,
                    int repeat) {
  std::string file = repeat > 0 ? fmt::format("{}.r{}.log", case_id, repeat) : case_id + ".log";
  // Absolute, so the stored path still leads to the log from another directory.
  std::error_code ec;
  auto dir = std::filesystem::absolute(logs_dir, ec);
  if (ec) dir = logs_dir;
  return (dir.lexically_normal() / fmt::format("run-{}", run_id) / file).string();
}

// "1000 steps", "100 steps, reported as 1000 steps", "31 requests, 7750 tokens".
std::string DescribeLength(const CaseSpec& spec) {
  if (spec.workload == Workload::kInference)
    return fmt::format("{} requests, {} tokens", spec.inference.max_new_tokens.size(),
                       spec.inference.TotalTokens());
  if (!spec.length) return "no length";
  std::string text = spec.length->ToString();
  std::vector<std::string> more;
  for (const Length& l : spec.report_as) more.push_back(l.ToString());
  if (!more.empty()) text += ", reported also as " + Join(more, ", ");
  return text;
}

CaseRecord MakeCaseRecord(const CaseSpec& spec, int64_t run_id, int repeat) {
  CaseRecord r;
  r.run_id = run_id;
  r.case_id = spec.id;
  r.repeat = repeat;
  r.stage = spec.stage;
  r.model = spec.model;
  r.workload = WorkloadName(spec.workload);
  r.backend = spec.backend;
  r.system = spec.system.empty() ? spec.backend : spec.system;
  r.nodes = spec.nodes;
  r.topology = spec.topology.ToString();
  r.network = spec.network;
  r.variant = spec.variant;
  if (spec.length) {
    r.length_unit = spec.length->UnitName();
    r.length_count = spec.length->count;
  }
  // report_as_unit/count stay empty: each figure at another length carries
  // that length itself (Measurement::length_unit/count).
  return r;
}

// A backend and its problems, or why there is none.
struct Lookup {
  std::unique_ptr<Backend> backend;
  std::string failure;  // non-empty: the case fails with this reason without running
};

Lookup LookUpBackend(const BackendFactory& factory, const Plan& plan, const CaseSpec& spec) {
  Lookup out;
  try {
    out.backend = factory(spec.backend);
    if (!out.backend) {
      out.failure = fmt::format("unknown backend '{}'", spec.backend);
      return out;
    }
    std::vector<std::string> problems = out.backend->Check(plan, spec);
    if (!problems.empty()) out.failure = "backend check failed: " + Join(problems, "; ");
  } catch (const std::exception& e) {
    out.failure = fmt::format("backend threw: {}", e.what());
  } catch (...) {
    out.failure = "backend threw: unknown exception";
  }
  if (!out.failure.empty()) out.backend.reset();
  return out;
}

// Case statuses the run status counts as success.
bool IsSuccess(CaseStatus s) { return s == CaseStatus::kOk || s == CaseStatus::kSkipped; }

void Count(RunSummary& summary, CaseStatus status) {
  switch (status) {
    case CaseStatus::kOk: ++summary.ok; break;
    case CaseStatus::kFailed: ++summary.failed; break;
    case CaseStatus::kTimeout: ++summary.timeout; break;
    case CaseStatus::kSkipped: ++summary.skipped; break;
    case CaseStatus::kInterrupted: ++summary.interrupted; break;
    case CaseStatus::kRunning: break;  // never a final outcome (mapped to failed)
  }
}

std::string ShortSha(const std::string& sha) { return sha.substr(0, 12) + "\u2026"; }

// --only names cases of the plan: every unknown id is reported (with the
// closest known one), all at once.
Status CheckOnlyIds(const Plan& plan, const std::vector<std::string>& only) {
  std::vector<std::string> all_ids;
  for (const CaseSpec* c : plan.Cases()) all_ids.push_back(c->id);
  std::vector<std::string> unknown;
  for (const std::string& id : only) {
    if (plan.FindCase(id) != nullptr) continue;
    std::string suggestion = DidYouMean(id, all_ids);
    unknown.push_back(suggestion.empty()
                          ? fmt::format("unknown case id '{}'", id)
                          : fmt::format("unknown case id '{}' (did you mean '{}'?)", id, suggestion));
  }
  if (!unknown.empty()) return Status::InvalidArgument(Join(unknown, "; "));
  return Status::Ok();
}

// Appends `line` to the case log; "" or why it could not (text.h CannotWrite).
std::string AppendToLog(const std::string& log_path, const std::string& line) {
  std::ofstream log(log_path, std::ios::app);
  if (!log) return CannotWrite(log_path, errno);
  log << line;
  log.close();
  if (!log) return CannotWrite(log_path, errno);
  return "";
}

// Creates the case log (and its folder) with its header line; the log exists
// before the row says "running".
Status WriteLogHeader(const CaseRecord& record, const CaseSpec& spec) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(record.log_path).parent_path(), ec);
  if (ec) return Status::IoError(fmt::format("cannot create the folder of the case log {}: {}", record.log_path,
                                             ec.message()));
  const std::string error = AppendToLog(
      record.log_path, fmt::format("# protocol run {} case {} repeat {}/{} backend {} started {}\n", record.run_id,
                                   spec.id, record.repeat + 1, std::max(1, spec.repeats), spec.backend,
                                   record.started_at));
  if (!error.empty()) return Status::IoError(error + " (the case log; nothing of the case ran)");
  return Status::Ok();
}

// Appends the footer line; "" or why it could not.
std::string WriteLogFooter(const std::string& log_path, const CaseSpec& spec, int repeat,
                           const CaseResult& result, double seconds) {
  return AppendToLog(log_path, fmt::format("# protocol case {} repeat {}/{} ended {} after {} s{}\n", spec.id,
                                           repeat + 1, std::max(1, spec.repeats), CaseStatusName(result.status),
                                           FormatFigure(seconds), result.reason.empty() ? "" : ": " + result.reason));
}

// The ProcessRunner a backend gets: the runner's own, keeping the first
// log_error of what it ran (a case log the disk could not take).
class LogWatchingProcessRunner : public ProcessRunner {
 public:
  explicit LogWatchingProcessRunner(ProcessRunner& inner) : inner_(inner) {}
  ProcessResult Run(const ProcessSpec& spec, const StopFlag& stop, const LineCallback& on_line) override {
    ProcessResult result = inner_.Run(spec, stop, on_line);
    Keep(result.log_error);
    return result;
  }
  GroupResult RunGroup(const std::vector<ProcessSpec>& children, const GroupOptions& options, const StopFlag& stop,
                       const GroupLineCallback& on_line) override {
    GroupResult result = inner_.RunGroup(children, options, stop, on_line);
    Keep(result.log_error);
    return result;
  }
  const std::string& log_error() const { return log_error_; }

 private:
  void Keep(const std::string& error) {
    if (log_error_.empty()) log_error_ = error;
  }
  ProcessRunner& inner_;
  std::string log_error_;
};

// The case could not be logged whole: it is stored as interrupted (so that
// --resume runs it again), what the backend said kept in the reason.
void MarkLogLost(const std::string& log_error, CaseResult& result) {
  result.reason = fmt::format("the case log could not be written whole ({}); backend reported {}{}", log_error,
                              CaseStatusName(result.status), result.reason.empty() ? "" : ": " + result.reason);
  result.status = CaseStatus::kInterrupted;
}

// The case's status and reason from the backend's outcome: 'running' is a
// backend bug (failed); a stop seen while it ran makes it interrupted, the
// backend's own status kept in the reason.
void SetStatus(const BackendOutcome& outcome, bool stop_seen, CaseResult& result) {
  result.status = outcome.status;
  result.reason = outcome.reason;
  result.exit_code = outcome.exit_code;
  if (result.status == CaseStatus::kRunning) {
    result.status = CaseStatus::kFailed;
    result.reason = "backend returned status 'running' (a backend bug)" +
                    (outcome.reason.empty() ? std::string() : ": " + outcome.reason);
  }
  if (stop_seen && result.status != CaseStatus::kInterrupted) {
    result.reason = fmt::format("stop requested (Ctrl-C / SIGTERM); backend reported {}{}",
                                CaseStatusName(result.status),
                                result.reason.empty() ? "" : ": " + result.reason);
    result.status = CaseStatus::kInterrupted;
  } else if (stop_seen && result.reason.empty()) {
    result.reason = "stop requested (Ctrl-C / SIGTERM)";
  }
}

// The backend's outcome; an exception it throws is a failed case.
BackendOutcome RunBackend(Backend& backend, BackendContext& context) {
  try {
    return backend.Run(context);
  } catch (const std::exception& e) {
    return FailedOutcome(CaseStatus::kFailed, fmt::format("backend threw: {}", e.what()));
  } catch (...) {
    return FailedOutcome(CaseStatus::kFailed, "backend threw: unknown exception");
  }
}

// Measurements: the measured wall time first (also for failed cases: a
// failure's time is data), the backend's figures, contention, then derived
// ones (the step mean; for an ok case the figures at the other lengths).
// A contended case is counted in `summary`.
void AddMeasurements(const CaseSpec& spec, double seconds, const std::vector<StepSample>& steps,
                     std::vector<Measurement> backend_figures, std::vector<Measurement> contention_figures,
                     CaseResult& result, RunSummary& summary) {
  Measurement wall;
  wall.name = metric::kWallSeconds;
  wall.value = seconds;
  wall.unit = "s";
  wall.how = Provenance::kMeasured;
  result.measurements.push_back(wall);
  for (auto& m : backend_figures) result.measurements.push_back(std::move(m));
  for (Measurement& m : contention_figures) result.measurements.push_back(std::move(m));
  if (std::optional<double> share = ContendedShare(result.measurements)) {
    ++summary.contended;
    summary.worst_contention = std::max(summary.worst_contention, *share);
  }
  if (auto mean = StepSecondsMean(steps, spec.warmup_steps)) result.measurements.push_back(*mean);
  if (result.status == CaseStatus::kOk) {
    std::vector<double> step_seconds;
    for (const StepSample& s : steps) step_seconds.push_back(s.seconds);
    std::vector<std::string> problems;
    for (Measurement& m : FiguresAtOtherLengths(spec, seconds, step_seconds, &problems))
      result.measurements.push_back(std::move(m));
    // Validation refuses what it can; a prefix without per-step timings is known only now.
    for (const std::string& p : problems) spdlog::warn("case {}: {}", spec.id, p);
  }
}

// The hardware samples of the case (telemetry.h): stored with it, their
// figures added (telemetry_figures.h), what was read said as a fact, and a
// GPU part that could not be read said in the case log too.
void AddTelemetry(const CaseSpec& spec, const std::string& log_path, const std::vector<TelemetrySample>& all,
                  const TelemetryWork& work, TelemetrySampler::Ending& sampled, CaseResult& result) {
  for (Measurement& m : TelemetryFigures(all, work)) result.measurements.push_back(std::move(m));
  result.samples = std::move(sampled.samples);
  result.facts.emplace_back(fact::kTelemetry, sampled.description);
  if (!sampled.gpu_problem.empty()) {
    // Said on the terminal once per reason (a machine without nvidia-smi says it for every case), in every case's log.
    static std::string said;
    if (sampled.gpu_problem != said)
      spdlog::info("GPUs not sampled: {} (from case {} on; each case's log and its telemetry fact say so)",
                   sampled.gpu_problem, spec.id);
    said = sampled.gpu_problem;
    AppendToLog(log_path, fmt::format("# protocol telemetry: GPUs not sampled: {}\n", sampled.gpu_problem));
  }
}

// The case's expected wall time (estimate.h) as a measurement of provenance
// estimated, and the band's flag of an ok case whose measured time left it.
void AddExpected(const CaseSpec& spec, const TimeEstimate& expected, double seconds, CaseResult& result,
                 RunSummary& summary) {
  if (!expected.estimated()) return;
  Measurement m;
  m.name = metric::kExpectedWallSeconds;
  m.value = expected.seconds;
  m.unit = "s";
  m.how = Provenance::kEstimated;
  const TimeTerm* largest = expected.Largest();
  const std::string term = largest ? fmt::format("{} {}", largest->name, FormatDuration(largest->seconds)) : "";
  m.method = fmt::format("estimated before the case ran on {}: {}{}{}", expected.device, expected.Describe(),
                         metric::kLargestTermNote, term);
  result.measurements.push_back(std::move(m));
  if (result.status != CaseStatus::kOk) return;
  if (auto flag = EstimateBandFlag(seconds, expected.seconds, term)) {
    summary.off_estimate.push_back(fmt::format("{}: {}", spec.id, *flag));
    spdlog::warn("case {}: {}", spec.id, *flag);
  }
}

// A case whose measured link is off its network's label (link_label.h):
// listed for the run's end, and warned of now.
void CheckLinkLabel(const CaseSpec& spec, const CaseResult& result, RunSummary& summary) {
  const std::string warning = LinkLabelWarning(LinkOfCase(result.measurements, result.facts));
  if (warning.empty()) return;
  summary.link_off_label.push_back(fmt::format("{}: {}", spec.id, warning));
  spdlog::warn("case {}: {}", spec.id, warning);
}

}  // namespace

Runner::Runner(Store& store, Clock& clock, ProcessRunner& processes, BackendFactory backends,
               Progress& progress, const StopFlag& stop)
    : store_(store), clock_(clock), processes_(processes), backends_(std::move(backends)),
      progress_(progress), stop_(stop) {}

Result<RunSummary> Runner::Run(const Plan& plan, const RunOptions& options) {
  // ---- what to run: --only ids must exist ----
  if (Status s = CheckOnlyIds(plan, options.only); !s.ok()) return s;
  const std::set<std::string> only(options.only.begin(), options.only.end());

  // ---- the run: new, or the one being resumed ----
  RunSummary summary;
  Result<DoneCases> done = DoneCases();  // (case_id, repeat) with a final status
  if (options.resume_run_id) done = ResumeRun(plan, options, summary);
  else if (!options.dry_run) done = CreateRun(plan, options, summary);
  if (!done.ok()) return done.status();

  // The schedule (plan order, or interleaved groups) less what a resumed run has.
  std::vector<ScheduledRun> work;
  for (const ScheduledRun& item : ScheduleRuns(plan, only))
    if (!done->count({item.spec->id, item.repeat})) work.push_back(item);

  // ---- dry run: say what would run, store nothing ----
  if (options.dry_run) {
    DescribeDryRun(plan, work, options.calibration);
    return summary;
  }

  // ---- each (case, repeat) in schedule order ----
  const int total = static_cast<int>(work.size());
  for (int i = 0; i < total; ++i) {
    if (stop_.requested()) {
      summary.stopped = true;
      break;
    }
    Result<bool> stop_seen = RunCase(plan, options, work[i], i + 1, total, summary);
    if (!stop_seen.ok()) {
      // A lost case log stops the run as a Ctrl-C would (the database took the case: it can take the run's end).
      if (summary.log_lost) {
        summary.stopped = true;
        (void)FinishRun(summary);
      }
      return stop_seen.status();
    }
    if (*stop_seen) {
      summary.stopped = true;
      break;
    }
  }

  // ---- run status ----
  if (Status s = FinishRun(summary); !s.ok()) return s;
  return summary;
}

Result<Runner::DoneCases> Runner::ResumeRun(const Plan& plan, const RunOptions& options, RunSummary& summary) {
  const int64_t id = *options.resume_run_id;
  const std::string plan_sha = Sha256Hex(plan.resolved_text);
  Result<RunRecord> run = store_.GetRun(id);
  if (!run.ok()) return run.status();
  if (run->kind != "run")
    return Status::InvalidArgument(
        fmt::format("run {} is an {}, not a run; there is nothing to resume", id, run->kind));
  if (run->plan_sha256 != plan_sha)
    return Status::InvalidArgument(fmt::format(
        "plan changed since run {} (sha256 {} vs {}); --resume needs the same resolved plan", id,
        ShortSha(run->plan_sha256), ShortSha(plan_sha)));
  if (!options.dry_run) {
    Result<int> changed = store_.InterruptRunningCases(
        id, "runner stopped before the case finished (found running on --resume)");
    if (!changed.ok()) return changed.status();
    // The resumed part may run elsewhere, by another process: its facts are appended (the last wins).
    auto facts = options.context;
    facts.emplace_back("resumed_at", clock_.NowIso8601());
    Status s = store_.PutContext(id, facts);
    if (!s.ok()) return s;
  }
  Result<std::vector<CaseRecord>> rows = store_.CasesOfRun(id);
  if (!rows.ok()) return rows.status();
  DoneCases done;
  for (const CaseRecord& row : *rows)
    if (IsFinal(row.status)) done.insert({row.case_id, row.repeat});
  summary.run_id = id;
  return done;
}

Result<Runner::DoneCases> Runner::CreateRun(const Plan& plan, const RunOptions& options, RunSummary& summary) {
  const std::string plan_sha = Sha256Hex(plan.resolved_text);
  RunRecord run;
  run.kind = "run";
  run.plan_name = plan.name;
  run.plan_title = plan.title;
  run.plan_file = plan.file;
  run.plan_text = plan.resolved_text;
  run.plan_sha256 = plan_sha;
  run.started_at = clock_.NowIso8601();
  run.status = "running";
  run.protocol_version = BuildInfo().version;
  run.git_revision = BuildInfo().git_revision;
  Result<int64_t> id = store_.CreateRun(run);
  if (!id.ok()) return id.status();
  summary.run_id = *id;
  auto facts = options.context;
  facts.emplace_back("plan_sha256", plan_sha);
  Status s = store_.PutContext(summary.run_id, facts);
  if (!s.ok()) return s;
  return DoneCases();
}

void Runner::DescribeDryRun(const Plan& plan, const std::vector<ScheduledRun>& work,
                            const std::optional<HostCalibration>& calibration) {
  std::set<std::string> advised;  // case ids whose advice is shown (once per case)
  PlanTimeTotal total;
  for (const ScheduledRun& item : work) {
    const CaseSpec& spec = *item.spec;
    Lookup lookup = LookUpBackend(backends_, plan, spec);
    if (!lookup.failure.empty()) {
      progress_.Message(fmt::format("would fail {}: {}", spec.id, lookup.failure));
      continue;
    }
    // One repeat's expected time, counted for each (case, repeat) that would run.
    const TimeEstimate time = lookup.backend->EstimateTime(plan, spec, calibration);
    total.Add(spec.id, time, 1);
    progress_.Message(fmt::format("would run {} {} {} nodes={} {} (repeat {}/{})", spec.id,
                                  WorkloadName(spec.workload), spec.backend, spec.nodes,
                                  DescribeLength(spec), item.repeat + 1, std::max(1, spec.repeats)));
    // The backend's warnings and notes (e.g. the expected peak memory), once per case.
    if (advised.insert(spec.id).second) {
      CaseAdvice advice = lookup.backend->Advise(plan, spec);
      advice.notes.push_back(DescribeCaseTime(time, spec.repeats));
      for (const std::string& w : advice.warnings) progress_.Message(fmt::format("  warning: {}", w));
      for (const std::string& n : advice.notes) progress_.Message("  " + Join(Split(n, '\n'), "\n      "));
    }
  }
  progress_.Message(total.Describe());
}

Result<bool> Runner::RunCase(const Plan& plan, const RunOptions& options, const ScheduledRun& item,
                             int index, int total, RunSummary& summary) {
  const CaseSpec& spec = *item.spec;
  const int repeat = item.repeat;
  const int64_t run_id = summary.run_id;
  progress_.CaseStarted(index, total, spec, repeat);

  CaseRecord record = MakeCaseRecord(spec, run_id, repeat);
  record.log_path = LogPath(options.logs_dir, run_id, spec.id, repeat);
  record.started_at = clock_.NowIso8601();
  if (Status s = WriteLogHeader(record, spec); !s.ok()) return s;
  Result<int64_t> row = store_.BeginCase(record);
  if (!row.ok()) return row.status();

  const std::string output_dir = ExpandPlaceholders(
      spec.output_dir, CasePlaceholderValues(PlaceholderField::kOutputDir, {plan, spec, repeat, run_id, ""}));

  // Set-up, timed run, outcome. wall_seconds covers everything the case cost.
  const bool in_steps = spec.length && spec.length->unit == Length::Unit::kSteps;
  CaseEventSink events(&store_, *row, clock_, progress_, in_steps ? spec.length->count : 0,
                       spec.workload == Workload::kInference
                           ? static_cast<int64_t>(spec.inference.max_new_tokens.size())
                           : 0);
  const double t0 = clock_.NowSeconds();
  std::optional<ContentionSampler> contention;
  if (options.cpu_meter) contention.emplace(*options.cpu_meter, options.contention_interval_seconds);
  std::optional<TelemetrySampler> telemetry;
  const TelemetrySources& sources = options.telemetry;
  if (plan.telemetry.interval_seconds > 0 && (sources.processes || sources.net || sources.cpu)) {
    telemetry.emplace(sources, plan.telemetry.interval_seconds);
    events.SetTelemetry(&*telemetry);
  }
  // The backend lives until the case is stored (its tear-down is not timed).
  Lookup lookup = LookUpBackend(backends_, plan, spec);
  LogWatchingProcessRunner watched(processes_);
  TimeEstimate expected;  // computed before the case runs, as validate prints it
  expected.why_not = "no backend";
  if (lookup.failure.empty()) expected = lookup.backend->EstimateTime(plan, spec, options.calibration);
  BackendOutcome outcome;
  if (!lookup.failure.empty()) {
    outcome.status = CaseStatus::kFailed;
    outcome.reason = lookup.failure;
  } else {
    BackendContext context{plan, spec, repeat, record.log_path, output_dir,
                           stop_, watched, clock_, events, run_id};
    outcome = RunBackend(*lookup.backend, context);
  }
  const double seconds = clock_.NowSeconds() - t0;
  std::vector<Measurement> contention_figures;
  if (contention) contention_figures = contention->Stop();
  std::optional<TelemetrySampler::Ending> sampled;
  if (telemetry) {
    events.SetTelemetry(nullptr);
    sampled = telemetry->Stop();
  }
  if (!events.error().ok()) return events.error();

  CaseResult result;
  result.facts = std::move(outcome.facts);
  result.eval_curve = std::move(outcome.eval_curve);
  const bool stop_seen = stop_.requested();
  SetStatus(outcome, stop_seen, result);
  AddMeasurements(spec, seconds, events.steps(), std::move(outcome.measurements),
                  std::move(contention_figures), result, summary);
  AddExpected(spec, expected, seconds, result, summary);
  CheckLinkLabel(spec, result, summary);
  if (sampled) AddTelemetry(spec, record.log_path, events.AllSamples(sampled->samples), events.Work(spec.nodes), *sampled,
                            result);
  result.steps = events.TakePendingSteps();
  result.requests = events.TakePendingRequests();
  result.finished_at = clock_.NowIso8601();

  std::string log_error = watched.log_error();
  if (!log_error.empty()) MarkLogLost(log_error, result);
  if (std::string footer = WriteLogFooter(record.log_path, spec, repeat, result, seconds); !footer.empty() &&
      log_error.empty()) {
    log_error = footer;
    MarkLogLost(log_error, result);
  }
  // Provenance: the log as it stands now, footer included, is what the row vouches for.
  if (Result<std::string> sha = Sha256File(record.log_path); sha.ok()) result.log_sha256 = *sha;
  Status finished = store_.FinishCase(*row, result);
  if (!finished.ok()) {
    if (log_error.empty()) return finished;
    // The log met the full disk first; the database then could not store the case either.
    return Status::IoError(fmt::format("{} (the case log); the case could not be stored either: {}", log_error,
                                       finished.message()));
  }
  Count(summary, result.status);
  progress_.CaseFinished(index, total, spec, repeat, result.status, seconds, result.reason);
  if (!log_error.empty()) {
    summary.log_lost = true;
    return Status::IoError(fmt::format(
        "{} (the case log); case {} repeat {}/{} is stored as interrupted with its figures, and the run stops: "
        "free space, then --resume {} runs it again",
        log_error, spec.id, repeat + 1, std::max(1, spec.repeats), run_id));
  }
  return stop_seen;
}

Status Runner::FinishRun(const RunSummary& summary) {
  // Over the latest row of every (case, repeat) of the run.
  std::string status = "ok";
  if (summary.stopped) {
    status = "interrupted";
  } else {
    Result<std::vector<CaseRecord>> rows = store_.CasesOfRun(summary.run_id);
    if (!rows.ok()) return rows.status();
    std::map<std::pair<std::string, int>, CaseStatus> latest;
    for (const CaseRecord& row : *rows) latest[{row.case_id, row.repeat}] = row.status;
    for (const auto& entry : latest)
      if (!IsSuccess(entry.second)) status = "failed";
  }
  return store_.FinishRun(summary.run_id, status, clock_.NowIso8601());
}

}  // namespace protocol
