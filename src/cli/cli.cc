// The `protocol` command line. Each subcommand is one row of kCommands (ninja's
// kTools style): a name, a one-line summary, a function that declares its
// options, and a function that runs it. This is the only file that includes
// CLI11. Everything here is wiring: parsing, execution, storage and reporting
// live in their own layers.

#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backends/environment.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/worker.h"
#include "backends/registry.h"
#include "report/report.h"
#include "report/verify.h"
#include "runner/analysis/compare.h"
#include "runner/analysis/junit.h"
#include "runner/analysis/reference_check.h"
#include "runner/base/build_info.h"
#include "runner/base/log.h"
#include "runner/base/sha256.h"
#include "runner/base/text.h"
#include "runner/exec/progress.h"
#include "runner/exec/runner.h"
#include "runner/exec/signals.h"
#include "runner/plan/coverage.h"
#include "runner/plan/plan_parser.h"
#include "runner/store/export.h"
#include "runner/store/import_file.h"
#include "runner/store/run_spec.h"
#include "runner/store/store.h"

namespace protocol {
namespace {

constexpr const char* kDefaultDb = "results/protocol.db";

// Options of every subcommand, bound by CLI11. One struct keeps the wiring flat.
struct Args {
  std::string db = kDefaultDb;
  std::vector<std::string> plans;  // run: one; validate: one or more
  std::vector<std::string> only;
  bool dry_run = false;
  std::string resume;  // run: a run spec (ID | latest | latest:PLAN)
  std::vector<std::string> set;
  std::string logs_dir = "results/logs";
  std::string run_id;
  bool json = false;
  std::vector<std::string> runs;  // report, export: run specs
  std::string model;
  std::string format;
  std::string template_path;
  std::string out;
  std::string baseline_system = kBaselineSystem;
  std::string candidate_system = kCandidateSystem;
  std::string import_file;
  std::string junit;                   // run, compare: JUnit XML here
  bool check = false;                  // run: check reference bands
  std::string baseline, candidate;     // compare
  std::string threshold = "5%";        // compare
  std::vector<std::string> metrics;    // compare
  std::string verify;                  // report: verify this file
  std::string worker_case;  // worker: the case file a distributed backend wrote
};

void PrintError(const std::string& text) { std::fprintf(stderr, "protocol: %s\n", text.c_str()); }

// Maps a Status to an exit code: what the user named wrongly (a bad flag or
// file, an unknown run) is bad input (2); a database or file that cannot be
// read or written (unreadable, not a database, locked beyond the busy
// timeout, disk full) and our own bugs are internal or I/O errors (3).
int ExitFor(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk: return kExitOk;
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotFound: return kExitBadInput;
    case Status::Code::kCorruption:
    case Status::Code::kIoError:
    case Status::Code::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

int Fail(const Status& status) {
  PrintError(status.message());
  return ExitFor(status);
}

std::unique_ptr<Store> OpenOrReport(const std::string& path, int* exit_code) {
  auto store = OpenStore(path);
  if (!store.ok()) {
    const std::string& why = store.status().message();  // names the path already, as a rule
    PrintError(StartsWith(why, path + ": ") ? why : fmt::format("cannot open database {}: {}", path, why));
    *exit_code = ExitFor(store.status());
    return nullptr;
  }
  return std::move(store).value();
}

// Writes `text` to `path` (creating parent directories), or stdout when empty.
int WriteOutput(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    PrintError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    return kExitInternal;
  }
  spdlog::info("wrote {}", path);
  return kExitOk;
}

// What a file extension means as a format, e.g. {".csv", "csv"}.
struct Extension {
  const char* suffix;
  const char* format;
};

// The format to write: --format when given, else the one the --out file's
// extension names, else `fallback`. A --format that contradicts a known
// extension of the file is an error naming both (kInvalidArgument).
Result<std::string> PickFormat(const std::string& flag, const std::string& file,
                               const std::vector<Extension>& extensions, const std::string& fallback) {
  std::string by_extension;
  for (const Extension& e : extensions)
    if (EndsWith(file, e.suffix)) by_extension = e.format;
  if (flag.empty()) return by_extension.empty() ? fallback : by_extension;
  if (!by_extension.empty() && by_extension != flag)
    return Status::InvalidArgument(fmt::format(
        "--format {} contradicts the file name {} (a {} file): drop --format or rename the file", flag, file,
        by_extension));
  return flag;
}

// Parses a plan and checks every case against its backend. Prints every
// problem (located) and returns nullopt when there is any. Otherwise prints
// the backends' warnings (located, one line each: they fail nothing) unless
// `print_warnings` is false (a dry run lists them under each case), and, when
// `notes` is given, collects each case's notes ("case id: note") in plan order.
std::optional<Plan> LoadPlan(const std::string& path, const std::vector<std::string>& overrides,
                             std::vector<std::string>* notes = nullptr, bool print_warnings = true) {
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
         UnequalSides(plan, TrainingCoverage(plan, kBaselineSystem, kCandidateSystem), kBaselineSystem, resources))
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

// ---- subcommands ---------------------------------------------------------

int CmdRun(Args& a) {
  std::optional<Plan> plan = LoadPlan(a.plans.at(0), a.set, nullptr, /*print_warnings=*/!a.dry_run);
  if (!plan) return kExitBadInput;
  int code = kExitOk;
  std::unique_ptr<Store> store;
  if (!a.dry_run || !a.resume.empty()) {  // a dry run of a resume reads the run it would continue
    store = OpenOrReport(a.db, &code);
    if (!store) return code;
  }
  static StopFlag stop;
  InstallStopSignals(&stop);
  auto processes = MakeSystemProcessRunner();
  auto progress = MakeTerminalProgress();
  RunOptions options;
  options.only = a.only;
  options.dry_run = a.dry_run;
  if (!a.resume.empty()) {
    auto id = ResolveRunSpec(*store, a.resume);
    if (!id.ok()) return Fail(id.status());
    options.resume_run_id = id.value();
    if (!a.dry_run)
      if (Status alive = RunnerStillAlive(*store, id.value()); !alive.ok()) return Fail(alive);
  }
  options.logs_dir = a.logs_dir;
  if (!a.dry_run) {
    options.context = CollectEnvironment();
    // Provenance: the program that produced the figures (docs/regression.md).
    auto exe = Sha256File("/proc/self/exe");
    if (exe.ok()) options.context.emplace_back("protocol_binary_sha256", exe.value());
    // Timings taken on a machine busy with other work are contended (OpenMP
    // threads spin while waiting for a core): say so; the context keeps the load.
    std::string load, cores;
    for (const auto& [key, value] : options.context) {
      if (key == "load_average_1m") load = value;
      if (key == "cpu_cores") cores = value;
    }
    if (!load.empty() && !cores.empty() && std::stod(load) > std::stod(cores))
      spdlog::warn("load average {} exceeds the {} cores: timings of this run will be contended "
                   "(docs/performance.md); measure on an idle machine for figures you report",
                   load, cores);
  }
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
    std::optional<Plan> plan = LoadPlan(path, a.set, &notes);
    if (!plan) {
      code = kExitBadInput;
      continue;
    }
    size_t cases = plan->Cases().size();
    std::printf("%s: ok (%zu stage%s, %zu case%s)\n", path.c_str(), plan->stages.size(),
                plan->stages.size() == 1 ? "" : "s", cases, cases == 1 ? "" : "s");
    // A note's further lines (its terms) are indented under it.
    for (const std::string& note : notes) std::printf("  %s\n", Join(Split(note, '\n'), "\n      ").c_str());
    std::fputs(RenderCoverage(TrainingCoverage(*plan, kBaselineSystem, kCandidateSystem)).c_str(), stdout);
  }
  return code;
}

int CmdList(Args& a) {
  int code = kExitOk;
  auto store = OpenOrReport(a.db, &code);
  if (!store) return code;
  auto text = RenderRunList(*store, a.json);
  if (!text.ok()) return Fail(text.status());
  return WriteOutput(text.value(), "");
}

int CmdShow(Args& a) {
  int code = kExitOk;
  auto store = OpenOrReport(a.db, &code);
  if (!store) return code;
  auto id = ResolveRunSpec(*store, a.run_id);
  if (!id.ok()) return Fail(id.status());
  auto text = RenderRunDetails(*store, id.value(), a.json);
  if (!text.ok()) return Fail(text.status());
  return WriteOutput(text.value(), "");
}

int CmdReport(Args& a) {
  ReportFormat format = ReportFormat::kMarkdown;
  auto picked = PickFormat(a.format, a.verify.empty() ? a.out : a.verify,
                           {{".md", "md"}, {".html", "html"}, {".htm", "html"}, {".json", "json"}, {".csv", "csv"}},
                           "md");
  if (!picked.ok()) return Fail(picked.status());
  const std::string& format_name = picked.value();
  if (!ParseReportFormat(format_name, &format)) {
    PrintError(fmt::format("unknown report format '{}' (md, html, json or csv)", format_name));
    return kExitBadInput;
  }
  int code = kExitOk;
  auto store = OpenOrReport(a.db, &code);
  if (!store) return code;
  ReportOptions options;
  for (const std::string& run : a.runs) {
    auto id = ResolveRunSpec(*store, run);
    if (!id.ok()) return Fail(id.status());
    options.run_ids.push_back(id.value());
  }
  options.model = a.model;
  options.baseline_system = a.baseline_system;
  options.candidate_system = a.candidate_system;
  ReportInvocation invocation{options, format, a.template_path};
  if (!a.verify.empty()) {
    auto text = ReadFileText(a.verify);
    if (!text.ok()) {
      PrintError(fmt::format("cannot read {}", a.verify));
      return kExitBadInput;
    }
    auto outcome = VerifyReport(*store, text.value(), invocation);
    if (!outcome.ok()) return Fail(outcome.status());
    const std::string how = InvocationText(outcome->invocation);
    if (outcome->match) {
      std::printf("%s: matches the database byte for byte (re-rendered with %s)\n",
                  a.verify.c_str(), how.c_str());
      return kExitOk;
    }
    std::printf("%s: DIFFERS from the database (re-rendered with %s):\n", a.verify.c_str(),
                how.c_str());
    for (const std::string& d : outcome->differences) std::printf("  %s\n", d.c_str());
    return kExitCaseFailed;
  }
  auto text = RenderReportFile(*store, invocation);
  if (!text.ok()) return Fail(text.status());
  return WriteOutput(text.value(), a.out);
}

int CmdImport(Args& a) {
  ImportParseResult parsed = ParseImportFile(a.import_file);
  if (!parsed.ok()) {
    std::fputs(RenderDiagnostics(parsed.errors, parsed.source_text).c_str(), stderr);
    std::fprintf(stderr, "protocol: %s: %zu problem%s\n", a.import_file.c_str(),
                 parsed.errors.size(), parsed.errors.size() == 1 ? "" : "s");
    return kExitBadInput;
  }
  int code = kExitOk;
  auto store = OpenOrReport(a.db, &code);
  if (!store) return code;
  auto run = StoreImport(*store, *parsed.file, SystemClock());
  if (!run.ok()) return Fail(run.status());
  std::printf("imported %zu figure%s from %s as run %lld (source: %s)\n",
              parsed.file->figures.size(), parsed.file->figures.size() == 1 ? "" : "s",
              a.import_file.c_str(), static_cast<long long>(run.value()),
              parsed.file->source.c_str());
  return kExitOk;
}

int CmdExport(Args& a) {
  auto format = PickFormat(a.format, a.out, {{".json", "json"}, {".csv", "csv"}}, "json");
  if (!format.ok()) return Fail(format.status());
  if (format.value() != "json" && format.value() != "csv") {
    PrintError(fmt::format("unknown export format '{}' (json or csv)", format.value()));
    return kExitBadInput;
  }
  int code = kExitOk;
  auto store = OpenOrReport(a.db, &code);
  if (!store) return code;
  std::vector<int64_t> run_ids;
  for (const std::string& run : a.runs) {
    auto id = ResolveRunSpec(*store, run);
    if (!id.ok()) return Fail(id.status());
    run_ids.push_back(id.value());
  }
  auto text = ExportStore(*store, format.value(), run_ids);
  if (!text.ok()) return Fail(text.status());
  return WriteOutput(text.value(), a.out);
}

int CmdCompare(Args& a) {
  CompareOptions options;
  auto threshold = ParseThreshold(a.threshold);
  if (!threshold.ok()) return Fail(threshold.status());
  options.threshold = threshold.value();
  options.metrics = a.metrics;
  if (Status s = ValidateCompareOptions(options); !s.ok()) return Fail(s);
  int code = kExitOk;
  auto store = OpenOrReport(a.db, &code);
  if (!store) return code;
  auto base = ResolveRunSpec(*store, a.baseline);
  if (!base.ok()) return Fail(base.status());
  auto cand = ResolveRunSpec(*store, a.candidate);
  if (!cand.ok()) return Fail(cand.status());
  auto base_side = CollectCompareSide(*store, base.value());
  if (!base_side.ok()) return Fail(base_side.status());
  auto cand_side = CollectCompareSide(*store, cand.value());
  if (!cand_side.ok()) return Fail(cand_side.status());
  CompareReport report = CompareRuns(base_side.value(), cand_side.value(), options);
  std::string text = a.json ? CompareToJson(report).dump(2) + "\n" : RenderCompareText(report);
  if (int c = WriteOutput(text, ""); c != kExitOk) return c;
  if (!a.junit.empty()) {
    std::string xml = RenderJunit("protocol compare", {JunitSuiteForCompare(report)});
    if (int c = WriteOutput(xml, a.junit); c != kExitOk) return c;
  }
  return report.ExitCode();
}

int CmdBackends(Args&) {
  for (const BackendEntry& entry : BackendTable()) std::printf("%-8s %s\n", entry.name, entry.summary);
  return kExitOk;
}

// ---- the table of subcommands ---------------------------------------------

void AddDb(CLI::App* cmd, Args& a) {
  cmd->add_option("--db", a.db, "SQLite results database (created on first use)")
      ->capture_default_str();
}

struct Command {
  const char* name;
  const char* summary;
  const char* footer;
  void (*declare)(CLI::App* cmd, Args& a);
  int (*run)(Args& a);
};

const Command kCommands[] = {
    {"run", "Run a plan's cases and store every result",
     "Examples:\n"
     "  protocol run plans/quickstart.yaml\n"
     "  protocol run plans/llama70b.yaml --only 2.1.1.1,2.2.1.1 --set defaults.repeats=3\n"
     "  protocol run plans/llama70b.yaml --resume 7      # after Ctrl-C or a crash\n"
     "Each case gets a row before it starts; a failed case is stored and the run goes on.\n"
     "Exit: 0 all cases ok, 1 a case failed / timed out / was interrupted, 2 bad plan or usage,\n"
     "3 internal or I/O error (e.g. the database cannot be written).",
     [](CLI::App* c, Args& a) {
       c->add_option("plan", a.plans, "Plan file (YAML, docs/plan-format.md)")
           ->required()->expected(1)->check(CLI::ExistingFile);
       AddDb(c, a);
       c->add_option("--only", a.only, "Run only these case ids (comma-separated)")->delimiter(',');
       c->add_flag("--dry-run", a.dry_run, "Show what would run; store nothing");
       c->add_option("--resume", a.resume,
                     "Continue this run (ID, 'latest' or 'latest:PLAN'): run only cases without a final status");
       c->add_option("--set", a.set,
                     "Override a plan value: key.path=value, e.g. defaults.timeout=600 or "
                     "stages[stage1].cases[2.1.1.1].steps=10 (repeatable)");
       c->add_option("--logs", a.logs_dir, "Directory for per-case logs")->capture_default_str();
       c->add_flag("--check", a.check,
                   "Check each case against its `reference:` band; exit 1 when outside");
       c->add_option("--junit", a.junit, "Also write a JUnit XML report here (one testcase per case)");
     },
     &CmdRun},
    {"validate", "Check plans without running them; every problem is reported with FILE:LINE:COL",
     "Exit: 0 all plans valid, 2 otherwise.",
     [](CLI::App* c, Args& a) {
       c->add_option("plans", a.plans, "Plan files")->required();
       c->add_option("--set", a.set, "Override a plan value (as in `run`)");
     },
     &CmdValidate},
    {"list", "List stored runs", "",
     [](CLI::App* c, Args& a) {
       AddDb(c, a);
       c->add_flag("--json", a.json, "JSON instead of a table");
     },
     &CmdList},
    {"show", "Show one run: context, cases, statuses, measurements and how each was obtained", "",
     [](CLI::App* c, Args& a) {
       c->add_option("run", a.run_id, "Run: ID, 'latest' or 'latest:PLAN'")->required();
       AddDb(c, a);
       c->add_flag("--json", a.json, "JSON with everything, samples included");
     },
     &CmdShow},
    {"report", "Render the efficiency-ratio tables (baseline time / share time)",
     "Examples:\n"
     "  protocol report --out results/report.md\n"
     "  protocol report --run latest --format html --out results/report.html\n"
     "  protocol report --model llama2-70b --format csv\n"
     "Without --run, every stored run is used and the newest result of each cell wins.\n"
     "Markers: * extrapolated or computed, X not provided, – no ratio for lack of a result.\n"
     "Markdown and HTML reports record their options in a comment line; an auditor checks a\n"
     "report with: protocol report --verify results/report.md",
     [](CLI::App* c, Args& a) {
       AddDb(c, a);
       c->add_option("--run", a.runs, "Use only these runs (ID, 'latest' or 'latest:PLAN'; repeatable)");
       c->add_option("--model", a.model, "Only this model (name as in the plans)");
       c->add_option("--format", a.format, "md | html | json | csv (default: from --out, else md)");
       c->add_option("--template", a.template_path, "Mustache template instead of templates/report.*");
       c->add_option("--out", a.out, "Write here instead of stdout");
       c->add_option("--baseline-system", a.baseline_system, "System in the baseline columns")
           ->capture_default_str();
       c->add_option("--candidate-system", a.candidate_system, "System in the share columns")
           ->capture_default_str();
       c->add_option("--verify", a.verify,
                     "Re-render REPORT_FILE from the database with the options it records and "
                     "compare byte for byte (exit 1 when it differs)");
     },
     &CmdReport},
    {"import", "Store published figures (auditors) from a YAML file (docs/import-format.md)", "",
     [](CLI::App* c, Args& a) {
       c->add_option("file", a.import_file, "Import file")->required();
       AddDb(c, a);
     },
     &CmdImport},
    {"export", "Export the database (or some runs) as JSON or CSV",
     "Examples:\n"
     "  protocol export --out results/all.csv              # the format follows the extension\n"
     "  protocol export --run latest:nightly --format json",
     [](CLI::App* c, Args& a) {
       AddDb(c, a);
       c->add_option("--run", a.runs, "Export only these runs (ID, 'latest' or 'latest:PLAN'; repeatable)");
       c->add_option("--format", a.format, "json | csv (default: from --out's extension, else json)");
       c->add_option("--out", a.out, "Write here instead of stdout");
     },
     &CmdExport},
    {"compare", "Compare two runs case by case: ratios, bootstrap intervals, verdicts",
     "Examples:\n"
     "  protocol compare 12 latest                      # pinned baseline vs the newest run\n"
     "  protocol compare 12 latest:nightly --threshold 3% --junit results/compare.xml\n"
     "  protocol compare 12 13 --metric tokens_per_second --metric my_score:higher --json\n"
     "A run is an id, 'latest' or 'latest:PLAN_NAME'. Verdicts: improved | unchanged |\n"
     "regressed | incomparable (with the reason), decided by the primary metric: the wall\n"
     "time for training, the total generation time for inference (other metrics are notes),\n"
     "or by the metrics named with --metric. docs/regression.md.\n"
     "Exit: 0 no regression, 1 a case regressed, 2 bad input.",
     [](CLI::App* c, Args& a) {
       c->add_option("baseline", a.baseline, "Baseline run: id, 'latest' or 'latest:PLAN'")->required();
       c->add_option("candidate", a.candidate, "Candidate run: id, 'latest' or 'latest:PLAN'")->required();
       AddDb(c, a);
       c->add_option("--threshold", a.threshold, "Change that counts (5% or 0.05)")->capture_default_str();
       c->add_option("--metric", a.metrics,
                     "Decide by this metric instead of the primary one (repeatable; NAME, or NAME:lower / NAME:higher)");
       c->add_flag("--json", a.json, "JSON instead of a table");
       c->add_option("--junit", a.junit, "Also write a JUnit XML report here");
     },
     &CmdCompare},
    {"backends", "List the backends a plan can name", "",
     [](CLI::App*, Args&) {}, &CmdBackends},
    {"worker", "One rank of a distributed native case (started by the fsdp/share backends)",
     "Internal: the backends start it with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set.\n"
     "See docs/distributed.md.",
     [](CLI::App* c, Args& a) {
       c->group("");  // hidden from --help
       c->add_option("--case", a.worker_case, "Case file (JSON) written by the backend")->required();
     },
     [](Args& a) { return native::RunWorker(a.worker_case); }},
};

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{
      "protocol — runs declarative LLM test plans (FSDP baseline vs share protocol), stores every\n"
      "result in SQLite and renders efficiency-ratio tables.\n"};
  app.footer(
      "Quick start:\n"
      "  protocol run plans/quickstart.yaml && protocol report --out results/report.md\n"
      "A run is named the same way everywhere (show, report --run, export --run, compare,\n"
      "run --resume): ID, 'latest' (the newest run of a plan) or 'latest:PLAN'.\n"
      "Exit codes: 0 ok · 1 a case failed or a regression was found · 2 bad input or usage ·\n"
      "3 internal or I/O error (the database or a file cannot be read or written: unreadable,\n"
      "not a database, locked beyond the busy timeout, disk full).\n"
      "Documentation: docs/ (plan-format.md, report.md, database.md).");
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("protocol {} ({}, {}; {})", BuildInfo().version,
                                                BuildInfo().git_revision, BuildInfo().build_type,
                                                native::compat::BuildFeatures()));
  // --log-level is accepted before the subcommand and after it
  // (`protocol run PLAN --log-level debug`): one variable, declared on both.
  std::string log_level = "info";
  auto add_log_level = [&log_level](CLI::App* on) {
    on->add_option("--log-level", log_level, "quiet | info | debug")
        ->check(CLI::IsMember({"quiet", "info", "debug"}))
        ->capture_default_str();
  };
  add_log_level(&app);
  Args args;
  std::vector<std::pair<CLI::App*, const Command*>> subcommands;
  for (const Command& command : kCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.summary);
    if (command.footer[0]) sub->footer(command.footer);
    command.declare(sub, args);
    add_log_level(sub);
    subcommands.emplace_back(sub, &command);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  InitLogging(log_level);
  for (const auto& [sub, command] : subcommands)
    if (sub->parsed()) return command->run(args);
  return kExitBadInput;
}

}  // namespace protocol
