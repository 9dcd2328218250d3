#include "report/report_data.h"
#include "report/work_settings.h"

// How every cell, marker, ratio and sentence is computed: docs/report.md.
// Read top to bottom: group results into cells, pick each cell's figure
// (newest run, median of repeats), lay out the training table, the two
// inference tables, quality and metrics tables, then the sentences, appendix
// and chart.

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "runner/analysis/compare_stats.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

const char* const kDash = "–";  // U+2013: no value / no ratio
const char* const kNoSolution = "no solution";
const char* const kNotSignificant = "~";  // the ratio's interval crosses 1
const char* const kDifferentRuns = "\u2020";  // "†": the ratio's two sides come from different runs
const char* const kDifferentRunsText = "sides from different runs";
const std::string kRefusedPrefix = "no ratio: ";  // ReportCell::refused

// ---- formats ---------------------------------------------------------------

// `decimals` decimals, widened so a value below 1 keeps 3 significant digits
// (0.0123 min, not 0.0): a small figure is still a measured figure.
std::string FormatDecimals(double v, int decimals) {
  if (v != 0 && std::fabs(v) < 1) {
    int significant = 2 - static_cast<int>(std::floor(std::log10(std::fabs(v))));
    decimals = std::max(decimals, std::min(significant, 12));
  }
  return fmt::format("{:.{}f}", v, decimals);
}
std::string FormatSeconds(double s) { return FormatDecimals(s, 1); }
std::string FormatSecondsPerToken(double s) { return FormatDecimals(s, 4); }
std::string FormatTokensPerSecond(double t) { return fmt::format("{:.2f}", t); }
std::string FormatLoss(double v) { return fmt::format("{:.4f}", v); }
std::string FormatGiB(double bytes) { return FormatDecimals(bytes / (1024.0 * 1024.0 * 1024.0), 2); }
// Human units, binary: "512 B", "1.50 KiB", "3.25 MiB", "1.00 GiB" (GiB and up stay GiB).
std::string FormatBinaryBytes(double bytes) {
  const char* const units[] = {"KiB", "MiB", "GiB"};
  if (std::fabs(bytes) < 1024) return fmt::format("{:.0f} B", bytes);
  double v = bytes;
  for (size_t i = 0; i < std::size(units); ++i) {
    v /= 1024;
    if (std::fabs(v) < 1024 || i + 1 == std::size(units)) return fmt::format("{:.2f} {}", v, units[i]);
  }
  return "";  // unreachable
}
std::string FormatOne(double v) { return fmt::format("{:.1f}", v); }
std::string FormatTwo(double v) { return fmt::format("{:.2f}", v); }
std::string FormatMfu(double v) { return fmt::format("{:.1f}", v * 100); }
std::string FormatCount(double v) { return fmt::format("{:.0f}", v); }

std::string NodesText(int nodes) { return fmt::format("{} {}", nodes, nodes == 1 ? "node" : "nodes"); }

// ---- cells -------------------------------------------------------------------

// What identifies a cell within one model.
struct CellKey {
  std::string workload;
  std::string length_unit;  // row length: report_as when present, else length
  int64_t length_count = 0;
  std::string system;
  int nodes = 1;
  std::string network;
  std::string variant;
  auto Tie() const { return std::tie(workload, length_unit, length_count, system, nodes, network, variant); }
  bool operator<(const CellKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const CellKey& o) const { return Tie() == o.Tie(); }
};

CellKey KeyOf(const CaseRecord& r) {
  CellKey k;
  k.workload = r.workload;
  if (!r.report_as_unit.empty()) {
    k.length_unit = r.report_as_unit;
    k.length_count = r.report_as_count;
  } else {
    k.length_unit = r.length_unit;
    k.length_count = r.length_count;
  }
  k.system = r.system;
  k.nodes = r.nodes;
  k.network = r.network;
  k.variant = r.variant;
  return k;
}

std::string KeyText(const CellKey& k) {
  std::vector<std::string> parts = {k.workload};
  std::string len = LengthText(k.length_unit, k.length_count);
  if (!len.empty()) parts.push_back(len);
  parts.push_back(k.system);
  parts.push_back(NodesText(k.nodes));
  if (!k.network.empty()) parts.push_back("(" + k.network + ")");
  if (!k.variant.empty()) parts.push_back("[" + k.variant + "]");
  return Join(parts, " ");
}

struct Entry {
  const RunRecord* run;
  const ReportCaseInput* c;
};

// All results of one cell: ok cases per run id, and the cases not ok.
struct CellResults {
  std::map<int64_t, std::vector<Entry>> ok_by_run;
  std::vector<const FailureEntry*> failures;
  int64_t WinningRun() const { return ok_by_run.empty() ? 0 : ok_by_run.rbegin()->first; }
  const std::vector<Entry>* Winning() const {
    return ok_by_run.empty() ? nullptr : &ok_by_run.rbegin()->second;
  }
};

