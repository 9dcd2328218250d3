#ifndef PROTOCOL_REPORT_TABLES_MODEL_BUILDER_H_
#define PROTOCOL_REPORT_TABLES_MODEL_BUILDER_H_

// The report of one model, built from its cells (internal to src/report:
// ComputeReport, report_data.cc, feeds one ModelBuilder per model). How the
// tables, sentences and appendix are laid out: docs/report.md. The class is
// one concept whose parts live in one file each:
//
//   model_builder.cc            the cells, failures, verdict qualifiers, Build
//   model_builder_training.cc   the training and scaling tables
//   model_builder_baselines.cc  the candidate against each baseline (further baselines)
//   model_builder_inference.cc  the two inference tables
//   model_builder_extras.cc     the quality & cost and additional metrics tables
//   model_builder_appendix.cc   the appendix, provenance and ratio lists
//   model_builder_charts.cc     the generation-time chart and the history charts
//   model_builder_estimates.cc  expected against measured wall time (the time estimate)
//
// A cell's figure is cells.h; a ratio ratios.h; a sentence sentences.h.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "report/report_data.h"
#include "report/tables/cell_key.h"
#include "report/tables/cells.h"
#include "report/tables/ratios.h"
#include "runner/plan/coverage.h"

namespace protocol {

// A training column: the layout `protocol validate` predicts (coverage.h) is the one shown.
struct Column : TableColumn {
  bool Matches(const CellKey& k) const {
    return k.system == system && k.nodes == nodes && k.network == network && k.variant == variant;
  }
};

// A cell placed in a main table: used for the quality/metrics tables, the
// untabulated list and the chart.
struct Placed {
  std::string row_label;
  std::string column_label;
  const CellResults* cell;
};

struct ExtraSpec;  // a column of the quality or metrics table (model_builder_extras.cc)

// Training rows in the report's order: pretrain before finetune, steps before epochs.
inline int WorkloadOrder(const std::string& w) { return w == "pretrain" ? 0 : w == "finetune" ? 1 : 2; }
inline int UnitOrder(const std::string& u) { return u == "steps" ? 0 : u == "epochs" ? 1 : 2; }
// "pretrain 1000 steps".
inline std::string TrainingRowLabel(const std::string& workload, const std::string& unit, int64_t count) {
  return workload + " " + LengthText(unit, count);
}

// A column group of the baselines table: one system on one network and variant.
struct SideColumn {
  std::string system;
  std::string network;
  std::string variant;
  // "fsdp (80G)", "share [exact]"; with the node count, as the training table
  // names a column: "fsdp 2 nodes (80G)".
  std::string Label() const {
    return system + (network.empty() ? "" : " (" + network + ")") + (variant.empty() ? "" : " [" + variant + "]");
  }
  std::string LabelOn(int nodes) const {
    return system + " " + NodesText(nodes) + (network.empty() ? "" : " (" + network + ")") +
           (variant.empty() ? "" : " [" + variant + "]");
  }
  bool operator<(const SideColumn& o) const {
    return std::tie(system, network, variant) < std::tie(o.system, o.network, o.variant);
  }
};

class ModelBuilder {
 public:
  ModelBuilder(const std::string& model, const ReportOptions& o, const RunIndex& runs) : o_(o), runs_(runs) {
    out_.model = model;
  }

  // An ok result of cell `k` (a case gives one per cell it fills: cell_key.h KeysOf).
  void AddOk(const CellKey& k, const CaseEntry& e);
  // A case of cell `k` that did not end ok.
  void AddFailure(const CellKey& k, const CaseEntry& e);

  // The model's report from what was added; call once, after every Add.
  ModelReport Build();

  // An ok result of a run read for the history charts only (or also tabulated).
  void AddHistory(const CellKey& k, const CaseEntry& e) { history_[k][e.run->id].push_back(e); }

  // The runs a figure shown or a failure listed comes from (after Build).
  const std::set<int64_t>& RunsShown() const { return runs_shown_; }

 private:
  // The failures listed, by run (stable), each also attached to its cell:
  // every case not ok, but for one older than its cell's newest ok run
  // (superseded: the cell was measured again, successfully).
  void ListFailures();

  const CellResults* Find(const CellKey& k) const {
    auto it = cells_.find(k);
    return it == cells_.end() ? nullptr : &it->second;
  }

  // The candidate column a baseline column `j` is compared with: the same
  // node count, of the same variant when there is one; of several (e.g. one
  // per network) the first whose cell in this row has a value, so that an
  // empty sibling column never hides a ratio. -1 when none.
  int PartnerColumn(const std::vector<Column>& columns, const ReportRow& row, size_t j) const;

