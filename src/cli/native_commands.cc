// The subcommands that need the native backends, as `protocol-native` runs
// them (native_commands.h).

#include "cli/native_commands.h"

#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "backends/build_capabilities.h"
#include "backends/environment.h"
#include "backends/native/calibrate.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/worker.h"
#include "backends/registry.h"
#include "cli/subcommand.h"
#include "runner/analysis/junit.h"
#include "runner/analysis/reference_check.h"
#include "runner/base/log.h"
#include "runner/base/placeholders.h"
#include "runner/base/sha256.h"
#include "runner/base/text.h"
#include "runner/exec/calibration.h"
#include "runner/exec/cpu_meter.h"
#include "runner/exec/net_dev.h"
#include "runner/exec/progress.h"
#include "runner/exec/runner.h"
#include "runner/exec/signals.h"
#include "runner/plan/coverage.h"
#include "runner/plan/plan_parser.h"
#include "runner/store/run_spec.h"

namespace protocol {
namespace {

// Parses a plan and checks every case against its backend. Prints every
// problem (located) and returns nullopt when there is any. Otherwise prints
// the backends' warnings (located, one line each: they fail nothing) unless
// `print_warnings` is false (a dry run lists them under each case), and, when
// `notes` is given, collects each case's notes ("case id: note") in plan order.
// With `total`, each case's notes end with its expected wall time (the
// backend's EstimateTime with `calibration`), and `total` sums them.
std::optional<Plan> LoadPlan(const std::string& path, const std::vector<std::string>& overrides,
                             std::vector<std::string>* notes = nullptr, bool print_warnings = true,
                             const std::optional<HostCalibration>& calibration = std::nullopt,
                             PlanTimeTotal* total = nullptr) {
  PlanParseOptions options;
  options.backend_names = BackendNames();
  options.overrides = overrides;
  PlanParseResult parsed = ParsePlanFile(path, options);
  std::vector<Diagnostic> problems = parsed.errors;
  std::vector<Diagnostic> warnings;
  if (parsed.ok()) {
    for (const CaseSpec* spec : parsed.plan->Cases()) {
      const BackendEntry* entry = FindBackend(spec->backend);
      if (!entry) continue;  // the parser already reported unknown backends
      std::unique_ptr<Backend> backend = entry->make();
      std::vector<std::string> messages = backend->Check(*parsed.plan, *spec);
      for (const std::string& message : messages)
        problems.push_back({spec->where, fmt::format("case {}: {}", spec->id, message), ""});
      if (!messages.empty()) continue;
      CaseAdvice advice = backend->Advise(*parsed.plan, *spec);
      for (const std::string& message : advice.warnings)
        warnings.push_back({spec->where, fmt::format("warning: case {}: {}", spec->id, message), ""});
      if (notes)
        for (const std::string& note : advice.notes) notes->push_back(fmt::format("{}: {}", spec->id, note));
      if (notes && total) {
        const TimeEstimate time = backend->EstimateTime(*parsed.plan, *spec, calibration);
        total->Add(spec->id, time, spec->repeats);
        notes->push_back(fmt::format("{}: {}", spec->id, DescribeCaseTime(time, spec->repeats)));
      }
    }
  }
  if (problems.empty() && parsed.ok()) {
    // The two sides of a report row must compute on the same resources.
    const Plan& plan = *parsed.plan;
    ResourcesOf resources = [&plan](const CaseSpec& spec) -> std::optional<CaseResources> {
      const BackendEntry* entry = FindBackend(spec.backend);
      return entry ? entry->make()->Resources(plan, spec) : std::nullopt;
    };
    for (const auto& [case_id, w] :
         UnequalSides(plan, TrainingCoverage(plan, kBaselineSystem, kCandidateSystem, {kFurtherBaselineSystem}),
                      kCandidateSystem, resources))
      warnings.push_back({plan.FindCase(case_id)->where, fmt::format("warning: case {}: {}", case_id, w), ""});
  }
  if (!problems.empty()) {
    std::fputs(RenderDiagnostics(problems, parsed.source_text).c_str(), stderr);
    std::fprintf(stderr, "protocol: %s: %zu problem%s\n", path.c_str(), problems.size(),
                 problems.size() == 1 ? "" : "s");
    return std::nullopt;
  }
  if (print_warnings)
    for (const Diagnostic& w : warnings) std::fprintf(stderr, "%s\n", w.ToString().c_str());
  return std::move(parsed.plan);
}

// A --resume of a run whose runner still lives on this host would run its
// cases twice, side by side: refused. (The runner's last recorded pid and host;
// a runner on another host cannot be checked from here.)
Status RunnerStillAlive(Store& store, int64_t run_id) {
  auto facts = store.GetContext(run_id);
  if (!facts.ok()) return facts.status();
  std::string host, pid;
  for (const auto& [key, value] : *facts) {
    if (key == "hostname") host = value;
    if (key == "runner_pid") pid = value;
  }
  char here[256] = {};
  if (pid.empty() || ::gethostname(here, sizeof here - 1) != 0 || host != here) return Status::Ok();
  const int64_t runner = std::atoll(pid.c_str());
  if (runner == ::getpid() || !IsLiveProtocolRun(runner)) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "run {} is still running here: its runner, process {}, is alive; stop it (Ctrl-C, or kill {}) or let it "
      "finish, then --resume",
      run_id, runner, runner));
}

