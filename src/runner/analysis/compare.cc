#include "runner/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "runner/analysis/compare_stats.h"
#include "runner/base/text.h"
#include "runner/store/metric_table.h"

namespace protocol {

namespace {

// The metrics compared by default (when measured on both sides): those of
// the metric table (metric_table.h) with a better direction, in its order.
struct DirectionRow {
  std::string metric;
  Direction direction;
};
const std::vector<DirectionRow>& MetricDirections() {
  static const std::vector<DirectionRow> rows = [] {
    std::vector<DirectionRow> out;
    for (const MetricRow& m : MetricTable())
      if (m.better != Better::kNone)
        out.push_back({m.name, m.better == Better::kLower ? Direction::kLower : Direction::kHigher});
    return out;
  }();
  return rows;
}

struct MetricRequest {
  std::string name;
  Direction direction;
};

// "name" | "name:lower" | "name:higher"; false with `problem` set otherwise.
bool ParseMetricRequest(const std::string& text, MetricRequest* out, std::string* problem) {
  size_t colon = text.rfind(':');
  std::string name = colon == std::string::npos ? text : text.substr(0, colon);
  if (name.empty()) {
    *problem = fmt::format("metric '{}' has no name", text);
    return false;
  }
  if (colon != std::string::npos) {
    std::string dir = text.substr(colon + 1);
    if (dir != "lower" && dir != "higher") {
      *problem = fmt::format("metric '{}': direction must be 'lower' or 'higher', got '{}'", text, dir);
      return false;
    }
    *out = {name, dir == "lower" ? Direction::kLower : Direction::kHigher};
    return true;
  }
  auto known = MetricDirection(name);
  if (!known) {
    std::vector<std::string> names;
    for (const auto& row : MetricDirections()) names.push_back(row.metric);
    std::string suggestion = DidYouMean(name, names);
    *problem = suggestion.empty()
                   ? fmt::format("metric '{}' has no known better direction; write '{}:lower' or "
                                 "'{}:higher'", name, name, name)
                   : fmt::format("unknown metric '{}' (did you mean '{}'?)", name, suggestion);
    return false;
  }
  *out = {name, *known};
  return true;
}

// A case on one side: its repeats (latest row of each), in repeat order.
struct SideCase {
  std::string case_id;
  std::vector<const CompareCase*> repeats;
  const CaseRecord& first() const { return repeats.front()->record; }
};

std::vector<SideCase> GroupCases(const CompareSide& side) {
  std::map<std::pair<std::string, int>, const CompareCase*> latest;
  std::vector<std::string> order;
  for (const CompareCase& c : side.cases) {
    if (std::find(order.begin(), order.end(), c.record.case_id) == order.end())
      order.push_back(c.record.case_id);
    latest[{c.record.case_id, c.record.repeat}] = &c;  // later rows win (resume)
  }
  std::vector<SideCase> out;
  for (const std::string& id : order) {
    SideCase sc;
    sc.case_id = id;
    for (const auto& [key, c] : latest)
      if (key.first == id) sc.repeats.push_back(c);
    out.push_back(std::move(sc));
  }
  return out;
}

std::string CaseLengthText(const CaseRecord& r) {
  return r.length_unit.empty() ? "no length" : LengthText(r.length_unit, r.length_count);
}

// (field, value) pairs that must agree for two cases to compare.
std::vector<std::pair<std::string, std::string>> IdentityFields(const CaseRecord& r) {
  return {{"model", r.model},
          {"workload", r.workload},
          {"length", CaseLengthText(r)},
          {"system", r.system},
          {"backend", r.backend},
          {"nodes", std::to_string(r.nodes)},
          {"topology", r.topology.empty() ? "none" : r.topology},
          {"network", r.network.empty() ? "none" : r.network},
          {"variant", r.variant.empty() ? "none" : r.variant}};
}

std::string IdentityText(const CaseRecord& r) {
  std::string text = fmt::format("{} {} {} {} {} node{}", r.model, r.workload, CaseLengthText(r),
                                 r.system, r.nodes, r.nodes == 1 ? "" : "s");
  if (!r.topology.empty()) text += " " + r.topology;
  if (!r.network.empty()) text += " " + r.network;
  if (!r.variant.empty()) text += " " + r.variant;
  return text;
}

std::vector<std::string> IdentityDifferences(const CaseRecord& a, const CaseRecord& b) {
  std::vector<std::string> out;
  auto fa = IdentityFields(a), fb = IdentityFields(b);
  for (size_t i = 0; i < fa.size(); ++i)
    if (fa[i].second != fb[i].second)
      out.push_back(fmt::format("different {}: {} vs {}", fa[i].first, fa[i].second, fb[i].second));
  return out;
}

// "" when every repeat is ok; else "failed in the baseline run: repeat 2 timeout — <reason>".
std::string NotOk(const SideCase& c, const char* side) {
  std::vector<std::string> parts;
  for (const CompareCase* r : c.repeats) {
    if (r->record.status == CaseStatus::kOk) continue;
    std::string part = fmt::format("repeat {} {}", r->record.repeat + 1,
                                   CaseStatusName(r->record.status));
    if (!r->record.reason.empty()) part += " \u2014 " + r->record.reason;
    parts.push_back(part);
  }
  if (parts.empty()) return "";
  return fmt::format("not ok in the {} run: {}", side, Join(parts, "; "));
}

// "" when no repeat ran contended; else "contended in the candidate run:
// repeat 1 (others took 48 % of the CPU)".
std::string Contended(const SideCase& c, const char* side) {
  std::vector<std::string> parts;
  for (const CompareCase* r : c.repeats)
    if (std::optional<double> share = ContendedShare(r->measurements))
      parts.push_back(fmt::format("repeat {} (others took {} % of the CPU)", r->record.repeat + 1,
                                  FormatFigure(std::round(*share * 100))));
  if (parts.empty()) return "";
  return fmt::format("contended in the {} run: {}", side, Join(parts, ", "));
}

// The measured value of `name` in each repeat that has one; the unit seen.
std::vector<double> Measured(const SideCase& c, const std::string& name, std::string* unit) {
  std::vector<double> values;
  for (const CompareCase* r : c.repeats) {
    for (const Measurement& m : r->measurements) {
      if (m.name != name || m.how != Provenance::kMeasured || !m.value) continue;
      values.push_back(*m.value);
      if (unit && unit->empty()) *unit = m.unit;
      break;
    }
  }
  return values;
}

MetricComparison CompareMetric(const SideCase& base, const SideCase& cand,
                               const MetricRequest& request, const CompareOptions& options,
                               uint64_t seed) {
  MetricComparison m;
  m.metric = request.name;
  m.direction = request.direction;
  m.baseline = Measured(base, request.name, &m.unit);
  m.candidate = Measured(cand, request.name, &m.unit);
  m.baseline_median = Median(m.baseline);
  m.candidate_median = Median(m.candidate);
  if (m.baseline.size() != base.repeats.size() || m.candidate.size() != cand.repeats.size()) {
    const char* side = m.baseline.size() != base.repeats.size() ? "baseline" : "candidate";
    m.note = fmt::format("not measured in every repeat of the {} run", side);
    m.verdict = Verdict::kIncomparable;
    return m;
  }
  if (!m.baseline_median || !m.candidate_median || *m.baseline_median == 0) {
    m.note = "no ratio (baseline median is 0)";
    m.verdict = Verdict::kIncomparable;
    return m;
  }
  m.ratio = *m.candidate_median / *m.baseline_median;
  auto interval = BootstrapMedianRatio(m.baseline, m.candidate, options.resamples, seed,
                                       options.confidence);
  if (interval) {
    m.low = interval->low;
    m.high = interval->high;
  } else if (m.baseline.size() < 3 || m.candidate.size() < 3) {
    m.note = "fewer than 3 repeats, no interval";
  }
  const double t = options.threshold;
  const double r = *m.ratio;
  // above: the ratio (and interval) lies beyond 1 + t; below: beyond 1 - t.
  const bool above = r > 1 + t && (!interval || interval->low > 1 + t);
  const bool below = r < 1 - t && (!interval || interval->high < 1 - t);
  const bool worse = m.direction == Direction::kLower ? above : below;
  const bool better = m.direction == Direction::kLower ? below : above;
  m.verdict = worse ? Verdict::kRegressed : better ? Verdict::kImproved : Verdict::kUnchanged;
  if (m.verdict == Verdict::kUnchanged && interval &&
      ((m.direction == Direction::kLower && r > 1 + t) ||
       (m.direction == Direction::kHigher && r < 1 - t)))
    m.note = "worse beyond the threshold, but the interval reaches into the band (noise)";
  return m;
}

bool MeasuredOnBothSides(const SideCase& base, const SideCase& cand, const std::string& name) {
  return !Measured(base, name, nullptr).empty() && !Measured(cand, name, nullptr).empty();
}

// The metric that decides a case by default (docs/regression.md): the total
// generation time of an inference case when both sides measured it, else the
// wall time.
std::string PrimaryMetric(const SideCase& base, const SideCase& cand) {
  if (cand.first().workload == "inference" && MeasuredOnBothSides(base, cand, metric::kTotalGenerationSeconds))
    return metric::kTotalGenerationSeconds;
  return metric::kWallSeconds;
}

// Metrics to compare for a matched pair, the deciding ones first: the
// requested ones (all deciding), or the primary metric (deciding) and every
// other well-known metric measured on both sides (notes).
std::vector<std::pair<MetricRequest, bool>> MetricsFor(const SideCase& base, const SideCase& cand,
                                                       const CompareOptions& options) {
  std::vector<std::pair<MetricRequest, bool>> out;
  if (!options.metrics.empty()) {
    for (const std::string& text : options.metrics) {
      MetricRequest request;
      std::string problem;
      if (ParseMetricRequest(text, &request, &problem)) out.push_back({request, true});
    }
    return out;
  }
  const std::string primary = PrimaryMetric(base, cand);
  out.push_back({{primary, Direction::kLower}, true});
  for (const auto& row : MetricDirections())
    if (row.metric != primary && MeasuredOnBothSides(base, cand, row.metric))
      out.push_back({{row.metric, row.direction}, false});
  return out;
}

std::string ContextValue(const RunContextFacts& context, const std::string& key) {
  std::string value;
  for (const auto& [k, v] : context)
    if (k == key) value = v;  // the last one wins (appended facts)
  return value;
}

std::string Pct(double fraction) { return FormatFigure(fraction * 100) + " %"; }

std::string Fig(const std::optional<double>& v) {
  if (!v) return "\u2013";
  double a = std::fabs(*v);
  if (a != 0 && (a < 0.001 || a >= 1e7)) return fmt::format("{:.4g}", *v);
  return FormatFigure(*v);
}

std::string Ratio(const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : "\u2013"; }

}  // namespace

const char* const kFingerprintKeys[6] = {"gpu_names",     "cpu_model",    "libtorch_version",
                                         "cuda_version",  "nccl_version", "cpu_cores"};

std::vector<std::string> FingerprintDifferences(const RunContextFacts& a, const RunContextFacts& b) {
  std::vector<std::string> out;
  for (const char* key : kFingerprintKeys) {
    std::string x = ContextValue(a, key), y = ContextValue(b, key);
    if (x != y) out.push_back(fmt::format("{}: {} vs {}", key, x.empty() ? "(none)" : x, y.empty() ? "(none)" : y));
  }
  return out;
}

std::string FingerprintReason(const std::vector<std::string>& differences) {
  if (differences.empty()) return "";
  std::vector<std::string> keys;
  for (const std::string& d : differences) keys.push_back(d.substr(0, d.find(':')));
  return "environment fingerprint differs: " + Join(keys, ", ");
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kImproved: return "improved";
    case Verdict::kUnchanged: return "unchanged";
    case Verdict::kRegressed: return "regressed";
    case Verdict::kIncomparable: return "incomparable";
  }
  return "incomparable";
}

