#ifndef PROTOCOL_REPORT_REPORT_DATA_H_
#define PROTOCOL_REPORT_REPORT_DATA_H_

// The report model: what a report says, before it is rendered. ComputeReport
// is pure (no store, no files, no clock): it takes the stored records as plain
// vectors (ReportInput, filled by collect.h from a Store, or by tests) and
// returns every table, ratio, sentence and appendix line. docs/report.md gives
// the formulas; the renderers (render.h, csv.h, report_json.h) only lay it out.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/formats/numbers.h"
#include "report/report_options.h"
#include "report/formats/chart.h"
#include "runner/analysis/compare.h"
#include "runner/analysis/compare_stats.h"
#include "runner/store/records.h"

namespace protocol {

// ---- input: the stored records -------------------------------------------

struct ReportCaseInput {
  CaseRecord record;
  std::vector<Measurement> measurements;
  std::vector<RequestSample> requests;
  std::vector<EvalPoint> eval_curve;  // training: the held-out loss curve, by step (may be empty)
  // The case's facts (Store::FactsOfCase): the report reads the network's
  // label and nominal rate beside the link measured (link_label.h).
  std::vector<std::pair<std::string, std::string>> facts;
  // The hardware sampled while it ran (Store::TelemetryOfCase); may be empty.
  std::vector<TelemetrySample> samples;
};

struct ReportRunInput {
  RunRecord run;
  RunContextFacts context;             // Store::GetContext: the machine fingerprint of a ratio's sides
  std::vector<ReportCaseInput> cases;  // in row order
};

struct ReportInput {
  std::vector<ReportRunInput> runs;  // any order; ComputeReport orders by run id
  // Ok cases read for the history charts only, never tabulated (collect.h:
  // the cases of `runs` are only those a report shows, these the others,
  // each with just its identity and the measurements a chart plots). Tests
  // may leave it empty and pass every case in `runs`.
  std::vector<ReportRunInput> history_only;
};

// ---- output: the report -----------------------------------------------------

// One stored case behind a cell (the HTML provenance appendix).
struct CellSource {
  int64_t run_id = 0;
  std::string case_id;
  int repeat = 0;
  std::string value_text;   // "120.0 min", "not provided"
  std::string how;          // "measured" | "extrapolated" | "imported" | "measured, derived from 3 requests"
  std::string detail;       // extrapolated: the method; imported: the source; "" otherwise
  std::string log_sha256;   // CaseRecord::log_sha256; "" when not stored
  std::string plan_sha256;  // RunRecord::plan_sha256 of its run; "" when not stored
};

// One cell of a table: a value, a ratio, or a reason why there is none.
struct ReportCell {
  std::string column;           // the column header it sits under
  std::optional<double> value;  // in the row's unit; absent when text is a marker alone
  std::string text;             // as shown: "12.1", "12.1 *", "12.1 !", "X", "–", "no solution", "3.21", "1.04 ~"
  // "" | "*" | "X" | "–" | "no solution"; ratio cells also "~" (interval
  // crosses 1) or "* ~" (both).
  std::string marker;
  std::string provenance;       // "measured" | "extrapolated" | "prefix" | "declared" (X) | "imported" | "" (no value)
  // Value cells: the largest metric::kContention among the cases shown when
  // one ran contended (records.h ContendedShare); the text ends with the
  // marker "!" (not in `marker`: it goes with any other).
  std::optional<double> contended;
  // Value cells of multi-node cases: their link, measured before the first
  // step, was more than metric::kLinkLabelFactor away from their network
  // label's nominal rate (link_label.h); the text ends with the marker "≠"
  // and `origin` says both rates (it gives the measured link of every such cell).
  bool link_off_label = false;
  std::string origin;           // where the number came from (appendix text, HTML title)
  // Value cells: the values combined into `value` (display unit), one per
  // repeat of the winning run, in stored order.
  std::vector<double> repeats;
  // Ratio cells: 95 % bootstrap interval of the ratio of medians over the
  // repeats (compare_stats.h); absent with fewer than 3 repeats on a side.
  std::optional<RatioInterval> interval;
  std::string interval_note;  // "" | "no interval (fewer than 3 repeats)" | ...
  // Value cells: every case of the winning run that gave a figure.
  std::vector<CellSource> sources;
  // Value cells: the run whose figures are shown (the winning run); 0 when none.
  int64_t run_id = 0;
  // Ratio cells (efficiency coefficients, scaling efficiency) whose two sides
  // have a figure: the run of the numerator and of the denominator (each
  // side's newest run, chosen independently). Different runs: the ratio is
  // marked "†" (sides from different runs). Different machine fingerprints
  // (kFingerprintKeys of compare.h; both runs of kind "run"): no ratio, the
  // cell shows "–" and `refused` says why. 0 / "" otherwise.
  int64_t numerator_run_id = 0;
  int64_t denominator_run_id = 0;
  std::string refused;  // "no ratio: run 3 and run 5 ran on different machines (cpu_cores: 8 vs 16)"
};

struct ReportRow {
  std::string label;  // "pretrain 1000 steps", "tokens per second", ...
  std::string unit;   // "min", "s", "s/token", "tokens/s", "×", "" (mixed)
  std::vector<ReportCell> cells;  // one per column, in column order
};

struct ReportTable {
  // "training" | "baselines" | "scaling" | "inference-single-stream" | "inference-multi" | "quality" |
  // "metrics"
  std::string id;
  std::string title;  // "Training (minutes)", ...
  std::string unit;   // unit of every value row, or "" when rows differ
  std::vector<std::string> columns;
  std::vector<ReportRow> rows;
  // Efficiency coefficients: same rows and columns as `rows` (row i, column j
  // is the ratio for rows[i].cells[j]); empty for tables without ratios.
  std::vector<ReportRow> efficiency;
  std::string note;  // shown under the table (the formula it uses); "" for none
};

// "run 3, case 2.1.1.1 (repeats 3: median 12.1 min, spread 11.9–12.4)".
struct AppendixEntry {
  std::string table;   // table title
  std::string row;
  std::string column;
  std::string text;
};

// One ratio whose two sides have a figure, with the runs behind them (the
// HTML appendix, JSON ratios[], CSV ratio_* columns).
struct RatioEntry {
  std::string table;  // table title
  std::string row;
  std::string column;
  std::string text;   // as shown: "3.00", "3.00 †", "–"
  int64_t numerator_run_id = 0;
  int64_t denominator_run_id = 0;
  std::string note;   // "same run" | "sides from different runs" | ReportCell::refused
};

// The provenance of one figure of one cell: the table cell and one case behind it.
struct ProvenanceEntry {
  std::string table;  // table title
  std::string row;
  std::string column;
  CellSource source;
};

// The history of one case identity (model, workload, row length, system,
// nodes, network, variant) over the stored runs: one point per run with an ok
// figure (median of that run's repeats). Present only with >= 2 points.
struct HistoryChart {
  std::string identity;  // "pretrain 1000 steps fsdp 1 node"
  std::string y_label;   // "wall time (min)" | "tokens per second"
  Chart chart;           // x = run id
};

// A case that did not end ok; never hidden.
struct FailureEntry {
  int64_t run_id = 0;
  std::string case_id;
  int repeat = 0;
  std::string status;  // CaseStatusName
  std::string reason;
  std::string text;    // "run 4, case 2.1.1.2 (repeat 1): failed — <reason>"
};

// One row of the verdict table a report opens with: a table row with a ratio
// (an efficiency coefficient, a scaling efficiency), its short cells
// (`compared` … `caveats`), the sentence a reader should conclude from it
// (`conclusion`), and the whole of it in one long sentence (`text`: the
// held-out loss it costs, the bytes it moved, every note) (docs/report.md,
// "Verdict"). The parts are kept apart so that a later pass can qualify a
// line (append to `qualifiers` and `caveats`) before ComputeReport composes
// `text` and `conclusion`.
struct VerdictLine {
  // the table id: "training" | "baselines" | "scaling" | "inference-single-stream" | "inference-multi"
  std::string table;
  std::string row;    // the row: "pretrain 1000 steps", "tokens per second"
  std::string scope;  // which columns: "1 node", "2 nodes (fsdp over 80G, share over 10G)", "share 1 → 2 nodes"
  // "share is 3.00× faster than fsdp", "scaling efficiency 0.67 (…)", or
  // "no ratio: run 1 and run 2 ran on different machines (…)".
  std::string claim;
  // Training rows: "held-out loss 3.1000 vs 2.9500 for fsdp, +5.08 %", or
  // which side stored none; "" where it does not apply.
  std::string quality;
  // Training rows: "moving 0 B within groups and 15.01 MiB between groups",
  // or "bytes moved not stored"; "" where it does not apply.
  std::string bytes;
  // Training rows: the speed-up at equal quality (each side's training time to
  // the target held-out loss), "1.31× at equal quality", or why there is none
  // ("fsdp's target not reached (best 5.41 at step 12)"); "" where not computed.
  std::string equal_quality;
  // Its verdict-table cell: "1.31×", "not reached" (a side never reached the
  // target), or "–" (no curve, no point at the row's length).
  std::string equal_quality_cell;
  // Expected against measured wall time of each side (the time estimate):
  // "fsdp 1.1× its estimate, share 0.9×"; "" where no side was estimated.
  std::string expected;
  // Its verdict-table cell: each side's measured / expected in the same
  // order, "0.61×, 0.51×".
  std::string expected_cell;
  // Energy per token of each side (telemetry_figures.h), where both stored
  // one: "energy per token 0.41 J vs 0.66 J for fsdp, -37.9 %"; "" otherwise.
  std::string energy;
  // Its verdict-table cell: "0.41 vs 0.66 J (-37.9 %)".
  std::string energy_cell;
  // What qualifies the row as a whole, in order: "its 2 nodes are one host
  // (localhost)". Another qualifier (e.g. a contention note) is appended here.
  std::vector<std::string> qualifiers;
  // The ratio's own notes (sentences.h: inputs not measured end to end,
  // sides from different runs, the interval).
  std::vector<std::string> notes;
  // "tiny pretrain 12 steps, 1 node: share is 1.42× faster than fsdp (held-out
  // loss …), moving …; qualifiers; notes."
  std::string text;