// One stored figure of one case, in the measurement's unit.
struct Figure {
  std::optional<double> value;
  std::string marker;  // "" | "*" | "X"
  Provenance how = Provenance::kMeasured;
  std::string method;
  std::string source;
  int derived_from = 0;  // > 0: derived from this many request samples
};

Figure FigureFromMeasurement(const Measurement& m, const RunRecord& run) {
  Figure f;
  f.how = m.how;
  f.method = m.method;
  f.source = m.source.empty() ? run.source : m.source;
  if (m.marker == "not-provided") {
    f.marker = "X";
    return f;  // no value, whatever was stored
  }
  f.value = m.value;
  if (m.marker == "extrapolated" || m.how == Provenance::kExtrapolated) f.marker = "*";
  return f;
}

// Training time: wall_seconds. A case with report_as takes only its
// extrapolated figure; others prefer a measured or imported one.
std::optional<Figure> WallFigure(const Entry& e) {
  bool extrapolated_row = !e.c->record.report_as_unit.empty();
  const Measurement* pick = nullptr;
  for (const auto& m : e.c->measurements) {
    if (m.name != metric::kWallSeconds) continue;
    bool is_extrap = m.how == Provenance::kExtrapolated;
    if (extrapolated_row) {
      if (is_extrap) { pick = &m; break; }
    } else if (!is_extrap) {
      pick = &m;
      break;
    }
  }
  if (!pick) return std::nullopt;
  return FigureFromMeasurement(*pick, *e.run);
}

std::optional<Figure> NamedFigure(const Entry& e, const std::string& name) {
  for (const auto& m : e.c->measurements) {
    if (m.name == name) return FigureFromMeasurement(m, *e.run);
  }
  return std::nullopt;
}

// Inference figures, derived from request samples when not stored:
// total = Σ seconds, s/token = Σ seconds / Σ generated, tokens/s = Σ generated / Σ seconds.
std::optional<Figure> InferenceFigure(const Entry& e, const std::string& name) {
  if (auto f = NamedFigure(e, name)) return f;
  const auto& reqs = e.c->requests;
  if (reqs.empty()) return std::nullopt;
  double seconds = 0, generated = 0;
  for (const auto& r : reqs) {
    seconds += r.seconds;
    generated += r.generated_tokens;
  }
  Figure f;
  f.derived_from = static_cast<int>(reqs.size());
  if (name == metric::kTotalGenerationSeconds) {
    f.value = seconds;
  } else if (name == metric::kSecondsPerToken) {
    if (generated > 0) f.value = seconds / generated;
  } else if (name == metric::kTokensPerSecond) {
    if (seconds > 0) f.value = generated / seconds;
  }
  if (!f.value) return std::nullopt;
  return f;
}

// The runs read, by id: the two sides of a ratio are checked against them.
class RunIndex {
 public:
  void Add(const ReportRunInput& r) { runs_[r.run.id] = &r; }

  // Why runs `a` and `b` cannot be the two sides of one ratio: both are runs
  // of kind "run" (an import records no machine) and their machine
  // fingerprints differ (FingerprintDifferences, compare.h: the rule of
  // `protocol compare`). "" when they can.
  std::string MachineDifference(int64_t a, int64_t b) const {
    if (a == b) return "";
    auto x = runs_.find(a), y = runs_.find(b);
    if (x == runs_.end() || y == runs_.end()) return "";
    if (x->second->run.kind != "run" || y->second->run.kind != "run") return "";
    std::vector<std::string> differences = FingerprintDifferences(x->second->context, y->second->context);
    if (differences.empty()) return "";
    return fmt::format("run {} and run {} ran on different machines ({})", a, b, Join(differences, "; "));
  }

  // Why the cases behind two cells did not do the same work (work_settings.h):
  // "the sides did different work (seq_len: 128 vs 256)"; "" when they did, or
  // when a side's settings are unknown (an import, a plan this build cannot read).
  std::string WorkDifference(const ReportCell& num, const ReportCell& den) const {
    const WorkSettings* a = SettingsOf(num);
    const WorkSettings* b = SettingsOf(den);
    if (!a || !b) return "";
    std::vector<std::string> differences = WorkDifferences(*a, *b);
    if (differences.empty()) return "";
    return fmt::format("the sides did different work ({})", Join(differences, "; "));
  }

 private:
  // The work settings of the first case behind a cell; null when unknown.
  const WorkSettings* SettingsOf(const ReportCell& cell) const {
    if (cell.sources.empty()) return nullptr;
    const CellSource& src = cell.sources.front();
    auto run = runs_.find(src.run_id);
    if (run == runs_.end() || run->second->run.kind != "run") return nullptr;
    auto cached = settings_.find(src.run_id);
    if (cached == settings_.end())  // parsed once per run, only for runs that give a ratio's side
      cached = settings_.emplace(src.run_id, PlanWorkSettings(run->second->run.plan_text)).first;
    auto found = cached->second.find(src.case_id);
    return found == cached->second.end() ? nullptr : &found->second;
  }

