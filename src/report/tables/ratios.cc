#include "report/tables/ratios.h"

#include "report/formats/numbers.h"
#include "report/tables/cells.h"
#include "runner/analysis/compare.h"
#include "runner/analysis/compare_stats.h"
#include "runner/base/text.h"

namespace protocol {

std::string RunIndex::MachineDifference(int64_t a, int64_t b) const {
  if (a == b) return "";
  auto x = runs_.find(a), y = runs_.find(b);
  if (x == runs_.end() || y == runs_.end()) return "";
  if (x->second->run.kind != "run" || y->second->run.kind != "run") return "";
  std::vector<std::string> differences = FingerprintDifferences(x->second->context, y->second->context);
  if (differences.empty()) return "";
  return fmt::format("run {} and run {} ran on different machines ({})", a, b, Join(differences, "; "));
}

std::string RunIndex::WorkDifference(const ReportCell& num, const ReportCell& den) const {
  const StoredCase* a = CaseOf(num);
  const StoredCase* b = CaseOf(den);
  if (!a || !b) return "";
  std::vector<std::string> differences = WorkDifferences(a->work, b->work);
  if (differences.empty()) return "";
  return fmt::format("the sides did different work ({})", Join(differences, "; "));
}

const StoredCase* RunIndex::CaseOf(const ReportCell& cell) const {
  if (cell.sources.empty()) return nullptr;
  const CellSource& src = cell.sources.front();
  auto run = runs_.find(src.run_id);
  if (run == runs_.end() || run->second->run.kind != "run") return nullptr;
  auto cached = plans_.find(src.run_id);
  if (cached == plans_.end())  // parsed once per run, only for runs that give a ratio's side
    cached = plans_.emplace(src.run_id, ReadStoredPlan(run->second->run.plan_text)).first;
  auto found = cached->second.find(src.case_id);
  return found == cached->second.end() ? nullptr : &found->second;
}

std::string RatioProvenance(const ReportCell& a, const ReportCell& b) {
  if (a.provenance == "measured" && b.provenance == "measured") return "measured";
  if (a.provenance == "extrapolated" || b.provenance == "extrapolated") return "extrapolated";
  return "imported";
}


ReportCell UnitRatioCell(const ReportCell& value_cell, const ReportCell& candidate) {
  if (value_cell.value && candidate.value) {
    ReportCell c = MarkerCell(value_cell.column, "");
    c.value = 1.0;
    c.text = "1";
    return c;
  }
  return MarkerCell(value_cell.column, value_cell.marker == "X" ? "X" : kDash);
}

bool CheckRatioSides(const ReportCell& num, const ReportCell& den, const RunIndex& runs, ReportCell* c) {
  c->numerator_run_id = num.run_id;
  c->denominator_run_id = den.run_id;
  std::string why = runs.MachineDifference(num.run_id, den.run_id);
  if (why.empty()) why = runs.WorkDifference(num, den);
  if (why.empty()) return true;
  c->value.reset();
  c->text = c->marker = kDash;
  c->refused = kRefusedPrefix + why;
  return false;
}

std::string RatioOrigin(const std::string& num_text, int64_t num_run, const std::string& den_text, int64_t den_run) {
  std::string s = fmt::format("{} (run {}) / {} (run {})", num_text, num_run, den_text, den_run);
  if (num_run != den_run) s += std::string("; ") + kDifferentRunsText;
  return s;
}

ReportCell RatioCell(const std::string& column, const ReportCell& num, const ReportCell& den, const RunIndex& runs) {
  if (!num.value || !den.value || *den.value == 0) return MarkerCell(column, kDash);
  ReportCell c;
  c.column = column;
  if (!CheckRatioSides(num, den, runs, &c)) {
    c.origin = RatioOrigin(num.text, num.run_id, den.text, den.run_id) + "; " + c.refused;
    return c;
  }
  c.value = *num.value / *den.value;
  std::vector<std::string> markers;
  if (num.marker == "*" || den.marker == "*") markers.push_back("*");
  if (num.run_id != den.run_id) markers.push_back(kDifferentRuns);
  if (num.repeats.size() < kBootstrapMinRepeats || den.repeats.size() < kBootstrapMinRepeats) {
    c.interval_note = "no interval (fewer than 3 repeats)";
  } else {
    // BootstrapMedianRatio gives median(candidate) / median(baseline): the
    // denominator is its "baseline".
    c.interval = BootstrapMedianRatio(den.repeats, num.repeats, kBootstrapResamples, kBootstrapSeed,
                                      kBootstrapConfidence, kBootstrapMinRepeats);
    if (!c.interval) {
      c.interval_note = "no interval (a resampled median is 0)";
    } else if (c.interval->low <= 1 && c.interval->high >= 1) {
      markers.push_back(kNotSignificant);
      c.interval_note = "the interval crosses 1: not significant";
    }
  }
  c.marker = Join(markers, " ");
  c.text = FormatRatio(*c.value) + (c.marker.empty() ? "" : " " + c.marker);
  c.provenance = RatioProvenance(num, den);
  c.origin = RatioOrigin(num.text, num.run_id, den.text, den.run_id);
  if (c.interval) {
    c.origin += fmt::format("; 95 % interval {}–{}", FormatRatio(c.interval->low), FormatRatio(c.interval->high));
  }
  if (!c.interval_note.empty()) c.origin += "; " + c.interval_note;
  return c;
}

}  // namespace protocol
