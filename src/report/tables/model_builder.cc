#include "report/tables/model_builder.h"

#include <algorithm>

#include "report/formats/numbers.h"
#include "report/tables/verdict.h"
#include "runner/base/text.h"

namespace protocol {

void ModelBuilder::AddOk(const CellKey& k, const CaseEntry& e) {
  cells_[k].ok_by_run[e.run->id].push_back(e);
  for (const Measurement& m : e.c->measurements)
    if (m.method.find(metric::kRandomWeightsNote) != std::string::npos) random_.insert({e.run->id, e.c->record.case_id});
  RememberEstimate(e);
  RememberEnergy(e);
  if (e.length_unit.empty() && !e.c->samples.empty())
    sampled_[{e.run->id, e.c->record.case_id, e.c->record.repeat}] = {e.c->record.system, e.c->record.nodes, &e.c->samples};
}

void ModelBuilder::AddFailure(const CellKey& k, const CaseEntry& e) {
  FailureEntry f;
  f.run_id = e.run->id;
  f.case_id = e.c->record.case_id;
  f.repeat = e.c->record.repeat;
  f.status = CaseStatusName(e.c->record.status);
  f.reason = e.c->record.reason;
  f.text = fmt::format("run {}, case {} (repeat {}): {} — {}", f.run_id, f.case_id, f.repeat, f.status,
                       f.reason.empty() ? "no reason recorded" : f.reason);
  failures_.push_back({k, f});
}

ModelReport ModelBuilder::Build() {
  ListFailures();
  for (const auto& [k, cell] : cells_)
    if (cell.Winning()) runs_shown_.insert(cell.WinningRun());
  for (const FailureEntry& f : out_.failures) runs_shown_.insert(f.run_id);
  BuildTraining();
  BuildBaselines();
  BuildScaling();
  BuildInference();
  BuildExtras();
  BuildEstimates();
  NoteRandomWeights();
  BuildAppendix();
  BuildProvenance();
  BuildRatios();
  BuildUntabulated();
  BuildChart();
  BuildHistory();
  OrderVerdict();
  // Each line's parts are final here: a pass that qualifies verdict lines
  // (VerdictLine::qualifiers) runs before this one.
  for (VerdictLine& v : out_.verdict) {
    v.text = VerdictText(out_.model, v);
    v.conclusion = VerdictConclusion(v);
  }
  out_.verdict_legend = VerdictLegend(out_.verdict);
  return std::move(out_);
}

void ModelBuilder::ListFailures() {
  std::stable_sort(failures_.begin(), failures_.end(),
                   [](const auto& a, const auto& b) { return a.second.run_id < b.second.run_id; });
  std::vector<CellKey> keys;
  for (const auto& [k, f] : failures_) {
    const CellResults* cell = Find(k);
    if (cell && cell->Winning() && f.run_id < cell->WinningRun()) continue;
    out_.failures.push_back(f);
    keys.push_back(k);
  }
  for (size_t i = 0; i < keys.size(); ++i) cells_[keys[i]].failures.push_back(&out_.failures[i]);
}

void ModelBuilder::OrderVerdict() {
  // "1 node", "2 nodes (fsdp over 80G, …)": the node count a line's scope starts with.
  auto nodes = [](const VerdictLine& v) { return v.scope.substr(0, v.scope.find(' ')); };
  std::vector<VerdictLine> ordered;
  std::vector<bool> placed(out_.verdict.size(), false);
  for (size_t i = 0; i < out_.verdict.size(); ++i) {
    if (placed[i]) continue;
    ordered.push_back(out_.verdict[i]);
    placed[i] = true;
    if (out_.verdict[i].table != "training") continue;
    for (size_t j = i + 1; j < out_.verdict.size(); ++j) {
      const VerdictLine& b = out_.verdict[j];
      if (!placed[j] && b.table == "baselines" && b.row == out_.verdict[i].row && nodes(b) == nodes(out_.verdict[i])) {
        ordered.push_back(b);
        placed[j] = true;
      }
    }
  }
  out_.verdict = std::move(ordered);
}

bool ModelBuilder::OnRandomWeights(const ReportCell& cell) const {
  for (const CellSource& src : cell.sources)
    if (random_.count({src.run_id, src.case_id})) return true;
  return false;
}

void ModelBuilder::AddVerdict(VerdictLine v, const std::vector<const ReportCell*>& sides) {
  if (std::any_of(sides.begin(), sides.end(), [this](const ReportCell* c) { return OnRandomWeights(*c); })) {
    v.qualifiers.push_back("measured on seeded random weights");
    AddCaveats(&v.caveats, {"random weights"});
  }
  FillExpected(sides, &v);
  FillEnergy(sides, &v);
  AddHardware(v, sides);
  out_.verdict.push_back(std::move(v));
}

void ModelBuilder::NoteRandomWeights() {
  if (random_.empty()) return;
  for (ReportTable& t : out_.tables) {
    // Quality, metrics and scaling cells (and most of the baselines table's)
    // repeat figures of the main tables' cells.
    std::vector<std::string> cells;
    for (const ReportRow& row : t.rows)
      for (const ReportCell& cell : row.cells)
        if (!RepeatsFigure(t, cell) && OnRandomWeights(cell)) cells.push_back(row.label + " — " + cell.column);
    if (cells.empty()) continue;
    const std::string line = fmt::format("Random weights: {} measured on seeded random weights (the plan says "
                                         "init: random), not on a trained model's: {}.",
                                         cells.size() == 1 ? "this cell was" : "these cells were", Join(cells, "; "));
    t.note = t.note.empty() ? line : t.note + " " + line;
  }
}

void ModelBuilder::BuildUntabulated() {
  for (const auto& [k, cell] : cells_) {
    if (tabulated_.count(k)) continue;
    std::string where;
    if (cell.Winning()) {
      where = fmt::format("newest ok result run {}, case {}", cell.WinningRun(),
                          cell.Winning()->front().c->record.case_id);
    } else {
      where = "no ok result";
    }
    out_.untabulated.push_back(KeyText(k) + ": " + where + " (no table column for it)");
  }
}

}  // namespace protocol
