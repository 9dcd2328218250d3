// The `command` backend (contract in command_backend.h, user guide in
// docs/backends.md): placeholders → argv → ProcessRunner → outcome.
//
// Output lines are parsed as they arrive: each `metrics` pattern keeps the
// value of its last match; `step_regex` turns a line into a StepSample whose
// `seconds` is the time since the previous step line (or since launch for the
// first one), read from context.clock.

#include "backends/command_backend.h"

#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

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

// A finite number filling all of `text` (surrounding blanks allowed); nullopt
// otherwise ("12abc", "nan", "inf" and "" are not figures).
std::optional<double> ParseNumber(const std::string& text) {
  std::string t = Trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseInteger(const std::string& text) {
  std::string t = Trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return static_cast<int64_t>(v);
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

class CommandBackend : public Backend {
 public:
  std::vector<std::string> Check(const Plan& plan, const CaseSpec& spec) const override {
    std::vector<std::string> problems;
    const CommandSpec& c = spec.command;
    if (c.argv.empty())
      problems.push_back("command.argv is empty: give the launch command, one element per argument "
                         "(command: {argv: [...]})");
    if (spec.system.empty() || spec.system == "command")
      problems.push_back("a command case must say which system its command runs (system: fsdp | share | <label>)");
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
    const CommandSpec& c = spec.command;
    BackendOutcome outcome;
    // Run() REQUIRES a clean Check(); a broken case still ends as a stored failure.
    std::vector<std::string> problems = Check(context.plan, spec);
    if (!problems.empty()) {
      outcome.status = CaseStatus::kFailed;
      outcome.reason = Join(problems, "; ");
      return outcome;
    }

    // Placeholders: raw values for argv, env and workdir (never parsed again),
    // single-quoted values for the one string /bin/sh -c reads.
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
    process.timeout_seconds = spec.timeout_seconds;

    // Parsers, compiled once (Check proved they compile).
    struct Metric {
      const MetricPattern* pattern;
      std::regex re;
      std::optional<double> last;
    };
    std::vector<Metric> metrics;
    for (const auto& m : c.metrics) metrics.push_back({&m, std::regex(m.regex), std::nullopt});
    std::optional<std::regex> step_re;
    if (!c.step_regex.empty()) step_re = std::regex(c.step_regex);
    std::optional<std::regex> request_re;
    if (!c.request_regex.empty()) request_re = std::regex(c.request_regex);
    int requests_seen = 0;
    const auto& schedule = spec.inference.max_new_tokens;
    double last_step_at = context.clock.NowSeconds();
    std::string of_total;
    if (spec.length && spec.length->unit == Length::Unit::kSteps)
      of_total = "/" + std::to_string(spec.length->count);

    auto on_line = [&](std::string_view view) {
      if (view.size() > kMaxMatchedLineBytes) return;
      const std::string line(view);
      std::smatch match;
      try {
        for (auto& m : metrics) {
          if (std::regex_search(line, match, m.re) && match.size() > 1 && match[1].matched) {
            if (auto v = ParseNumber(match[1].str())) m.last = v;
          }
        }
        if (step_re && std::regex_search(line, match, *step_re) && match.size() > 1) {
          std::optional<int64_t> step = ParseInteger(match[1].str());
          if (!step) return;
          StepSample sample;
          sample.step = *step;
          if (match.size() > 2 && match[2].matched) sample.loss = ParseNumber(match[2].str());
          double now = context.clock.NowSeconds();
          sample.seconds = now - last_step_at;
          last_step_at = now;
          context.events.OnStep(sample);
          std::string status = fmt::format("step {}{}", sample.step, of_total);
          if (sample.loss) status += fmt::format(" loss {:.4g}", *sample.loss);
          context.events.OnStatusLine(status);
        }
        if (request_re && std::regex_search(line, match, *request_re) && match.size() > 2) {
          std::optional<int64_t> tokens = ParseInteger(match[1].str());
          std::optional<double> seconds = ParseNumber(match[2].str());
          if (!tokens || !seconds) return;
          RequestSample request;
          request.index = requests_seen;
          // The i-th reported request is the schedule's i-th (the command serves them in order).
          request.max_new_tokens = requests_seen < static_cast<int>(schedule.size())
                                       ? schedule[requests_seen]
                                       : static_cast<int>(*tokens);
          request.generated_tokens = static_cast<int>(*tokens);
          request.seconds = *seconds;
          ++requests_seen;
          context.events.OnRequest(request);
          context.events.OnStatusLine(fmt::format("request {}/{}: {} tokens in {:.3g} s",
                                                  requests_seen, schedule.size(), *tokens, *seconds));
        }
      } catch (const std::exception&) {
        // std::regex may throw error_complexity / error_stack on odd input:
        // the line is simply not a figure.
      }
    };

    ProcessResult result = context.processes.Run(process, context.stop, on_line);
    SetEnding(result, spec, &outcome);
    for (const auto& m : metrics) {
      if (!m.last) continue;
      Measurement measurement;
      measurement.name = m.pattern->name;
      measurement.value = m.last;
      measurement.unit = m.pattern->unit;
      measurement.how = Provenance::kMeasured;
      measurement.method = kParsedMethod;
      outcome.measurements.push_back(std::move(measurement));
    }
    return outcome;
  }
};

}  // namespace

std::unique_ptr<Backend> MakeCommandBackend() { return std::make_unique<CommandBackend>(); }

}  // namespace protocol
