#include "report/report_data.h"

// How the tables, sentences and appendix of one model are laid out:
// docs/report.md. Read top to bottom: the columns and row specs, then
// ModelBuilder (training, scaling, the two inference tables, quality and
// metrics tables, then the appendix, ratios, chart and history), then
// ComputeReport. A cell's figure is cells.h; a ratio ratios.h; a sentence
// sentences.h.

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "report/cell_key.h"
#include "report/cells.h"
#include "report/formats.h"
#include "report/ratios.h"
#include "report/sentences.h"
#include "report/verdict.h"
#include "runner/base/text.h"
#include "runner/plan/coverage.h"

namespace protocol {

namespace {

// ---- columns -------------------------------------------------------------------

// A training column: the layout `protocol validate` predicts (coverage.h) is the one shown.
struct Column : TableColumn {
  bool Matches(const CellKey& k) const {
    return k.system == system && k.nodes == nodes && k.network == network && k.variant == variant;
  }
};

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
  std::string Label() const { return workload + " " + LengthText(unit, count); }
};

int WorkloadOrder(const std::string& w) { return w == "pretrain" ? 0 : w == "finetune" ? 1 : 2; }
int UnitOrder(const std::string& u) { return u == "steps" ? 0 : u == "epochs" ? 1 : 2; }

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

// Quality & cost, and additional metrics: name, column header, scale, format.
// Share-protocol measurements the report reads by name (docs/report.md,
// "Quality & cost, Additional metrics").

struct ExtraSpec {
  const char* metric;
  const char* column;
  std::string (*format)(double);
  bool optional = false;  // column shown only when some row has the figure
};
// Held-out loss first, so that a speed-up is read next to it.
const ExtraSpec kQuality[] = {
    {metric::kEvalLoss, "eval loss", FormatLoss},
    {metric::kBestGroupEvalLoss, "best group eval loss", FormatLoss, true},
    {metric::kFinalLoss, "final loss", FormatLoss},
    {metric::kBytesCommunicated, "bytes communicated", FormatBinaryBytes},
    {metric::kMergeSeconds, "merge time (s)", FormatSeconds, true},
};
const ExtraSpec kMetrics[] = {
    {metric::kTgs, "TGS (tokens/GPU/s)", FormatOne},
    {metric::kTflops, "TFLOP/s per device", FormatOne},
    {metric::kMfu, "MFU (%)", FormatMfu},
    {metric::kSamplesPerSecond, "samples/s", FormatTwo},
    {metric::kPeakDeviceMemory, "peak device memory (GiB)", FormatGiB},
    {metric::kPeakHostRss, "peak host RSS (GiB)", FormatGiB},
    {metric::kStragglers, "stragglers (ranks)", FormatCount, true},  // distributed training (stragglers.h)
};

// A cell placed in a main table: used for the quality/metrics tables, the
// untabulated list and the chart.
struct Placed {
  std::string row_label;
  std::string column_label;
  const CellResults* cell;
};

// ---- one model -------------------------------------------------------------------

class ModelBuilder {
 public:
  ModelBuilder(const std::string& model, const ReportOptions& o, const RunIndex& runs) : o_(o), runs_(runs) {
    out_.model = model;
  }