const char* DirectionName(Direction d) { return d == Direction::kLower ? "lower" : "higher"; }

std::optional<Direction> MetricDirection(const std::string& name) {
  for (const auto& row : MetricDirections())
    if (name == row.metric) return row.direction;
  return std::nullopt;
}

Status ValidateCompareOptions(const CompareOptions& options) {
  std::vector<std::string> problems;
  for (const std::string& text : options.metrics) {
    MetricRequest request;
    std::string problem;
    if (!ParseMetricRequest(text, &request, &problem)) problems.push_back(problem);
  }
  if (options.threshold < 0 || options.threshold >= 1)
    problems.push_back(fmt::format("threshold {} is outside 0 % … 100 %", Pct(options.threshold)));
  if (options.resamples < 1) problems.push_back("resamples must be at least 1");
  if (!problems.empty()) return Status::InvalidArgument(Join(problems, "; "));
  return Status::Ok();
}

Result<double> ParseThreshold(const std::string& text) {
  std::string t = Trim(text);
  bool percent = EndsWith(t, "%");
  if (percent) t = Trim(t.substr(0, t.size() - 1));
  char* end = nullptr;
  double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(v))
    return Status::InvalidArgument(
        fmt::format("threshold '{}' is not a number (write e.g. 5% or 0.05)", text));
  if (percent) v /= 100;
  if (v < 0 || v >= 1)
    return Status::InvalidArgument(
        fmt::format("threshold '{}' is outside 0 % … 100 % (write e.g. 5%)", text));
  return v;
}

