// The `protocol` command line. Each subcommand is one row of kCommands (ninja's
// kTools style): a name, a one-line summary, a function that declares its
// options, and a function that runs it. This is the only file that includes
// CLI11. Everything here is wiring: parsing, execution, storage and reporting
// live in their own layers.

#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/native_commands.h"
#include "cli/subcommand.h"
#include "report/report.h"
#include "report/verify.h"
#include "runner/analysis/compare.h"
#include "runner/analysis/junit.h"
#include "runner/base/build_info.h"
#include "runner/base/log.h"
#include "runner/base/text.h"
#include "runner/plan/diagnostic.h"
#include "runner/store/export.h"
#include "runner/store/import_file.h"
#include "runner/store/run_spec.h"
#include "runner/store/store.h"

namespace protocol {
namespace {

// ---- subcommands ---------------------------------------------------------

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
  options.history_through = a.history_through;
  options.baseline_system = a.baseline_system;
  options.candidate_system = a.candidate_system;
  options.further_baselines.clear();
  if (std::find(a.further_baselines.begin(), a.further_baselines.end(), "none") == a.further_baselines.end())
    options.further_baselines = a.further_baselines;
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
  auto store = OpenOrReport(a.db, &code, DbAccess::kCreate);
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
  if (format.value() != "json" && format.value() != "csv" && format.value() != "telemetry-csv") {
    PrintError(fmt::format("unknown export format '{}' (json, csv or telemetry-csv)", format.value()));
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

// ---- the table of subcommands ---------------------------------------------

// `run` and `import` create the database; the other commands only read one.
void AddDb(CLI::App* cmd, Args& a, DbAccess access = DbAccess::kMustExist) {
  cmd->add_option("--db", a.db,
                  access == DbAccess::kCreate ? "SQLite results database (created when missing)"
                                              : "SQLite results database (must exist)")
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
       AddDb(c, a, DbAccess::kCreate);
       c->add_option("--only", a.only, "Run only these case ids (comma-separated)")->delimiter(',');
       c->add_flag("--dry-run", a.dry_run, "Show what would run; store nothing");
       c->add_flag("--no-calibrate", a.no_calibrate,
                   "Where the database's folder has no CPU figures for this host (calibration.json), or only "
                   "figures measured on a busy machine, keep those (or the time estimate's assumed ones) instead of "
                   "measuring them first (a few seconds)");
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
       c->add_option("--db", a.db,
                     "Results database whose folder holds calibration.json (`protocol calibrate`): this host's "
                     "CPU figures for the time estimate (read only; nothing is created)")
           ->capture_default_str();
     },
     &CmdValidate},
    {"calibrate", "Measure this machine's CPU for the time estimate: matmul FLOP/s, memory bandwidth, op cost",
     "Takes a few seconds (2 x --seconds, and a few process starts). The figures go to calibration.json in\n"
     "the database's folder, one entry per host; `validate` and `run` read this host's entry for the CPU\n"
     "figures of the time estimate, which otherwise says \"assumed\" (docs/estimates.md).",
     [](CLI::App* c, Args& a) {
       c->add_option("--db", a.db, "Results database; calibration.json is written in its folder")
           ->capture_default_str();
       c->add_option("--seconds", a.calibrate_seconds, "Seconds spent on each of the matmul and the memory copy")
           ->capture_default_str()
           ->check(CLI::Range(0.1, 60.0));
     },
     &CmdCalibrate},
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
       c->add_option("--further-baseline", a.further_baselines,
                     "A further baseline system set against the candidate in its own table, beside the "
                     "baseline (repeatable; 'none' for no such table)")
           ->capture_default_str();
       c->add_option("--history-through", a.history_through,
                     "History charts (HTML, JSON) end at this run id, as an HTML report's options comment "
                     "records (default: every stored run)");
       c->add_option("--verify", a.verify,
                     "Re-render REPORT_FILE from the database with the options it records and "
                     "compare byte for byte (exit 1 when it differs)");
     },
     &CmdReport},
    {"import", "Store published figures (auditors) from a YAML file (docs/import-format.md)", "",
     [](CLI::App* c, Args& a) {
       c->add_option("file", a.import_file, "Import file")->required();
       AddDb(c, a, DbAccess::kCreate);
     },
     &CmdImport},
    {"export", "Export the database (or some runs) as JSON or CSV",
     "Examples:\n"
     "  protocol export --out results/all.csv              # the format follows the extension\n"
     "  protocol export --run latest:nightly --format json\n"
     "  protocol export --run latest --format telemetry-csv  # GPU, network and CPU readings over time",
     [](CLI::App* c, Args& a) {
       AddDb(c, a);
       c->add_option("--run", a.runs, "Export only these runs (ID, 'latest' or 'latest:PLAN'; repeatable)");
       c->add_option("--format", a.format, "json | csv | telemetry-csv (every hardware sample, one row each; default: from --out's extension, else json)");
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
     &CmdWorker},
};

// ---- the command reference (docs/cli.md) ----------------------------------

// `text` as one Markdown table cell.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

// A positional argument's name as usage writes it: "plan" → "PLAN".
std::string ArgumentName(const CLI::Option* o) {
  std::string name = o->get_name(true, false);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// One table row per option or argument of `app` (--help left out).
std::string OptionRows(const CLI::App& app) {
  std::string rows;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty() || o->get_name(false, true) == "-h,--help") continue;  // hidden, and --help
    std::string name = o->get_positional() ? ArgumentName(o) : o->get_name(false, true);
    if (!o->get_positional() && !o->get_type_name().empty()) name += " " + o->get_type_name();  // a flag has none
    std::vector<std::string> notes;
    if (o->get_required()) notes.push_back("required");
    if (o->get_expected_max() > 1) notes.push_back(o->get_positional() ? "one or more" : "repeatable");
    const std::string note = notes.empty() ? "" : " (" + Join(notes, ", ") + ")";
    const std::string def = o->get_default_str().empty() ? "" : "`" + o->get_default_str() + "`";
    rows += fmt::format("| `{}`{} | {} | {} |\n", name, note, Cell(o->get_description()), Cell(def));
  }
  return rows;
}