  // A training cell: its results and the cell the table shows.
  using SideCell = std::pair<const CellResults*, const ReportCell*>;

  // The sentence and the verdict line of one training ratio (baseline column
  // `col` over candidate column `partner`): "share is 3.00× faster than fsdp
  // on 1 node (300 %) for pretrain 1000 steps", with the held-out loss when
  // the candidate's is worse; or why it was refused. Nothing for no ratio.
  void SayTrainingRatio(const std::string& row_label, int64_t row_steps, const Column& col, const Column& partner,
                        SideCell base, SideCell cand, const ReportCell& ratio);

  // The speed-up at equal quality of a training ratio with a value
  // (time_to_target.h), at the row's `row_steps` (0: a row in epochs):
  // v.equal_quality, and a row of out_.equal_quality with its chart;
  // nothing when neither side stored a held-out curve.
  void SayEqualQuality(VerdictLine& v, int64_t row_steps, SideCell base, SideCell cand, const ReportCell& ratio);

  // A speed-up is read next to the held-out loss: ", but its held-out loss is
  // 3.1000 vs 2.9500 for fsdp" when the candidate's is worse (higher, and
  // different at 4 decimals); "" otherwise.
  std::string WorseLossClause(const CellResults* base, const CellResults* cand, double ratio,
                              const std::string& baseline_name) const;

  // Whether a figure of the cell was measured on declared random weights.
  bool OnRandomWeights(const ReportCell& cell) const;

  // A verdict line, qualified when a side's figure was measured on declared
  // random weights (a speed-up of an untrained model).
  void AddVerdict(VerdictLine v, const std::vector<const ReportCell*>& sides);

  // The verdict's lines in table order, but for a line of "Against each
  // baseline", which follows the training line of its row and node count
  // (the one of the methodology's baseline it extends).
  void OrderVerdict();

  void BuildTraining();

  // Scaling 1 → N nodes (docs/report.md), one row per training row, system
  // (baseline, candidate) and multi-node cell: T1, TN, N, the scaling
  // efficiency T1 / (N · TN), and TGS on 1 and on N nodes. The 1-node side is
  // the same row and system on 1 node, same variant (no network preferred).
  void BuildScaling();

  // The candidate against each baseline (docs/report.md, "Against each
  // baseline"): one row per training row and node count where a further
  // baseline (ReportOptions::further_baselines) has a result; per baseline
  // column its time, the ratio baseline / candidate and its bytes between
  // nodes, then the candidate's time and bytes between nodes. Nothing when no
  // further baseline has a training result.
  void BuildBaselines();

  // The sentences of the further baselines' ratios of one row, and the
  // row's verdict line: the candidate's speed-up against every baseline
  // column with a ratio (or why there is none), held-out losses, bytes
  // between nodes. Nothing when no further baseline's ratio has a value or
  // was refused.
  struct BaselineSide {
    const SideColumn* column;
    const CellResults* cell;  // the baseline's
    const ReportCell* time;   // its time, as shown
    const CellResults* partner_cell;  // the candidate's it is compared with; null when none
    const ReportCell* partner_time;
    const SideColumn* partner;
    const ReportCell* ratio;
  };
  void SayBaselines(const std::string& row_label, int nodes, const std::vector<BaselineSide>& sides);

  // Whether the figure of `cell` in table `t` repeats one another table
  // shows (quality, metrics, scaling; in the baselines table every cell but
  // a further baseline's time): such cells get no appendix, provenance or
  // random-weights line of their own.
  bool RepeatsFigure(const ReportTable& t, const ReportCell& cell) const;

  // T1 / (N · TN), marked * and † as a ratio; "–" when a side is missing,
  // refused when the sides ran on different machines or did different work.
  ReportCell ScalingEfficiencyCell(const std::string& column, const ReportCell& t1, const ReportCell& tn,
                                   int nodes) const;

  // The verdict line of a scaling row: "share 1 → 2 nodes: scaling
  // efficiency 0.45 (1.2 min on 1 node, 1.3 min on 2 nodes)"; nothing when no
  // efficiency.
  void SayScaling(const std::string& row_label, const CellKey& k, const ReportCell& t1, const ReportCell& tn,
                  const ReportCell& eff, const std::string& host);

  // The newest-winning key among `candidates` (ties: earlier in the list).
  std::optional<CellKey> Newest(const std::vector<CellKey>& candidates) const;

  // The two inference tables (docs/report.md): the reference is the
  // baseline's single-stream figure on 1 node, per row.
  void BuildInference();

  // The baseline's single-stream cell on 1 node and its figure per row.
  struct Inference {
    const CellResults* base_cell = nullptr;
    std::vector<ReportCell> reference;  // per kInferenceRows
  };

