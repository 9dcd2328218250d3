// `protocol compare`: verdicts on stored fixtures (tests/data/compare/nightly.json),
// the statistics, and the command's exit codes.

#include <doctest/doctest.h>

#include "regression_fixtures.h"
#include "runner/analysis/compare.h"
#include "runner/analysis/compare_stats.h"
#include "runner/analysis/junit.h"
#include "runner/exec/backend.h"
#include "runner/base/text.h"

using namespace protocol;
using namespace protocol::testing;

namespace {

std::unique_ptr<Store> NightlyStore() {
  auto store = OpenStore(":memory:");
  REQUIRE(store.ok());
  LoadRunsFixture(**store, "nightly.json");
  return std::move(store).value();
}

CompareReport Compare(Store& store, int64_t base, int64_t cand, CompareOptions options = {}) {
  auto b = CollectCompareSide(store, base);
  auto c = CollectCompareSide(store, cand);
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  REQUIRE(ValidateCompareOptions(options).ok());
  return CompareRuns(*b, *c, options);
}

const CaseComparison& Case(const CompareReport& r, const std::string& id) {
  for (const auto& c : r.cases)
    if (c.case_id == id) return c;
  FAIL("no case " << id);
  return r.cases.front();
}

}  // namespace

TEST_CASE("compare stats: median and a seeded bootstrap interval") {
  CHECK(*Median({3, 1, 2}) == 2);
  CHECK(*Median({4, 1, 2, 3}) == 2.5);
  CHECK_FALSE(Median({}).has_value());
  auto a = BootstrapMedianRatio({100, 101, 99}, {110, 111, 109}, 2000, 7, 0.95);
  auto b = BootstrapMedianRatio({100, 101, 99}, {110, 111, 109}, 2000, 7, 0.95);
  REQUIRE(a.has_value());
  CHECK(a->low == b->low);  // same seed, same interval
  CHECK(a->high == b->high);
  CHECK(a->low >= 109.0 / 101.0);  // every resampled ratio lies within the extremes
  CHECK(a->high <= 111.0 / 99.0);
  CHECK(a->low <= 110.0 / 100.0);
  CHECK(a->high >= 110.0 / 100.0);
  CHECK_FALSE(BootstrapMedianRatio({1, 2}, {1, 2, 3}, 100, 1, 0.95).has_value());
}

TEST_CASE("compare: a 12 % slower pretrain case is regressed and the run exits 1") {
  auto store = NightlyStore();
  CompareReport r = Compare(*store, 1, 2);
  const CaseComparison& c = Case(r, "2.1.2.1");
  CHECK(c.verdict == Verdict::kRegressed);
  REQUIRE(c.metrics.size() == 1);
  const MetricComparison& m = c.metrics[0];
  CHECK(m.metric == "wall_seconds");
  CHECK(m.direction == Direction::kLower);
  CHECK(*m.baseline_median == 100);
  CHECK(*m.candidate_median == 112);
  CHECK(*m.ratio == doctest::Approx(1.12));
  REQUIRE(m.low.has_value());
  CHECK(*m.low > 1.05);  // the interval excludes the threshold band
  CHECK(m.note == "");
  CHECK(r.HasRegression());
  CHECK(r.ExitCode() == 1);
}

TEST_CASE("compare: tokens/s higher is better; an unchanged inference case compares both metrics") {
  auto store = NightlyStore();
  CompareReport r = Compare(*store, 1, 2);
  const CaseComparison& c = Case(r, "2.1.2.4");
  CHECK(c.verdict == Verdict::kUnchanged);
  REQUIRE(c.metrics.size() == 2);
  CHECK(c.metrics[0].metric == "wall_seconds");
  CHECK(c.metrics[1].metric == "tokens_per_second");
  CHECK(c.metrics[1].direction == Direction::kHigher);
  CHECK(c.metrics[1].verdict == Verdict::kUnchanged);
}

