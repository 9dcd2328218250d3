#ifndef PROTOCOL_RUNNER_ANALYSIS_COMPARE_H_
#define PROTOCOL_RUNNER_ANALYSIS_COMPARE_H_

// `protocol compare BASELINE CANDIDATE`: per matching case of two stored runs,
// the ratio candidate / baseline of each metric's median over the repeats, a
// bootstrap interval for it (compare_stats.h), and a verdict. docs/regression.md
// is the user-facing description.
//
//   CollectCompareSide: store → CompareSide (records, measurements, context).
//   CompareRuns:        two sides → CompareReport. Pure: no store, no clock.
//   RenderCompareText / CompareToJson: the report as a table or JSON.
//
// Rules (each one tested in tests/runner/analysis/compare_test.cc):
//   - Cases match by case id, else by identity (model, workload, length,
//     system, backend, nodes, topology, network, variant) when exactly one
//     case on the other side has it. A case on one side only is incomparable
//     ("missing in the candidate run").
//   - Matched cases whose identities differ are incomparable, naming each
//     difference ("different topology: rig0:2x4 vs rig0:4x2").
//   - A case with any repeat not ok on a side is incomparable ("failed in the
//     candidate run: repeat 1 failed — <reason>").
//   - Runs whose environment fingerprints differ (run-context keys
//     kFingerprintKeys) make every case incomparable, listing the keys.
//   - Per metric, better direction from kMetricDirections (or "name:lower" /
//     "name:higher" given by the user). worse = the ratio moved against the
//     direction by more than the threshold: ratio > 1 + t (lower is better) or
//     ratio < 1 - t (higher is better). regressed = worse AND, when an interval
//     exists (>= 3 repeats on both sides), the whole interval lies beyond the
//     same bound; improved symmetrically; otherwise unchanged.
//   - The verdict of a case is decided by its primary metric: the wall time
//     (wall_seconds) for training, the total generation time
//     (total_generation_seconds, when measured on both sides; else the wall
//     time) for inference. Every other metric compared is a note: its own
//     ratio and verdict are shown, but do not decide. When metrics are named
//     (CompareOptions::metrics), those decide instead: regressed when any of
//     them regressed, else incomparable when any is, else improved when any
//     improved, else unchanged.
//   - A case with a repeat measured contended on either side (other processes
//     took at least metric::kContendedShare of the CPU: cpu_meter.h) is less
//     reliable: its ratios are shown, its verdict is incomparable, and the
//     reason says which side, which repeats and what the ratio alone would say.
// Only measured figures are compared (never extrapolated or imported ones).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/analysis/compare_stats.h"
#include "runner/base/json.h"
#include "runner/base/status.h"
#include "runner/store/records.h"
#include "runner/store/store.h"

namespace protocol {

enum class Verdict { kImproved, kUnchanged, kRegressed, kIncomparable };
const char* VerdictName(Verdict v);  // "improved" | "unchanged" | "regressed" | "incomparable"

// Which way is better for a metric.
enum class Direction { kLower, kHigher };
const char* DirectionName(Direction d);  // "lower" | "higher"
// The better direction of a well-known metric; nullopt for unknown names.
std::optional<Direction> MetricDirection(const std::string& name);

// Run-context keys whose values must agree for two runs to be comparable.
extern const char* const kFingerprintKeys[6];

// A run's context facts, as Store::GetContext returns them (key, value), in
// stored order; a key appended again later wins.
using RunContextFacts = std::vector<std::pair<std::string, std::string>>;

// The fingerprint keys whose values differ between two runs' contexts, one
// line each in kFingerprintKeys order: "cpu_cores: 8 vs 16" ("(none)" for a
// key a run did not record). Empty: the same machine as far as the
// fingerprint tells. `protocol compare` and the report's ratios use this.
std::vector<std::string> FingerprintDifferences(const RunContextFacts& a, const RunContextFacts& b);
// "environment fingerprint differs: cpu_model, cpu_cores" for differences
// from FingerprintDifferences ("" when there are none).
std::string FingerprintReason(const std::vector<std::string>& differences);

struct CompareOptions {
  double threshold = 0.05;  // fraction: 0.05 = 5 %
  // "name" (a well-known metric) or "name:lower" / "name:higher". Empty: wall_seconds
  // plus every other well-known metric measured on both sides.
  std::vector<std::string> metrics;
  int resamples = kBootstrapResamples;
  uint64_t seed = kBootstrapSeed;
  double confidence = kBootstrapConfidence;
};

// Checks options.metrics; every problem in one message (kInvalidArgument).
Status ValidateCompareOptions(const CompareOptions& options);
// "5%", "5 %", "0.05" → 0.05. kInvalidArgument otherwise or outside [0, 1).
Result<double> ParseThreshold(const std::string& text);

struct CompareCase {
  CaseRecord record;                      // latest row of this (case, repeat)
  std::vector<Measurement> measurements;
};

// One side of a comparison: a run, its context and its case rows.
struct CompareSide {
  RunRecord run;
  RunContextFacts context;
  std::vector<CompareCase> cases;  // in row order; later rows of a (case, repeat) win
};

struct MetricComparison {
  std::string metric;
  Direction direction = Direction::kLower;
  std::string unit;
  std::vector<double> baseline;   // measured values, one per ok repeat
  std::vector<double> candidate;
  std::optional<double> baseline_median;
  std::optional<double> candidate_median;
  std::optional<double> ratio;     // candidate median / baseline median
  std::optional<double> low, high; // bootstrap interval of the ratio
  std::string note;                // "fewer than 3 repeats, no interval", ...
  Verdict verdict = Verdict::kIncomparable;
  bool deciding = false;           // the case's verdict follows this metric (primary or named)
};

struct CaseComparison {
  std::string case_id;           // the candidate's (the baseline's when missing there)
  std::string baseline_case_id;  // differs from case_id when matched by identity
  std::string identity;          // "llama2-7b pretrain 1000 steps fsdp 1 node"
  Verdict verdict = Verdict::kIncomparable;
  std::string reason;            // why incomparable; empty otherwise
  bool contended = false;        // a repeat on a side ran contended (records.h): not decided
  std::vector<MetricComparison> metrics;  // the deciding ones first
  // The deciding metric the verdict rests on (the first that regressed, else
  // was incomparable, else improved, else the first); null without metrics.
  const MetricComparison* Headline() const;
};

struct CompareReport {
  int64_t baseline_run = 0;
  int64_t candidate_run = 0;
  std::string baseline_plan, candidate_plan;
  CompareOptions options;
  std::vector<std::string> environment_differences;  // "cpu_cores: 8 vs 16"
  std::vector<CaseComparison> cases;                  // candidate order, then baseline-only
  int Count(Verdict v) const;
  bool HasRegression() const { return Count(Verdict::kRegressed) > 0; }
  // 1 when any case regressed, else 0 (the CLI contract).
  int ExitCode() const { return HasRegression() ? 1 : 0; }
};

// Reads a run, its context and its cases with their measurements.
Result<CompareSide> CollectCompareSide(Store& store, int64_t run_id);

// REQUIRES: ValidateCompareOptions(options).ok().
CompareReport CompareRuns(const CompareSide& baseline, const CompareSide& candidate,
                          const CompareOptions& options);

// A table for people: one line per (case, metric), then a summary line.
std::string RenderCompareText(const CompareReport& report);
// Everything in the report, schema_version 1.
Json CompareToJson(const CompareReport& report);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_ANALYSIS_COMPARE_H_
