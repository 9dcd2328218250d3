// The speed-up at equal quality in a report (docs/report.md): from both
// sides' stored held-out curves, the verdict's clause, the row of figures,
// the chart, and the Markdown table; a row shorter than the case, and a
// plan's quality_target.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report/report.h"
#include "report/report_data.h"
#include "report_fixtures.h"

namespace protocol {
namespace {

using namespace report_test;

EvalPoint P(int64_t step, double seconds, double loss) {
  EvalPoint p;
  p.step = step;
  p.tokens = step * 512;
  p.training_seconds = seconds;
  p.loss = loss;
  return p;
}

// fsdp: 12 steps in 12 s to 5.40; share: 12 steps in 6 s to 5.50, reaching
// 5.40 never; at 6 steps fsdp is at 5.80 (6 s), share at 5.70 (3 s).
ReportCaseInput Fsdp() {
  ReportCaseInput c = TrainCase("f", "m", "pretrain", "fsdp", 1, "", "steps", 12, 20);
  c.measurements.push_back(M(metric::kEvalLoss, 5.40));
  c.eval_curve = {P(0, 0, 6.20), P(2, 2, 6.00), P(4, 4, 5.90), P(6, 6, 5.80), P(8, 8, 5.60), P(10, 10, 5.50),
                  P(12, 12, 5.40)};
  return c;
}
ReportCaseInput Share() {
  ReportCaseInput c = TrainCase("s", "m", "pretrain", "share", 1, "", "steps", 12, 10);
  c.measurements.push_back(M(metric::kEvalLoss, 5.50));
  c.eval_curve = {P(0, 0, 6.20), P(2, 1, 5.90), P(4, 2, 5.75), P(6, 3, 5.70), P(8, 4, 5.60), P(10, 5, 5.55),
                  P(12, 6, 5.50)};
  return c;
}

}  // namespace

TEST_CASE("report equal quality: a candidate that never reaches the baseline's loss has no ratio, and says its best") {
  ReportData data = Compute({RunWith(MakeRun(1), {Fsdp(), Share()})});
  const ModelReport& m = data.models.at(0);
  REQUIRE(m.verdict.size() == 1);
  CHECK(m.verdict[0].equal_quality ==
        "no speed-up at equal quality (held-out loss 5.4000, fsdp's at step 12): share not reached (best 5.5000 at "
        "step 12)");
  INFO(m.verdict[0].text);
  CHECK(m.verdict[0].text.find("share is 2.00× faster than fsdp (held-out loss 5.5000 vs 5.4000 for fsdp, +1.9 %), "
                               "no speed-up at equal quality (") != std::string::npos);
  REQUIRE(m.equal_quality.size() == 1);
  const EqualQualityRow& row = m.equal_quality[0];
  CHECK(row.row == "pretrain 12 steps");
  CHECK(row.scope == "1 node");
  CHECK(row.target_text == "5.4000 (fsdp's at step 12)");
  CHECK(row.baseline_text == "12.00 s at step 12 (5.4000)");
  CHECK(row.candidate_text == "not reached (best 5.5000 at step 12)");
  CHECK(row.ratio_text == "–");
  CHECK(row.steps_ratio_text == "2.00");
  // The chart: both curves and the target, loss against training seconds.
  REQUIRE(row.chart.series.size() == 3);
  CHECK(row.chart.series[0].label == "fsdp");
  CHECK(row.chart.series[1].label == "share");
  CHECK(row.chart.series[2].label == "target 5.4000");
  CHECK(row.chart.y_label == "held-out loss");
  CHECK(row.chart.x_label == "training time (s)");
  CHECK(row.chart.series[0].markers.size() == 7);
  CHECK(row.chart.series[0].markers[3].title == "fsdp step 6: 5.8000 at 6.00 s");
  CHECK(row.chart.y_ticks.front().label != "0");  // the axis spans the losses
}

TEST_CASE("report equal quality: a plan's quality_target both reach gives the ratio, interpolated") {
  RunRecord run = MakeRun(1);
  run.plan_text = R"yaml(protocol: 1
name: q
models:
  m: {preset: tiny}
datasets:
  corpus: {format: text, path: corpus.txt}
defaults:
  training: {batch_size: 8, seq_len: 128, device: cpu, eval_every: 2}
stages:
  - name: s
    cases:
      - {id: f, workload: pretrain, backend: fsdp, model: m, dataset: corpus, nodes: 1, steps: 12,
         quality_target: {loss: 5.65}}
      - {id: s, workload: pretrain, backend: share, model: m, dataset: corpus, topology: "n0:2x1", steps: 12}
)yaml";
  ReportData data = Compute({RunWith(run, {Fsdp(), Share()})});
  const ModelReport& m = data.models.at(0);
  REQUIRE(m.equal_quality.size() == 1);
  const EqualQualityRow& row = m.equal_quality[0];
  CHECK(row.target_text == "5.6500 (the plan's quality_target)");
  // fsdp: between step 6 (5.80 at 6 s) and step 8 (5.60 at 8 s): 6 + 0.15/0.2·2 = 7.5 s.
  CHECK(row.baseline_text == "7.50 s, interpolated between step 6 (5.8000 at 6.00 s) and step 8 (5.6000 at 8.00 s)");
  // share: between step 6 (5.70 at 3 s) and step 8 (5.60 at 4 s): 3 + 0.05/0.1·1 = 3.5 s.
  CHECK(row.candidate_text == "3.50 s, interpolated between step 6 (5.7000 at 3.00 s) and step 8 (5.6000 at 4.00 s)");
  CHECK(row.ratio_text == "2.14");  // 7.5 / 3.5
  CHECK(m.verdict.at(0).equal_quality ==
        "2.14× at equal quality (held-out loss 5.6500, the plan's quality_target: fsdp 7.50 s, share 3.50 s of "
        "training)");
  // The Markdown report tabulates the row.
  auto md = RenderReport(data, ReportFormat::kMarkdown, "");
  REQUIRE(md.ok());
  CHECK(md->find("### Speed-up at equal quality") != std::string::npos);
  CHECK(md->find("| pretrain 12 steps | 1 node | 5.6500 (the plan's quality_target) | 7.50 s, interpolated between "
                 "step 6 (5.8000 at 6.00 s) and step 8 (5.6000 at 8.00 s) | 3.50 s, interpolated between step 6 "
                 "(5.7000 at 3.00 s) and step 8 (5.6000 at 4.00 s) | 2.14 | 2.00 |") != std::string::npos);
  auto html = RenderReport(data, ReportFormat::kHtml, "");
  REQUIRE(html.ok());
  CHECK(html->find("aria-label=\"held-out loss against training time (s)\"") != std::string::npos);
}

