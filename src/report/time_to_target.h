#ifndef PROTOCOL_REPORT_TIME_TO_TARGET_H_
#define PROTOCOL_REPORT_TIME_TO_TARGET_H_

// The speed-up at equal quality (docs/report.md, "Speed-up at equal
// quality"), modelled on MLPerf Training's time-to-train: the training time
// each side needs to reach one held-out loss, read from its stored curve
// (records.h EvalPoint, training.eval_every), and their ratio.
//
//   target   the baseline's held-out loss at the row's length (its final
//            eval_loss), or the plan's quality_target.loss when set;
//   time     the training seconds where a curve first reaches the target
//            (loss <= target), interpolated linearly between the two points
//            that bracket it:
//              t = t_a + (L_a − target) / (L_a − L_b) · (t_b − t_a)
//            for the last point a above the target and the first point b at
//            or below it; a first point already at or below it (step 0)
//            gives its own time;
//   ratio    baseline time / candidate time.
// A side that never reaches the target within its run is "not reached (best
// L at step S)": no ratio then, never an extrapolated one. Pure functions;
// internal to src/report.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/tables/cells.h"
#include "runner/store/records.h"

namespace protocol {

// When one curve first reaches a target loss.
struct TargetTime {
  bool has_curve = false;  // false: no point stored (training.eval_every 0)
  bool reached = false;
  double seconds = 0;      // reached: the training seconds at the target
  // reached: the points it lies between (a = b when the first point meets
  // it, or a point's loss equals the target exactly).
  EvalPoint a, b;
  // Not reached: the lowest loss of the curve and the first step holding it.
  double best_loss = 0;
  int64_t best_step = 0;
};

// The first crossing of `target` by `curve` (points by step). REQUIRES: the
// points ordered by step.
TargetTime TimeToTarget(const std::vector<EvalPoint>& curve, double target);

// The points of `curve` up to `steps` optimizer steps (a row shorter than
// the case, read from its first steps).
std::vector<EvalPoint> CurveUpTo(const std::vector<EvalPoint>& curve, int64_t steps);

// How a side's time was found: "9.81 s, interpolated between step 8 (5.6021
// at 8.02 s) and step 10 (5.3977 at 10.11 s)", "0 s: met at step 0 (5.3000)",
// "12.00 s at step 12 (5.4107)", "not reached (best 5.5335 at step 12)", "no
// held-out curve stored".
std::string TargetTimeText(const TargetTime& t);

// The two sides of a row at one target.
struct EqualQuality {
  double target = 0;
  std::string target_source;  // "fsdp's held-out loss at 12 steps" | "the plan's quality_target"
  TargetTime baseline, candidate;
  std::optional<double> ratio;  // baseline.seconds / candidate.seconds; both reached, candidate's > 0
  std::string why_none;         // no ratio: why ("share: not reached (best 5.5335 at step 12)")
};

// Both sides at `target`, named for the texts.
EqualQuality CompareAtTarget(const std::vector<EvalPoint>& baseline, const std::vector<EvalPoint>& candidate,
                             double target, std::string target_source, const std::string& baseline_name,
                             const std::string& candidate_name);

// The verdict's clause: "1.31× at equal quality (held-out loss 5.4107,
// fsdp's at 12 steps: fsdp 12.00 s, share 9.16 s of training)", or "no
// speed-up at equal quality: share not reached (best 5.5335 at step 12)".
std::string EqualQualityText(const EqualQuality& q, const std::string& baseline_name,
                             const std::string& candidate_name);

// A row's comparison from its two cells (each the winning run's first case
// with a stored curve), at the row's `row_steps` (0: not a length in steps:
// the cases' whole curves). The target: `plan_target` when set, else the
// baseline's last point at the row's length; nullopt, with `why` set, when
// a side stored no curve, or its curve has no point at the row's length (a
// row read from a longer case's first steps between two evaluations, or one
// extrapolated beyond the case).
std::optional<EqualQuality> CellsAtTarget(const CellResults* baseline, const CellResults* candidate,
                                          int64_t row_steps, std::optional<double> plan_target,
                                          const std::string& baseline_name, const std::string& candidate_name,
                                          std::string* why);

// The curve of a cell: its winning run's first case with one; null when none.
const CaseEntry* CurveEntry(const CellResults* cell);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TIME_TO_TARGET_H_
