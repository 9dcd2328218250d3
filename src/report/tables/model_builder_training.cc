#include "report/tables/model_builder.h"

#include <algorithm>
#include <tuple>

#include "report/formats/numbers.h"
#include "report/formats/svg.h"
#include "report/tables/sentences.h"
#include "report/tables/stored_plan.h"
#include "report/time_to_target.h"
#include "report/tables/verdict.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// Columns for the given (system, nodes, network, variant) combinations, in
// TrainingColumnsOf's order with its labels.
std::vector<Column> TrainingColumns(const std::set<CellKey>& keys, const ReportOptions& o) {
  std::vector<TableColumn> combinations;
  for (const CellKey& k : keys) combinations.push_back(TableColumn{k.system, k.nodes, k.network, k.variant, ""});
  std::vector<Column> out;
  for (TableColumn& c : TrainingColumnsOf(std::move(combinations), o.baseline_system)) out.push_back(Column{std::move(c)});
  return out;
}

struct RowSpec {
  std::string workload;
  std::string unit;
  int64_t count;
  std::string Label() const { return TrainingRowLabel(workload, unit, count); }
};

}  // namespace

int ModelBuilder::PartnerColumn(const std::vector<Column>& columns, const ReportRow& row, size_t j) const {
  const Column& col = columns[j];
  int partner = -1;
  for (size_t m = 0; m < columns.size(); ++m) {
    if (columns[m].system != o_.candidate_system || columns[m].nodes != col.nodes) continue;
    const bool better =
        partner < 0 ||
        (columns[m].variant == col.variant && columns[partner].variant != col.variant) ||
        ((columns[m].variant == col.variant) == (columns[partner].variant == col.variant) &&
         row.cells[m].value && !row.cells[partner].value);
    if (better) partner = static_cast<int>(m);
  }
  return partner;
}

void ModelBuilder::SayTrainingRatio(const std::string& row_label, int64_t row_steps, const Column& col,
                                    const Column& partner, SideCell base, SideCell cand, const ReportCell& ratio) {
  if (!ratio.value && ratio.refused.empty()) return;
  const std::string& bs = o_.baseline_system;
  const std::string& cs = o_.candidate_system;
  VerdictLine v;
  v.table = "training";
  v.row = row_label;
  std::vector<std::string> nets;
  if (!col.network.empty()) nets.push_back(col.system + " over " + col.network);
  if (!partner.network.empty()) nets.push_back(partner.system + " over " + partner.network);
  v.scope = NodesText(col.nodes) + (nets.empty() ? "" : " (" + Join(nets, ", ") + ")");
  v.compared = row_label + ", " + v.scope + ": " + cs + " vs " + bs;
  const std::vector<std::pair<std::string, const ReportCell*>> inputs = {{bs, base.second}, {cs, cand.second}};
  v.caveats = RatioCaveats(ratio, inputs);
  if (!ratio.value) {
    out_.sentences.push_back(RefusedSentence(cs, bs + " on " + NodesText(col.nodes), row_label, ratio));
    v.claim = "no ratio: " + RefusalReason(ratio);
    v.speedup = "no ratio";
    AddVerdict(std::move(v), {base.second, cand.second});
    return;
  }
  out_.sentences.push_back(Sentence(cs, bs + " on " + NodesText(col.nodes), ratio, row_label, Join(nets, ", "),
                                    inputs, WorseLossClause(base.first, cand.first, *ratio.value, bs)));
  v.claim = SpeedClaim(cs, bs, *ratio.value);
  v.finding = v.claim + LossClause(base.first, cand.first);
  v.quality = HeldOutLossPhrase(base.first, cand.first, bs, cs);
  v.bytes = BytesMovedPhrase(base.first, cand.first, bs, col.nodes > 1);
  v.speedup = SpeedupCell(ratio, inputs);
  v.loss_difference = LossDifferenceCell(base.first, cand.first, bs, cs);
  if (col.nodes > 1) {
    v.bytes_between_nodes = BytesBetweenNodesCell(cand.first, base.first);
    std::string host = OneHostQualifier(runs_, col.nodes, inputs);
    if (!host.empty()) {
      v.qualifiers.push_back(host);
      AddCaveats(&v.caveats, {"one host"});
    }
  }
  v.notes = RatioNotes(ratio, inputs);
  SayEqualQuality(v, row_steps, base, cand, ratio);
  AddVerdict(std::move(v), {base.second, cand.second});
}

