// The `command` backend (contract in command_backend.h, user guide in
// docs/backends.md): placeholders → argv → ProcessRunner → outcome.
//
// Output lines are parsed as they arrive (OutputReader): each `metrics`
// pattern keeps the value of its last match; `step_regex` turns a line into a
// StepSample whose `seconds` is the time since the previous step line (or
// since launch for the first one), read from context.clock; `log_format`
// hands every line to a LogFormatReader (log_format.h), which knows the
// system's lines and stores canonical figures.

#include "backends/command_backend.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "backends/log_format.h"
#include "runner/base/placeholders.h"
#include "runner/base/text.h"
#include "runner/plan/case_placeholders.h"

namespace protocol {
namespace {

// Lines longer than this are not matched: libstdc++'s std::regex recurses per
// character and a megabyte-long progress line could overflow the stack.
constexpr size_t kMaxMatchedLineBytes = 4096;

const char* const kParsedMethod = "parsed from output by regex";

// "SIGKILL" for 9; empty when the number is not one of the usual signals.
std::string SignalName(int sig) {
  static const struct {
    int number;
    const char* name;
  } kSignals[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"},
  };
  for (const auto& s : kSignals)
    if (s.number == sig) return s.name;
  return "";
}

// Compiles `pattern`; on failure returns nullopt and sets `error`.
std::optional<std::regex> Compile(const std::string& pattern, std::string* error) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    *error = e.what();
    return std::nullopt;
  }
}

// Every plan string a command uses, with the name messages give it.
std::vector<std::pair<std::string, const std::string*>> TemplatedFields(const CommandSpec& c) {
  std::vector<std::pair<std::string, const std::string*>> fields;
  for (size_t i = 0; i < c.argv.size(); ++i)
    fields.push_back({fmt::format("command.argv[{}]", i), &c.argv[i]});
  for (const auto& [key, value] : c.env) fields.push_back({"command.env." + key, &value});
  fields.push_back({"command.workdir", &c.workdir});
  return fields;
}

PlaceholderValues Values(const BackendContext& context) {
  return CasePlaceholderValues(PlaceholderField::kCommand,
                               {context.plan, context.spec, context.repeat, context.run_id, context.output_dir});
}

// The ProcessResult, told as a case outcome.
void SetEnding(const ProcessResult& r, const CaseSpec& spec, BackendOutcome* out) {
  using Ending = ProcessResult::Ending;
  switch (r.ending) {
    case Ending::kExited:
      out->exit_code = r.exit_code;
      if (r.exit_code == 0) {
        out->status = CaseStatus::kOk;
      } else {
        out->status = CaseStatus::kFailed;
        out->reason = fmt::format("exit code {}", r.exit_code);
      }
      return;
    case Ending::kSignaled: {
      out->status = CaseStatus::kFailed;
      std::string name = SignalName(r.signal);
      out->reason = name.empty() ? fmt::format("killed by signal {}", r.signal)
                                 : fmt::format("killed by signal {} ({})", r.signal, name);
      return;
    }
    case Ending::kTimedOut:
      out->status = CaseStatus::kTimeout;
      out->reason = fmt::format("timed out after {:g} s; process group killed", spec.timeout_seconds);
      return;
    case Ending::kStopped:
      out->status = CaseStatus::kInterrupted;
      out->reason = "stopped by request (Ctrl-C / SIGTERM); process group killed";
      return;
    case Ending::kFailedToStart:
      out->status = CaseStatus::kFailed;
      out->reason = r.error;
      return;
  }
}

// command.log_format: a known name, no `metrics` name among its figures (two
// figures of one name), and not beside step_regex (both would store the step
// samples).
std::vector<std::string> LogFormatProblems(const CommandSpec& c) {
  if (c.log_format.empty()) return {};
  std::vector<std::string> problems;
  if (!IsLogFormat(c.log_format)) {
    const std::vector<std::string> known = LogFormatNames();
    std::string guess = DidYouMean(c.log_format, known);
    problems.push_back(fmt::format("command.log_format: unknown format '{}' ({})", c.log_format,
                                   guess.empty() ? "known: " + Join(known, ", ")
                                                 : fmt::format("did you mean '{}'?", guess)));
  }
  const std::vector<std::string> figures = LogFormatFigures(c.log_format);
  for (size_t i = 0; i < c.metrics.size(); ++i)
    if (std::find(figures.begin(), figures.end(), c.metrics[i].name) != figures.end())
      problems.push_back(fmt::format("command.metrics[{}] ({}): the log format {} stores a figure of that name; "
                                     "give the metric a name of its own",
                                     i, c.metrics[i].name, c.log_format));
  if (!c.step_regex.empty())
    problems.push_back(fmt::format("command.step_regex and command.log_format ({}) both read the step lines: "
                                   "keep one (an empty step_regex: \"\" removes an inherited one)",
                                   c.log_format));
  return problems;
}

