#include "report/tables/model_builder.h"

// The candidate against each baseline (docs/report.md, "Against each
// baseline"): the methodology's baseline and every further baseline
// (ReportOptions::further_baselines, by default PyTorch FSDP's HYBRID_SHARD)
// beside the candidate, on the rows where a further baseline has a result.

#include <algorithm>
#include <tuple>

#include "report/formats/numbers.h"
#include "report/tables/sentences.h"
#include "report/tables/verdict.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// A row of the table: a training row on a node count.
struct NodesRow {
  std::string workload;
  std::string unit;
  int64_t count = 0;
  int nodes = 1;
  auto Order() const { return std::make_tuple(WorkloadOrder(workload), UnitOrder(unit), count, nodes); }
  bool operator<(const NodesRow& o) const { return Order() < o.Order(); }
  bool Holds(const CellKey& k) const {
    return k.workload == workload && k.length_unit == unit && k.length_count == count && k.nodes == nodes;
  }
  CellKey Key(const SideColumn& c) const { return CellKey{workload, unit, count, c.system, nodes, c.network, c.variant}; }
};

bool IsTraining(const CellKey& k) { return k.workload == "pretrain" || k.workload == "finetune"; }

// The figure of a cell in one column of the table.
ReportCell TimeCell(const std::string& column, const CellResults* cell) {
  return ValueCell(column, Resolve(cell, [](const CaseEntry& e) { return WallFigure(e); }, 1.0 / 60.0, "min",
                                   FormatMinutes),
                   FormatMinutes);
}

// bytes_between_nodes of the case's own length ("–" at another length, or
// when not stored).
ReportCell BytesCell(const std::string& column, const CellResults* cell) {
  ResolvedCell r = Resolve(cell, [](const CaseEntry& e) { return NamedFigure(e, metric::kBytesBetweenNodes); }, 1.0,
                           "", FormatBinaryBytes);
  if (!r.any) {
    r = ResolvedCell();
    r.marker = kDash;
  }
  r.contended.reset();  // a count of bytes does not depend on the CPU other processes took
  r.link_off_label = false;  // nor on the link's rate (its tooltip still says it)
  return ValueCell(column, r, FormatBinaryBytes);
}

}  // namespace

void ModelBuilder::BuildBaselines() {
  const std::vector<std::string> further = FurtherBaselines(o_);
  std::set<NodesRow> rows;
  for (const auto& [k, _] : cells_)
    if (IsTraining(k) && std::find(further.begin(), further.end(), k.system) != further.end())
      rows.insert(NodesRow{k.workload, k.length_unit, k.length_count, k.nodes});
  if (rows.empty()) return;
  // Columns: the methodology's baseline, then each further one in the order
  // given, each by network and variant; then the candidate.
  std::vector<std::string> systems = {o_.baseline_system};
  systems.insert(systems.end(), further.begin(), further.end());
  std::map<std::string, std::set<SideColumn>> by_system;
  for (const auto& [k, _] : cells_)
    for (const NodesRow& r : rows)
      if (r.Holds(k)) by_system[k.system].insert(SideColumn{k.system, k.network, k.variant});
  std::vector<SideColumn> bases, cands(by_system[o_.candidate_system].begin(), by_system[o_.candidate_system].end());
  for (const std::string& s : systems) bases.insert(bases.end(), by_system[s].begin(), by_system[s].end());
  ReportTable t;
  t.id = "baselines";
  t.title = o_.candidate_system + " against each baseline";
  for (const SideColumn& b : bases) {
    t.columns.push_back(b.Label() + " (min)");
    t.columns.push_back(b.Label() + " / " + o_.candidate_system);
    t.columns.push_back(b.Label() + " bytes between nodes");
    if (b.system != o_.baseline_system) further_time_columns_.insert(t.columns[t.columns.size() - 3]);
  }
  for (const SideColumn& c : cands) {
    t.columns.push_back(c.Label() + " (min)");
    t.columns.push_back(c.Label() + " bytes between nodes");
  }
  for (const NodesRow& r : rows) {
    const std::string row_label = TrainingRowLabel(r.workload, r.unit, r.count);
    ReportRow row{row_label + " — " + NodesText(r.nodes), "", {}};
    std::vector<const CellResults*> cand_cells;
    std::vector<ReportCell> cand_time, cand_bytes;
    for (size_t i = 0; i < cands.size(); ++i) {
      cand_cells.push_back(Find(r.Key(cands[i])));
      cand_time.push_back(TimeCell(t.columns[3 * bases.size() + 2 * i], cand_cells.back()));
      cand_bytes.push_back(BytesCell(t.columns[3 * bases.size() + 2 * i + 1], cand_cells.back()));
    }
    std::vector<ReportCell> ratios(bases.size());  // stable addresses for the verdict
    std::vector<ReportCell> times(bases.size());
    std::vector<BaselineSide> sides;
    for (size_t j = 0; j < bases.size(); ++j) {
      const CellKey k = r.Key(bases[j]);
      const CellResults* cell = Find(k);
      times[j] = TimeCell(t.columns[3 * j], cell);
      if (bases[j].system != o_.baseline_system) {
        tabulated_.insert(k);
        if (cell) placed_.push_back({row_label, bases[j].LabelOn(r.nodes), cell});
      }
      // The candidate column compared with: the same variant preferred, then one with a value.
      int partner = -1;
      for (size_t m = 0; m < cands.size(); ++m) {
        const bool same = cands[m].variant == bases[j].variant;
        if (partner < 0 || (same && cands[partner].variant != bases[j].variant) ||
            (same == (cands[partner].variant == bases[j].variant) && cand_time[m].value &&
             !cand_time[partner].value))
          partner = static_cast<int>(m);
      }
      ratios[j] = partner < 0 ? MarkerCell(t.columns[3 * j + 1], kDash)
                              : RatioCell(t.columns[3 * j + 1], times[j], cand_time[partner], runs_);
      row.cells.push_back(times[j]);
      row.cells.push_back(ratios[j]);
      row.cells.push_back(BytesCell(t.columns[3 * j + 2], cell));
      sides.push_back(BaselineSide{&bases[j], cell, &times[j], partner < 0 ? nullptr : cand_cells[partner],
                                   partner < 0 ? nullptr : &cand_time[partner],
                                   partner < 0 ? nullptr : &cands[partner], &ratios[j]});
    }
    for (size_t i = 0; i < cands.size(); ++i) {
      row.cells.push_back(cand_time[i]);
      row.cells.push_back(cand_bytes[i]);
    }
    SayBaselines(row_label, r.nodes, sides);
    t.rows.push_back(std::move(row));
  }
  t.note = fmt::format(
      "Each baseline's wall time against {0}'s on the same row and node count: baseline / {0} is baseline time / "
      "{0} time, with the efficiency coefficient's rules (the sides did the same work on the same machine, else "
      "–; markers *, †, ~). Bytes between nodes: bytes_between_nodes, what the ranks sent to a rank on another "
      "node (ring model), over the case's own length (– at a length its figure was computed or extrapolated to, "
      "or when not stored).",
      o_.candidate_system);
  if (!by_system[kHybridFsdpSystem].empty())
    t.note += fmt::format(" {}: PyTorch FSDP's HYBRID_SHARD, sharded within a node and replicated across nodes, so "
                          "only gradient shards cross between nodes.",
                          kHybridFsdpSystem);
  out_.tables.push_back(std::move(t));
}