  std::map<int64_t, const ReportRunInput*> runs_;
  mutable std::map<int64_t, std::map<std::string, WorkSettings>> settings_;
};

// A cell's figure: the winning run's repeats combined.
struct Resolved {
  bool any = false;  // some figure was stored
  std::optional<double> value;  // median, in display units
  double min = 0, max = 0;
  int n = 0;  // values combined
  std::vector<double> values;  // the values combined, in display units
  std::vector<CellSource> sources;  // the cases that gave a figure
  std::string marker;
  std::string provenance;
  std::string origin;
  int64_t run_id = 0;
};

using FigureFn = std::function<std::optional<Figure>(const Entry&)>;

// `scale` converts the stored unit to the display unit (1/60 for minutes).
Resolved Resolve(const CellResults* cell, const FigureFn& get, double scale, const std::string& unit,
                 const std::function<std::string(double)>& format) {
  Resolved r;
  if (!cell || !cell->Winning()) {
    r.marker = kDash;
    if (cell && !cell->failures.empty()) {
      std::vector<std::string> why;
      for (const auto* f : cell->failures) why.push_back(f->text);
      r.origin = "no ok result: " + Join(why, "; ");
    }
    return r;
  }
  const auto& entries = *cell->Winning();
  r.run_id = cell->WinningRun();
  std::vector<double> values;
  std::vector<std::string> case_ids;
  bool star = false, not_provided = false, extrap = false, imported = false;
  int derived_from = 0;
  std::string method, source;
  for (const auto& e : entries) {
    if (std::find(case_ids.begin(), case_ids.end(), e.c->record.case_id) == case_ids.end()) {
      case_ids.push_back(e.c->record.case_id);
    }
    auto f = get(e);
    if (!f) continue;
    r.any = true;
    if (f->value) values.push_back(*f->value * scale);
    CellSource src;
    src.run_id = e.run->id;
    src.case_id = e.c->record.case_id;
    src.repeat = e.c->record.repeat;
    src.value_text = f->value ? format(*f->value * scale) + (unit.empty() ? "" : " " + unit) + (f->marker == "*" ? " *" : "")
                              : "not provided";
    src.how = ProvenanceName(f->how);
    if (f->derived_from) src.how += fmt::format(", derived from {} requests", f->derived_from);
    if (f->how == Provenance::kExtrapolated) src.detail = f->method;
    if (f->how == Provenance::kImported) src.detail = f->source;
    src.log_sha256 = e.c->record.log_sha256;
    src.plan_sha256 = e.run->plan_sha256;
    r.sources.push_back(std::move(src));
    if (f->marker == "*") star = true;
    if (f->marker == "X") not_provided = true;
    if (f->how == Provenance::kExtrapolated) extrap = true;
    if (f->how == Provenance::kImported) imported = true;
    if (f->derived_from) derived_from = f->derived_from;
    if (method.empty()) method = f->method;
    if (source.empty()) source = f->source;
  }
  std::string where = fmt::format("run {}, case {}", r.run_id, Join(case_ids, ", "));
  if (!r.any) {
    r.marker = kDash;
    r.origin = where + " (ok, but no figure stored for this cell)";
    return r;
  }
  r.provenance = extrap ? "extrapolated" : imported ? "imported" : "measured";
  if (values.empty()) {
    r.marker = not_provided ? "X" : kDash;
    r.origin = imported ? fmt::format("imported from {} ({}: not provided)", source, where)
                        : where + ": not provided";
    return r;
  }
  r.value = *Median(values);
  r.values = values;
  r.min = *std::min_element(values.begin(), values.end());
  r.max = *std::max_element(values.begin(), values.end());
  r.n = static_cast<int>(values.size());
  r.marker = star ? "*" : "";
  std::string v = format(*r.value) + (unit.empty() ? "" : " " + unit);
  std::string what;
  if (r.n > 1) {
    std::string prefix = r.provenance == "measured" ? "" : r.provenance + ", ";
    what = fmt::format("{}repeats {}: median {}, spread {}–{}", prefix, r.n, v, format(r.min), format(r.max));
  } else if (derived_from) {
    what = fmt::format("measured, derived from {} requests: {}", derived_from, v);
  } else if (imported) {
    what = v;
  } else {
    what = r.provenance + ": " + v;
  }
  if (imported && star && !extrap) what += ", marked extrapolated";
  if (extrap && !method.empty()) what += "; method: " + method;
  r.origin = imported ? fmt::format("imported from {} ({}: {})", source, where, what)
                      : fmt::format("{} ({})", where, what);
  // An older result shown while a newer run failed: say so.
  for (const auto* f : cell->failures) {
    if (f->run_id > r.run_id) r.origin += "; newer, not ok: " + f->text;
  }
  return r;
}