// The process to start: placeholders expanded, raw values for argv, env and
// workdir (never parsed again), single-quoted values for the one string
// /bin/sh -c reads.
ProcessSpec LaunchSpec(const BackendContext& context) {
  const CommandSpec& c = context.spec.command;
  PlaceholderValues values = Values(context);
  ProcessSpec process;
  if (c.shell) {
    PlaceholderValues quoted = values;
    for (auto& entry : quoted) entry.second = ShellQuote(entry.second);
    process.argv = {"/bin/sh", "-c", ExpandPlaceholders(c.argv[0], quoted)};
  } else {
    for (const auto& arg : c.argv) process.argv.push_back(ExpandPlaceholders(arg, values));
  }
  for (const auto& [key, value] : c.env) process.env[key] = ExpandPlaceholders(value, values);
  process.workdir = ExpandPlaceholders(c.workdir, values);
  process.log_path = context.log_path;
  process.timeout_seconds = context.spec.timeout_seconds;
  return process;
}

// The command's output, read as it arrives: each `metrics` pattern keeps the
// value of its last match, `step_regex` or the `log_format` reader give step
// samples, `request_regex` request samples. REQUIRES: Check() found no problem
// (every regex compiles, the format is known).
class OutputReader {
 public:
  explicit OutputReader(BackendContext& context) : context_(context), command_(context.spec.command) {
    for (const auto& m : command_.metrics) metrics_.push_back({&m, std::regex(m.regex), std::nullopt});
    if (!command_.step_regex.empty()) step_re_ = std::regex(command_.step_regex);
    if (!command_.request_regex.empty()) request_re_ = std::regex(command_.request_regex);
    if (!command_.log_format.empty()) log_format_.emplace(command_.log_format, context.spec.warmup_steps);
    last_step_at_ = context.clock.NowSeconds();
    const CaseSpec& spec = context.spec;
    if (spec.length && spec.length->unit == Length::Unit::kSteps) of_total_ = "/" + std::to_string(spec.length->count);
  }

  void OnLine(std::string_view view) {
    if (view.size() > kMaxMatchedLineBytes) return;
    const std::string line(view);
    if (log_format_)
      for (const StepSample& step : log_format_->Feed(line, context_.clock.NowSeconds())) Step(step);
    try {
      std::smatch match;
      for (auto& m : metrics_) {
        if (std::regex_search(line, match, m.re) && match.size() > 1 && match[1].matched) {
          if (auto v = ParseFiniteNumber(match[1].str())) m.last = v;
        }
      }
      if (step_re_ && std::regex_search(line, match, *step_re_) && match.size() > 1) StepLine(match);
      if (request_re_ && std::regex_search(line, match, *request_re_) && match.size() > 2) RequestLine(match);
    } catch (const std::exception&) {
      // std::regex may throw error_complexity / error_stack on odd input:
      // the line is simply not a figure.
    }
  }

  // The output ended (`ended_mid_line`: inside its last line): the figures
  // into `outcome` (the log format's first, then the `metrics` patterns that matched).
  void Finish(BackendOutcome& outcome, bool ended_mid_line) {
    if (log_format_) {
      for (const StepSample& step : log_format_->Finish(ended_mid_line)) Step(step);
      for (Measurement& m : log_format_->Figures()) outcome.measurements.push_back(std::move(m));
      outcome.facts.push_back({"log_format", log_format_->Summary()});
    }
    for (const auto& m : metrics_) {
      if (!m.last) continue;
      Measurement measurement;
      measurement.name = m.pattern->name;
      measurement.value = m.last;
      measurement.unit = m.pattern->unit;
      measurement.how = Provenance::kMeasured;
      measurement.method = kParsedMethod;
      outcome.measurements.push_back(std::move(measurement));
    }
  }

 private:
  struct Metric {
    const MetricPattern* pattern;
    std::regex re;
    std::optional<double> last;
  };

  // A step_regex line: its seconds are the time since the previous one.
  void StepLine(const std::smatch& match) {
    std::optional<int64_t> number = ParseWholeNumber(match[1].str());
    if (!number) return;
    StepSample sample;
    sample.step = *number;
    if (match.size() > 2 && match[2].matched) sample.loss = ParseFiniteNumber(match[2].str());
    double now = context_.clock.NowSeconds();
    sample.seconds = now - last_step_at_;
    last_step_at_ = now;
    Step(sample);
  }

  void Step(const StepSample& sample) {
    context_.events.OnStep(sample);
    std::string status = fmt::format("step {}{}", sample.step, of_total_);
    if (sample.loss) status += fmt::format(" loss {:.4g}", *sample.loss);
    context_.events.OnStatusLine(status);
  }

  void RequestLine(const std::smatch& match) {
    std::optional<int64_t> tokens = ParseWholeNumber(match[1].str());
    std::optional<double> seconds = ParseFiniteNumber(match[2].str());
    if (!tokens || !seconds) return;
    const auto& schedule = context_.spec.inference.max_new_tokens;
    RequestSample request;
    request.index = requests_seen_;
    // The i-th reported request is the schedule's i-th (the command serves them in order).
    request.max_new_tokens = requests_seen_ < static_cast<int>(schedule.size()) ? schedule[requests_seen_]
                                                                                : static_cast<int>(*tokens);
    request.generated_tokens = static_cast<int>(*tokens);
    request.seconds = *seconds;
    ++requests_seen_;
    context_.events.OnRequest(request);
    context_.events.OnStatusLine(fmt::format("request {}/{}: {} tokens in {:.3g} s", requests_seen_,
                                             schedule.size(), *tokens, *seconds));
  }

