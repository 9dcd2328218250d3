#include <doctest/doctest.h>

#include "runner/exec/extrapolate.h"

using namespace protocol;

namespace {
Length Steps(int64_t n) { return Length{Length::Unit::kSteps, n}; }
Length Epochs(int64_t n) { return Length{Length::Unit::kEpochs, n}; }
}  // namespace

// Hand computation: 10 steps, warm-up 2 (4 s + 2 s = 6 s), the other 8 sum to
// 11 s (mean 1.375 s), all steps 17 s; wall time 24.5 s → overhead 7.5 s.
// T(1000) = 7.5 + 6 + (1000 − 2) × 1.375 = 1385.75 s.
TEST_CASE("Extrapolation applies the per-step formula exactly") {
  ExtrapolationInput in;
  in.measured = Steps(10);
  in.target = Steps(1000);
  in.wall_seconds = 24.5;
  in.step_seconds = {4, 2, 1.5, 1.25, 1.25, 1.5, 1.5, 1.25, 1.25, 1.5};
  in.warmup_steps = 2;
  auto m = ExtrapolateWallSeconds(in);
  REQUIRE(m.ok());
  CHECK(m->name == "wall_seconds");
  CHECK(m->unit == "s");
  CHECK(m->how == Provenance::kExtrapolated);
  REQUIRE(m->value.has_value());
  CHECK(*m->value == 1385.75);
  CHECK(m->method ==
        "extrapolated from 10 measured steps to 1000: overhead 7.5 s + warm-up 2 steps 6 s + "
        "(M\u2212W)=998 \u00d7 mean step 1.375 s (steps 3..10)");
}

TEST_CASE("Extrapolation without warm-up uses every step for the mean") {
  ExtrapolationInput in;
  in.measured = Steps(4);
  in.target = Steps(8);
  in.wall_seconds = 10;
  in.step_seconds = {2, 2, 2, 2};  // overhead 2 s
  auto m = ExtrapolateWallSeconds(in);
  REQUIRE(m.ok());
  CHECK(*m->value == 18);  // 2 + 0 + 8 × 2
  CHECK(m->method ==
        "extrapolated from 4 measured steps to 8: overhead 2 s + warm-up 0 steps 0 s + "
        "(M\u2212W)=8 \u00d7 mean step 2 s (steps 1..4)");
}

TEST_CASE("Extrapolation falls back to linear scaling without per-step timings") {
  ExtrapolationInput in;
  in.measured = Steps(100);
  in.target = Steps(1000);
  in.wall_seconds = 37.5;
  auto m = ExtrapolateWallSeconds(in);
  REQUIRE(m.ok());
  CHECK(*m->value == 375);
  CHECK(m->how == Provenance::kExtrapolated);
  CHECK(m->method == "scaled wall time linearly 100\u21921000 steps (no per-step timings)");
}

TEST_CASE("Extrapolation scales epochs linearly and says why") {
  ExtrapolationInput in;
  in.measured = Epochs(1);
  in.target = Epochs(3);
  in.wall_seconds = 120;
  CHECK(ExtrapolateWallSeconds(in)->method ==
        "scaled wall time linearly 1\u21923 epochs (no per-step timings)");
  in.step_seconds = {1, 1};
  auto m = ExtrapolateWallSeconds(in);
  CHECK(*m->value == 360);
  CHECK(m->method ==
        "scaled wall time linearly 1\u21923 epochs (per-step timings are not used for epoch lengths)");
}

TEST_CASE("Extrapolation is linear when the timings do not cover every step or are all warm-up") {
  ExtrapolationInput in;
  in.measured = Steps(10);
  in.target = Steps(20);
  in.wall_seconds = 30;
  in.step_seconds = {1, 1, 1};
  auto partial = ExtrapolateWallSeconds(in);
  CHECK(*partial->value == 60);
  CHECK(partial->method ==
        "scaled wall time linearly 10\u219220 steps (per-step timings cover 3 of 10 steps)");

  in.measured = Steps(3);
  in.target = Steps(6);
  in.warmup_steps = 3;
  auto warm = ExtrapolateWallSeconds(in);
  CHECK(*warm->value == 60);
  CHECK(warm->method == "scaled wall time linearly 3\u21926 steps (all 3 steps are warm-up)");
}