ReportCell ValueCell(const std::string& column, const Resolved& r,
                     const std::function<std::string(double)>& format) {
  ReportCell c;
  c.column = column;
  c.value = r.value;
  c.marker = r.marker;
  c.provenance = r.provenance;
  c.origin = r.origin;
  c.repeats = r.values;
  c.sources = r.sources;
  c.run_id = r.run_id;
  if (r.value) {
    c.text = format(*r.value) + (r.marker == "*" ? " *" : "");
  } else {
    c.text = r.marker;
  }
  return c;
}

ReportCell MarkerCell(const std::string& column, const std::string& marker) {
  ReportCell c;
  c.column = column;
  c.text = marker;
  c.marker = marker;
  return c;
}

// The efficiency cell of a reference column: 1 when it has a value and so
// does the candidate it is compared with (`candidate`; the cell itself when
// the reference is the candidate's own column). An empty candidate gives no
// number in its row: "X" when the reference is not provided, else "–".
ReportCell UnitRatioCell(const ReportCell& value_cell, const ReportCell& candidate) {
  if (value_cell.value && candidate.value) {
    ReportCell c = MarkerCell(value_cell.column, "");
    c.value = 1.0;
    c.text = "1";
    return c;
  }
  return MarkerCell(value_cell.column, value_cell.marker == "X" ? "X" : kDash);
}

// The runs of a ratio's two sides, and whether it may be computed at all:
// sets numerator_run_id / denominator_run_id, and refused (with the cell shown
// as "–") when the sides ran on different machines or did different work
// (work_settings.h). Returns whether the ratio may be computed.
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

// "12.0 (run 3) / 4.0 (run 5); sides from different runs".
std::string RatioOrigin(const std::string& num_text, int64_t num_run, const std::string& den_text, int64_t den_run) {
  std::string s = fmt::format("{} (run {}) / {} (run {})", num_text, num_run, den_text, den_run);
  if (num_run != den_run) s += std::string("; ") + kDifferentRunsText;
  return s;
}

// ratio = numerator / denominator, marked `*` when an input is, `†` when the
// two sides come from different runs, and `~` when the bootstrap interval of
// median(num) / median(den) over the repeats (>= 3 on each side) contains 1
// (compare_stats.h's percentile bootstrap with its one set of settings,
// kBootstrapSeed etc., as `protocol compare`: the same report every time).
// Refused ("–", `refused` says why) when the sides' runs ran on different
// machines.
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
  c.provenance = (num.provenance == "measured" && den.provenance == "measured") ? "measured"
                 : (num.provenance == "extrapolated" || den.provenance == "extrapolated") ? "extrapolated"
                                                                                          : "imported";
  c.origin = RatioOrigin(num.text, num.run_id, den.text, den.run_id);
  if (c.interval) {
    c.origin += fmt::format("; 95 % interval {}–{}", FormatRatio(c.interval->low), FormatRatio(c.interval->high));
  }
  if (!c.interval_note.empty()) c.origin += "; " + c.interval_note;
  return c;
}

// "share is 3.21× faster than fsdp on 1 node (321 %) for pretrain 1000 steps."
// With an interval: "share is 1.04× (95 % interval 0.97–1.12) faster than …",
// the interval in the direction of the factor (inverted for "slower").
// `clause` (", but its held-out loss …") follows the context.
std::string Sentence(const std::string& subject, const std::string& object, const ReportCell& ratio_cell,
                     const std::string& what, const std::string& context,
                     const std::vector<std::pair<std::string, const ReportCell*>>& inputs,
                     const std::string& clause = "") {
  const double ratio = *ratio_cell.value;
  std::string pct = FormatPercent(ratio);
  std::string s;
  const auto& iv = ratio_cell.interval;
  if (FormatRatio(ratio) == "1.00") {
    std::string interval =
        iv ? fmt::format(", 95 % interval {}–{}", FormatRatio(iv->low), FormatRatio(iv->high)) : "";
    s = fmt::format("{} is as fast as {} ({} %{}) for {}", subject, object, pct, interval, what);
  } else if (ratio > 1) {
    std::string interval =
        iv ? fmt::format(" (95 % interval {}–{})", FormatRatio(iv->low), FormatRatio(iv->high)) : "";
    s = fmt::format("{} is {}×{} faster than {} ({} %) for {}", subject, FormatRatio(ratio), interval, object, pct,
                    what);
  } else {
    std::string interval =
        iv && iv->low > 0
            ? fmt::format(" (95 % interval {}–{})", FormatRatio(1 / iv->high), FormatRatio(1 / iv->low))
            : "";
    s = fmt::format("{} is {}×{} slower than {} ({} %) for {}", subject, FormatRatio(1 / ratio), interval, object,
                    pct, what);
  }
  if (!context.empty()) s += " (" + context + ")";
  s += clause;
  std::vector<std::string> notes;
  for (const auto& [who, cell] : inputs) {
    if (cell->provenance == "extrapolated" || (cell->marker == "*" && cell->provenance != "imported")) {
      notes.push_back(who + " figure extrapolated");
    } else if (cell->provenance == "imported") {
      notes.push_back(who + (cell->marker == "*" ? " figure imported, marked extrapolated"
                                                 : " figure imported"));
    }
  }
  if (!notes.empty()) s += "; " + Join(notes, ", ");
  if (ratio_cell.numerator_run_id != ratio_cell.denominator_run_id) {
    std::vector<std::string> sides;
    for (const auto& [who, cell] : inputs) sides.push_back(fmt::format("{} run {}", who, cell->run_id));
    s += fmt::format("; {} ({})", kDifferentRunsText, Join(sides, ", "));
  }
  if (!ratio_cell.interval_note.empty()) s += "; " + ratio_cell.interval_note;
  return s + ".";
}

