#ifndef PROTOCOL_REPORT_TABLES_RATIOS_H_
#define PROTOCOL_REPORT_TABLES_RATIOS_H_

// Ratios between two cells (docs/report.md, "Ratios from one run", "Ratios
// between the same work"): the runs behind each side, the refusals (different
// machines, different work), the markers (*, †, ~) and the bootstrap
// interval. Internal to src/report.

#include <cstdint>
#include <map>
#include <string>

#include "report/report_data.h"
#include "report/tables/stored_plan.h"

namespace protocol {

inline constexpr const char* kNotSignificant = "~";        // the ratio's interval crosses 1
inline constexpr const char* kDifferentRuns = "\u2020";    // "†": the two sides come from different runs
inline constexpr const char* kDifferentRunsText = "sides from different runs";
inline constexpr const char* kRefusedPrefix = "no ratio: ";  // ReportCell::refused

// The runs a report reads, by id: the two sides of a ratio are checked
// against their context (machine) and stored plan (work, hosts). Holds
// pointers into the input; the plan of a run is parsed once, when first asked.
class RunIndex {
 public:
  void Add(const ReportRunInput& r) { runs_[r.run.id] = &r; }

  // Why runs `a` and `b` cannot be the two sides of one ratio: both are runs
  // of kind "run" (an import records no machine) and their machine
  // fingerprints differ (FingerprintDifferences, compare.h: the rule of
  // `protocol compare`). "" when they can.
  std::string MachineDifference(int64_t a, int64_t b) const;

  // Why the cases behind two cells did not do the same work (work_settings.h):
  // "the sides did different work (seq_len: 128 vs 256)"; "" when they did, or
  // when a side's settings are unknown (an import, a plan this build cannot read).
  std::string WorkDifference(const ReportCell& num, const ReportCell& den) const;

  // What the stored plan of the first case behind `cell` says about it; null
  // when unknown (no case, an import, a plan this build cannot read).
  const StoredCase* CaseOf(const ReportCell& cell) const;

 private:
  std::map<int64_t, const ReportRunInput*> runs_;
  mutable std::map<int64_t, std::map<std::string, StoredCase>> plans_;
};

// The efficiency cell of a reference column: 1 when it has a value and so
// does the candidate it is compared with (`candidate`; the cell itself when
// the reference is the candidate's own column). An empty candidate gives no
// number in its row: "X" when the reference is not provided, else "–".
ReportCell UnitRatioCell(const ReportCell& value_cell, const ReportCell& candidate);

// The runs of a ratio's two sides, and whether it may be computed at all:
// sets numerator_run_id / denominator_run_id, and refused (with the cell shown
// as "–") when the sides ran on different machines or did different work
// (work_settings.h). Returns whether the ratio may be computed.
bool CheckRatioSides(const ReportCell& num, const ReportCell& den, const RunIndex& runs, ReportCell* c);

// "12.0 (run 3) / 4.0 (run 5); sides from different runs".
std::string RatioOrigin(const std::string& num_text, int64_t num_run, const std::string& den_text, int64_t den_run);

// ratio = numerator / denominator, marked `*` when an input is, `†` when the
// two sides come from different runs, and `~` when the bootstrap interval of
// median(num) / median(den) over the repeats (>= 3 on each side) contains 1
// (compare_stats.h's percentile bootstrap with its one set of settings,
// kBootstrapSeed etc., as `protocol compare`: the same report every time).
// Refused ("–", `refused` says why) when the sides' runs ran on different
// machines or did different work.
ReportCell RatioCell(const std::string& column, const ReportCell& num, const ReportCell& den, const RunIndex& runs);

// "measured" when both sides are, else "extrapolated" when a side is, else "imported".
std::string RatioProvenance(const ReportCell& a, const ReportCell& b);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_RATIOS_H_