TEST_CASE("compare: a different topology is incomparable, never a silent ratio") {
  auto store = NightlyStore();
  CompareReport r = Compare(*store, 1, 2);
  const CaseComparison& c = Case(r, "2.2.2.1");
  CHECK(c.verdict == Verdict::kIncomparable);
  CHECK(c.reason == "different topology: rig0:4x2 vs rig0:2x4");
  CHECK(c.metrics.empty());
  CHECK(r.Count(Verdict::kIncomparable) == 1);
}

TEST_CASE("compare: improvement, noise within the interval, a failed case") {
  auto store = NightlyStore();
  CompareReport r = Compare(*store, 1, 3);
  CHECK(Case(r, "2.1.2.1").verdict == Verdict::kImproved);
  CHECK(*Case(r, "2.1.2.1").metrics[0].ratio == doctest::Approx(0.9));

  const CaseComparison& noisy = Case(r, "2.1.2.4");
  CHECK(noisy.verdict == Verdict::kUnchanged);
  const MetricComparison& wall = noisy.metrics[0];
  CHECK(*wall.ratio == doctest::Approx(56.0 / 50.0));  // 12 % worse by the medians ...
  REQUIRE(wall.low.has_value());
  CHECK(*wall.low < 1.05);  // ... but the interval reaches into the band
  CHECK(wall.note == "worse beyond the threshold, but the interval reaches into the band (noise)");

  const CaseComparison& failed = Case(r, "2.2.2.1");
  CHECK(failed.verdict == Verdict::kIncomparable);
  CHECK(failed.reason ==
        "not ok in the candidate run: repeat 1 failed \u2014 exit code 1 (CUDA out of memory)");
  CHECK(r.ExitCode() == 0);
}

TEST_CASE("compare: a different environment fingerprint makes every case incomparable") {
  auto store = NightlyStore();
  CompareReport r = Compare(*store, 1, 4);
  REQUIRE(r.environment_differences.size() == 2);
  CHECK(r.environment_differences[0] == "cpu_model: Xeon 8480 vs EPYC 9654");
  CHECK(r.environment_differences[1] == "cpu_cores: 16 vs 96");
  const CaseComparison& c = Case(r, "2.1.2.1");
  CHECK(c.verdict == Verdict::kIncomparable);
  CHECK(c.reason == "environment fingerprint differs: cpu_model, cpu_cores");
  CHECK(Case(r, "2.1.2.4").reason == "missing in the candidate run");
}

TEST_CASE("compare: match by identity across plans; fewer than 3 repeats gives no interval") {
  auto store = NightlyStore();
  CompareReport r = Compare(*store, 1, 5);
  const CaseComparison& c = Case(r, "7b-pretrain");
  CHECK(c.baseline_case_id == "2.1.2.1");
  CHECK(c.verdict == Verdict::kRegressed);  // 20.5 % slower, no interval to consult
  CHECK_FALSE(c.metrics[0].low.has_value());
  CHECK(c.metrics[0].note == "fewer than 3 repeats, no interval");
  // A higher threshold than the change: unchanged.
  CompareOptions lenient;
  lenient.threshold = 0.25;
  CompareReport relaxed = Compare(*store, 1, 5, lenient);
  CHECK(Case(relaxed, "7b-pretrain").verdict == Verdict::kUnchanged);
}