  BackendContext& context_;
  const CommandSpec& command_;
  std::vector<Metric> metrics_;
  std::optional<std::regex> step_re_;
  std::optional<std::regex> request_re_;
  std::optional<LogFormatReader> log_format_;
  int requests_seen_ = 0;
  double last_step_at_ = 0;
  std::string of_total_;
};

class CommandBackend : public Backend {
 public:
  std::vector<std::string> Check(const Plan& plan, const CaseSpec& spec) const override {
    std::vector<std::string> problems;
    const CommandSpec& c = spec.command;
    if (c.argv.empty())
      problems.push_back("command.argv is empty: give the launch command, one element per argument "
                         "(command: {argv: [...]})");
    if (!spec.env.empty())
      problems.push_back("a command case's environment is command.env; `env:` sets the ranks' environment of a "
                         "native case");
    if (spec.system.empty() || spec.system == "command")
      problems.push_back("a command case must say which system its command runs (system: fsdp | share | <label>)");
    if (spec.workload == Workload::kInference && spec.inference.decode_step != DecodeStepChoice::kHost)
      problems.push_back(fmt::format("inference.decode_step: {} is a native backend's setting; a command case decodes "
                                     "as its command does (remove it, or say it in command.argv)",
                                     NameOf(spec.inference.decode_step)));
    if (c.shell && c.argv.size() > 1)
      problems.push_back(fmt::format(
          "command.shell is true, so command.argv must be one string for /bin/sh -c (it has {} "
          "elements)",
          c.argv.size()));
    const std::vector<std::string> known = PlaceholderNames(PlaceholderField::kCommand);
    for (const auto& [field, text] : TemplatedFields(c)) {
      for (const auto& name : UnknownPlaceholders(*text, known)) {
        std::string guess = DidYouMean(name, known);
        std::string hint = guess.empty()
                               ? fmt::format("known: {{{}}}", Join(known, "} {"))
                               : fmt::format("did you mean '{{{}}}'?", guess);
        problems.push_back(
            fmt::format("unknown placeholder '{{{}}}' in {} ({})", name, field, hint));
      }
    }
    for (size_t i = 0; i < c.metrics.size(); ++i) {
      const MetricPattern& m = c.metrics[i];
      std::string where = fmt::format("command.metrics[{}]", i);
      if (m.name.empty()) problems.push_back(where + " has no name");
      std::string error;
      auto re = Compile(m.regex, &error);
      if (!re)
        problems.push_back(fmt::format("{} ({}): bad regex '{}': {}", where, m.name, m.regex, error));
      else if (re->mark_count() < 1)
        problems.push_back(fmt::format(
            "{} ({}): regex '{}' has no capture group; the first group ( ) is the value", where,
            m.name, m.regex));
    }
    if (!c.step_regex.empty()) {
      std::string error;
      auto re = Compile(c.step_regex, &error);
      if (!re)
        problems.push_back(fmt::format(
            "command.step_regex: bad regex '{}': {} (groups are positional: 1 = step, 2 = loss)",
            c.step_regex, error));
      else if (re->mark_count() < 1)
        problems.push_back(fmt::format(
            "command.step_regex: regex '{}' has no capture group; group 1 is the step number",
            c.step_regex));
    }
    for (std::string& problem : LogFormatProblems(c)) problems.push_back(std::move(problem));
    if (!c.request_regex.empty()) {
      std::string error;
      auto re = Compile(c.request_regex, &error);
      if (!re)
        problems.push_back(fmt::format(
            "command.request_regex: bad regex '{}': {} (groups are positional: 1 = generated "
            "tokens, 2 = seconds)",
            c.request_regex, error));
      else if (re->mark_count() < 2)
        problems.push_back(fmt::format(
            "command.request_regex: regex '{}' needs 2 capture groups: 1 = generated tokens, 2 = seconds",
            c.request_regex));
    }
    return problems;
  }

  BackendOutcome Run(BackendContext& context) override {
    const CaseSpec& spec = context.spec;
    BackendOutcome outcome;
    // Run() REQUIRES a clean Check(); a broken case still ends as a stored failure.
    std::vector<std::string> problems = Check(context.plan, spec);
    if (!problems.empty()) {
      outcome.status = CaseStatus::kFailed;
      outcome.reason = Join(problems, "; ");
      return outcome;
    }
    OutputReader reader(context);
    ProcessResult result = context.processes.Run(
        LaunchSpec(context), context.stop, [&](std::string_view line) { reader.OnLine(line); });
    SetEnding(result, spec, &outcome);
    reader.Finish(outcome, result.ended_mid_line);
    return outcome;
  }
};

}  // namespace

std::unique_ptr<Backend> MakeCommandBackend() { return std::make_unique<CommandBackend>(); }

}  // namespace protocol