const MetricComparison* CaseComparison::Headline() const {
  for (Verdict v : {Verdict::kRegressed, Verdict::kIncomparable, Verdict::kImproved})
    for (const MetricComparison& m : metrics)
      if (m.deciding && m.verdict == v) return &m;
  return metrics.empty() ? nullptr : &metrics.front();
}

int CompareReport::Count(Verdict v) const {
  int n = 0;
  for (const CaseComparison& c : cases) n += c.verdict == v;
  return n;
}

Result<CompareSide> CollectCompareSide(Store& store, int64_t run_id) {
  CompareSide side;
  auto run = store.GetRun(run_id);
  if (!run.ok()) return run.status();
  side.run = std::move(run).value();
  auto context = store.GetContext(run_id);
  if (!context.ok()) return context.status();
  side.context = std::move(context).value();
  auto cases = store.CasesOfRun(run_id);
  if (!cases.ok()) return cases.status();
  for (CaseRecord& record : *cases) {
    CompareCase c;
    auto m = store.MeasurementsOfCase(record.row_id);
    if (!m.ok()) return m.status();
    c.record = std::move(record);
    c.measurements = std::move(m).value();
    side.cases.push_back(std::move(c));
  }
  return side;
}

CompareReport CompareRuns(const CompareSide& baseline, const CompareSide& candidate,
                          const CompareOptions& options) {
  CompareReport report;
  report.baseline_run = baseline.run.id;
  report.candidate_run = candidate.run.id;
  report.baseline_plan = baseline.run.plan_name;
  report.candidate_plan = candidate.run.plan_name;
  report.options = options;
  report.environment_differences = FingerprintDifferences(baseline.context, candidate.context);
  const std::string environment_reason = FingerprintReason(report.environment_differences);

  std::vector<SideCase> base = GroupCases(baseline), cand = GroupCases(candidate);
  std::set<std::string> used;  // baseline case ids already matched
  uint64_t seed = options.seed;
  for (const SideCase& c : cand) {
    CaseComparison out;
    out.case_id = c.case_id;
    out.identity = IdentityText(c.first());
    const SideCase* match = nullptr;
    for (const SideCase& b : base)
      if (b.case_id == c.case_id) match = &b;
    if (!match) {  // by identity, when exactly one unmatched baseline case has it
      int found = 0;
      for (const SideCase& b : base) {
        if (used.count(b.case_id) || IdentityFields(b.first()) != IdentityFields(c.first())) continue;
        // Only a baseline case whose id the candidate does not use itself.
        bool taken = false;
        for (const SideCase& other : cand) taken |= other.case_id == b.case_id;
        if (taken) continue;
        match = &b;
        ++found;
      }
      if (found != 1) match = nullptr;
    }
    if (!match) {
      out.reason = "missing in the baseline run";
      report.cases.push_back(std::move(out));
      continue;
    }
    used.insert(match->case_id);
    out.baseline_case_id = match->case_id;
    std::vector<std::string> reasons = IdentityDifferences(match->first(), c.first());
    if (std::string r = NotOk(*match, "baseline"); !r.empty()) reasons.push_back(r);
    if (std::string r = NotOk(c, "candidate"); !r.empty()) reasons.push_back(r);
    if (!environment_reason.empty()) reasons.push_back(environment_reason);
    if (!reasons.empty()) {
      out.reason = Join(reasons, "; ");
      report.cases.push_back(std::move(out));
      continue;
    }
    bool any_regressed = false, any_improved = false, any_incomparable = false;
    std::vector<std::string> missing;
    for (const auto& [request, deciding] : MetricsFor(*match, c, options)) {
      MetricComparison m = CompareMetric(*match, c, request, options, seed++);
      m.deciding = deciding;
      if (deciding) {
        any_regressed |= m.verdict == Verdict::kRegressed;
        any_improved |= m.verdict == Verdict::kImproved;
        if (m.verdict == Verdict::kIncomparable) {
          any_incomparable = true;
          missing.push_back(fmt::format("{}: {}", m.metric, m.note));
        }
      }
      out.metrics.push_back(std::move(m));
    }
    if (any_regressed) out.verdict = Verdict::kRegressed;
    else if (any_incomparable) {
      out.verdict = Verdict::kIncomparable;
      out.reason = Join(missing, "; ");
    } else if (any_improved) out.verdict = Verdict::kImproved;
    else out.verdict = Verdict::kUnchanged;
    // Figures measured beside other work are less reliable: shown, not decided.
    std::vector<std::string> contended;
    if (std::string r = Contended(*match, "baseline"); !r.empty()) contended.push_back(r);
    if (std::string r = Contended(c, "candidate"); !r.empty()) contended.push_back(r);
    if (!contended.empty()) {
      const MetricComparison* headline = out.Headline();
      out.reason = Join(contended, "; ") + "; not decided";
      if (headline && headline->ratio && out.verdict != Verdict::kIncomparable)
        out.reason += fmt::format(" (the {} ratio {} alone would say {})", headline->metric,
                                  Ratio(headline->ratio), VerdictName(out.verdict));
      out.verdict = Verdict::kIncomparable;
      out.contended = true;
    }
    report.cases.push_back(std::move(out));
  }
  for (const SideCase& b : base) {
    if (used.count(b.case_id)) continue;
    CaseComparison out;
    out.case_id = b.case_id;
    out.baseline_case_id = b.case_id;
    out.identity = IdentityText(b.first());
    out.reason = "missing in the candidate run";
    report.cases.push_back(std::move(out));
  }
  return report;
}

