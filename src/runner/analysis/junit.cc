#include "runner/analysis/junit.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "runner/base/text.h"

namespace protocol {

namespace {

std::string Seconds(double s) { return fmt::format("{:.3f}", s < 0 ? 0.0 : s); }

struct Counts {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  double time = 0;
  void Add(const JunitCase& c) {
    ++tests;
    failures += c.outcome == JunitCase::Outcome::kFailure;
    errors += c.outcome == JunitCase::Outcome::kError;
    skipped += c.outcome == JunitCase::Outcome::kSkipped;
    time += c.time;
  }
  std::string Attributes() const {
    return fmt::format("tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\"", tests,
                       failures, errors, skipped, Seconds(time));
  }
};

}  // namespace

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t n = DecodeUtf8(text, i, &cp);  // 0: not well-formed (overlong, surrogate, truncated, ...)
    if (n == 0) {  // not UTF-8: one replacement character per bad byte
      out += "\uFFFD";
      ++i;
      continue;
    }
    bool allowed = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                   (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
    if (!allowed) out += "\uFFFD";
    else if (cp == '&') out += "&amp;";
    else if (cp == '<') out += "&lt;";
    else if (cp == '>') out += "&gt;";
    else if (cp == '"') out += "&quot;";
    else if (cp == '\'') out += "&apos;";
    else if (cp == '\n' || cp == '\r' || cp == '\t') out += fmt::format("&#{};", cp);
    else out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string RenderJunit(const std::string& name, const std::vector<JunitSuite>& suites) {
  Counts all;
  std::string body;
  for (const JunitSuite& suite : suites) {
    Counts counts;
    std::string cases;
    for (const JunitCase& c : suite.cases) {
      counts.Add(c);
      all.Add(c);
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"", XmlEscape(c.classname),
                           XmlEscape(c.name), Seconds(c.time));
      std::string inner;
      switch (c.outcome) {
        case JunitCase::Outcome::kPassed: break;
        case JunitCase::Outcome::kFailure:
        case JunitCase::Outcome::kError: {
          const char* tag = c.outcome == JunitCase::Outcome::kFailure ? "failure" : "error";
          inner += fmt::format("      <{} message=\"{}\" type=\"{}\">{}</{}>\n", tag, XmlEscape(c.message),
                               XmlEscape(c.type), XmlEscape(c.text), tag);
          break;
        }
        case JunitCase::Outcome::kSkipped:
          inner += fmt::format("      <skipped message=\"{}\"/>\n", XmlEscape(c.message));
          break;
      }
      if (!c.system_out.empty())
        inner += fmt::format("      <system-out>{}</system-out>\n", XmlEscape(c.system_out));
      cases += inner.empty() ? "/>\n" : ">\n" + inner + "    </testcase>\n";
    }
    body += fmt::format("  <testsuite name=\"{}\" {}", XmlEscape(suite.name), counts.Attributes());
    if (!suite.timestamp.empty()) body += fmt::format(" timestamp=\"{}\"", XmlEscape(suite.timestamp));
    body += ">\n";
    if (!suite.properties.empty()) {
      body += "    <properties>\n";
      for (const auto& [k, v] : suite.properties)
        body += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", XmlEscape(k), XmlEscape(v));
      body += "    </properties>\n";
    }
    body += cases + "  </testsuite>\n";
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" {}>\n{}</testsuites>\n",
                     XmlEscape(name), all.Attributes(), body);
}

Result<JunitSuite> JunitSuiteForRun(
    Store& store, int64_t run_id,
    const std::vector<std::pair<std::string, std::string>>& extra_failures) {
  auto run = store.GetRun(run_id);
  if (!run.ok()) return run.status();
  auto rows = store.CasesOfRun(run_id);
  if (!rows.ok()) return rows.status();
  JunitSuite suite;
  suite.name = fmt::format("protocol run {} ({})", run_id, run->plan_name);
  suite.timestamp = run->started_at;
  suite.properties = {{"run_id", std::to_string(run_id)},
                      {"plan", run->plan_name},
                      {"plan_file", run->plan_file},
                      {"plan_sha256", run->plan_sha256},
                      {"protocol_version", run->protocol_version},
                      {"git_revision", run->git_revision},
                      {"status", run->status}};
  // The latest row of each (case, repeat); cases with repeats name the repeat.
  std::map<std::pair<std::string, int>, size_t> latest;
  std::map<std::string, int> repeats;
  for (size_t i = 0; i < rows->size(); ++i) {
    const CaseRecord& r = (*rows)[i];
    latest[{r.case_id, r.repeat}] = i;
    repeats[r.case_id] = std::max(repeats[r.case_id], r.repeat + 1);
  }
  std::map<std::string, std::vector<std::string>> extra;
  for (const auto& [id, message] : extra_failures) extra[id].push_back(message);
  for (size_t i = 0; i < rows->size(); ++i) {
    const CaseRecord& r = (*rows)[i];
    if (latest[{r.case_id, r.repeat}] != i) continue;
    auto measurements = store.MeasurementsOfCase(r.row_id);
    if (!measurements.ok()) return measurements.status();
    JunitCase c;
    c.classname = fmt::format("protocol.{}.{}", run->plan_name, r.stage);
    c.name = repeats[r.case_id] > 1 ? fmt::format("{} repeat {}", r.case_id, r.repeat + 1) : r.case_id;
    std::vector<std::string> out;
    for (const Measurement& m : *measurements) {
      if (!m.value) continue;
      if (m.name == metric::kWallSeconds && m.how == Provenance::kMeasured) c.time = *m.value;
      out.push_back(fmt::format("{} = {}{} ({})", m.name, FormatFigure(*m.value),
                                m.unit.empty() ? "" : " " + m.unit, ProvenanceName(m.how)));
    }
    out.push_back("log: " + r.log_path);
    c.system_out = Join(out, "\n");
    std::string reason = r.reason.empty() ? CaseStatusName(r.status) : r.reason;
    switch (r.status) {
      case CaseStatus::kOk:
        if (extra.count(r.case_id)) {
          c.outcome = JunitCase::Outcome::kFailure;
          c.type = "reference";
          c.message = Join(extra[r.case_id], "; ");
          c.text = c.message;
        }
        break;
      case CaseStatus::kFailed:
      case CaseStatus::kTimeout:
      case CaseStatus::kInterrupted:
      case CaseStatus::kRunning:
        // failed / timeout: a failure of the case; interrupted / still running: an error.
        c.outcome = r.status == CaseStatus::kFailed || r.status == CaseStatus::kTimeout ? JunitCase::Outcome::kFailure
                                                                                         : JunitCase::Outcome::kError;
        c.type = CaseStatusName(r.status);
        c.message = reason;
        c.text = fmt::format("{} {}: {}", r.case_id, CaseStatusName(r.status), reason);
        break;
      case CaseStatus::kSkipped:
        c.outcome = JunitCase::Outcome::kSkipped;
        c.message = reason;
        break;
    }
    suite.cases.push_back(std::move(c));
  }
  return suite;
}

JunitSuite JunitSuiteForCompare(const CompareReport& report) {
  JunitSuite suite;
  suite.name = fmt::format("protocol compare {} \u2192 {}", report.baseline_run, report.candidate_run);
  suite.properties = {{"baseline_run", std::to_string(report.baseline_run)},
                      {"candidate_run", std::to_string(report.candidate_run)},
                      {"baseline_plan", report.baseline_plan},
                      {"candidate_plan", report.candidate_plan},
                      {"threshold", FormatFigure(report.options.threshold * 100) + " %"}};
  for (const std::string& d : report.environment_differences)
    suite.properties.emplace_back("environment_difference", d);
  for (const CaseComparison& cc : report.cases) {
    JunitCase c;
    c.classname = "protocol.compare." + (report.candidate_plan.empty() ? "run" : report.candidate_plan);
    c.name = cc.case_id;
    std::vector<std::string> out{"identity: " + cc.identity};
    if (!cc.baseline_case_id.empty() && cc.baseline_case_id != cc.case_id)
      out.push_back("baseline case: " + cc.baseline_case_id);
    std::vector<std::string> regressions;
    for (const MetricComparison& m : cc.metrics) {
      std::string unit = m.unit.empty() ? "" : " " + m.unit;
      std::string line = fmt::format(
          "{}: baseline {}{}, candidate {}{}, ratio {}{} ({}, {} is better)", m.metric,
          m.baseline_median ? FormatFigure(*m.baseline_median) : "\u2013", unit,
          m.candidate_median ? FormatFigure(*m.candidate_median) : "\u2013", unit,
          m.ratio ? fmt::format("{:.3f}", *m.ratio) : "\u2013",
          m.low ? fmt::format(" [{:.3f}, {:.3f}]", *m.low, *m.high) : "", VerdictName(m.verdict),
          DirectionName(m.direction));
      if (!m.note.empty()) line += "; note: " + m.note;
      out.push_back(line);
      if (!m.deciding) line += "; a note: does not decide";
      if (m.deciding && m.verdict == Verdict::kRegressed && m.ratio)
        regressions.push_back(fmt::format("{} {} % worse ({}{} \u2192 {}{}, threshold {} %)", m.metric,
                                          FormatFigure(std::abs(*m.ratio - 1) * 100),
                                          FormatFigure(*m.baseline_median), unit,
                                          FormatFigure(*m.candidate_median), unit,
                                          FormatFigure(report.options.threshold * 100)));
      if (m.metric == metric::kWallSeconds && m.candidate_median) c.time = *m.candidate_median;
    }
    c.system_out = Join(out, "\n");
    if (cc.verdict == Verdict::kRegressed) {
      c.outcome = JunitCase::Outcome::kFailure;
      c.type = "regression";
      c.message = Join(regressions, "; ");
      c.text = c.system_out;
    } else if (cc.verdict == Verdict::kIncomparable) {
      c.outcome = JunitCase::Outcome::kSkipped;
      c.message = "incomparable: " + cc.reason;
    }
    suite.cases.push_back(std::move(c));
  }
  return suite;
}

}  // namespace protocol
