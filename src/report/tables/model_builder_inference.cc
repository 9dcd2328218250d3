#include "report/tables/model_builder.h"

#include <algorithm>
#include <tuple>

#include "report/formats/numbers.h"
#include "report/tables/sentences.h"
#include "report/tables/verdict.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// The inference rows: measurement name, label, unit, format, whether higher is better.
struct InferenceRowSpec {
  const char* metric;
  const char* label;
  const char* what;  // in sentences
  const char* unit;
  std::string (*format)(double);
  bool higher_is_better;
};
const InferenceRowSpec kInferenceRows[] = {
    {metric::kTotalGenerationSeconds, "total generation time (s)", "total generation time", "s", FormatSeconds, false},
    {metric::kSecondsPerToken, "seconds per token", "seconds per token", "s/token", FormatSecondsPerToken, false},
    {metric::kTokensPerSecond, "tokens per second", "tokens per second", "tokens/s", FormatTokensPerSecond, true},
};

}  // namespace

std::optional<CellKey> ModelBuilder::Newest(const std::vector<CellKey>& candidates) const {
  std::optional<CellKey> best;
  int64_t best_run = -1;
  for (const auto& k : candidates) {
    const CellResults* c = Find(k);
    if (!c) continue;
    int64_t run = c->WinningRun();
    if (run > best_run) {
      best = k;
      best_run = run;
    }
  }
  return best;
}

void ModelBuilder::BuildInference() {
  std::vector<CellKey> base_ss, cand_ss;
  std::set<CellKey> cand_multi;
  bool any = false;
  // Preference order for ties: "single-stream" before "".
  for (const char* variant : {"single-stream", ""}) {
    for (const auto& [k, _] : cells_) {
      if (k.workload != "inference") continue;
      any = true;
      if (k.variant != variant) continue;
      if (k.system == o_.baseline_system && k.nodes == 1) base_ss.push_back(k);
      if (k.system == o_.candidate_system && k.nodes == 1 && k.variant == "single-stream") cand_ss.push_back(k);
    }
  }
  for (const auto& [k, _] : cells_) {
    if (k.workload == "inference" && k.system == o_.candidate_system && k.variant == "multi-inference") {
      cand_multi.insert(k);
    }
  }
  if (!any) return;
  std::optional<CellKey> base = Newest(base_ss);
  std::optional<CellKey> cand = Newest(cand_ss);
  const CellResults* base_cell = base ? Find(*base) : nullptr;
  if (base) tabulated_.insert(*base);
  if (cand) tabulated_.insert(*cand);
  Inference inf;
  inf.base_cell = base_cell;
  for (const auto& spec : kInferenceRows) {
    std::string name = spec.metric;
    ResolvedCell r = Resolve(base_cell, [name](const CaseEntry& e) { return InferenceFigure(e, name); }, 1.0,
                             spec.unit, spec.format);
    inf.reference.push_back(ValueCell(o_.baseline_system + " 1 node", r, spec.format));
  }
  BuildSingleStream(inf, cand ? Find(*cand) : nullptr);
  if (!cand_multi.empty()) BuildMultiInference(inf, cand_multi);
}

ReportCell ModelBuilder::InferenceRatio(const Inference& inf, size_t i, const ReportCell& v,
                                        const std::string& column) const {
  return kInferenceRows[i].higher_is_better ? RatioCell(column, v, inf.reference[i], runs_)
                                            : RatioCell(column, inf.reference[i], v, runs_);
}

void ModelBuilder::SayInference(const Inference& inf, const ReportTable& t, size_t col, const std::string& mode) {
  const std::string subject = o_.candidate_system + " " + mode;
  const std::string object = o_.baseline_system + " on 1 node";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const ReportCell& ratio = t.efficiency[i].cells[col];
    if (!ratio.value && ratio.refused.empty()) continue;
    const std::vector<std::pair<std::string, const ReportCell*>> inputs = {
        {o_.baseline_system, &inf.reference[i]}, {o_.candidate_system, &t.rows[i].cells[col]}};
    if (!ratio.value) {
      out_.sentences.push_back(RefusedSentence(subject, object, kInferenceRows[i].what, ratio));
    } else {
      out_.sentences.push_back(Sentence(subject, object, ratio, kInferenceRows[i].what, "", inputs));
    }
    // The verdict has one line per comparison: the total generation time
    // decides; the per-token figures are in the table.
    if (i != 0) continue;
    VerdictLine v;
    v.table = t.id;
    v.row = std::string("inference, ") + kInferenceRows[i].what;
    v.scope = mode;
    v.compared = "inference, " + mode + ": " + o_.candidate_system + " vs " + o_.baseline_system;
    v.caveats = RatioCaveats(ratio, inputs);
    if (!ratio.value) {
      v.claim = "no ratio: " + RefusalReason(ratio);
      v.speedup = "no ratio";
    } else {
      v.claim = SpeedClaim(o_.candidate_system, object, *ratio.value);
      v.finding = v.claim;
      v.speedup = SpeedupCell(ratio, inputs);
      v.notes = RatioNotes(ratio, inputs);
    }
    AddVerdict(std::move(v), {&inf.reference[i], &t.rows[i].cells[col]});
  }
}