namespace {

// Why a case got its verdict, in words: "12 % worse than the baseline (5 %
// threshold)", "within ±5 %", the reason it is incomparable, ...
std::string WhyText(const CaseComparison& c, double threshold) {
  if (c.verdict == Verdict::kIncomparable) return c.reason;
  const MetricComparison* m = c.Headline();
  if (!m || !m->ratio) return "";
  const std::string change = FormatFigure(std::fabs(*m->ratio - 1) * 100) + " %";
  const std::string band = "threshold " + Pct(threshold);
  const std::string interval = m->low ? ", and so is the whole interval" : "";
  switch (c.verdict) {
    case Verdict::kRegressed: return change + " worse than the baseline, beyond the " + band + interval;
    case Verdict::kImproved: return change + " better than the baseline, beyond the " + band + interval;
    default: return m->low && !m->note.empty() ? m->note : "within \u00b1" + Pct(threshold);
  }
}

// "tokens_per_second 1.010 unchanged; step_seconds_mean 1.850 regressed" for
// the metrics other than the headline (the ones that do not decide say so).
std::string OtherMetricsText(const CaseComparison& c) {
  std::vector<std::string> parts;
  const MetricComparison* headline = c.Headline();
  for (const MetricComparison& m : c.metrics) {
    if (&m == headline) continue;
    parts.push_back(fmt::format("{} {} {}{}", m.metric, Ratio(m.ratio), VerdictName(m.verdict),
                                m.deciding ? "" : m.verdict == Verdict::kRegressed ? " (a note: does not decide)" : ""));
  }
  return Join(parts, "; ");
}

}  // namespace