// Starting `protocol-native --version` (the program, libtorch's libraries):
// the fastest of five, in seconds (the start least disturbed by other work,
// as the benchmarks keep their best run: a busy machine shows as the cases'
// contention, not as a slower machine); 0 when it cannot be started.
double ProcessStartSeconds() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 0;
  const std::string command = ShellQuote(std::string(self, static_cast<size_t>(n))) + " --version >/dev/null 2>&1";
  std::vector<double> times;
  Clock& clock = SystemClock();
  for (int i = 0; i < 5; ++i) {
    const double t0 = clock.NowSeconds();
    if (std::system(command.c_str()) != 0) return 0;
    times.push_back(clock.NowSeconds() - t0);
  }
  return *std::min_element(times.begin(), times.end());
}

// This host's CPU figures for the time estimate (`protocol calibrate`):
// matmul and memory rates over `seconds_each` each, a decode op's cost, and
// a process start; with the share of the CPU other processes took meanwhile
// (cpu_meter.h, read before and after).
HostCalibration CalibrateThisHost(double seconds_each) {
  ProcCpuMeter meter;
  const std::optional<CpuReading> before = meter.Read();
  const native::CpuRates rates = native::MeasureHostForEstimate(seconds_each);
  HostCalibration c;
  c.host = ThisHost();
  c.measured_at = SystemClock().NowIso8601();
  c.cpu_flops = rates.matmul_flops;
  c.memory_bytes_per_second = rates.memory_bytes_per_second;
  c.op_seconds = rates.op_seconds;
  c.threads = rates.threads;
  c.process_start_seconds = ProcessStartSeconds();
  if (const std::optional<CpuReading> after = meter.Read(); before && after)
    c.contention = OthersShare(*before, *after).value_or(0);
  return c;
}

// Says on stderr that `c` was measured on a busy machine, if it was.
void WarnIfContended(const HostCalibration& c) {
  if (CalibrationContended(c))
    spdlog::warn("this host's CPU figures were {}: they are low, and the time estimates from them long; "
                 "`protocol calibrate` on an idle machine replaces them",
                 CalibrationContentionNote(c));
}