void ModelBuilder::SayEqualQuality(VerdictLine& v, int64_t row_steps, SideCell base, SideCell cand,
                                   const ReportCell& ratio) {
  // Neither side kept a curve (no training.eval_every, an import): not computed.
  if (!CurveEntry(base.first) && !CurveEntry(cand.first)) return;
  const std::string& bs = o_.baseline_system;
  const std::string& cs = o_.candidate_system;
  // The plan's quality_target of the baseline's case, else of the candidate's.
  std::optional<double> plan_target;
  for (const ReportCell* side : {base.second, cand.second}) {
    const StoredCase* stored = runs_.CaseOf(*side);
    if (!plan_target && stored) plan_target = stored->quality_target_loss;
  }
  EqualQualityRow row;
  row.row = v.row;
  row.scope = v.scope;
  row.steps_ratio_text = ratio.text;
  row.target_text = row.baseline_text = row.candidate_text = row.ratio_text = kDash;
  std::string why;
  std::optional<EqualQuality> q = CellsAtTarget(base.first, cand.first, row_steps, plan_target, bs, cs, &why);
  if (q) {
    v.equal_quality = EqualQualityText(*q, bs, cs);
    v.equal_quality_cell = q->ratio ? FormatRatio(*q->ratio) + "×"
                           : q->why_none.find("not reached") != std::string::npos ? "not reached"
                                                                                  : "–";
    row.target_text = fmt::format("{} ({})", FormatLoss(q->target), q->target_source);
    row.baseline_text = TargetTimeText(q->baseline);
    row.candidate_text = TargetTimeText(q->candidate);
    if (q->ratio) row.ratio_text = FormatRatio(*q->ratio);
    row.note = q->why_none;
  } else {
    v.equal_quality = "no speed-up at equal quality: " + why;
    v.equal_quality_cell = "–";
    row.note = why;
  }
  // The chart: each side's curve (to the row's length) and the target.
  std::vector<ChartSeriesInput> series;
  double right = 0;
  for (const auto& [name, cell] : {std::pair{bs, base.first}, std::pair{cs, cand.first}}) {
    const CaseEntry* e = CurveEntry(cell);
    if (!e) continue;
    ChartSeriesInput in;
    in.label = name;
    for (const EvalPoint& p : row_steps > 0 ? CurveUpTo(e->c->eval_curve, row_steps) : e->c->eval_curve) {
      in.points.push_back({p.training_seconds, p.loss});
      in.titles.push_back(fmt::format("{} step {}: {} at {:.2f} s", name, p.step, FormatLoss(p.loss),
                                      p.training_seconds));
      right = std::max(right, p.training_seconds);
    }
    series.push_back(std::move(in));
  }
  if (q && !series.empty()) {
    ChartSeriesInput target;
    target.label = "target " + FormatLoss(q->target);
    target.points = {{0.0, q->target}, {right, q->target}};
    target.titles = {target.label, target.label};
    series.push_back(std::move(target));
  }
  ChartAxes axes;
  axes.x_label = "training time (s)";
  axes.y_label = "held-out loss";
  axes.y_from_data = true;
  axes.points_noun = "evaluations";
  row.chart = LayoutChart(series, axes);
  out_.equal_quality.push_back(std::move(row));
}

std::string ModelBuilder::WorseLossClause(const CellResults* base, const CellResults* cand, double ratio,
                                          const std::string& baseline_name) const {
  auto eval = [](const CaseEntry& e) { return NamedFigure(e, metric::kEvalLoss); };
  ResolvedCell eb = Resolve(base, eval, 1.0, "", FormatLoss);
  ResolvedCell es = Resolve(cand, eval, 1.0, "", FormatLoss);
  if (!eb.value || !es.value || *es.value <= *eb.value || FormatLoss(*es.value) == FormatLoss(*eb.value))
    return "";
  return fmt::format(ratio >= 1 || FormatRatio(ratio) == "1.00" ? ", but its held-out loss is {} vs {} for {}"
                                                               : ", and its held-out loss is also worse: {} vs {} for {}",
                     FormatLoss(*es.value), FormatLoss(*eb.value), baseline_name);
}

