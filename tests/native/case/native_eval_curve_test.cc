// eval_curve.h: which step counts the held-out curve evaluates (one model,
// and the share protocol's merged model), and training time kept apart from
// the evaluations' time.
#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include "backends/native/case/eval_curve.h"

namespace protocol {
namespace native {
namespace {

std::vector<int64_t> DueSteps(int64_t steps, int64_t eval_every, std::optional<int64_t> merge_every) {
  std::vector<int64_t> due;
  for (int64_t done = 0; done <= steps; ++done)
    if (EvalDue(done, steps, eval_every, merge_every)) due.push_back(done);
  return due;
}

}  // namespace

TEST_CASE("eval curve: one model is evaluated at step 0, every eval_every steps and at the last step") {
  CHECK(DueSteps(12, 3, std::nullopt) == std::vector<int64_t>{0, 3, 6, 9, 12});
  CHECK(DueSteps(10, 4, std::nullopt) == std::vector<int64_t>{0, 4, 8, 10});
  CHECK(DueSteps(12, 0, std::nullopt).empty());  // 0: no curve (eval_loss at the end only)
  CHECK(DueSteps(3, 10, std::nullopt) == std::vector<int64_t>{0, 3});
}

TEST_CASE("eval curve: the share protocol's merged model is evaluated at the merges") {
  // A multiple of sync_every: every due step is a merge.
  CHECK(DueSteps(12, 2, 2) == std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12});
  CHECK(DueSteps(12, 4, 2) == std::vector<int64_t>{0, 4, 8, 12});
  // Not a multiple: each evaluation waits for the first merge at or after its step.
  CHECK(DueSteps(12, 3, 2) == std::vector<int64_t>{0, 4, 6, 10, 12});
  CHECK(DueSteps(12, 1, 4) == std::vector<int64_t>{0, 4, 8, 12});
  // Merged only at the end: step 0 and the last.
  CHECK(DueSteps(12, 2, 0) == std::vector<int64_t>{0, 12});
}

TEST_CASE("eval curve: a point's training seconds are the steps' own, never the evaluations'") {
  EvalCurve curve(2, 4, std::nullopt);
  REQUIRE(curve.enabled());
  curve.Add(0, 6.0, 0.7);  // evaluating before the first step takes time, but no training time
  curve.AddStep(1.0, 100);
  curve.AddStep(1.5, 100);
  curve.Add(2, 5.0, 0.7);
  curve.AddStep(2.0, 100);
  curve.AddStep(2.5, 100);
  curve.AddTrainingSeconds(0.25);  // e.g. a final merge the last point's model needs
  curve.Add(4, 4.5, 0.6);
  REQUIRE(curve.points().size() == 3);
  CHECK(curve.points()[0].training_seconds == 0);
  CHECK(curve.points()[0].tokens == 0);
  CHECK(curve.points()[1].training_seconds == 2.5);
  CHECK(curve.points()[1].tokens == 200);
  CHECK(curve.points()[2].training_seconds == 7.25);
  CHECK(curve.points()[2].tokens == 400);
  CHECK(curve.points()[2].loss == 4.5);
  CHECK(curve.eval_seconds() == doctest::Approx(2.0));
  auto figure = curve.EvalSecondsFigure(16, "rank 0");
  REQUIRE(figure);
  CHECK(figure->name == metric::kEvalSeconds);
  CHECK(*figure->value == doctest::Approx(2.0));
  CHECK(figure->method ==
        "rank 0's time in 3 evaluation(s) of the 16 held-out sequences for the loss curve (training.eval_every 2, "
        "device synchronised); not in the curve's training seconds");
  // eval_every 0: no curve, no figure.
  EvalCurve none(0, 4, std::nullopt);
  none.Add(4, 4.5, 0.6);
  CHECK(none.points().empty());
  CHECK(!none.EvalSecondsFigure(16, "rank 0"));
}

}  // namespace native
}  // namespace protocol