void ModelBuilder::BuildSingleStream(const Inference& inf, const CellResults* cand_cell) {
  const std::string base_label = o_.baseline_system + " 1 node";
  const std::string cand_label = o_.candidate_system + " 1 node";
  ReportTable t;
  t.id = "inference-single-stream";
  t.title = "Inference, single-stream";
  t.columns = {base_label, cand_label + " (single-stream)"};
  for (size_t i = 0; i < std::size(kInferenceRows); ++i) {
    const auto& spec = kInferenceRows[i];
    std::string name = spec.metric;
    ResolvedCell r = Resolve(cand_cell, [name](const CaseEntry& e) { return InferenceFigure(e, name); }, 1.0,
                             spec.unit, spec.format);
    ReportRow row{spec.label, spec.unit, {inf.reference[i], ValueCell(t.columns[1], r, spec.format)}};
    row.cells[0].column = t.columns[0];
    ReportRow eff{spec.label, "×",
                  {UnitRatioCell(row.cells[0], row.cells[1]), InferenceRatio(inf, i, row.cells[1], t.columns[1])}};
    t.rows.push_back(row);
    t.efficiency.push_back(eff);
  }
  if (inf.base_cell) placed_.push_back({"inference", t.columns[0], inf.base_cell});
  if (cand_cell) placed_.push_back({"inference", t.columns[1], cand_cell});
  if (inf.base_cell) series_.push_back({base_label + " single-stream", inf.base_cell});
  if (cand_cell) series_.push_back({cand_label + " single-stream", cand_cell});
  SayInference(inf, t, 1, "single-stream on 1 node");
  if (inf.base_cell || cand_cell) out_.tables.push_back(std::move(t));
}

void ModelBuilder::BuildMultiInference(const Inference& inf, const std::set<CellKey>& cand_multi) {
  std::map<int, std::set<std::string>> networks;
  for (const auto& k : cand_multi) networks[k.nodes].insert(k.network);
  ReportTable t;
  t.id = "inference-multi";
  t.title = "Inference, multi-inference";
  t.columns = {o_.baseline_system};
  std::vector<CellKey> keys(cand_multi.begin(), cand_multi.end());
  std::stable_sort(keys.begin(), keys.end(), [](const CellKey& a, const CellKey& b) {
    return std::tie(a.nodes, a.network) < std::tie(b.nodes, b.network);
  });
  std::vector<std::string> modes;
  for (const auto& k : keys) {
    std::string label = o_.candidate_system + " " + NodesText(k.nodes);
    if (networks[k.nodes].size() > 1 && !k.network.empty()) label += " (" + k.network + ")";
    t.columns.push_back(label);
    modes.push_back("multi-inference on " + NodesText(k.nodes) + (k.network.empty() ? "" : " over " + k.network));
    tabulated_.insert(k);
  }
  for (size_t i = 0; i < std::size(kInferenceRows); ++i) {
    const auto& spec = kInferenceRows[i];
    std::string name = spec.metric;
    ReportRow row{spec.label, spec.unit, {MarkerCell(t.columns[0], kNoSolution)}};
    ReportRow eff{spec.label, "×", {MarkerCell(t.columns[0], kNoSolution)}};
    for (size_t j = 0; j < keys.size(); ++j) {
      ResolvedCell r = Resolve(Find(keys[j]), [name](const CaseEntry& e) { return InferenceFigure(e, name); }, 1.0,
                               spec.unit, spec.format);
      row.cells.push_back(ValueCell(t.columns[j + 1], r, spec.format));
      eff.cells.push_back(InferenceRatio(inf, i, row.cells.back(), t.columns[j + 1]));
    }
    t.rows.push_back(row);
    t.efficiency.push_back(eff);
  }
  for (size_t j = 0; j < keys.size(); ++j) {
    placed_.push_back({"inference", t.columns[j + 1] + " (multi-inference)", Find(keys[j])});
    series_.push_back({t.columns[j + 1] + " multi-inference", Find(keys[j])});
    SayInference(inf, t, j + 1, modes[j]);
  }
  out_.tables.push_back(std::move(t));
}

}  // namespace protocol