// The first run beside a database whose folder has no calibration for this
// host measures one (`protocol calibrate` with its seconds trimmed: about
// kRunCalibrationSeconds · 2 + 2 s) and stores it there, so that a new
// user's first estimates are this machine's, not assumed figures. A run whose
// stored calibration was measured on a busy machine measures again, and keeps
// whichever was measured on the quieter machine (PreferRemeasured): a first
// run beside a busy build does not fix its estimates for good. Only when the
// plan has a case of a native backend (the command backend's estimate uses no
// CPU figures).
constexpr double kRunCalibrationSeconds = 0.5;
std::optional<HostCalibration> RunCalibration(const Plan& plan, const std::string& db,
                                              const std::optional<HostCalibration>& stored) {
  bool native = false;
  for (const CaseSpec* c : plan.Cases()) native = native || c->command.argv.empty();
  if (!native) return stored;
  const std::string path = CalibrationPathFor(db);
  if (stored) {
    std::fprintf(stderr,
                 "protocol: this host's CPU figures in %s were %s: measuring them again for the time estimate "
                 "(about %.0f s; --no-calibrate keeps them)\n",
                 path.c_str(), CalibrationContentionNote(*stored).c_str(), 2 * kRunCalibrationSeconds + 2);
  } else {
    std::fprintf(stderr,
                 "protocol: %s has no CPU figures for this host: measuring them for the time estimate (about %.0f s; "
                 "`protocol calibrate` measures longer, --no-calibrate keeps the assumed figures)\n",
                 path.c_str(), 2 * kRunCalibrationSeconds + 2);
  }
  const HostCalibration measured = CalibrateThisHost(kRunCalibrationSeconds);
  if (stored && !PreferRemeasured(*stored, measured)) {
    WarnIfContended(*stored);
    return stored;
  }
  WarnIfContended(measured);
  if (Status s = WriteCalibration(path, measured); !s.ok()) {
    spdlog::warn("{}; the time estimate uses this run's figures without storing them", s.message());
  }
  return measured;
}

// This host's `protocol calibrate` figures beside the database `db`; nullopt
// when there are none (`absent`, when given, set true) or when the file cannot
// be read (said once).
std::optional<HostCalibration> LoadCalibration(const std::string& db, bool* absent = nullptr) {
  auto read = ReadCalibration(CalibrationPathFor(db), ThisHost());
  if (!read.ok()) {
    spdlog::warn("{}; the time estimate uses the assumed CPU figures", read.status().message());
    return std::nullopt;
  }
  if (absent) *absent = !read->has_value();
  return *read;
}

}  // namespace

void StartProgram(int, char**) { native::compat::TurnOffCudnn(); }

std::string NativeBuildFeatures() { return BuildCapabilitiesLine(); }

// What a run records of where it ran (docs/regression.md): the environment,
// the program's own digest; warns when the machine is already busy.
std::vector<std::pair<std::string, std::string>> RunContext() {
  std::vector<std::pair<std::string, std::string>> context = CollectEnvironment();
  // Provenance: the program that produced the figures (docs/regression.md).
  auto exe = Sha256File("/proc/self/exe");
  if (exe.ok()) context.emplace_back("protocol_binary_sha256", exe.value());
  // Timings taken on a machine busy with other work are contended (OpenMP
  // threads spin while waiting for a core): say so; the context keeps the load.
  std::string load, cores;
  for (const auto& [key, value] : context) {
    if (key == "load_average_1m") load = value;
    if (key == "cpu_cores") cores = value;
  }
  if (!load.empty() && !cores.empty() && std::stod(load) > std::stod(cores))
    spdlog::warn("load average {} exceeds the {} cores: timings of this run will be contended "
                 "(docs/performance.md); measure on an idle machine for figures you report",
                 load, cores);
  return context;
}