std::string RenderCompareText(const CompareReport& report) {
  const CompareOptions& o = report.options;
  std::string out = fmt::format(
      "compare: baseline run {} ({}) \u2192 candidate run {} ({}); threshold {}; "
      "{} % bootstrap interval of the median ratio, {} resamples\n",
      report.baseline_run, report.baseline_plan, report.candidate_run, report.candidate_plan,
      Pct(o.threshold), FormatFigure(o.confidence * 100), o.resamples);
  out += o.metrics.empty()
             ? "decided by the primary metric: wall_seconds for training, total_generation_seconds for inference; "
               "other metrics are notes\n"
             : "decided by the named metrics: " + Join(o.metrics, ", ") + "\n";
  for (const std::string& d : report.environment_differences)
    out += "environment differs: " + d + "\n";
  size_t without_interval = 0;
  for (const CaseComparison& c : report.cases)
    if (const MetricComparison* m = c.Headline(); m && m->ratio && !m->low) ++without_interval;
  if (without_interval > 0)
    out += fmt::format("note: {} case{} with fewer than 3 repeats on a side: no interval, the verdict rests on the "
                       "ratio of the medians alone\n",
                       without_interval, without_interval == 1 ? "" : "s");

  std::vector<std::vector<std::string>> rows = {
      {"case", "verdict", "metric", "baseline", "candidate", "ratio", "interval", "why"}};
  std::vector<std::string> notes;
  for (const CaseComparison& c : report.cases) {
    std::string id = c.case_id;
    if (!c.baseline_case_id.empty() && c.baseline_case_id != c.case_id)
      id += " (baseline " + c.baseline_case_id + ")";
    const MetricComparison* m = c.Headline();
    if (!m) {
      rows.push_back({id, VerdictName(c.verdict), "\u2013", "", "", "", "", WhyText(c, o.threshold)});
    } else {
      const std::string unit = m->unit.empty() ? "" : " " + m->unit;
      rows.push_back({id, VerdictName(c.verdict), m->metric,
                      Fig(m->baseline_median) + unit + fmt::format(" (n={})", m->baseline.size()),
                      Fig(m->candidate_median) + unit + fmt::format(" (n={})", m->candidate.size()),
                      Ratio(m->ratio), m->low ? fmt::format("{:.3f}\u2026{:.3f}", *m->low, *m->high) : "\u2013",
                      WhyText(c, o.threshold)});
    }
    if (std::string others = OtherMetricsText(c); !others.empty()) notes.push_back(c.case_id + " notes: " + others);
  }
  out += AlignColumns(rows, "  ");
  for (const std::string& n : notes) out += n + "\n";
  out += fmt::format("{} regressed, {} improved, {} unchanged, {} incomparable\n",
                     report.Count(Verdict::kRegressed), report.Count(Verdict::kImproved),
                     report.Count(Verdict::kUnchanged), report.Count(Verdict::kIncomparable));
  return out;
}