TEST_CASE("compare: options — thresholds, metric names and directions") {
  CHECK(*ParseThreshold("5%") == doctest::Approx(0.05));
  CHECK(*ParseThreshold("2.5 %") == doctest::Approx(0.025));
  CHECK(*ParseThreshold("0.1") == doctest::Approx(0.1));
  CHECK(ParseThreshold("five").status().message() ==
        "threshold 'five' is not a number (write e.g. 5% or 0.05)");
  CHECK(ParseThreshold("150%").status().message() ==
        "threshold '150%' is outside 0 % … 100 % (write e.g. 5%)");
  CompareOptions o;
  o.metrics = {"wall_secnds", "loss_at_end", "accuracy:higher", "x:up"};
  CHECK(ValidateCompareOptions(o).message() ==
        "unknown metric 'wall_secnds' (did you mean 'wall_seconds'?); metric 'loss_at_end' has no "
        "known better direction; write 'loss_at_end:lower' or 'loss_at_end:higher'; metric 'x:up': "
        "direction must be 'lower' or 'higher', got 'up'");
  // Only the requested metric is compared.
  auto store = NightlyStore();
  CompareOptions only;
  only.metrics = {"tokens_per_second"};
  CompareReport report = Compare(*store, 1, 2, only);
  const CaseComparison& c = Case(report, "2.1.2.4");
  REQUIRE(c.metrics.size() == 1);
  CHECK(c.metrics[0].metric == "tokens_per_second");
  // A requested metric the pretrain case does not have makes it incomparable.
  const CaseComparison& p = Case(report, "2.1.2.1");
  CHECK(p.verdict == Verdict::kIncomparable);
  CHECK(p.reason == "tokens_per_second: not measured in every repeat of the baseline run");
}

TEST_CASE("compare: JSON carries every verdict and figure; the table has a summary line") {
  auto store = NightlyStore();
  CompareReport r = Compare(*store, 1, 2);
  Json j = CompareToJson(r);
  CHECK(j["schema_version"] == 1);
  CHECK(j["cases"][0]["case_id"] == "2.1.2.1");
  CHECK(j["cases"][0]["verdict"] == "regressed");
  CHECK(j["cases"][0]["metrics"][0]["baseline"] == Json::array({100, 101, 99, 100, 102}));
  CHECK(j["summary"]["regressed"] == 1);
  CHECK(j["summary"]["incomparable"] == 1);
  std::string text = RenderCompareText(r);
  // One line per case: verdict, the deciding metric's ratio and interval, and why; other metrics as notes.
  CHECK(text ==
        "compare: baseline run 1 (nightly) \u2192 candidate run 2 (nightly); threshold 5 %; 95 % bootstrap interval "
        "of the median ratio, 2000 resamples\n"
        "decided by the primary metric: wall_seconds for training, total_generation_seconds for inference; other "
        "metrics are notes\n"
        "case     verdict       metric        baseline     candidate    ratio  interval     why\n"
        "2.1.2.1  regressed     wall_seconds  100 s (n=5)  112 s (n=5)  1.120  1.098\u20261.140  12 % worse than the "
        "baseline, beyond the threshold 5 %, and so is the whole interval\n"
        "2.1.2.4  unchanged     wall_seconds  50 s (n=3)   50 s (n=3)   1.000  0.971\u20261.031  within \u00b15 %\n"
        "2.2.2.1  incomparable  \u2013                                                           different topology: "
        "rig0:4x2 vs rig0:2x4\n"
        "2.1.2.4 notes: tokens_per_second 1.000 unchanged\n"
        "1 regressed, 0 improved, 1 unchanged, 1 incomparable\n");
  CHECK(EndsWith(text, "1 regressed, 0 improved, 1 unchanged, 1 incomparable\n"));
}

TEST_CASE("compare: the command exits 1 on a regression, 0 otherwise, 2 on a bad run") {
  TempDir dir;
  std::string db = (dir.path / "r.db").string();
  {
    auto store = OpenStore(db);
    REQUIRE(store.ok());
    LoadRunsFixture(**store, "nightly.json");
  }
  Output regressed = Protocol({"compare", "1", "2", "--db", db}, dir.path);
  CHECK(regressed.exit_code == 1);
  CHECK(regressed.out.find("1 regressed, 0 improved, 1 unchanged, 1 incomparable") !=
        std::string::npos);
  Output improved = Protocol({"compare", "1", "3", "--db", db, "--json"}, dir.path);
  CHECK(improved.exit_code == 0);
  CHECK(Json::parse(improved.out)["summary"]["improved"] == 1);
  Output lenient = Protocol({"compare", "1", "2", "--db", db, "--threshold", "15%"}, dir.path);
  CHECK(lenient.exit_code == 0);
  Output bad = Protocol({"compare", "1", "latest:monthly", "--db", db}, dir.path);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "protocol: unknown run 'latest:monthly': no run of plan 'monthly' (plans run: nightly, weekly)\n");
}

