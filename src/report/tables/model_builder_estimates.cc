// Expected against measured wall time: the time estimate a run stored with
// each case (metric::kExpectedWallSeconds, provenance estimated) beside the
// case's measured wall time (docs/estimates.md, docs/report.md).

#include <algorithm>

#include "report/tables/model_builder.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

std::string Seconds(double s) { return fmt::format("{:.3g}", s); }

bool Outside(double ratio) { return ratio < metric::kEstimateBandLow || ratio > metric::kEstimateBandHigh; }

}  // namespace

void ModelBuilder::RememberEstimate(const CaseEntry& e) {
  if (!e.length_unit.empty()) return;  // a figure at another length: the case's own entry says it
  EstimateEntry entry;
  for (const Measurement& m : e.c->measurements) {
    if (!m.value || !m.length_unit.empty()) continue;
    if (m.name == metric::kExpectedWallSeconds && m.how == Provenance::kEstimated) {
      entry.expected = *m.value;
      entry.method = m.method;
      const size_t at = m.method.rfind(metric::kLargestTermNote);
      if (at != std::string::npos) entry.largest = m.method.substr(at + std::string(metric::kLargestTermNote).size());
    }
    if (m.name == metric::kWallSeconds && m.how == Provenance::kMeasured) entry.measured = *m.value;
  }
  if (entry.expected <= 0) return;
  entry.system = e.c->record.system;
  entry.nodes = e.c->record.nodes;
  estimates_[{e.run->id, e.c->record.case_id, e.c->record.repeat}] = entry;
}

void ModelBuilder::BuildEstimates() {
  ReportTable t;
  t.id = "estimates";
  t.title = "Expected against measured wall time (s)";
  t.unit = "s";
  t.columns = {"expected", "measured", "measured / expected", "largest term"};
  for (const auto& [key, e] : estimates_) {
    const auto& [run, case_id, repeat] = key;
    if (!runs_shown_.count(run)) continue;
    ReportRow row;
    row.label = fmt::format("run {}, {}{} ({} {})", run, case_id, repeat > 0 ? fmt::format(" repeat {}", repeat + 1) : "",
                            e.system, NodesText(e.nodes));
    row.unit = "s";
    ReportCell expected;
    expected.column = t.columns[0];
    expected.value = e.expected;
    expected.text = Seconds(e.expected);
    expected.provenance = "estimated";
    expected.origin = fmt::format("run {}, case {}: {}", run, case_id, e.method);
    ReportCell measured;
    measured.column = t.columns[1];
    ReportCell ratio;
    ratio.column = t.columns[2];
    ReportCell largest;
    largest.column = t.columns[3];
    largest.text = e.largest;
    if (e.measured > 0) {
      measured.value = e.measured;
      measured.text = Seconds(e.measured);
      measured.provenance = "measured";
      const double r = e.measured / e.expected;
      ratio.value = r;
      ratio.text = fmt::format("{:.2f}", r);
      if (Outside(r)) {  // said in the last cell ("!" is the tables' contended mark)
        largest.text = fmt::format("outside {}–{}×: most likely {}", metric::kEstimateBandLow,
                                   metric::kEstimateBandHigh, e.largest.empty() ? "unknown" : e.largest);
      }
    } else {
      measured.text = ratio.text = "–";
    }
    row.cells = {expected, measured, ratio, largest};
    t.rows.push_back(std::move(row));
  }
  if (t.rows.empty()) return;
  t.note = fmt::format(
      "Expected: the time estimate stored with each case before it ran (docs/estimates.md; its terms in the "
      "appendix). A case whose measured time is outside {}–{}× of it says so in its last cell, with the term "
      "most likely at fault (the largest).",
      metric::kEstimateBandLow, metric::kEstimateBandHigh);
  out_.tables.push_back(std::move(t));
}

std::string ModelBuilder::ExpectedPhrase(const std::vector<const ReportCell*>& sides) const {
  std::vector<std::string> parts;
  for (const ReportCell* cell : sides) {
    if (!cell) continue;
    for (const CellSource& src : cell->sources) {
      auto it = estimates_.find({src.run_id, src.case_id, src.repeat});
      if (it == estimates_.end() || it->second.measured <= 0) continue;
      const EstimateEntry& e = it->second;
      const double r = e.measured / e.expected;
      std::string part = fmt::format("{} {:.2g}×{}", e.system, r, parts.empty() ? " its estimate" : "");
      if (Outside(r)) part += fmt::format(" (outside {}–{}×; most likely {})", metric::kEstimateBandLow,
                                          metric::kEstimateBandHigh, e.largest.empty() ? "unknown" : e.largest);
      parts.push_back(part);
      break;  // one figure per side: its first case
    }
  }
  return Join(parts, ", ");
}

}  // namespace protocol