int CmdRun(Args& a) {
  std::optional<Plan> plan = LoadPlan(a.plans.at(0), a.set, nullptr, /*print_warnings=*/!a.dry_run);
  if (!plan) return kExitBadInput;
  int code = kExitOk;
  std::unique_ptr<Store> store;
  if (!a.dry_run || !a.resume.empty()) {  // a dry run of a resume reads the run it would continue
    // A resume continues a stored run, so its database must exist.
    store = OpenOrReport(a.db, &code, a.resume.empty() ? DbAccess::kCreate : DbAccess::kMustExist);
    if (!store) return code;
  }
  static StopFlag stop;
  InstallStopSignals(&stop);
  auto processes = MakeSystemProcessRunner();
  auto progress = MakeTerminalProgress();
  RunOptions options;
  options.only = a.only;
  options.dry_run = a.dry_run;
  bool uncalibrated = false;
  options.calibration = LoadCalibration(a.db, &uncalibrated);
  const bool busy_figures = options.calibration && CalibrationContended(*options.calibration);
  if (!a.dry_run && !a.no_calibrate && (uncalibrated || busy_figures))
    options.calibration = RunCalibration(*plan, a.db, options.calibration);
  if (!a.resume.empty()) {
    auto id = ResolveRunSpec(*store, a.resume);
    if (!id.ok()) return Fail(id.status());
    options.resume_run_id = id.value();
    if (!a.dry_run)
      if (Status alive = RunnerStillAlive(*store, id.value()); !alive.ok()) return Fail(alive);
  }
  options.logs_dir = a.logs_dir;
  if (!a.dry_run) options.context = RunContext();
  BackendFactory factory = [](const std::string& name) -> std::unique_ptr<Backend> {
    const BackendEntry* entry = FindBackend(name);
    return entry ? entry->make() : nullptr;
  };
  // A dry run stores nothing; the runner never touches the store then.
  std::unique_ptr<Store> no_store;
  Store* target = store.get();
  if (!target) {
    auto memory = OpenStore(":memory:");
    if (!memory.ok()) return Fail(memory.status());
    no_store = std::move(memory).value();
    target = no_store.get();
  }
  ProcCpuMeter cpu_meter;
  options.cpu_meter = &cpu_meter;
  // The hardware while each case runs (telemetry.h): nvidia-smi through a
  // process runner of its own (it runs beside the case's processes).
  std::unique_ptr<ProcessRunner> gpu_reader = MakeSystemProcessRunner();
  ProcNetMeter net_meter;
  ProcCpuMeter telemetry_cpu;
  options.telemetry = {gpu_reader.get(), &net_meter, &telemetry_cpu};
  Runner runner(*target, SystemClock(), *processes, factory, *progress, stop);
  Result<RunSummary> summary = runner.Run(*plan, options);
  if (!summary.ok()) return Fail(summary.status());
  const RunSummary& s = summary.value();
  if (a.dry_run) return kExitOk;
  std::fprintf(stderr,
               "protocol: run %lld %s: %d ok, %d failed, %d timeout, %d skipped, %d interrupted "
               "(database %s)\n",
               static_cast<long long>(s.run_id), s.stopped ? "stopped" : "finished", s.ok,
               s.failed, s.timeout, s.skipped, s.interrupted, a.db.c_str());
  if (s.contended)
    std::fprintf(stderr,
                 "protocol: warning: %d case%s ran contended: other processes took up to %.0f %% "
                 "of the machine's CPU (a case is contended from %.0f %%); their figures are "
                 "less reliable and the report says so. Measure on an idle machine for figures "
                 "you publish (docs/performance.md)\n",
                 s.contended, s.contended == 1 ? "" : "s", 100 * s.worst_contention,
                 100 * metric::kContendedShare);
  if (!s.off_estimate.empty()) {
    std::fprintf(stderr,
                 "protocol: warning: %zu case%s outside %s time estimate's band (%gx-%gx of the expected wall "
                 "time; docs/estimates.md):\n",
                 s.off_estimate.size(), s.off_estimate.size() == 1 ? "" : "s",
                 s.off_estimate.size() == 1 ? "its" : "their", kEstimateBandLow, kEstimateBandHigh);
    for (const std::string& line : s.off_estimate) std::fprintf(stderr, "  %s\n", line.c_str());
  }
  if (!s.link_off_label.empty()) {
    std::fprintf(stderr,
                 "protocol: warning: %zu case%s measured a link more than %gx away from %s network's nominal rate "
                 "(bus bandwidth before the first step; docs/distributed.md):\n",
                 s.link_off_label.size(), s.link_off_label.size() == 1 ? "" : "s", metric::kLinkLabelFactor,
                 s.link_off_label.size() == 1 ? "its" : "their");
    for (const std::string& line : s.link_off_label) std::fprintf(stderr, "  %s\n", line.c_str());
  }
  if (s.stopped)
    std::fprintf(stderr, "protocol: continue with: protocol run %s --db %s --resume %lld\n",
                 a.plans[0].c_str(), a.db.c_str(), static_cast<long long>(s.run_id));
  int exit_code = s.ExitCode();
  std::vector<std::pair<std::string, std::string>> check_failures;
  if (a.check) {
    auto verdicts = CheckRunReferences(*store, *plan, s.run_id);
    if (!verdicts.ok()) return Fail(verdicts.status());
    int failed = 0;
    for (const ReferenceVerdict& v : verdicts.value()) {
      std::fprintf(stderr, "protocol: check %s %s: %s\n", v.pass ? "pass" : "FAIL", v.case_id.c_str(),
                   v.message.c_str());
      if (!v.pass) {
        ++failed;
        check_failures.emplace_back(v.case_id, v.message);
      }
    }
    std::fprintf(stderr, "protocol: check: %zu reference%s, %d outside %s band\n",
                 verdicts->size(), verdicts->size() == 1 ? "" : "s", failed,
                 failed == 1 ? "its" : "their");
    if (failed) exit_code = kExitCaseFailed;
  }
  if (!a.junit.empty()) {
    auto suite = JunitSuiteForRun(*store, s.run_id, check_failures);
    if (!suite.ok()) return Fail(suite.status());
    if (int c = WriteOutput(RenderJunit("protocol", {suite.value()}), a.junit); c != kExitOk) return c;
  }
  return exit_code;
}