void ModelBuilder::SayBaselines(const std::string& row_label, int nodes, const std::vector<BaselineSide>& sides) {
  const std::string& cs = o_.candidate_system;
  std::vector<const BaselineSide*> said;  // the sides with a ratio, or a refused one
  for (const BaselineSide& s : sides)
    if (s.ratio->value || !s.ratio->refused.empty()) said.push_back(&s);
  if (std::none_of(said.begin(), said.end(),
                   [this](const BaselineSide* s) { return s->column->system != o_.baseline_system; }))
    return;
  std::map<std::string, int> columns_of;
  for (const BaselineSide* s : said) ++columns_of[s->column->system];
  std::vector<std::string> speeds, refusals, nets, partners, notes, intervals;
  std::vector<std::pair<std::string, const CellResults*>> named;
  std::vector<std::pair<std::string, const ReportCell*>> shown;  // each side once, as named
  std::vector<const ReportCell*> cells;
  for (const BaselineSide* s : said) {
    // A system with several columns (one per network) is named with its network.
    const std::string name = columns_of[s->column->system] > 1 && !s->column->network.empty()
                                 ? s->column->system + " over " + s->column->network
                                 : s->column->system;
    if (!s->column->network.empty()) nets.push_back(s->column->system + " over " + s->column->network);
    if (!s->partner->network.empty() && std::find(partners.begin(), partners.end(), s->partner->network) == partners.end())
      partners.push_back(s->partner->network);
    cells.insert(cells.end(), {s->time, s->partner_time});
    named.push_back({name, s->cell});
    shown.push_back({name, s->time});
    const bool further = s->column->system != o_.baseline_system;  // the baseline's sentence is the training table's
    if (!s->ratio->value) {
      refusals.push_back("no ratio to " + name + ": " + RefusalReason(*s->ratio));
      if (further) out_.sentences.push_back(RefusedSentence(cs, name + " on " + NodesText(nodes), row_label, *s->ratio));
      continue;
    }
    const double ratio = *s->ratio->value;
    speeds.push_back(FormatRatio(ratio) == "1.00" ? "as fast as " + name
                     : ratio > 1 ? fmt::format("{}× faster than {}", FormatRatio(ratio), name)
                                 : fmt::format("{}× slower than {}", FormatRatio(1 / ratio), name));
    const std::vector<std::pair<std::string, const ReportCell*>> inputs = {{name, s->time}, {cs, s->partner_time}};
    for (const std::string& n : RatioNotes(*s->ratio, inputs)) {
      if (n == s->ratio->interval_note) intervals.push_back(n);
      else if (!StartsWith(n, "contended: ") && std::find(notes.begin(), notes.end(), n) == notes.end())
        notes.push_back(n);
    }
    if (!further) continue;
    std::vector<std::string> context;
    if (!s->column->network.empty()) context.push_back(s->column->system + " over " + s->column->network);
    if (!s->partner->network.empty()) context.push_back(cs + " over " + s->partner->network);
    out_.sentences.push_back(Sentence(cs, name + " on " + NodesText(nodes), *s->ratio, row_label, Join(context, ", "),
                                      inputs, WorseLossClause(s->cell, s->partner_cell, ratio, name)));
  }
  for (const std::string& p : partners) nets.push_back(cs + " over " + p);
  // One contention note naming each contended side once (the candidate's is every ratio's), where
  // a ratio's note has it: before the runs of the sides.
  shown.push_back({cs, said.front()->partner_time});
  const auto runs_note = std::find_if(notes.begin(), notes.end(),
                                      [](const std::string& n) { return StartsWith(n, kDifferentRunsText); });
  std::vector<std::string> contended;
  for (const std::string& n : RatioNotes(ReportCell(), shown))
    if (StartsWith(n, "contended: ")) contended.push_back(n);
  notes.insert(runs_note, contended.begin(), contended.end());
  // One interval note when every ratio has the same one, else each named.
  if (!intervals.empty() && std::all_of(intervals.begin(), intervals.end(),
                                        [&](const std::string& n) { return n == intervals[0]; }) &&
      intervals.size() == speeds.size()) {
    notes.push_back(intervals[0]);
  } else {
    for (size_t i = 0; i < said.size(); ++i)
      if (said[i]->ratio->value && !said[i]->ratio->interval_note.empty())
        notes.push_back(fmt::format("against {}: {}", named[i].first, said[i]->ratio->interval_note));
  }
  VerdictLine v;
  v.table = "baselines";
  v.row = row_label;
  v.scope = NodesText(nodes) + (nets.empty() ? "" : " (" + Join(nets, ", ") + ")");
  // "share is 3.00× faster than fsdp and 1.20× faster than fsdp-hybrid"; refusals after a "; ".
  if (!speeds.empty()) refusals.insert(refusals.begin(), cs + " is " + Join(speeds, " and "));
  v.claim = Join(refusals, "; ");
  const CellResults* cand = said.front()->partner_cell;
  v.quality = HeldOutLossAgainst(cand, cs, named);
  v.bytes = BetweenNodesPhrase(cand, cs, named);
  // The table row: the further baselines only (the methodology's baseline
  // has its row from the training table), each cell one entry per side.
  std::vector<std::string> against, speedups, losses, bytes, further_speeds;
  for (size_t i = 0; i < said.size(); ++i) {
    const BaselineSide* s = said[i];
    if (s->column->system == o_.baseline_system) continue;
    against.push_back(named[i].first);
    const std::vector<std::pair<std::string, const ReportCell*>> inputs = {{named[i].first, s->time},
                                                                          {cs, s->partner_time}};
    AddCaveats(&v.caveats, RatioCaveats(*s->ratio, inputs));
    if (!s->ratio->value) {
      speedups.push_back("no ratio");
      further_speeds.push_back("no ratio to " + named[i].first + ": " + RefusalReason(*s->ratio));
      continue;
    }
    speedups.push_back(SpeedupCell(*s->ratio, inputs));
    further_speeds.push_back(SpeedClaim(cs, named[i].first, *s->ratio->value));
    losses.push_back(LossDifferenceCell(s->cell, s->partner_cell, named[i].first, cs));
    if (nodes > 1) bytes.push_back(BytesBetweenNodesCell(s->partner_cell, s->cell));
  }
  v.compared = row_label + ", " + v.scope + ": " + cs + " vs " + Join(against, ", ");
  v.speedup = Join(speedups, "; ");
  v.loss_difference = Join(losses, "; ");
  v.bytes_between_nodes = Join(bytes, "; ");
  v.finding = Join(further_speeds, "; ");
  if (further_speeds.size() == 1 && losses.size() == 1) {  // one further side, with a ratio
    const BaselineSide* only = *std::find_if(said.begin(), said.end(), [this](const BaselineSide* s) {
      return s->column->system != o_.baseline_system;
    });
    v.finding += LossClause(only->cell, only->partner_cell);
  }
  if (nodes > 1) {
    std::string host = OneHostQualifier(runs_, nodes, shown);
    if (!host.empty()) {
      v.qualifiers.push_back(host);
      AddCaveats(&v.caveats, {"one host"});
    }
  }
  v.notes = notes;
  AddVerdict(std::move(v), cells);
}

bool ModelBuilder::RepeatsFigure(const ReportTable& t, const ReportCell& cell) const {
  if (t.id == "quality" || t.id == "metrics" || t.id == "scaling") return true;
  return t.id == "baselines" && !further_time_columns_.count(cell.column);
}

}  // namespace protocol