TEST_CASE("Extrapolation refuses different units and non-positive lengths") {
  ExtrapolationInput in;
  in.measured = Steps(100);
  in.target = Epochs(1);
  auto m = ExtrapolateWallSeconds(in);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "cannot extrapolate 100 steps to 1 epoch: different units");
  in.target = Steps(0);
  CHECK(ExtrapolateWallSeconds(in).status().message() ==
        "cannot extrapolate 100 steps to 0 steps: lengths must be positive");
}

namespace {
// Step samples numbered `first`, first + `every`, ... with these seconds.
std::vector<StepSample> Numbered(int64_t first, int64_t every, const std::vector<double>& seconds) {
  std::vector<StepSample> out;
  for (size_t i = 0; i < seconds.size(); ++i) {
    StepSample s;
    s.step = first + static_cast<int64_t>(i) * every;
    s.seconds = seconds[i];
    out.push_back(s);
  }
  return out;
}
}  // namespace

TEST_CASE("StepSecondsMean averages the steps after the warm-up") {
  auto m = StepSecondsMean(Numbered(1, 1, {5, 1, 2, 3}), 1);
  REQUIRE(m.has_value());
  CHECK(m->name == "step_seconds_mean");
  CHECK(*m->value == 2);
  CHECK(m->how == Provenance::kMeasured);
  CHECK(m->method == "mean of steps 2..4");
  CHECK_FALSE(StepSecondsMean(Numbered(1, 1, {5, 1}), 2).has_value());
  CHECK_FALSE(StepSecondsMean({}, 0).has_value());
}

TEST_CASE("StepSecondsMean numbers steps as the system printed them, warm-up by that number") {
  // A log that prints every 10th step: steps 10, 20, 30, as the log format's figures say.
  auto m = StepSecondsMean(Numbered(10, 10, {4, 2, 3}), 0);
  REQUIRE(m.has_value());
  CHECK(*m->value == 3);
  CHECK(m->method == "mean of 3 logged steps (steps 10..30)");
  // warmup_steps: 10 leaves out step 10 itself, not the first ten lines.
  m = StepSecondsMean(Numbered(10, 10, {4, 2, 3}), 10);
  REQUIRE(m.has_value());
  CHECK(*m->value == 2.5);
  CHECK(m->method == "mean of 2 logged steps (steps 20..30)");
}

TEST_CASE("FormatFigure keeps at most three decimals without trailing zeros") {
  CHECK(FormatFigure(12.3) == "12.3");
  CHECK(FormatFigure(4) == "4");
  CHECK(FormatFigure(1.23449) == "1.234");
  CHECK(FormatFigure(-0.5) == "-0.5");
  CHECK(FormatFigure(-0.0001) == "0");
}

// The same 10 steps read back at 4: overhead 7.5 s + steps 1..4 (4 + 2 + 1.5 + 1.25 = 8.75 s) = 16.25 s.
TEST_CASE("A shorter length is read from the first steps of the measured run") {
  ExtrapolationInput in;
  in.measured = Steps(10);
  in.target = Steps(4);
  in.wall_seconds = 24.5;
  in.step_seconds = {4, 2, 1.5, 1.25, 1.25, 1.5, 1.5, 1.25, 1.25, 1.5};
  in.warmup_steps = 2;
  auto m = PrefixWallSeconds(in);
  REQUIRE(m.ok());
  CHECK(m->name == "wall_seconds");
  CHECK(m->how == Provenance::kPrefix);
  CHECK(std::string(ProvenanceName(m->how)) == "prefix");
  CHECK(*m->value == 16.25);
  CHECK(m->method == "computed from the first 4 of 10 measured steps: overhead 7.5 s + steps 1..4 8.75 s");
  // No figure without a timing per step (never a pro-rata share of the overhead), nor for epochs or longer lengths.
  in.step_seconds.pop_back();
  CHECK(PrefixWallSeconds(in).status().message() ==
        "cannot compute 4 steps from 10 steps: per-step timings cover 9 of 10 steps");
  in.step_seconds.push_back(1.5);
  in.target = Steps(10);
  CHECK_FALSE(PrefixWallSeconds(in).ok());
  in.target = Epochs(1);
  CHECK_FALSE(PrefixWallSeconds(in).ok());
}
