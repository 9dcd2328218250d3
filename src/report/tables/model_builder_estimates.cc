// Expected against measured wall time: the time estimate a run stored with
// each case (metric::kExpectedWallSeconds, provenance estimated) beside the
// case's measured wall time (docs/estimates.md, docs/report.md).

#include <algorithm>
#include <map>
#include <set>

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

void ModelBuilder::FillExpected(const std::vector<const ReportCell*>& sides, VerdictLine* v) const {
  // One figure per side (its first case with an estimate), each case once; a
  // side is named by its system, with its nodes where two sides share one
  // (a scaling row: "fsdp 1 node 0.61× its estimate, fsdp 2 nodes 0.82×").
  std::vector<const EstimateEntry*> shown;
  std::set<std::tuple<int64_t, std::string, int>> seen;
  for (const ReportCell* cell : sides) {
    if (!cell) continue;
    for (const CellSource& src : cell->sources) {
      auto it = estimates_.find({src.run_id, src.case_id, src.repeat});
      if (it == estimates_.end() || it->second.measured <= 0) continue;
      if (seen.insert(it->first).second) shown.push_back(&it->second);
      break;
    }
  }
  std::map<std::string, int> per_system;
  for (const EstimateEntry* e : shown) ++per_system[e->system];
  std::vector<std::string> parts, cells;
  for (const EstimateEntry* e : shown) {
    const double r = e->measured / e->expected;
    cells.push_back(fmt::format("{:.2f}×", r));
    std::string name = e->system;
    if (per_system[e->system] > 1) name += fmt::format(" {} node{}", e->nodes, e->nodes == 1 ? "" : "s");
    std::string part = fmt::format("{} {:.2g}×{}", name, r, parts.empty() ? " its estimate" : "");
    if (Outside(r)) part += fmt::format(" (outside {}–{}×; most likely {})", metric::kEstimateBandLow,
                                        metric::kEstimateBandHigh, e->largest.empty() ? "unknown" : e->largest);
    parts.push_back(part);
  }
  v->expected = Join(parts, ", ");
  v->expected_cell = Join(cells, ", ");
}

}  // namespace protocol