// docs/cli.md: every visible subcommand of `app` with its options, help
// texts, defaults and examples, in table order — what `--help` prints, as
// Markdown.
std::string CommandReference(const CLI::App& app) {
  std::string out =
      "# Command reference\n\n"
      "<!-- Generated from the command table that `--help` is built from: build/protocol --help-markdown > "
      "docs/cli.md. A test (cli_reference_test) fails when this file differs. -->\n\n"
      "Every subcommand and option of `protocol`, with the help text `--help` prints. How the commands are\n"
      "used together: README.md; what the words mean: docs/glossary.md.\n\n";
  out += app.get_description() + "\n";
  out += "\n## Options of every command\n\n| option | meaning | default |\n|---|---|---|\n";
  out += OptionRows(app);
  out += "\n```\n" + app.get_footer() + "\n```\n";
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_group().empty()) continue;  // hidden (the rank worker)
    std::string usage = "protocol " + sub->get_name();
    for (const CLI::Option* o : sub->get_options())
      if (o->get_positional()) usage += " " + ArgumentName(o) + (o->get_expected_max() > 1 ? "..." : "");
    out += fmt::format("\n## `{}`\n\n{}.\n\n| argument or option | meaning | default |\n|---|---|---|\n", usage,
                       sub->get_description());
    out += OptionRows(*sub);
    if (!sub->get_footer().empty() && sub->get_footer() != app.get_footer())  // not the inherited one
      out += "\n```\n" + sub->get_footer() + "\n```\n";
  }
  return out;
}

// Where the command stands in argv: its index and word (0 and "" when there
// is none). Before the command only --log-level takes a value.
std::pair<int, std::string> CommandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--log-level") {
      ++i;
      continue;
    }
    if (!arg.empty() && arg[0] != '-') return {i, arg};
  }
  return {0, ""};
}

// The long names ("--format") of the options `on` declares.
std::vector<std::string> LongOptionNames(const CLI::App& on) {
  std::vector<std::string> names;
  for (const CLI::Option* o : on.get_options())
    for (const std::string& name : o->get_lnames()) names.push_back("--" + name);
  return names;
}

// For a command line the parser refused, the message that says what is wrong
// where the parser's would not: a command `app` does not have (`protocol rnu
// plan.yaml`), or an option its command does not have (`protocol report
// --fromat md`), with the near one where one is close. Nothing otherwise:
// the parser's own message serves.
std::optional<std::string> UsageMessage(CLI::App& app, int argc, char** argv) {
  const auto [at, word] = CommandWord(argc, argv);
  if (word.empty()) return std::nullopt;
  CLI::App* command = nullptr;
  std::vector<std::string> commands;
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) command = sub;
    if (!sub->get_group().empty()) commands.push_back(sub->get_name());  // not the hidden rank worker
  }
  if (command == nullptr) {
    const std::string close = DidYouMean(word, commands);
    return fmt::format("protocol: unknown command '{}' ({})\n", word,
                       close.empty() ? "commands: " + Join(commands, ", ") : fmt::format("did you mean '{}'?", close));
  }
  for (int i = at + 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // the rest are arguments
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (command->get_option_no_throw(name) != nullptr || app.get_option_no_throw(name) != nullptr) continue;
    std::vector<std::string> options = LongOptionNames(*command);
    for (const std::string& o : LongOptionNames(app)) options.push_back(o);
    const std::string close = DidYouMean(name, options);
    return fmt::format("protocol {}: unknown option '{}' ({})\n", word, name,
                       close.empty() ? fmt::format("protocol {} --help lists its options", word)
                                     : fmt::format("did you mean '{}'?", close));
  }
  return std::nullopt;
}

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
      "Documentation: docs/README.md (every page, in reading order); every command and flag:\n"
      "docs/cli.md; the words of the reports and plans: docs/glossary.md.");
  app.require_subcommand(1);
  StartProgram(argc, argv);
  app.set_version_flag("--version", [] {
    return fmt::format("protocol {} ({}, {}; {})", BuildInfo().version, BuildInfo().git_revision,
                       BuildInfo().build_type, NativeBuildFeatures());
  });
  // --log-level is accepted before the subcommand and after it
  // (`protocol run PLAN --log-level debug`): one variable, declared on both.
  std::string log_level = "info";
  auto add_log_level = [&log_level](CLI::App* on) {
    on->add_option("--log-level", log_level, "quiet | info | debug")
        ->check(CLI::IsMember({"quiet", "info", "debug"}))
        ->capture_default_str();
  };
  add_log_level(&app);
  // Hidden: prints docs/cli.md (CommandReference) and exits 0.
  app.add_flag_callback("--help-markdown", [&app] {
       std::fputs(CommandReference(app).c_str(), stdout);
       throw CLI::Success();
     })
      ->group("");
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
    if (const std::optional<std::string> message = UsageMessage(app, argc, argv)) {
      std::fputs(message->c_str(), stderr);
      return kExitBadInput;
    }
    app.exit(e);
    return kExitBadInput;
  }
  InitLogging(log_level);
  for (const auto& [sub, command] : subcommands)
    if (sub->parsed()) return command->run(args);
  return kExitBadInput;
}

}  // namespace protocol