void ModelBuilder::BuildTraining() {
  std::set<CellKey> keys;
  std::set<std::tuple<int, int, int64_t, std::string, std::string>> rows;
  for (const auto& [k, _] : cells_) {
    if (k.workload != "pretrain" && k.workload != "finetune") continue;
    if (k.system != o_.baseline_system && k.system != o_.candidate_system) continue;
    keys.insert(k);
    rows.insert({WorkloadOrder(k.workload), UnitOrder(k.length_unit), k.length_count, k.workload, k.length_unit});
  }
  if (keys.empty()) return;
  std::vector<Column> columns = TrainingColumns(keys, o_);
  ReportTable t;
  t.id = "training";
  t.title = "Training (minutes)";
  t.unit = "min";
  for (const auto& c : columns) t.columns.push_back(c.label);
  auto get = [](const CaseEntry& e) { return WallFigure(e); };
  for (const auto& [wo, uo, count, workload, unit] : rows) {
    RowSpec spec{workload, unit, count};
    ReportRow row{spec.Label(), "min", {}};
    std::vector<const CellResults*> row_cells;
    for (const auto& col : columns) {
      CellKey k{workload, unit, count, col.system, col.nodes, col.network, col.variant};
      const CellResults* cell = Find(k);
      row_cells.push_back(cell);
      ResolvedCell r = Resolve(cell, get, 1.0 / 60.0, "min", FormatMinutes);
      row.cells.push_back(ValueCell(col.label, r, FormatMinutes));
      if (cell) placed_.push_back({row.label, col.label, cell});
      tabulated_.insert(k);
    }
    // Efficiency: baseline column / the candidate column on the same node count
    // (PartnerColumn).
    ReportRow eff{row.label, "×", {}};
    for (size_t j = 0; j < columns.size(); ++j) {
      const Column& col = columns[j];
      if (col.system != o_.baseline_system) {
        eff.cells.push_back(UnitRatioCell(row.cells[j], row.cells[j]));
        continue;
      }
      const int partner = PartnerColumn(columns, row, j);
      if (partner < 0) {
        eff.cells.push_back(MarkerCell(col.label, kDash));
        continue;
      }
      const ReportCell& b = row.cells[j];
      const ReportCell& s = row.cells[partner];
      eff.cells.push_back(RatioCell(col.label, b, s, runs_));
      SayTrainingRatio(row.label, unit == "steps" ? count : 0, col, columns[partner], {row_cells[j], &b}, {row_cells[partner], &s},
                       eff.cells.back());
    }
    t.rows.push_back(std::move(row));
    t.efficiency.push_back(std::move(eff));
  }
  out_.tables.push_back(std::move(t));
}

void ModelBuilder::BuildScaling() {
  std::map<std::tuple<int, int, int64_t, int, int, std::string, std::string>, CellKey> multi;
  for (const auto& [k, _] : cells_) {
    if (k.workload != "pretrain" && k.workload != "finetune") continue;
    if (k.system != o_.baseline_system && k.system != o_.candidate_system) continue;
    if (k.nodes < 2) continue;
    multi[{WorkloadOrder(k.workload), UnitOrder(k.length_unit), k.length_count, k.nodes,
           k.system == o_.baseline_system ? 0 : 1, k.network, k.variant}] = k;
  }
  if (multi.empty()) return;
  ReportTable t;
  t.id = "scaling";
  t.title = "Scaling 1 → N nodes";
  t.columns = {"1 node (min)", "N nodes (min)", "N", "scaling efficiency", "TGS 1 node", "TGS N nodes"};
  t.note = "Scaling efficiency = T1 / (N · TN), T1 and TN the wall times of the same model, workload, length and "
           "system on 1 node and on N nodes: 1.00 when N nodes do the same work N times as fast. "
           "TGS = tokens per GPU per second (tokens_per_gpu_per_second), per device. – : that side is missing.";
  auto wall = [](const CaseEntry& e) { return WallFigure(e); };
  auto tgs = [](const CaseEntry& e) { return NamedFigure(e, metric::kTgs); };
  auto tgs_cell = [&](const std::string& column, const CellResults* cell) {
    ResolvedCell r = Resolve(cell, tgs, 1.0, "", FormatOne);
    if (!r.any) {
      r = ResolvedCell();
      r.marker = kDash;
    }
    return ValueCell(column, r, FormatOne);
  };
  bool one_host = false;
  for (const auto& [_, k] : multi) {
    CellKey one = k;
    one.nodes = 1;
    one.network = "";
    if (!Find(one)) {
      for (const auto& [c, __] : cells_) {
        if (c.workload == k.workload && c.length_unit == k.length_unit && c.length_count == k.length_count &&
            c.system == k.system && c.variant == k.variant && c.nodes == 1) {
          one = c;
          break;
        }
      }
    }
    const std::string row_label = RowSpec{k.workload, k.length_unit, k.length_count}.Label();
    const std::string scope = k.system + " " + NodesText(k.nodes) + (k.network.empty() ? "" : " (" + k.network + ")") +
                              (k.variant.empty() ? "" : " [" + k.variant + "]");
    ReportCell t1 = ValueCell(t.columns[0], Resolve(Find(one), wall, 1.0 / 60.0, "min", FormatMinutes), FormatMinutes);
    ReportCell tn = ValueCell(t.columns[1], Resolve(Find(k), wall, 1.0 / 60.0, "min", FormatMinutes), FormatMinutes);
    // Nodes that are one host measure no network between machines: the row says so.
    const std::string host = OneHostQualifier(runs_, k.nodes, {{k.system, &tn}});
    ReportRow row{row_label + " — " + scope + (host.empty() ? "" : ", one host"), "", {}};
    ReportCell n = MarkerCell(t.columns[2], "");
    n.value = k.nodes;
    n.text = std::to_string(k.nodes);
    ReportCell eff = ScalingEfficiencyCell(t.columns[3], t1, tn, k.nodes);
    SayScaling(row_label, k, t1, tn, eff, host);
    row.cells = {t1, tn, n, eff, tgs_cell(t.columns[4], Find(one)), tgs_cell(t.columns[5], Find(k))};
    t.rows.push_back(std::move(row));
    one_host = one_host || !host.empty();
  }
  if (one_host)
    t.note += " One host: the N \"nodes\" of that row ran on one machine (the plan's cluster: launcher local, or "
              "one host for every node), so its scaling measures no network between machines.";
  out_.tables.push_back(std::move(t));
}