TEST_CASE("report equal quality: a row read from a longer case's first steps needs a point at its length") {
  // fsdp ran 6 steps; share 12, reported at 6 from its first steps.
  ReportCaseInput fsdp = TrainCase("f", "m", "pretrain", "fsdp", 1, "", "steps", 6, 10);
  fsdp.measurements.push_back(M(metric::kEvalLoss, 5.80));
  fsdp.eval_curve = {P(0, 0, 6.20), P(2, 2, 6.00), P(4, 4, 5.90), P(6, 6, 5.80)};
  ReportCaseInput share = Share();
  Measurement at6 = M(metric::kWallSeconds, 5, Provenance::kPrefix, "computed from the first 6 of 12 steps");
  at6.length_unit = "steps";
  at6.length_count = 6;
  share.measurements.push_back(at6);
  ReportData data = Compute({RunWith(MakeRun(1), {fsdp, share})});
  const ModelReport& m = data.models.at(0);
  const EqualQualityRow* row6 = nullptr;
  for (const EqualQualityRow& r : m.equal_quality)
    if (r.row == "pretrain 6 steps") row6 = &r;
  REQUIRE(row6);
  // Target fsdp's 5.80 at step 6; share's curve up to step 6 first reaches it
  // between step 2 (5.90 at 1 s) and step 4 (5.75 at 2 s): 1 + 0.1/0.15 = 1.67 s.
  CHECK(row6->target_text == "5.8000 (fsdp's at step 6)");
  CHECK(row6->candidate_text ==
        "1.67 s, interpolated between step 2 (5.9000 at 1.00 s) and step 4 (5.7500 at 2.00 s)");
  CHECK(row6->baseline_text == "6.00 s at step 6 (5.8000)");
  CHECK(row6->ratio_text == "3.60");  // 6 / 1.667
}

}  // namespace protocol
