// The time to a target held-out loss (src/report/time_to_target.h) on
// synthetic curves: interpolation between the bracketing points, a target met
// at step 0, a side that never reaches it, and the ratio.

#include "report/time_to_target.h"

#include <doctest/doctest.h>

namespace protocol {
namespace {

EvalPoint P(int64_t step, double seconds, double loss) {
  EvalPoint p;
  p.step = step;
  p.tokens = step * 100;
  p.training_seconds = seconds;
  p.loss = loss;
  return p;
}

// 0 s: 6.0; 10 s: 5.0; 20 s: 4.0; 30 s: 3.5.
const std::vector<EvalPoint> kFalling = {P(0, 0, 6.0), P(2, 10, 5.0), P(4, 20, 4.0), P(6, 30, 3.5)};

}  // namespace

TEST_CASE("time to target: interpolated linearly between the two points that bracket the target") {
  TargetTime t = TimeToTarget(kFalling, 4.5);
  REQUIRE(t.reached);
  // Between step 2 (5.0 at 10 s) and step 4 (4.0 at 20 s): halfway.
  CHECK(t.seconds == doctest::Approx(15.0));
  CHECK(t.a.step == 2);
  CHECK(t.b.step == 4);
  CHECK(TargetTimeText(t) ==
        "15.00 s, interpolated between step 2 (5.0000 at 10.00 s) and step 4 (4.0000 at 20.00 s)");
  // A quarter of the way from 4.0 to 3.5.
  CHECK(TimeToTarget(kFalling, 3.875).seconds == doctest::Approx(22.5));
}

TEST_CASE("time to target: a point exactly at the target gives its own time") {
  TargetTime t = TimeToTarget(kFalling, 4.0);
  REQUIRE(t.reached);
  CHECK(t.seconds == 20.0);
  CHECK(TargetTimeText(t) == "20.00 s at step 4 (4.0000)");
}

TEST_CASE("time to target: the first crossing counts, not a later one") {
  // Dips below 4.5 at step 2, rises above it, falls below again.
  const std::vector<EvalPoint> bumpy = {P(0, 0, 6.0), P(2, 10, 4.0), P(4, 20, 5.0), P(6, 30, 3.0)};
  TargetTime t = TimeToTarget(bumpy, 4.5);
  REQUIRE(t.reached);
  CHECK(t.seconds == doctest::Approx(0 + (6.0 - 4.5) / (6.0 - 4.0) * 10));
  CHECK(t.b.step == 2);
}

TEST_CASE("time to target: a target already met at step 0 takes no training time") {
  TargetTime t = TimeToTarget(kFalling, 6.5);
  REQUIRE(t.reached);
  CHECK(t.seconds == 0.0);
  CHECK(t.a.step == 0);
  CHECK(t.b.step == 0);
  CHECK(TargetTimeText(t) == "0.00 s: met at step 0 (6.0000)");
  // The candidate meets it at step 0, the baseline later: no ratio (it would be infinite).
  EqualQuality q = CompareAtTarget(kFalling, {P(0, 0, 4.0), P(2, 8, 3.0)}, 5.0, "test", "fsdp", "share");
  CHECK(!q.ratio);
  CHECK(q.why_none == "share meets the target at step 0 (fsdp needs 10.00 s)");
  EqualQuality both = CompareAtTarget(kFalling, kFalling, 6.0, "test", "fsdp", "share");
  CHECK(!both.ratio);
  CHECK(both.why_none == "both sides meet the target at step 0");
}

TEST_CASE("time to target: a curve that never reaches the target is not reached, with its best point") {
  TargetTime t = TimeToTarget(kFalling, 3.0);
  CHECK(t.has_curve);
  CHECK(!t.reached);
  CHECK(t.best_loss == 3.5);
  CHECK(t.best_step == 6);
  CHECK(TargetTimeText(t) == "not reached (best 3.5000 at step 6)");
  CHECK(TargetTimeText(TimeToTarget({}, 3.0)) == "no held-out curve stored");
}

TEST_CASE("speed-up at equal quality: baseline time / candidate time, never extrapolated") {
  // The baseline reaches its own final loss 3.5 at 30 s; the candidate,
  // twice as fast per step but worse per step, reaches 3.5 between its
  // step 6 (3.6 at 12 s) and step 8 (3.4 at 16 s): at 14 s.
  const std::vector<EvalPoint> candidate = {P(0, 0, 6.0), P(2, 4, 5.2), P(4, 8, 4.4), P(6, 12, 3.6),
                                            P(8, 16, 3.4)};
  EqualQuality q = CompareAtTarget(kFalling, candidate, 3.5, "fsdp's at step 6", "fsdp", "share");
  REQUIRE(q.ratio);
  CHECK(q.baseline.seconds == 30.0);
  CHECK(q.candidate.seconds == doctest::Approx(14.0));
  CHECK(*q.ratio == doctest::Approx(30.0 / 14.0));
  CHECK(EqualQualityText(q, "fsdp", "share") ==
        "2.14× at equal quality (held-out loss 3.5000, fsdp's at step 6: fsdp 30.00 s, share 14.00 s of training)");
  // The candidate stops short of a lower target: no ratio, its best said.
  EqualQuality short_of = CompareAtTarget(kFalling, {P(0, 0, 6.0), P(2, 4, 3.6)}, 3.5, "fsdp's at step 6", "fsdp",
                                          "share");
  CHECK(!short_of.ratio);
  CHECK(EqualQualityText(short_of, "fsdp", "share") ==
        "no speed-up at equal quality (held-out loss 3.5000, fsdp's at step 6): share not reached (best 3.6000 at "
        "step 2)");
}

TEST_CASE("time to target: a row shorter than the case reads the curve up to its steps") {
  const std::vector<EvalPoint> upto = CurveUpTo(kFalling, 4);
  REQUIRE(upto.size() == 3);
  CHECK(upto.back().step == 4);
  CHECK(CurveUpTo(kFalling, 1).size() == 1);
}

}  // namespace protocol
