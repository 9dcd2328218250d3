#include "report/time_to_target.h"

#include <algorithm>
#include <tuple>

#include "report/formats/numbers.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// A training time as read: "9.81 s" below 100 s, else minutes "12.3 min".
std::string DurationText(double seconds) {
  if (seconds < 100) return fmt::format("{:.2f} s", seconds);
  return fmt::format("{:.1f} min", seconds / 60);
}

std::string PointText(const EvalPoint& p) {
  return fmt::format("step {} ({} at {})", p.step, FormatLoss(p.loss), DurationText(p.training_seconds));
}

}  // namespace

TargetTime TimeToTarget(const std::vector<EvalPoint>& curve, double target) {
  TargetTime t;
  if (curve.empty()) return t;
  t.has_curve = true;
  t.best_loss = curve.front().loss;
  t.best_step = curve.front().step;
  for (size_t i = 0; i < curve.size(); ++i) {
    const EvalPoint& b = curve[i];
    if (b.loss < t.best_loss) {
      t.best_loss = b.loss;
      t.best_step = b.step;
    }
    if (!(b.loss <= target)) continue;
    t.reached = true;
    t.b = b;
    if (i == 0 || b.loss == target) {  // met at the first point, or exactly at a point
      t.a = b;
      t.seconds = b.training_seconds;
      return t;
    }
    const EvalPoint& a = curve[i - 1];  // above the target: the first point at or below it is b
    t.a = a;
    t.seconds = a.training_seconds + (a.loss - target) / (a.loss - b.loss) * (b.training_seconds - a.training_seconds);
    return t;
  }
  return t;
}

std::vector<EvalPoint> CurveUpTo(const std::vector<EvalPoint>& curve, int64_t steps) {
  std::vector<EvalPoint> out;
  for (const EvalPoint& p : curve)
    if (p.step <= steps) out.push_back(p);
  return out;
}

std::string TargetTimeText(const TargetTime& t) {
  if (!t.has_curve) return "no held-out curve stored";
  if (!t.reached) return fmt::format("not reached (best {} at step {})", FormatLoss(t.best_loss), t.best_step);
  if (t.a.step == t.b.step) {
    if (t.b.step == 0) return fmt::format("{}: met at step 0 ({})", DurationText(t.seconds), FormatLoss(t.b.loss));
    return fmt::format("{} at step {} ({})", DurationText(t.seconds), t.b.step, FormatLoss(t.b.loss));
  }
  return fmt::format("{}, interpolated between {} and {}", DurationText(t.seconds), PointText(t.a), PointText(t.b));
}

EqualQuality CompareAtTarget(const std::vector<EvalPoint>& baseline, const std::vector<EvalPoint>& candidate,
                             double target, std::string target_source, const std::string& baseline_name,
                             const std::string& candidate_name) {
  EqualQuality q;
  q.target = target;
  q.target_source = std::move(target_source);
  q.baseline = TimeToTarget(baseline, target);
  q.candidate = TimeToTarget(candidate, target);
  std::vector<std::string> missing;
  if (!q.baseline.reached) missing.push_back(baseline_name + " " + TargetTimeText(q.baseline));
  if (!q.candidate.reached) missing.push_back(candidate_name + " " + TargetTimeText(q.candidate));
  if (!missing.empty()) {
    q.why_none = Join(missing, ", ");
  } else if (q.candidate.seconds <= 0) {
    q.why_none = q.baseline.seconds <= 0
                     ? "both sides meet the target at step 0"
                     : fmt::format("{} meets the target at step 0 ({} needs {})", candidate_name, baseline_name,
                                   DurationText(q.baseline.seconds));
  } else {
    q.ratio = q.baseline.seconds / q.candidate.seconds;
  }
  return q;
}

std::string EqualQualityText(const EqualQuality& q, const std::string& baseline_name,
                             const std::string& candidate_name) {
  const std::string at = fmt::format("held-out loss {}, {}", FormatLoss(q.target), q.target_source);
  if (!q.ratio) return fmt::format("no speed-up at equal quality ({}): {}", at, q.why_none);
  return fmt::format("{}× at equal quality ({}: {} {}, {} {} of training)", FormatRatio(*q.ratio), at, baseline_name,
                     DurationText(q.baseline.seconds), candidate_name, DurationText(q.candidate.seconds));
}

const CaseEntry* CurveEntry(const CellResults* cell) {
  const std::vector<CaseEntry>* winning = cell ? cell->Winning() : nullptr;
  if (!winning) return nullptr;
  for (const CaseEntry& e : *winning)
    if (!e.c->eval_curve.empty()) return &e;
  return nullptr;
}

std::optional<EqualQuality> CellsAtTarget(const CellResults* baseline, const CellResults* candidate,
                                          int64_t row_steps, std::optional<double> plan_target,
                                          const std::string& baseline_name, const std::string& candidate_name,
                                          std::string* why) {
  const CaseEntry* b = CurveEntry(baseline);
  const CaseEntry* c = CurveEntry(candidate);
  if (!b || !c) {
    std::vector<std::string> none;
    if (!b) none.push_back(baseline_name);
    if (!c) none.push_back(candidate_name);
    *why = fmt::format("no held-out curve stored for {} (training.eval_every)", Join(none, " and "));
    return std::nullopt;
  }
  std::vector<EvalPoint> bc = b->c->eval_curve, cc = c->c->eval_curve;
  if (row_steps > 0) {
    bc = CurveUpTo(bc, row_steps);
    cc = CurveUpTo(cc, row_steps);
  }
  // A row longer than a case (extrapolated) has no curve at its length.
  for (const auto& [name, curve, entry] : {std::tuple{baseline_name, &bc, b}, std::tuple{candidate_name, &cc, c}}) {
    if (row_steps > 0 && entry->c->record.length_unit == "steps" && entry->c->record.length_count < row_steps) {
      *why = fmt::format("{} ran {}: no held-out curve at the row's length", name,
                         LengthText(entry->c->record.length_unit, entry->c->record.length_count));
      return std::nullopt;
    }
    // A row shorter than the case: the curve must have a point at its length,
    // or "not reached" would say more than was measured.
    if (curve->empty() || (row_steps > 0 && curve->back().step != row_steps)) {
      *why = fmt::format("{}'s held-out curve has no point at step {}", name, row_steps);
      return std::nullopt;
    }
  }
  double target = 0;
  std::string source;
  if (plan_target) {
    target = *plan_target;
    source = "the plan's quality_target";
  } else {
    const EvalPoint& last = bc.back();
    target = last.loss;
    source = fmt::format("{}'s at step {}", baseline_name, last.step);
  }
  return CompareAtTarget(bc, cc, target, std::move(source), baseline_name, candidate_name);
}

}  // namespace protocol