ReportCell ModelBuilder::ScalingEfficiencyCell(const std::string& column, const ReportCell& t1, const ReportCell& tn,
                                               int nodes) const {
  ReportCell eff = MarkerCell(column, kDash);
  if (!t1.value || !tn.value || *tn.value <= 0) return eff;
  if (!CheckRatioSides(t1, tn, runs_, &eff)) {
    eff.origin = RatioOrigin(t1.text, t1.run_id, tn.text, tn.run_id) + "; " + eff.refused;
    return eff;
  }
  std::vector<std::string> markers;
  if (t1.marker == "*" || tn.marker == "*") markers.push_back("*");
  if (t1.run_id != tn.run_id) markers.push_back(kDifferentRuns);
  eff.marker = Join(markers, " ");
  eff.value = *t1.value / (nodes * *tn.value);
  eff.text = FormatRatio(*eff.value) + (eff.marker.empty() ? "" : " " + eff.marker);
  eff.provenance = RatioProvenance(t1, tn);
  eff.origin = fmt::format("T1 / (N · TN) = {} (run {}) / ({} × {} (run {}))", FormatMinutes(*t1.value), t1.run_id,
                           nodes, FormatMinutes(*tn.value), tn.run_id);
  if (t1.run_id != tn.run_id) eff.origin += std::string("; ") + kDifferentRunsText;
  return eff;
}

void ModelBuilder::SayScaling(const std::string& row_label, const CellKey& k, const ReportCell& t1,
                              const ReportCell& tn, const ReportCell& eff, const std::string& host) {
  if (!eff.value && eff.refused.empty()) return;
  VerdictLine v;
  v.table = "scaling";
  v.row = row_label;
  v.scope = k.system + " 1 → " + NodesText(k.nodes) + (k.network.empty() ? "" : " over " + k.network) +
            (k.variant.empty() ? "" : " [" + k.variant + "]");
  v.compared = row_label + ": " + v.scope;
  const std::vector<std::pair<std::string, const ReportCell*>> inputs = {{"1 node", &t1}, {NodesText(k.nodes), &tn}};
  v.caveats = RatioCaveats(eff, inputs);
  if (!eff.value) {
    v.claim = "no ratio: " + RefusalReason(eff);
    v.speedup = "no ratio";
  } else {
    v.claim = fmt::format("scaling efficiency {} ({} min on 1 node, {} min on {})", FormatRatio(*eff.value),
                          FormatMinutes(*t1.value), FormatMinutes(*tn.value), NodesText(k.nodes));
    v.notes = RatioNotes(eff, inputs);
    // T1 / TN: how much faster N nodes did the work (the efficiency is that over N).
    const double speedup = *t1.value / *tn.value;
    v.speedup = fmt::format("{}×, efficiency {}", FormatRatio(speedup), FormatRatio(*eff.value));
    v.finding = fmt::format("{} on {} is {}× {} than on 1 node, a scaling efficiency of {} (1.00 is {}× faster)",
                            k.system, NodesText(k.nodes), FormatRatio(speedup >= 1 ? speedup : 1 / speedup),
                            speedup >= 1 ? "faster" : "slower", FormatRatio(*eff.value), k.nodes);
  }
  if (!host.empty()) {
    v.qualifiers.push_back(host + ": the scaling measures no network between machines");
    AddCaveats(&v.caveats, {"one host"});
  }
  AddVerdict(std::move(v), {&t1, &tn});
}

}  // namespace protocol