// A ratio refused because its sides ran on different machines (or did different work):
// "No ratio of share to fsdp on 1 node for pretrain 1000 steps: run 3 and run
// 5 ran on different machines (cpu_cores: 8 vs 16)."
std::string RefusedSentence(const std::string& subject, const std::string& object, const std::string& what,
                            const ReportCell& ratio_cell) {
  const std::string why = ratio_cell.refused.substr(kRefusedPrefix.size());
  return fmt::format("No ratio of {} to {} for {}: {}.", subject, object, what, why);
}

// ---- columns -------------------------------------------------------------------

struct Column {
  std::string label;
  std::string system;
  int nodes = 1;
  std::string network;
  std::string variant;
  bool Matches(const CellKey& k) const {
    return k.system == system && k.nodes == nodes && k.network == network && k.variant == variant;
  }
};

// Columns for the given (system, nodes, network, variant) combinations:
// by node count, baseline before candidate, then network and variant.
std::vector<Column> TrainingColumns(const std::set<CellKey>& keys, const ReportOptions& o) {
  std::map<std::tuple<int, int, std::string, std::string>, Column> ordered;
  std::map<std::pair<std::string, int>, std::set<std::string>> networks;
  for (const auto& k : keys) networks[{k.system, k.nodes}].insert(k.network);
  for (const auto& k : keys) {
    int sys_order = k.system == o.baseline_system ? 0 : 1;
    bool show_network = !k.network.empty() &&
                        ((k.system == o.baseline_system && k.nodes > 1) || networks[{k.system, k.nodes}].size() > 1);
    Column c;
    c.system = k.system;
    c.nodes = k.nodes;
    c.network = k.network;
    c.variant = k.variant;
    c.label = k.system + " " + NodesText(k.nodes);
    if (show_network) c.label += " (" + k.network + ")";
    if (!k.variant.empty()) c.label += " [" + k.variant + "]";
    ordered[{k.nodes, sys_order, k.network, k.variant}] = c;
  }
  std::vector<Column> out;
  for (auto& [_, c] : ordered) out.push_back(c);
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

  void AddOk(const CellKey& k, const Entry& e) {
    cells_[k].ok_by_run[e.run->id].push_back(e);
    for (const Measurement& m : e.c->measurements)
      if (m.method.find(metric::kRandomWeightsNote) != std::string::npos) random_.insert({e.run->id, e.c->record.case_id});
  }
  void AddFailure(const CellKey& k, const Entry& e) {
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
    // Failures are stored in a stable order; cells point at them.
    std::stable_sort(failures_.begin(), failures_.end(),
                     [](const auto& a, const auto& b) { return a.second.run_id < b.second.run_id; });
    for (const auto& [k, f] : failures_) out_.failures.push_back(f);
    for (size_t i = 0; i < failures_.size(); ++i) {
      cells_[failures_[i].first].failures.push_back(&out_.failures[i]);
    }
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
    return std::move(out_);
  }

  // An ok result of a run read for the history charts only (or also tabulated).
  void AddHistory(const CellKey& k, const Entry& e) { history_[k][e.run->id].push_back(e); }

 private:
  const CellResults* Find(const CellKey& k) const {
    auto it = cells_.find(k);
    return it == cells_.end() ? nullptr : &it->second;
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
    auto get = [](const Entry& e) { return WallFigure(e); };
    auto eval = [](const Entry& e) { return NamedFigure(e, metric::kEvalLoss); };
    for (const auto& [wo, uo, count, workload, unit] : rows) {
      RowSpec spec{workload, unit, count};
      ReportRow row{spec.Label(), "min", {}};
      std::vector<const CellResults*> row_cells;
      for (const auto& col : columns) {
        CellKey k{workload, unit, count, col.system, col.nodes, col.network, col.variant};
        const CellResults* cell = Find(k);
        row_cells.push_back(cell);
        Resolved r = Resolve(cell, get, 1.0 / 60.0, "min", FormatMinutes);
        row.cells.push_back(ValueCell(col.label, r, FormatMinutes));
        if (cell) placed_.push_back({row.label, col.label, cell});
        tabulated_.insert(k);
      }
      // Efficiency: baseline column / the candidate column on the same node count
      // (of the same variant when there is one; of several, e.g. one per network, the
      // first whose cell in this row has a value, so that an empty sibling column never
      // hides a ratio; the sentence names both networks).
      ReportRow eff{row.label, "×", {}};
      for (size_t j = 0; j < columns.size(); ++j) {
        const Column& col = columns[j];
        if (col.system != o_.baseline_system) {
          eff.cells.push_back(UnitRatioCell(row.cells[j], row.cells[j]));
          continue;
        }
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
        if (partner < 0) {
          eff.cells.push_back(MarkerCell(col.label, kDash));
          continue;
        }
        const ReportCell& b = row.cells[j];
        const ReportCell& s = row.cells[partner];
        ReportCell ratio = RatioCell(col.label, b, s, runs_);
        eff.cells.push_back(ratio);
        if (ratio.value) {
          std::vector<std::string> nets;
          if (!col.network.empty()) nets.push_back(col.system + " over " + col.network);
          if (!columns[partner].network.empty()) nets.push_back(columns[partner].system + " over " + columns[partner].network);
          // A speed-up is read next to the held-out loss: say when the candidate's is worse.
          std::string clause;
          Resolved eb = Resolve(row_cells[j], eval, 1.0, "", FormatLoss);
          Resolved es = Resolve(row_cells[partner], eval, 1.0, "", FormatLoss);
          if (eb.value && es.value && *es.value > *eb.value && FormatLoss(*es.value) != FormatLoss(*eb.value)) {
            clause = fmt::format(*ratio.value >= 1 || FormatRatio(*ratio.value) == "1.00"
                                     ? ", but its held-out loss is {} vs {} for {}"
                                     : ", and its held-out loss is also worse: {} vs {} for {}",
                                 FormatLoss(*es.value), FormatLoss(*eb.value), o_.baseline_system);
          }
          out_.sentences.push_back(Sentence(o_.candidate_system, o_.baseline_system + " on " + NodesText(col.nodes),
                                            ratio, row.label, Join(nets, ", "),
                                            {{o_.baseline_system, &b}, {o_.candidate_system, &s}}, clause));
        } else if (!ratio.refused.empty()) {
          out_.sentences.push_back(RefusedSentence(o_.candidate_system, o_.baseline_system + " on " + NodesText(col.nodes),
                                                   row.label, ratio));
        }
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
    auto wall = [](const Entry& e) { return WallFigure(e); };
    auto tgs = [](const Entry& e) { return NamedFigure(e, metric::kTgs); };
    auto tgs_cell = [&](const std::string& column, const CellResults* cell) {
      Resolved r = Resolve(cell, tgs, 1.0, "", FormatOne);
      if (!r.any) {
        r = Resolved();
        r.marker = kDash;
      }
      return ValueCell(column, r, FormatOne);
    };
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
      std::string label = RowSpec{k.workload, k.length_unit, k.length_count}.Label() + " — " + k.system + " " +
                          NodesText(k.nodes) + (k.network.empty() ? "" : " (" + k.network + ")") +
                          (k.variant.empty() ? "" : " [" + k.variant + "]");
      ReportRow row{label, "", {}};
      ReportCell t1 = ValueCell(t.columns[0], Resolve(Find(one), wall, 1.0 / 60.0, "min", FormatMinutes), FormatMinutes);
      ReportCell tn = ValueCell(t.columns[1], Resolve(Find(k), wall, 1.0 / 60.0, "min", FormatMinutes), FormatMinutes);
      ReportCell n = MarkerCell(t.columns[2], "");
      n.value = k.nodes;
      n.text = std::to_string(k.nodes);
      ReportCell eff = MarkerCell(t.columns[3], kDash);
      if (t1.value && tn.value && *tn.value > 0 && !CheckRatioSides(t1, tn, runs_, &eff)) {
        eff.origin = RatioOrigin(t1.text, t1.run_id, tn.text, tn.run_id) + "; " + eff.refused;
      } else if (t1.value && tn.value && *tn.value > 0) {
        std::vector<std::string> markers;
        if (t1.marker == "*" || tn.marker == "*") markers.push_back("*");
        if (t1.run_id != tn.run_id) markers.push_back(kDifferentRuns);
        eff.marker = Join(markers, " ");
        eff.value = *t1.value / (k.nodes * *tn.value);
        eff.text = FormatRatio(*eff.value) + (eff.marker.empty() ? "" : " " + eff.marker);
        eff.provenance = (t1.provenance == "measured" && tn.provenance == "measured") ? "measured"
                         : (t1.provenance == "extrapolated" || tn.provenance == "extrapolated") ? "extrapolated"
                                                                                                  : "imported";
        eff.origin = fmt::format("T1 / (N · TN) = {} (run {}) / ({} × {} (run {}))", FormatMinutes(*t1.value),
                                 t1.run_id, k.nodes, FormatMinutes(*tn.value), tn.run_id);
        if (t1.run_id != tn.run_id) eff.origin += std::string("; ") + kDifferentRunsText;
      }
      row.cells = {t1, tn, n, eff, tgs_cell(t.columns[4], Find(one)), tgs_cell(t.columns[5], Find(k))};
      t.rows.push_back(std::move(row));
    }
    out_.tables.push_back(std::move(t));
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
    std::string base_label = o_.baseline_system + " 1 node";
    std::string cand_label = o_.candidate_system + " 1 node";
    if (base) tabulated_.insert(*base);
    if (cand) tabulated_.insert(*cand);

    // Reference values: baseline single-stream on 1 node, per row.
    std::vector<ReportCell> reference;
    for (const auto& spec : kInferenceRows) {
      std::string name = spec.metric;
      Resolved r = Resolve(base_cell, [name](const Entry& e) { return InferenceFigure(e, name); }, 1.0, spec.unit,
                           spec.format);
      reference.push_back(ValueCell(base_label, r, spec.format));
    }

    auto ratio_for = [&](size_t i, const ReportCell& v, const std::string& column) {
      return kInferenceRows[i].higher_is_better ? RatioCell(column, v, reference[i], runs_)
                                                : RatioCell(column, reference[i], v, runs_);
    };
    auto add_sentences = [&](const ReportTable& t, size_t col, const std::string& subject) {
      for (size_t i = 0; i < t.rows.size(); ++i) {
        const ReportCell& ratio = t.efficiency[i].cells[col];
        if (!ratio.value) {
          if (!ratio.refused.empty())
            out_.sentences.push_back(
                RefusedSentence(subject, o_.baseline_system + " on 1 node", kInferenceRows[i].what, ratio));
          continue;
        }
        out_.sentences.push_back(Sentence(subject, o_.baseline_system + " on 1 node", ratio,
                                          kInferenceRows[i].what, "",
                                          {{o_.baseline_system, &reference[i]},
                                           {o_.candidate_system, &t.rows[i].cells[col]}}));
      }
    };

    // (a) single-stream: baseline 1 node | candidate 1 node single-stream.
    {
      ReportTable t;
      t.id = "inference-single-stream";
      t.title = "Inference, single-stream";
      t.columns = {base_label, cand_label + " (single-stream)"};
      const CellResults* cand_cell = cand ? Find(*cand) : nullptr;
      for (size_t i = 0; i < std::size(kInferenceRows); ++i) {
        const auto& spec = kInferenceRows[i];
        std::string name = spec.metric;
        Resolved r = Resolve(cand_cell, [name](const Entry& e) { return InferenceFigure(e, name); }, 1.0,
                             spec.unit, spec.format);
        ReportRow row{spec.label, spec.unit, {reference[i], ValueCell(t.columns[1], r, spec.format)}};
        row.cells[0].column = t.columns[0];
        ReportRow eff{spec.label, "×",
                      {UnitRatioCell(row.cells[0], row.cells[1]), ratio_for(i, row.cells[1], t.columns[1])}};
        t.rows.push_back(row);
        t.efficiency.push_back(eff);
      }
      if (base_cell) placed_.push_back({"inference", t.columns[0], base_cell});
      if (cand_cell) placed_.push_back({"inference", t.columns[1], cand_cell});
      if (base_cell) series_.push_back({base_label + " single-stream", base_cell});
      if (cand_cell) series_.push_back({cand_label + " single-stream", cand_cell});
      add_sentences(t, 1, o_.candidate_system + " single-stream on 1 node");
      if (base_cell || cand_cell) out_.tables.push_back(std::move(t));
    }

    // (b) multi-inference: baseline "no solution" | candidate multi-inference per node count.
    if (!cand_multi.empty()) {
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
      std::vector<std::string> subjects;
      for (const auto& k : keys) {
        std::string label = o_.candidate_system + " " + NodesText(k.nodes);
        if (networks[k.nodes].size() > 1 && !k.network.empty()) label += " (" + k.network + ")";
        t.columns.push_back(label);
        subjects.push_back(o_.candidate_system + " multi-inference on " + NodesText(k.nodes) +
                           (k.network.empty() ? "" : " over " + k.network));
        tabulated_.insert(k);
      }
      for (size_t i = 0; i < std::size(kInferenceRows); ++i) {
        const auto& spec = kInferenceRows[i];
        std::string name = spec.metric;
        ReportRow row{spec.label, spec.unit, {MarkerCell(t.columns[0], kNoSolution)}};
        ReportRow eff{spec.label, "×", {MarkerCell(t.columns[0], kNoSolution)}};
        for (size_t j = 0; j < keys.size(); ++j) {
          Resolved r = Resolve(Find(keys[j]), [name](const Entry& e) { return InferenceFigure(e, name); }, 1.0,
                               spec.unit, spec.format);
          row.cells.push_back(ValueCell(t.columns[j + 1], r, spec.format));
          eff.cells.push_back(ratio_for(i, row.cells.back(), t.columns[j + 1]));
        }
        t.rows.push_back(row);
        t.efficiency.push_back(eff);
      }
      for (size_t j = 0; j < keys.size(); ++j) {
        placed_.push_back({"inference", t.columns[j + 1] + " (multi-inference)", Find(keys[j])});
        series_.push_back({t.columns[j + 1] + " multi-inference", Find(keys[j])});
        add_sentences(t, j + 1, subjects[j]);
      }
      out_.tables.push_back(std::move(t));
    }
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
        present = Resolve(p.cell, [name](const Entry& e) { return NamedFigure(e, name); }, 1.0, "",
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
        Resolved r = Resolve(p.cell, [name](const Entry& e) { return NamedFigure(e, name); }, 1.0, "",
                             specs[i].format);
        if (!r.any) {
          r = Resolved();
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
        for (const ReportCell& cell : row.cells) {
          bool random = false;
          for (const CellSource& src : cell.sources) random |= random_.count({src.run_id, src.case_id}) > 0;
          if (random) cells.push_back(row.label + " — " + cell.column);
        }
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
      FigureFn get = inference ? FigureFn([](const Entry& e) { return InferenceFigure(e, metric::kTokensPerSecond); })
                               : FigureFn([](const Entry& e) { return WallFigure(e); });
      const double scale = inference ? 1.0 : 1.0 / 60.0;
      const std::string unit = inference ? "tokens/s" : "min";
      auto format = inference ? FormatTokensPerSecond : FormatMinutes;
      ChartSeriesInput series;
      series.label = KeyText(k);
      for (const auto& [run_id, entries] : by_run) {
        CellResults one;
        one.ok_by_run[run_id] = entries;
        Resolved r = Resolve(&one, get, scale, unit, format);
        if (!r.value) continue;
        series.points.push_back({static_cast<double>(run_id), *r.value});
        series.titles.push_back(fmt::format("run {}: {} {}{}{}", run_id, format(*r.value), unit,
                                            r.marker == "*" ? " *" : "",
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
        for (const auto& r : e.c->requests) {
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
          row.seconds_text = fmt::format("{:.3f}", r.seconds);
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
  std::map<CellKey, std::map<int64_t, std::vector<Entry>>> history_;  // ok results by run, all runs read
};

}  // namespace

std::string FormatMinutes(double minutes) { return FormatDecimals(minutes, 1); }
// Half-way cases round away from zero, like FormatPercent (3.125 → "3.13", 313 %).
std::string FormatRatio(double ratio) { return fmt::format("{:.2f}", std::round(ratio * 100) / 100); }
std::string FormatPercent(double ratio) { return fmt::format("{}", std::llround(ratio * 100)); }

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
    data.runs.push_back({r->run.id, r->run.kind, r->run.plan_name, r->run.started_at, r->run.status, r->run.source});
    for (const auto& c : r->cases) {
      const auto& rec = c.record;
      if (!options.model.empty() && rec.model != options.model) continue;
      auto it = builders.try_emplace(rec.model, rec.model, options, index).first;
      Entry e{&r->run, &c};
      if (rec.status == CaseStatus::kOk) {
        it->second.AddOk(KeyOf(rec), e);
      } else {
        it->second.AddFailure(KeyOf(rec), e);
      }
    }
  }
  // History: every run of the input up to history_through, selected or not.
  for (const auto& r : input.runs) {
    if (options.history_through > 0 && r.run.id > options.history_through) continue;
    for (const auto& c : r.cases) {
      if (c.record.status != CaseStatus::kOk) continue;
      auto it = builders.find(c.record.model);
      if (it == builders.end()) continue;  // a model the selected runs do not report
      it->second.AddHistory(KeyOf(c.record), Entry{&r.run, &c});
    }
  }
  for (auto& [_, b] : builders) data.models.push_back(b.Build());

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