  // ---- the cells of its table row (short; "" where a cell does not apply)
  // What is compared: "pretrain 12 steps, 2 nodes: share vs fsdp-hybrid",
  // "pretrain 12 steps: share 1 → 2 nodes", "inference single-stream, 1 node:
  // share vs fsdp".
  std::string compared;
  // The candidate's speed-up (the ratio, > 1 faster) with its 95 % interval,
  // or the fewest repeats on a side when it has none: "1.42× (1.31–1.55)",
  // "1.42× (n=1)"; a scaling row T1 / TN with its efficiency: "1.41×,
  // efficiency 0.70"; a refused ratio "no ratio".
  std::string speedup;
  // The candidate's held-out loss relative to the baseline's: "+2.3 %";
  // "not stored", "fsdp: not stored"; "" for rows without a loss (inference,
  // scaling).
  std::string loss_difference;
  // bytes_between_nodes of the candidate, then of the baseline, each with
  // the link its ranks measured beside its network label where they did:
  // "13.51 MiB (10G, measured 9.4 Gbit/s) vs 328.82 MiB"; "not stored" for a
  // side without; "" on 1 node (verdict.h BytesBetweenNodesCell).
  std::string bytes_between_nodes;
  // Short tags, each explained once in ModelReport::verdict_legend:
  // "contended 40 %", "one host", "link ≠ label", "random weights", "extrapolated", "first
  // steps", "imported", "different runs", "not significant", "different
  // machines", "different work".
  std::vector<std::string> caveats;
  // What the row finds, before its certainty and caveats: "share is 1.13×
  // faster than fsdp, its held-out loss 2.3 % higher".
  std::string finding;
  // What a reader should conclude, in one plain sentence (VerdictConclusion,
  // verdict.h): "pretrain 12 steps, 1 node: share is 1.13× faster than fsdp,
  // its held-out loss 2.3 % higher; one repeat, so no interval yet."
  std::string conclusion;
};

// One entry of the legend under the verdict table: a caveat tag (or the
// "n=1" of a speed-up) and what it means.
struct LegendEntry {
  std::string tag;      // "one host", "contended N %", "n=1"
  std::string meaning;  // "the nodes of a multi-node side ran on one machine: …"
};

// One inference request, for the per-request table and the chart.
struct RequestRow {
  std::string series;  // "fsdp 1 node single-stream", ...
  int64_t run_id = 0;
  std::string case_id;
  int repeat = 0;
  int index = 0;
  int max_new_tokens = 0;
  int generated_tokens = 0;
  double seconds = 0;
  std::string seconds_text;  // "%.3f"
  std::string answer;
};

// One compared training row at equal quality (docs/report.md, "Speed-up at
// equal quality"): the figures behind VerdictLine::equal_quality, and a
// chart of both sides' held-out loss against training time.
struct EqualQualityRow {
  std::string row;             // "pretrain 12 steps"
  std::string scope;           // "1 node", as the verdict line's
  std::string target_text;     // "5.4107 (fsdp's at step 12)"; "–" when none
  std::string baseline_text;   // its time to target (time_to_target.h TargetTimeText); "–"
  std::string candidate_text;
  std::string ratio_text;      // at equal quality: "1.31"; "–" when none
  std::string steps_ratio_text;  // at equal steps, as the training table shows it: "1.65"
  std::string note;            // why no ratio at equal quality; "" when there is one
  Chart chart;                 // no series when neither side stored a curve
};

// One compared row's hardware over time (docs/report.md, "Hardware over
// time"): each side's GPU utilization and link throughput against the
// seconds since its case began (telemetry_figures.h), the sides on one axis.
struct HardwareRow {
  std::string compared;  // the verdict line's: "pretrain 12 steps, 1 node: share vs fsdp"
  Chart gpu;             // GPU use (%); no series when no side sampled a busy GPU
  Chart link;            // link (MB/s, sent + received); no series when no side sampled an interface
};

struct ModelReport {
  std::string model;
  // One line per table row with a ratio (or a refused one), in table order.
  std::vector<VerdictLine> verdict;
  // Each caveat tag used by `verdict` (and the "n=" of its speed-ups),
  // explained once, in a fixed order.
  std::vector<LegendEntry> verdict_legend;
  // training, baselines, scaling, inference-single-stream, inference-multi, quality, metrics (present ones)
  std::vector<ReportTable> tables;
  std::vector<std::string> sentences;   // one per ratio with a value (or refused), the baseline's said once
  std::vector<AppendixEntry> appendix;  // one per cell with a stored figure
  // Every case of this model not ok, but for those superseded: a failure
  // older than its cell's newest ok run is not listed.
  std::vector<FailureEntry> failures;
  std::vector<std::string> untabulated; // results that fit no table column, said so
  Chart chart;                          // generation time vs answer length; no series when no samples
  std::vector<RequestRow> requests;      // per series, each case's requests in request order (index)
  // Every figure of every value cell (training, inference, quality, metrics
  // tables), one entry per case behind it.
  std::vector<ProvenanceEntry> provenance;
  // Every ratio of every table whose two sides have a figure.
  std::vector<RatioEntry> ratios;
  // One per training verdict line with a ratio at equal steps where a side
  // stored a held-out curve, in the verdict's order.
  std::vector<EqualQualityRow> equal_quality;
  // Per verdict line of two sides where a side sampled its hardware.
  std::vector<HardwareRow> hardware;
  // Over every run of the input up to ReportOptions::history_through (not
  // only the selected ones).
  std::vector<HistoryChart> history;
};

struct ReportRunSummary {
  int64_t id = 0;
  std::string kind;  // "run" | "import"
  std::string plan_name;
  std::string started_at;
  std::string status;
  std::string source;
};

struct ReportData {
  int schema_version = 1;
  std::string title = "Efficiency report";
  std::string baseline_system;
  std::string candidate_system;
  // FurtherBaselines(options): the systems set against the candidate beside
  // the baseline ("Against each baseline").
  std::vector<std::string> further_baseline_systems;
  // The runs read, by id: those a figure shown or a failure listed comes
  // from (a selected run that gave neither is not named).
  std::vector<ReportRunSummary> runs;
  std::vector<ModelReport> models;     // by model name
  // Non-empty when there is nothing to tabulate ("The store holds no runs.").
  std::string empty_message;
};

// Builds the report from records. Pure and total: an empty input gives a
// report whose empty_message says so. Filters by options.model and
// options.run_ids (empty = all) itself, so callers may pass more: the tables
// use the selected runs only, the history charts (when options.history)
// every run of the input and of input.history_only with id <=
// options.history_through (0: all).
ReportData ComputeReport(const ReportInput& input, const ReportOptions& options);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_REPORT_DATA_H_