Json CompareToJson(const CompareReport& report) {
  auto opt = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
  Json j;
  j["schema_version"] = 1;
  j["baseline_run"] = report.baseline_run;
  j["candidate_run"] = report.candidate_run;
  j["baseline_plan"] = report.baseline_plan;
  j["candidate_plan"] = report.candidate_plan;
  j["threshold"] = report.options.threshold;
  j["confidence"] = report.options.confidence;
  j["resamples"] = report.options.resamples;
  j["seed"] = report.options.seed;
  j["environment_differences"] = report.environment_differences;
  Json cases = Json::array();
  for (const CaseComparison& c : report.cases) {
    Json jc;
    jc["case_id"] = c.case_id;
    jc["baseline_case_id"] = c.baseline_case_id;
    jc["identity"] = c.identity;
    jc["verdict"] = VerdictName(c.verdict);
    jc["reason"] = c.reason;
    jc["contended"] = c.contended;
    jc["why"] = WhyText(c, report.options.threshold);
    Json metrics = Json::array();
    for (const MetricComparison& m : c.metrics) {
      Json jm;
      jm["metric"] = m.metric;
      jm["better"] = DirectionName(m.direction);
      jm["unit"] = m.unit;
      jm["baseline"] = m.baseline;
      jm["candidate"] = m.candidate;
      jm["baseline_median"] = opt(m.baseline_median);
      jm["candidate_median"] = opt(m.candidate_median);
      jm["ratio"] = opt(m.ratio);
      jm["interval_low"] = opt(m.low);
      jm["interval_high"] = opt(m.high);
      jm["note"] = m.note;
      jm["verdict"] = VerdictName(m.verdict);
      jm["deciding"] = m.deciding;
      metrics.push_back(std::move(jm));
    }
    jc["metrics"] = std::move(metrics);
    cases.push_back(std::move(jc));
  }
  j["cases"] = std::move(cases);
  Json summary;
  for (Verdict v : {Verdict::kRegressed, Verdict::kImproved, Verdict::kUnchanged, Verdict::kIncomparable})
    summary[VerdictName(v)] = report.Count(v);
  j["summary"] = std::move(summary);
  return j;
}

}  // namespace protocol