  void AddOk(const CellKey& k, const CaseEntry& e) {
    cells_[k].ok_by_run[e.run->id].push_back(e);
    for (const Measurement& m : e.c->measurements)
      if (m.method.find(metric::kRandomWeightsNote) != std::string::npos) random_.insert({e.run->id, e.c->record.case_id});
  }
  void AddFailure(const CellKey& k, const CaseEntry& e) {
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

  ModelReport Build() {
    ListFailures();
    for (const auto& [k, cell] : cells_)
      if (cell.Winning()) runs_shown_.insert(cell.WinningRun());
    for (const FailureEntry& f : out_.failures) runs_shown_.insert(f.run_id);
    BuildTraining();
    BuildScaling();
    BuildInference();
    BuildExtra("quality", "Quality & cost", kQuality, std::size(kQuality));
    BuildExtra("metrics", "Additional metrics", kMetrics, std::size(kMetrics));
    NoteRandomWeights();
    BuildAppendix();
    BuildProvenance();
    BuildRatios();
    BuildUntabulated();
    BuildChart();
    BuildHistory();
    // Each line's parts are final here: a pass that qualifies verdict lines
    // (VerdictLine::qualifiers) runs before this one.
    for (VerdictLine& v : out_.verdict) v.text = VerdictText(out_.model, v);
    return std::move(out_);
  }

  // An ok result of a run read for the history charts only (or also tabulated).
  void AddHistory(const CellKey& k, const CaseEntry& e) { history_[k][e.run->id].push_back(e); }

  // The runs a figure shown or a failure listed comes from (after Build).
  const std::set<int64_t>& RunsShown() const { return runs_shown_; }

 private:
  // The failures listed, by run (stable), each also attached to its cell:
  // every case not ok, but for one older than its cell's newest ok run
  // (superseded: the cell was measured again, successfully).
  void ListFailures() {
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

  // A case's requests in the order of its schedule (index): the store keeps
  // them in the order they finished, which multi-inference interleaves.
  static std::vector<const RequestSample*> InRequestOrder(const std::vector<RequestSample>& requests) {
    std::vector<const RequestSample*> out;
    for (const RequestSample& r : requests) out.push_back(&r);
    std::stable_sort(out.begin(), out.end(),
                     [](const RequestSample* a, const RequestSample* b) { return a->index < b->index; });
    return out;
  }

  const CellResults* Find(const CellKey& k) const {
    auto it = cells_.find(k);
    return it == cells_.end() ? nullptr : &it->second;
  }

  // The candidate column a baseline column `j` is compared with: the same
  // node count, of the same variant when there is one; of several (e.g. one
  // per network) the first whose cell in this row has a value, so that an
  // empty sibling column never hides a ratio. -1 when none.
  int PartnerColumn(const std::vector<Column>& columns, const ReportRow& row, size_t j) const {
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

  // A training cell: its results and the cell the table shows.
  using SideCell = std::pair<const CellResults*, const ReportCell*>;

  // The sentence and the verdict line of one training ratio (baseline column
  // `col` over candidate column `partner`): "share is 3.00× faster than fsdp
  // on 1 node (300 %) for pretrain 1000 steps", with the held-out loss when
  // the candidate's is worse; or why it was refused. Nothing for no ratio.
  void SayTrainingRatio(const std::string& row_label, const Column& col, const Column& partner, SideCell base,
                        SideCell cand, const ReportCell& ratio) {
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
    if (!ratio.value) {
      out_.sentences.push_back(RefusedSentence(cs, bs + " on " + NodesText(col.nodes), row_label, ratio));
      v.claim = "no ratio: " + RefusalReason(ratio);
      AddVerdict(std::move(v), {base.second, cand.second});
      return;
    }
    const std::vector<std::pair<std::string, const ReportCell*>> inputs = {{bs, base.second}, {cs, cand.second}};
    out_.sentences.push_back(Sentence(cs, bs + " on " + NodesText(col.nodes), ratio, row_label, Join(nets, ", "),
                                      inputs, WorseLossClause(base.first, cand.first, *ratio.value)));
    v.claim = SpeedClaim(cs, bs, *ratio.value);
    v.quality = HeldOutLossPhrase(base.first, cand.first, bs, cs);
    v.bytes = BytesMovedPhrase(base.first, cand.first, bs);
    if (col.nodes > 1) {
      std::string host = OneHostQualifier(runs_, col.nodes, inputs);
      if (!host.empty()) v.qualifiers.push_back(host);
    }
    v.notes = RatioNotes(ratio, inputs);
    AddVerdict(std::move(v), {base.second, cand.second});
  }

  // A speed-up is read next to the held-out loss: ", but its held-out loss is
  // 3.1000 vs 2.9500 for fsdp" when the candidate's is worse (higher, and
  // different at 4 decimals); "" otherwise.
  std::string WorseLossClause(const CellResults* base, const CellResults* cand, double ratio) const {
    auto eval = [](const CaseEntry& e) { return NamedFigure(e, metric::kEvalLoss); };
    ResolvedCell eb = Resolve(base, eval, 1.0, "", FormatLoss);
    ResolvedCell es = Resolve(cand, eval, 1.0, "", FormatLoss);
    if (!eb.value || !es.value || *es.value <= *eb.value || FormatLoss(*es.value) == FormatLoss(*eb.value))
      return "";
    return fmt::format(ratio >= 1 || FormatRatio(ratio) == "1.00" ? ", but its held-out loss is {} vs {} for {}"
                                                                 : ", and its held-out loss is also worse: {} vs {} for {}",
                       FormatLoss(*es.value), FormatLoss(*eb.value), o_.baseline_system);
  }

  // Whether a figure of the cell was measured on declared random weights.
  bool OnRandomWeights(const ReportCell& cell) const {
    for (const CellSource& src : cell.sources)
      if (random_.count({src.run_id, src.case_id})) return true;
    return false;
  }

  // A verdict line, qualified when a side's figure was measured on declared
  // random weights (a speed-up of an untrained model).
  void AddVerdict(VerdictLine v, const std::vector<const ReportCell*>& sides) {
    if (std::any_of(sides.begin(), sides.end(), [this](const ReportCell* c) { return OnRandomWeights(*c); }))
      v.qualifiers.push_back("measured on seeded random weights");
    out_.verdict.push_back(std::move(v));
  }

  void BuildTraining() {
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
        SayTrainingRatio(row.label, col, columns[partner], {row_cells[j], &b}, {row_cells[partner], &s},
                         eff.cells.back());
      }
      t.rows.push_back(std::move(row));
      t.efficiency.push_back(std::move(eff));
    }
    out_.tables.push_back(std::move(t));
  }

  // Scaling 1 → N nodes (docs/report.md), one row per training row, system
  // (baseline, candidate) and multi-node cell: T1, TN, N, the scaling
  // efficiency T1 / (N · TN), and TGS on 1 and on N nodes. The 1-node side is
  // the same row and system on 1 node, same variant (no network preferred).
  void BuildScaling() {
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

  // T1 / (N · TN), marked * and † as a ratio; "–" when a side is missing,
  // refused when the sides ran on different machines or did different work.
  ReportCell ScalingEfficiencyCell(const std::string& column, const ReportCell& t1, const ReportCell& tn,
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

  // The verdict line of a scaling row: "share 1 → 2 nodes: scaling
  // efficiency 0.45 (1.2 min on 1 node, 1.3 min on 2 nodes)"; nothing when no
  // efficiency.
  void SayScaling(const std::string& row_label, const CellKey& k, const ReportCell& t1, const ReportCell& tn,
                  const ReportCell& eff, const std::string& host) {
    if (!eff.value && eff.refused.empty()) return;
    VerdictLine v;
    v.table = "scaling";
    v.row = row_label;
    v.scope = k.system + " 1 → " + NodesText(k.nodes) + (k.network.empty() ? "" : " over " + k.network) +
              (k.variant.empty() ? "" : " [" + k.variant + "]");
    if (!eff.value) {
      v.claim = "no ratio: " + RefusalReason(eff);
    } else {
      v.claim = fmt::format("scaling efficiency {} ({} min on 1 node, {} min on {})", FormatRatio(*eff.value),
                            FormatMinutes(*t1.value), FormatMinutes(*tn.value), NodesText(k.nodes));
      v.notes = RatioNotes(eff, {{"1 node", &t1}, {NodesText(k.nodes), &tn}});
    }
    if (!host.empty()) v.qualifiers.push_back(host + ": the scaling measures no network between machines");
    AddVerdict(std::move(v), {&t1, &tn});
  }

  // The newest-winning key among `candidates` (ties: earlier in the list).
  std::optional<CellKey> Newest(const std::vector<CellKey>& candidates) const {
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

  // The two inference tables (docs/report.md): the reference is the
  // baseline's single-stream figure on 1 node, per row.
  void BuildInference() {
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

  // The baseline's single-stream cell on 1 node and its figure per row.
  struct Inference {
    const CellResults* base_cell = nullptr;
    std::vector<ReportCell> reference;  // per kInferenceRows
  };

  // Row i's efficiency of value cell `v`: baseline / candidate for times,
  // candidate / baseline for tokens per second.
  ReportCell InferenceRatio(const Inference& inf, size_t i, const ReportCell& v, const std::string& column) const {
    return kInferenceRows[i].higher_is_better ? RatioCell(column, v, inf.reference[i], runs_)
                                              : RatioCell(column, inf.reference[i], v, runs_);
  }

  // The sentences and verdict lines of column `col` of an inference table;
  // `mode` is "single-stream on 1 node" or "multi-inference on 2 nodes over 10G".
  void SayInference(const Inference& inf, const ReportTable& t, size_t col, const std::string& mode) {
    const std::string subject = o_.candidate_system + " " + mode;
    const std::string object = o_.baseline_system + " on 1 node";
    for (size_t i = 0; i < t.rows.size(); ++i) {
      const ReportCell& ratio = t.efficiency[i].cells[col];
      if (!ratio.value && ratio.refused.empty()) continue;
      VerdictLine v;
      v.table = t.id;
      v.row = std::string("inference, ") + kInferenceRows[i].what;
      v.scope = mode;
      if (!ratio.value) {
        out_.sentences.push_back(RefusedSentence(subject, object, kInferenceRows[i].what, ratio));
        v.claim = "no ratio: " + RefusalReason(ratio);
      } else {
        const std::vector<std::pair<std::string, const ReportCell*>> inputs = {
            {o_.baseline_system, &inf.reference[i]}, {o_.candidate_system, &t.rows[i].cells[col]}};
        out_.sentences.push_back(Sentence(subject, object, ratio, kInferenceRows[i].what, "", inputs));
        v.claim = SpeedClaim(o_.candidate_system, object, *ratio.value);
        v.notes = RatioNotes(ratio, inputs);
      }
      AddVerdict(std::move(v), {&inf.reference[i], &t.rows[i].cells[col]});
    }
  }

  // (a) single-stream: baseline 1 node | candidate 1 node single-stream.
  void BuildSingleStream(const Inference& inf, const CellResults* cand_cell) {
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

  // (b) multi-inference: baseline "no solution" | candidate multi-inference per node count.
  void BuildMultiInference(const Inference& inf, const std::set<CellKey>& cand_multi) {
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

  void BuildExtra(const char* id, const char* title, const ExtraSpec* all_specs, size_t n_all) {
    ReportTable t;
    t.id = id;
    t.title = title;
    std::vector<ExtraSpec> specs;
    for (size_t i = 0; i < n_all; ++i) {
      bool present = !all_specs[i].optional;
      std::string name = all_specs[i].metric;
      for (const auto& p : placed_) {
        if (present) break;
        present = Resolve(p.cell, [name](const CaseEntry& e) { return NamedFigure(e, name); }, 1.0, "",
                          all_specs[i].format)
                      .any;
      }
      if (present) specs.push_back(all_specs[i]);
    }
    const size_t n = specs.size();
    for (size_t i = 0; i < n; ++i) t.columns.push_back(specs[i].column);
    for (const auto& p : placed_) {
      ReportRow row{p.row_label + " — " + p.column_label, "", {}};
      bool any = false;
      for (size_t i = 0; i < n; ++i) {
        std::string name = specs[i].metric;
        ResolvedCell r = Resolve(p.cell, [name](const CaseEntry& e) { return NamedFigure(e, name); }, 1.0, "",
                             specs[i].format);
        if (!r.any) {
          r = ResolvedCell();
          r.marker = kDash;
        }
        any = any || r.any;
        row.cells.push_back(ValueCell(specs[i].column, r, specs[i].format));
      }
      if (any) t.rows.push_back(std::move(row));
    }
    if (!t.rows.empty()) out_.tables.push_back(std::move(t));
  }

  // A line under each table with cells measured on declared random weights,
  // naming them: such a figure says nothing about a trained model.
  void NoteRandomWeights() {
    if (random_.empty()) return;
    for (ReportTable& t : out_.tables) {
      // Quality, metrics and scaling cells repeat figures of the main tables' cells.
      if (t.id == "quality" || t.id == "metrics" || t.id == "scaling") continue;
      std::vector<std::string> cells;
      for (const ReportRow& row : t.rows)
        for (const ReportCell& cell : row.cells)
          if (OnRandomWeights(cell)) cells.push_back(row.label + " — " + cell.column);
      if (cells.empty()) continue;
      const std::string line = fmt::format("Random weights: {} measured on seeded random weights (the plan says "
                                           "init: random), not on a trained model's: {}.",
                                           cells.size() == 1 ? "this cell was" : "these cells were", Join(cells, "; "));
      t.note = t.note.empty() ? line : t.note + " " + line;
    }
  }

  void BuildAppendix() {
    for (const auto& t : out_.tables) {
      // Quality, metrics and scaling cells repeat figures of the main tables' cells.
      if (t.id == "quality" || t.id == "metrics" || t.id == "scaling") continue;
      for (const auto& row : t.rows) {
        for (const auto& cell : row.cells) {
          if (cell.origin.empty()) continue;
          out_.appendix.push_back({t.title, row.label, cell.column, cell.origin});
        }
      }
    }
  }

  void BuildProvenance() {
    for (const auto& t : out_.tables) {
      if (t.id == "scaling") continue;  // its cells repeat training and metrics cells
      for (const auto& row : t.rows) {
        for (const auto& cell : row.cells) {
          for (const auto& src : cell.sources) out_.provenance.push_back({t.title, row.label, cell.column, src});
        }
      }
    }
  }

  // Every ratio whose two sides have a figure (efficiency coefficients and
  // scaling efficiency), with the runs behind it.
  void BuildRatios() {
    for (const auto& t : out_.tables) {
      for (const auto* block : {&t.rows, &t.efficiency}) {
        for (const auto& row : *block) {
          for (const auto& cell : row.cells) {
            if (cell.numerator_run_id == 0 && cell.denominator_run_id == 0) continue;
            RatioEntry e;
            e.table = t.title;
            e.row = row.label;
            e.column = cell.column;
            e.text = cell.text;
            e.numerator_run_id = cell.numerator_run_id;
            e.denominator_run_id = cell.denominator_run_id;
            e.note = !cell.refused.empty() ? cell.refused
                     : cell.numerator_run_id != cell.denominator_run_id ? kDifferentRunsText
                                                                         : "same run";
            out_.ratios.push_back(std::move(e));
          }
        }
      }
    }
  }

  // One chart per case identity with an ok figure in >= 2 runs: training
  // rows plot wall minutes, inference tokens per second, against the run id.
  void BuildHistory() {
    for (const auto& [k, by_run] : history_) {
      const bool inference = k.workload == "inference";
      FigureFn get = inference ? FigureFn([](const CaseEntry& e) { return InferenceFigure(e, metric::kTokensPerSecond); })
                               : FigureFn([](const CaseEntry& e) { return WallFigure(e); });
      const double scale = inference ? 1.0 : 1.0 / 60.0;
      const std::string unit = inference ? "tokens/s" : "min";
      auto format = inference ? FormatTokensPerSecond : FormatMinutes;
      ChartSeriesInput series;
      series.label = KeyText(k);
      for (const auto& [run_id, entries] : by_run) {
        RunFigure r = MedianFigure(entries, get, scale);
        if (!r.value) continue;
        series.points.push_back({static_cast<double>(run_id), *r.value});
        series.titles.push_back(fmt::format("run {}: {} {}{}{}", run_id, format(*r.value), unit,
                                            r.extrapolated ? " *" : "",
                                            r.n > 1 ? fmt::format(" (median of {})", r.n) : ""));
      }
      if (series.points.size() < 2) continue;
      ChartAxes axes;
      axes.x_label = "run id";
      axes.y_label = inference ? "tokens per second" : "wall time (min)";
      axes.integer_x_from_data = true;
      HistoryChart h;
      h.identity = series.label;
      h.y_label = axes.y_label;
      h.chart = LayoutChart({series}, axes);
      out_.history.push_back(std::move(h));
    }
  }

  void BuildUntabulated() {
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

  void BuildChart() {
    std::vector<ChartSeriesInput> inputs;
    for (const auto& [label, cell] : series_) {
      if (!cell || !cell->Winning()) continue;
      ChartSeriesInput in;
      in.label = label;
      for (const auto& e : *cell->Winning()) {
        for (const RequestSample* rp : InRequestOrder(e.c->requests)) {
          const RequestSample& r = *rp;
          int tokens = r.generated_tokens > 0 ? r.generated_tokens : r.max_new_tokens;
          in.points.push_back({static_cast<double>(tokens), r.seconds});
          RequestRow row;
          row.series = label;
          row.run_id = e.run->id;
          row.case_id = e.c->record.case_id;
          row.repeat = e.c->record.repeat;
          row.index = r.index;
          row.max_new_tokens = r.max_new_tokens;
          row.generated_tokens = r.generated_tokens;
          row.seconds = r.seconds;
          row.seconds_text = FormatRequestSeconds(r.seconds);
          row.answer = r.answer;
          out_.requests.push_back(std::move(row));
        }
      }
      inputs.push_back(std::move(in));
    }
    out_.chart = LayoutChart(inputs);
  }

  const ReportOptions& o_;
  const RunIndex& runs_;
  ModelReport out_;
  std::map<CellKey, CellResults> cells_;
  std::set<std::pair<int64_t, std::string>> random_;  // (run, case) measured on declared random weights
  std::vector<std::pair<CellKey, FailureEntry>> failures_;
  std::set<CellKey> tabulated_;
  std::vector<Placed> placed_;
  std::vector<std::pair<std::string, const CellResults*>> series_;  // winning cells with requests
  std::map<CellKey, std::map<int64_t, std::vector<CaseEntry>>> history_;  // ok results by run, all runs read
  std::set<int64_t> runs_shown_;
};

}  // namespace


namespace {

// `e` as the entry of cell `k`: at a length other than the case's own it stands for that length.
CaseEntry EntryAt(const CellKey& k, const CaseRecord& rec, CaseEntry e) {
  if (k.length_unit != rec.length_unit || k.length_count != rec.length_count) {
    e.length_unit = k.length_unit;
    e.length_count = k.length_count;
  }
  return e;
}

}  // namespace

ReportData ComputeReport(const ReportInput& input, const ReportOptions& options) {
  ReportData data;
  data.baseline_system = options.baseline_system;
  data.candidate_system = options.candidate_system;

  std::vector<const ReportRunInput*> runs;
  for (const auto& r : input.runs) {
    if (!options.run_ids.empty() &&
        std::find(options.run_ids.begin(), options.run_ids.end(), r.run.id) == options.run_ids.end()) {
      continue;
    }
    runs.push_back(&r);
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const ReportRunInput* a, const ReportRunInput* b) { return a->run.id < b->run.id; });

  RunIndex index;
  for (const auto* r : runs) index.Add(*r);
  std::map<std::string, ModelBuilder> builders;
  for (const auto* r : runs) {
    for (const auto& c : r->cases) {
      const auto& rec = c.record;
      if (!options.model.empty() && rec.model != options.model) continue;
      auto it = builders.try_emplace(rec.model, rec.model, options, index).first;
      if (rec.status != CaseStatus::kOk) {
        it->second.AddFailure(KeyOf(rec), CaseEntry{&r->run, &c});
        continue;
      }
      for (const CellKey& k : KeysOf(rec, c.measurements))
        it->second.AddOk(k, EntryAt(k, rec, CaseEntry{&r->run, &c}));
    }
  }
  // History: every run of the input up to history_through, selected or not.
  for (const auto* all : {&input.runs, &input.history_only}) {
    for (const auto& r : *all) {
      if (!options.history || (options.history_through > 0 && r.run.id > options.history_through)) continue;
      for (const auto& c : r.cases) {
        if (c.record.status != CaseStatus::kOk) continue;
        auto it = builders.find(c.record.model);
        if (it == builders.end()) continue;  // a model the selected runs do not report
        for (const CellKey& k : KeysOf(c.record, c.measurements))
          it->second.AddHistory(k, EntryAt(k, c.record, CaseEntry{&r.run, &c}));
      }
    }
  }
  std::set<int64_t> shown;
  for (auto& [_, b] : builders) {
    data.models.push_back(b.Build());
    shown.insert(b.RunsShown().begin(), b.RunsShown().end());
  }
  // The runs read: those a figure shown or a failure listed comes from.
  for (const auto* r : runs)
    if (shown.count(r->run.id))
      data.runs.push_back({r->run.id, r->run.kind, r->run.plan_name, r->run.started_at, r->run.status, r->run.source});

  if (data.models.empty()) {
    if (input.runs.empty()) {
      data.empty_message = "The store holds no runs: nothing to report.";
    } else if (runs.empty()) {
      data.empty_message = "None of the selected runs is in the store: nothing to report.";
    } else if (!options.model.empty()) {
      data.empty_message = fmt::format("No case of model '{}' in the selected runs: nothing to report.",
                                       options.model);
    } else {
      data.empty_message = "The selected runs hold no cases: nothing to report.";
    }
  }
  return data;
}

}  // namespace protocol