  // Row i's efficiency of value cell `v`: baseline / candidate for times,
  // candidate / baseline for tokens per second.
  ReportCell InferenceRatio(const Inference& inf, size_t i, const ReportCell& v, const std::string& column) const;

  // The sentences and verdict lines of column `col` of an inference table;
  // `mode` is "single-stream on 1 node" or "multi-inference on 2 nodes over 10G".
  void SayInference(const Inference& inf, const ReportTable& t, size_t col, const std::string& mode);

  // (a) single-stream: baseline 1 node | candidate 1 node single-stream.
  void BuildSingleStream(const Inference& inf, const CellResults* cand_cell);

  // (b) multi-inference: baseline "no solution" | candidate multi-inference per node count.
  void BuildMultiInference(const Inference& inf, const std::set<CellKey>& cand_multi);

  // The quality & cost table, then the additional metrics table: one row
  // per placed cell with any of their figures (model_builder_extras.cc).
  void BuildExtras();
  void BuildExtra(const char* id, const char* title, const ExtraSpec* all_specs, size_t n_all);

  // A line under each table with cells measured on declared random weights,
  // naming them: such a figure says nothing about a trained model.
  void NoteRandomWeights();

  void BuildAppendix();

  void BuildProvenance();

  // Every ratio whose two sides have a figure (efficiency coefficients and
  // scaling efficiency), with the runs behind it.
  void BuildRatios();

  // One chart per case identity with an ok figure in >= 2 runs: training
  // rows plot wall minutes, inference tokens per second, against the run id.
  void BuildHistory();

  void BuildUntabulated();

  void BuildChart();

  // The time estimate (docs/estimates.md): one row per ok case of the runs
  // shown that stored an expected_wall_seconds — expected, measured, their
  // ratio, and the largest term with a flag outside the band. Nothing when
  // no case stored one.
  void BuildEstimates();
  // A verdict line's sides against their estimates: "fsdp 1.1× its estimate,
  // share 0.9×", a side outside the band flagged with its largest term; ""
  // when no side's case stored an estimate.
  // v->expected ("fsdp 0.61× its estimate, share 0.51×") and
  // v->expected_cell ("0.61×, 0.51×"), each side's measured / expected.
  void FillExpected(const std::vector<const ReportCell*>& sides, VerdictLine* v) const;
  // One ok case's estimate, by (run, case id, repeat), from AddOk.
  struct EstimateEntry {
    std::string system;
    int nodes = 1;
    double expected = 0;   // s
    double measured = 0;   // s (its own wall_seconds; 0: none stored)
    std::string method;    // the estimate's terms
    std::string largest;   // "compute 3 s"
  };
  std::map<std::tuple<int64_t, std::string, int>, EstimateEntry> estimates_;
  void RememberEstimate(const CaseEntry& e);
  // A verdict line of two sides (baseline, candidate) that both stored an
  // energy per token: v->energy and v->energy_cell (model_builder_extras.cc).
  void FillEnergy(const std::vector<const ReportCell*>& sides, VerdictLine* v) const;
  // One ok case's energy per token, by (run, case id, repeat), from AddOk.
  std::map<std::tuple<int64_t, std::string, int>, double> energy_per_token_;
  void RememberEnergy(const CaseEntry& e);
  // A verdict line of two sides where a side's case sampled its hardware:
  // its charts (HardwareRow, model_builder_charts.cc).
  void AddHardware(const VerdictLine& v, const std::vector<const ReportCell*>& sides);
  // One ok case's samples, by (run, case id, repeat), from AddOk.
  struct SampledCase {
    std::string system;
    int nodes = 1;
    const std::vector<TelemetrySample>* samples = nullptr;
  };
  std::map<std::tuple<int64_t, std::string, int>, SampledCase> sampled_;

  const ReportOptions& o_;
  const RunIndex& runs_;
  ModelReport out_;
  std::map<CellKey, CellResults> cells_;
  std::set<std::pair<int64_t, std::string>> random_;  // (run, case) measured on declared random weights
  std::vector<std::pair<CellKey, FailureEntry>> failures_;
  std::set<CellKey> tabulated_;
  std::set<std::string> further_time_columns_;  // the baselines table's columns of further baselines' times
  std::vector<Placed> placed_;
  std::vector<std::pair<std::string, const CellResults*>> series_;  // winning cells with requests
  std::map<CellKey, std::map<int64_t, std::vector<CaseEntry>>> history_;  // ok results by run, all runs read
  std::set<int64_t> runs_shown_;
};

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_MODEL_BUILDER_H_
