#ifndef PROTOCOL_REPORT_TABLES_CELLS_H_
#define PROTOCOL_REPORT_TABLES_CELLS_H_

// The figure of one report cell (docs/report.md, "Cells"): the stored results
// of a cell grouped by run, the figure each case gives (wall time, an
// inference figure, a named metric), and the winning run's repeats combined
// into one value with its marker, provenance and origin text. Internal to
// src/report: ModelBuilder (model_builder.h) lays these cells out in tables.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/report_data.h"
#include "runner/store/link_label.h"

namespace protocol {

inline constexpr const char* kDash = "–";  // U+2013: no value / no ratio
inline constexpr const char* kNoSolution = "no solution";
// After a value: a case behind it ran contended (ReportCell::contended).
inline constexpr const char* kContendedMark = "!";
// After a value: the link a multi-node case measured is off its network's
// label (ReportCell::link_off_label; link_label.h).
inline constexpr const char* kLinkOffLabelMark = "≠";

// One stored case and the run it belongs to.
struct CaseEntry {
  const RunRecord* run;
  const ReportCaseInput* c;
  // The length this entry stands for when it is not the case's own (a figure
  // at a report_as / not_provided length): only its wall time is shown there.
  std::string length_unit;
  int64_t length_count = 0;
};

// All results of one cell: ok cases per run id, and the cases not ok (those
// the report lists: a failure older than the cell's newest ok run is not).
struct CellResults {
  std::map<int64_t, std::vector<CaseEntry>> ok_by_run;
  std::vector<const FailureEntry*> failures;
  int64_t WinningRun() const { return ok_by_run.empty() ? 0 : ok_by_run.rbegin()->first; }
  const std::vector<CaseEntry>* Winning() const {
    return ok_by_run.empty() ? nullptr : &ok_by_run.rbegin()->second;
  }
};

// One stored figure of one case, in the measurement's unit.
struct CaseFigure {
  std::optional<double> value;
  std::string marker;  // "" | "*" | "X"
  Provenance how = Provenance::kMeasured;
  std::string method;
  std::string source;
  int derived_from = 0;  // > 0: derived from this many request samples
};

// Training time: the wall_seconds figure for the entry's length (the case's
// own, or the one a report_as / not_provided figure carries).
std::optional<CaseFigure> WallFigure(const CaseEntry& e);
// The first measurement called `name`; nullopt when none, and at a length not
// the case's own (its quality and metrics are the whole run's).
std::optional<CaseFigure> NamedFigure(const CaseEntry& e, const std::string& name);
// Inference figures, derived from request samples when not stored:
// total = Σ seconds, s/token = Σ seconds / Σ generated, tokens/s = Σ generated / Σ seconds.
std::optional<CaseFigure> InferenceFigure(const CaseEntry& e, const std::string& name);

// A cell's figure: the winning run's repeats combined.
struct ResolvedCell {
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
  std::optional<double> contended;  // the largest contention of a contended case shown
  bool link_off_label = false;      // the link of the cases shown is off their label (CellLink)
};

using FigureFn = std::function<std::optional<CaseFigure>(const CaseEntry&)>;
using FormatFn = std::function<std::string(double)>;

// The median of the winning run's figures (`get`), scaled by `scale` (the
// stored unit to the display unit: 1/60 for minutes), with its marker,
// provenance and origin ("run 3, case 2.1.1.1 (measured: 12.1 min)"). A cell
// without an ok result (or null) gives "–" and says why.
ResolvedCell Resolve(const CellResults* cell, const FigureFn& get, double scale, const std::string& unit,
                     const FormatFn& format);

// What a history point shows of one run's cases: the median of their figures
// (`get`, scaled as for Resolve), whether one is marked *, and how many were
// combined; the value of Resolve over that run alone, without its texts.
struct RunFigure {
  std::optional<double> value;
  bool extrapolated = false;
  int n = 0;
};
RunFigure MedianFigure(const std::vector<CaseEntry>& entries, const FigureFn& get, double scale);

// The link of a multi-node cell's cases shown (those of the winning run that
// measured one, link_label.h): the median of their bus bandwidths and of
// their latencies, with the network label and nominal rate of the first that
// stored them; nullopt for a cell on one node, without an ok result, or whose
// cases measured no link. Resolve appends it to a cell's origin ("; link:
// 1.17 GB/s bus bandwidth (9.4 Gbit/s), latency 85 µs; its network '10G' is
// nominally 10 Gbit/s") and marks the cell when it is off the label.
std::optional<CaseLink> CellLink(const CellResults* cell);

// The table cell of a resolved figure under `column`.
ReportCell ValueCell(const std::string& column, const ResolvedCell& r, const FormatFn& format);
// A cell showing only `marker` ("–", "no solution", "X").
ReportCell MarkerCell(const std::string& column, const std::string& marker);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_CELLS_H_