int CmdValidate(Args& a) {
  int code = kExitOk;
  for (const std::string& path : a.plans) {
    std::vector<std::string> notes;
    PlanTimeTotal total;
    std::optional<Plan> plan = LoadPlan(path, a.set, &notes, true, LoadCalibration(a.db), &total);
    if (!plan) {
      code = kExitBadInput;
      continue;
    }
    size_t cases = plan->Cases().size();
    std::printf("%s: ok (%zu stage%s, %zu case%s)\n", path.c_str(), plan->stages.size(),
                plan->stages.size() == 1 ? "" : "s", cases, cases == 1 ? "" : "s");
    // A note's further lines (its terms) are indented under it.
    for (const std::string& note : notes) std::printf("  %s\n", Join(Split(note, '\n'), "\n      ").c_str());
    std::printf("  %s\n", total.Describe().c_str());
    std::fputs(
        RenderCoverage(TrainingCoverage(*plan, kBaselineSystem, kCandidateSystem, {kFurtherBaselineSystem})).c_str(),
        stdout);
  }
  return code;
}

int CmdCalibrate(Args& a) {
  std::fprintf(stderr, "protocol: calibrating this host's CPU (about %.0f s) ...\n", 2 * a.calibrate_seconds + 2);
  const HostCalibration c = CalibrateThisHost(a.calibrate_seconds);
  const std::string path = CalibrationPathFor(a.db);
  if (Status s = WriteCalibration(path, c); !s.ok()) return Fail(s);
  std::printf("%s: host %s, %d threads: matmul %.3g GFLOP/s (fp32), memory %.3g GB/s (copy, read + write), "
              "decode op %.3g us, process start %.3g s; other processes took %.0f %% of the CPU meanwhile\n",
              path.c_str(), c.host.c_str(), c.threads, c.cpu_flops / 1e9, c.memory_bytes_per_second / 1e9,
              c.op_seconds * 1e6, c.process_start_seconds, 100 * c.contention);
  WarnIfContended(c);
  return kExitOk;
}

int CmdBackends(Args&) {
  for (const BackendEntry& entry : BackendTable()) std::printf("%-8s %s\n", entry.name, entry.summary);
  std::printf("\nThis build of the native backends (fsdp, share):\n");
  for (const BuildCapability& row : BuildCapabilities()) std::printf("  %-18s %s\n", row.name, row.value.c_str());
  return kExitOk;
}

int CmdWorker(Args& a) { return native::RunWorker(a.worker_case); }

}  // namespace protocol