namespace {

// One side of a comparison built by hand: one case, one repeat, these measured figures.
CompareSide Side(int64_t run, const std::string& workload,
                 const std::vector<std::pair<std::string, double>>& figures) {
  CompareSide side;
  side.run.id = run;
  side.run.plan_name = "nightly";
  CompareCase c;
  c.record.case_id = "1.1";
  c.record.model = "llama2-7b";
  c.record.workload = workload;
  c.record.system = "fsdp";
  c.record.backend = "fsdp";
  c.record.status = CaseStatus::kOk;
  if (workload != "inference") {
    c.record.length_unit = "steps";
    c.record.length_count = 10;
  }
  for (const auto& [name, value] : figures) c.measurements.push_back(MeasuredFigure(name, value, "s"));
  side.cases.push_back(c);
  return side;
}

}  // namespace

TEST_CASE("compare: the primary metric decides; a worse secondary metric is a note, not a regression") {
  // The wall time went down to 0.93x while the mean step time went up 1.85x.
  CompareReport r = CompareRuns(Side(1, "pretrain", {{"wall_seconds", 100}, {"step_seconds_mean", 1.0}}),
                                Side(2, "pretrain", {{"wall_seconds", 93}, {"step_seconds_mean", 1.85}}), {});
  REQUIRE(r.cases.size() == 1);
  const CaseComparison& c = r.cases[0];
  CHECK(c.verdict == Verdict::kImproved);
  REQUIRE(c.metrics.size() == 2);
  CHECK(c.metrics[0].metric == "wall_seconds");
  CHECK(c.metrics[0].deciding);
  CHECK(c.metrics[1].metric == "step_seconds_mean");
  CHECK(c.metrics[1].verdict == Verdict::kRegressed);
  CHECK_FALSE(c.metrics[1].deciding);
  CHECK(r.ExitCode() == 0);
  const std::string text = RenderCompareText(r);
  INFO(text);
  // "fewer than 3 repeats" is said once, not per metric.
  CHECK(text.find("note: 1 case with fewer than 3 repeats on a side: no interval, the verdict rests on the ratio of "
                  "the medians alone\n") != std::string::npos);
  CHECK(text.find("fewer than 3 repeats, no interval") == std::string::npos);
  CHECK(text.find("1.1 notes: step_seconds_mean 1.850 regressed (a note: does not decide)\n") != std::string::npos);
  CHECK(text.find("\n1.1   improved  wall_seconds  100 s (n=1)  93 s (n=1)  0.930  \u2013         7 % better than the "
                  "baseline, beyond the threshold 5 %\n") != std::string::npos);
  // JUnit follows the same rule: no failure for the note.
  const JunitSuite suite = JunitSuiteForCompare(r);
  REQUIRE(suite.cases.size() == 1);
  CHECK(suite.cases[0].outcome == JunitCase::Outcome::kPassed);
  // Named metrics decide instead.
  CompareOptions named;
  named.metrics = {"step_seconds_mean"};
  CompareReport by_step = CompareRuns(Side(1, "pretrain", {{"wall_seconds", 100}, {"step_seconds_mean", 1.0}}),
                                      Side(2, "pretrain", {{"wall_seconds", 93}, {"step_seconds_mean", 1.85}}), named);
  CHECK(by_step.cases[0].verdict == Verdict::kRegressed);
  CHECK(by_step.ExitCode() == 1);
}

