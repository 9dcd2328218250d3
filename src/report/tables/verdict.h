#ifndef PROTOCOL_REPORT_TABLES_VERDICT_H_
#define PROTOCOL_REPORT_TABLES_VERDICT_H_

// The verdict a report opens with (docs/report.md, "Verdict"): one
// VerdictLine (report_data.h) per table row with a ratio, its parts made
// here from the cells the tables already hold, then composed by VerdictText.
// A figure not stored is said to be missing, never guessed. Internal to
// src/report.

#include <string>
#include <utility>
#include <vector>

#include "report/tables/cells.h"
#include "report/tables/ratios.h"
#include "report/report_data.h"

namespace protocol {

// The candidate's held-out loss (eval_loss) against the baseline's, each its
// cell's median over the winning run: "held-out loss 3.1000 vs 2.9500 for
// fsdp, +5.08 %" (the relative difference, candidate over baseline); "no
// held-out loss stored", or "held-out loss of fsdp not stored".
std::string HeldOutLossPhrase(const CellResults* baseline, const CellResults* candidate,
                              const std::string& baseline_name, const std::string& candidate_name);

// The bytes the candidate moved: "moving 0 B within groups and 15.01 MiB
// between groups" (bytes_within_groups, bytes_between_groups), "moving 15.01
// MiB, not split by group" (bytes_communicated only), or "bytes moved not
// stored"; then the baseline's total when it stored one: " (fsdp 375.33 MiB)".
// With `between_nodes` (a row on more than one node), each side's
// bytes_between_nodes where stored, as the part of its total that crossed
// between nodes: "…, 15.01 MiB of it between nodes (fsdp 375.33 MiB, 187.67
// MiB of it between nodes)".
std::string BytesMovedPhrase(const CellResults* baseline, const CellResults* candidate,
                             const std::string& baseline_name, bool between_nodes = false);

// A cell's bytes_between_nodes (median of the winning run's cases), binary
// units: "15.01 MiB"; at a row length not the cases' own (a figure computed
// from the first steps of a longer run, or extrapolated) the figure of their
// own length, said so: "40.00 MiB over its own 100 steps". "" when not stored.
std::string BetweenNodesText(const CellResults* cell);

// The candidate's held-out loss against several baselines', each a cell's
// median: "held-out loss 3.1000 vs 2.9500 for fsdp (+5.08 %) and 3.0000 for
// fsdp-hybrid (+3.33 %)"; a baseline without one: ", not stored for
// fsdp-hybrid"; "no held-out loss stored" when no side has one, "held-out
// loss of share not stored" when the candidate has none.
std::string HeldOutLossAgainst(const CellResults* candidate, const std::string& candidate_name,
                               const std::vector<std::pair<std::string, const CellResults*>>& baselines);

// The bytes between nodes of the candidate and of each baseline
// (BetweenNodesText): "moving 15.01 MiB between nodes (fsdp 375.33 MiB,
// fsdp-hybrid 40.00 MiB over its own 100 steps)", "bytes between nodes of
// share not stored (fsdp not stored, …)".
std::string BetweenNodesPhrase(const CellResults* candidate, const std::string& candidate_name,
                               const std::vector<std::pair<std::string, const CellResults*>>& baselines);

// The qualifier of a row whose sides ran their N nodes on one host:
// "the 2 nodes of fsdp and share are one host (localhost)". `sides` are
// (system, the cell shown); "" when no side's nodes are one host.
std::string OneHostQualifier(const RunIndex& runs, int nodes,
                             const std::vector<std::pair<std::string, const ReportCell*>>& sides);

// "{model} {row}, {scope}: {claim} ({quality}), {equal_quality}, {bytes};
// {qualifiers}; {notes}."
std::string VerdictText(const std::string& model, const VerdictLine& line);

// ---- the verdict table (docs/report.md, "Verdict"): its cells, legend and conclusions

// The speed-up cell of a ratio with a value: "1.42× (1.31–1.55)" with its
// 95 % interval, else "1.42× (n=1)", n the fewest repeats on a side.
// REQUIRES: ratio.value.
std::string SpeedupCell(const ReportCell& ratio, const std::vector<std::pair<std::string, const ReportCell*>>& inputs);

// The candidate's held-out loss relative to the baseline's, each its cell's
// median: "+2.3 %"; "not stored" when neither side has one, "fsdp: not
// stored" when one side has none.
std::string LossDifferenceCell(const CellResults* baseline, const CellResults* candidate,
                               const std::string& baseline_name, const std::string& candidate_name);

// How the candidate's held-out loss compares, said after a speed-up: ", its
// held-out loss 2.3 % higher", ", its held-out loss 1.2 % lower", ", at the
// same held-out loss" (equal at 4 decimals); "" when a side has none.
std::string LossClause(const CellResults* baseline, const CellResults* candidate);

// A side's link as its ranks measured it before the first step
// (CellLink), beside its network label, for the bytes column: " (10G,
// measured 9.4 Gbit/s)", ending ": link ≠ label" when it is more than
// metric::kLinkLabelFactor away from the label's nominal rate; " (measured
// 9.4 Gbit/s)" without a label; "" when no link was measured.
std::string MeasuredLinkNote(const CellResults* cell);

// The bytes between nodes of the candidate, then of the baseline
// (BetweenNodesText), each with its MeasuredLinkNote: "13.51 MiB (10G,
// measured 9.4 Gbit/s) vs 328.82 MiB (10G, measured 0.8 Gbit/s: link ≠
// label)", "13.51 MiB vs 328.82 MiB" where no link was measured, "not
// stored" for a side without bytes.
std::string BytesBetweenNodesCell(const CellResults* candidate, const CellResults* baseline);

// The caveat tags of a ratio, in kCaveats order (verdict.cc): "contended 40
// %" (the most of its sides), "link ≠ label" (a side's ReportCell::link_off_label), "extrapolated", "first steps", "imported",
// "different runs", "not significant"; of a refused one "different machines"
// or "different work".
std::vector<std::string> RatioCaveats(const ReportCell& ratio,
                                      const std::vector<std::pair<std::string, const ReportCell*>>& inputs);

// `tags` added to `caveats`, each once, in kCaveats order; of two contended
// tags the larger share is kept.
void AddCaveats(std::vector<std::string>* caveats, const std::vector<std::string>& tags);

// The legend under the verdict table: each tag the lines use, once, in
// kCaveats order, then "n=1" when a speed-up has no interval.
std::vector<LegendEntry> VerdictLegend(const std::vector<VerdictLine>& lines);

// "{row}, {scope}: {finding}; {certainty}; {what the caveats change}." — the
// certainty from the speed-up cell (n, or an interval that crosses 1), the
// caveats that make the figure less sure said plainly.
std::string VerdictConclusion(const VerdictLine& line);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_VERDICT_H_