TEST_CASE("compare: inference is decided by the total generation time when both sides measured it") {
  CompareReport r = CompareRuns(
      Side(1, "inference", {{"wall_seconds", 100}, {"total_generation_seconds", 80}, {"tokens_per_second", 10}}),
      Side(2, "inference", {{"wall_seconds", 90}, {"total_generation_seconds", 96}, {"tokens_per_second", 8.3}}), {});
  const CaseComparison& c = r.cases[0];
  REQUIRE(!c.metrics.empty());
  CHECK(c.metrics[0].metric == "total_generation_seconds");
  CHECK(c.metrics[0].deciding);
  CHECK(c.verdict == Verdict::kRegressed);  // 1.2x the generation time, though the wall time went down
  CHECK(r.ExitCode() == 1);
  // Without it on one side, the wall time decides.
  CompareReport w = CompareRuns(Side(1, "inference", {{"wall_seconds", 100}}),
                                Side(2, "inference", {{"wall_seconds", 90}, {"total_generation_seconds", 96}}), {});
  CHECK(w.cases[0].metrics[0].metric == "wall_seconds");
  CHECK(w.cases[0].verdict == Verdict::kImproved);
}

TEST_CASE("compare: a case measured contended on either side is shown but not decided") {
  // 1.30x the wall time, but the candidate ran while others took 48 % of the CPU.
  CompareReport r = CompareRuns(Side(1, "pretrain", {{"wall_seconds", 100}, {"contention", 0.02}}),
                                Side(2, "pretrain", {{"wall_seconds", 130}, {"contention", 0.48}}), {});
  REQUIRE(r.cases.size() == 1);
  const CaseComparison& c = r.cases[0];
  CHECK(c.contended);
  CHECK(c.verdict == Verdict::kIncomparable);
  CHECK(c.reason ==
        "contended in the candidate run: repeat 1 (others took 48 % of the CPU); not decided "
        "(the wall_seconds ratio 1.300 alone would say regressed)");
  REQUIRE(!c.metrics.empty());
  CHECK(*c.metrics[0].ratio == doctest::Approx(1.3));  // the figures are still shown
  CHECK(r.ExitCode() == 0);
  CHECK(CompareToJson(r)["cases"][0]["contended"] == true);
  // The same figures measured idle decide.
  CompareReport idle = CompareRuns(Side(1, "pretrain", {{"wall_seconds", 100}, {"contention", 0.02}}),
                                   Side(2, "pretrain", {{"wall_seconds", 130}, {"contention", 0.19}}), {});
  CHECK_FALSE(idle.cases[0].contended);
  CHECK(idle.cases[0].verdict == Verdict::kRegressed);
}

TEST_CASE("compare: energy per token is compared, lower better; a rise is a note beside the deciding time") {
  CompareReport r = CompareRuns(Side(1, "pretrain", {{"wall_seconds", 100}, {"energy_per_token_joules", 0.50}}),
                                Side(2, "pretrain", {{"wall_seconds", 99}, {"energy_per_token_joules", 0.60}}), {});
  REQUIRE(r.cases.size() == 1);
  REQUIRE(r.cases[0].metrics.size() == 2);
  CHECK(r.cases[0].metrics[1].metric == "energy_per_token_joules");
  CHECK(r.cases[0].metrics[1].verdict == Verdict::kRegressed);  // 20 % more energy per token
  CHECK_FALSE(r.cases[0].metrics[1].deciding);
  // Named, it decides.
  CompareOptions named;
  named.metrics = {"energy_per_token_joules"};
  CompareReport by_energy = CompareRuns(Side(1, "pretrain", {{"energy_per_token_joules", 0.50}}),
                                        Side(2, "pretrain", {{"energy_per_token_joules", 0.40}}), named);
  CHECK(by_energy.cases[0].verdict == Verdict::kImproved);
}
