// Report extras: ratio intervals over repeats, scaling 1 → N nodes and TGS,
// quality and cost beside speed, the HTML provenance appendix and history
// charts. docs/report.md.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/report_data.h"
#include "report/formats/report_json.h"
#include "report_fixtures.h"

namespace protocol {
namespace {

using namespace report_test;

// `seconds.size()` repeats of one training cell.
std::vector<ReportCaseInput> Repeats(const std::string& id, const std::string& system, int nodes,
                                     const std::string& network, const std::vector<double>& seconds) {
  std::vector<ReportCaseInput> out;
  for (size_t i = 0; i < seconds.size(); ++i) {
    out.push_back(TrainCase(id, "m", "pretrain", system, nodes, network, "steps", 1000, seconds[i], static_cast<int>(i)));
  }
  return out;
}

std::vector<ReportCaseInput> Concat(std::vector<ReportCaseInput> a, const std::vector<ReportCaseInput>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- 1. ratio intervals --------------------------------------------------------

TEST_CASE("report extras: a ratio whose interval crosses 1 is marked ~ and its sentence gives the interval") {
  auto data = Compute({RunWith(MakeRun(1), Concat(Repeats("a", "fsdp", 1, "", {600, 660, 630}),
                                                  Repeats("b", "share", 1, "", {640, 590, 610})))});
  const ModelReport& m = data.models[0];
  const ReportTable* t = FindTable(m, "training");
  REQUIRE(t != nullptr);
  const ReportCell& ratio = t->efficiency[0].cells[0];
  CHECK(ratio.text == "1.03 ~");
  CHECK(ratio.marker == "~");
  REQUIRE(ratio.interval.has_value());
  CHECK(FormatRatio(ratio.interval->low) == "0.94");
  CHECK(FormatRatio(ratio.interval->high) == "1.12");
  CHECK(*ratio.value == doctest::Approx(630.0 / 610.0));  // the point value is never hidden
  CHECK(ratio.origin ==
        "10.5 (run 1) / 10.2 (run 1); 95 % interval 0.94–1.12; the interval crosses 1: not significant");
  REQUIRE(m.sentences.size() == 1);
  CHECK(m.sentences[0] ==
        "share is 1.03× (95 % interval 0.94–1.12) faster than fsdp on 1 node (103 %) for pretrain 1000 steps; "
        "the interval crosses 1: not significant.");
  Json j = ReportToJson(data)["models"][0]["tables"][0];
  CHECK(j["efficiency"][0]["cells"][0]["interval_note"] == "the interval crosses 1: not significant");
  CHECK(j["efficiency"][0]["cells"][0]["interval"]["low"].get<double>() == doctest::Approx(ratio.interval->low));
  CHECK(j["rows"][0]["cells"][0]["repeats"].dump() == "[10.0,11.0,10.5]");
}

TEST_CASE("report extras: a significant ratio keeps its interval and no ~; slower inverts the interval") {
  auto data = Compute({RunWith(MakeRun(1), Concat(Repeats("a", "fsdp", 1, "", {7200, 7260, 7140}),
                                                  Repeats("b", "share", 1, "", {2400, 2430, 2370})))});
  const ReportCell& ratio = FindTable(data.models[0], "training")->efficiency[0].cells[0];
  CHECK(ratio.text == "3.00");
  CHECK(ratio.marker == "");
  REQUIRE(ratio.interval.has_value());
  CHECK(data.models[0].sentences[0] ==
        "share is 3.00× (95 % interval 2.94–3.06) faster than fsdp on 1 node (300 %) for pretrain 1000 steps.");

  auto slow = Compute({RunWith(MakeRun(1), Concat(Repeats("a", "fsdp", 1, "", {800, 810, 790}),
                                                  Repeats("b", "share", 1, "", {1000, 990, 1010})))});
  CHECK(slow.models[0].sentences[0] ==
        "share is 1.25× (95 % interval 1.22–1.28) slower than fsdp on 1 node (80 %) for pretrain 1000 steps.");
}

TEST_CASE("report extras: fewer than 3 repeats on a side gives no interval, and the sentence says so") {
  auto data = Compute({RunWith(MakeRun(1), Concat(Repeats("a", "fsdp", 1, "", {600, 660, 630}),
                                                  Repeats("b", "share", 1, "", {300, 310})))});
  const ReportCell& ratio = FindTable(data.models[0], "training")->efficiency[0].cells[0];
  CHECK(ratio.text == "2.07");
  CHECK(!ratio.interval.has_value());
  CHECK(ratio.interval_note == "no interval (fewer than 3 repeats)");
  CHECK(data.models[0].sentences[0] ==
        "share is 2.07× faster than fsdp on 1 node (207 %) for pretrain 1000 steps; no interval (fewer than 3 "
        "repeats).");
}

TEST_CASE("report extras: inference ratios get intervals from repeats too") {
  std::vector<ReportCaseInput> cases;
  for (int i = 0; i < 3; ++i) {
    auto b = WithInferenceFigures(InferenceCase("i1", "m", "fsdp", 1, "", "single-stream"), 300 + i, 0.04, 25 + i);
    b.record.repeat = i;
    auto s = WithInferenceFigures(InferenceCase("i2", "m", "share", 1, "", "single-stream"), 299 - i, 0.04, 26 - i);
    s.record.repeat = i;
    cases.push_back(b);
    cases.push_back(s);
  }
  auto data = Compute({RunWith(MakeRun(1), cases)});
  const ReportTable* t = FindTable(data.models[0], "inference-single-stream");
  REQUIRE(t != nullptr);
  CHECK(Texts(t->efficiency[0]) == std::vector<std::string>{"1", "1.01"});
  CHECK(Texts(t->efficiency[1]) == std::vector<std::string>{"1", "1.00 ~"});
  CHECK(Texts(t->efficiency[2]) == std::vector<std::string>{"1", "0.96 ~"});
}

}  // namespace
}  // namespace protocol

namespace protocol {
namespace {

// ---- 2. scaling 1 → N nodes ----------------------------------------------------

TEST_CASE("report extras: scaling efficiency is T1 / (N · TN) per row and system, with TGS on both sides") {
  auto b1 = TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 6000);
  b1.measurements.push_back(M(metric::kTgs, 400, Provenance::kMeasured, "tokens/s"));
  auto b2 = TrainCase("b", "m", "pretrain", "fsdp", 2, "80G", "steps", 100, 4000);
  b2.measurements.push_back(M(metric::kTgs, 300, Provenance::kMeasured, "tokens/s"));
  auto s2 = TrainCase("d", "m", "pretrain", "share", 2, "10G", "steps", 100, 1500);
  auto f2 = TrainCase("e", "m", "finetune", "fsdp", 2, "80G", "steps", 50, 600);
  auto data = Compute({RunWith(MakeRun(1), {b1, b2, TrainCase("c", "m", "pretrain", "share", 1, "", "steps", 100, 2400),
                                            s2, f2})});
  const ReportTable* t = FindTable(data.models[0], "scaling");
  REQUIRE(t != nullptr);
  CHECK(data.models[0].tables[1].id == "scaling");  // right after the training table
  CHECK(t->title == "Scaling 1 → N nodes");
  CHECK(t->columns == std::vector<std::string>{"1 node (min)", "N nodes (min)", "N", "scaling efficiency",
                                               "TGS 1 node", "TGS N nodes"});
  REQUIRE(t->rows.size() == 3);
  CHECK(t->rows[0].label == "pretrain 100 steps — fsdp 2 nodes (80G)");
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"100.0", "66.7", "2", "0.75", "400.0", "300.0"});
  CHECK(*t->rows[0].cells[3].value == doctest::Approx(6000.0 / (2 * 4000.0)));
  CHECK(t->rows[0].cells[3].origin == "T1 / (N · TN) = 100.0 (run 1) / (2 × 66.7 (run 1))");
  CHECK(t->rows[0].cells[3].numerator_run_id == 1);
  CHECK(t->rows[0].cells[3].denominator_run_id == 1);
  CHECK(t->rows[1].label == "pretrain 100 steps — share 2 nodes (10G)");
  CHECK(Texts(t->rows[1]) == std::vector<std::string>{"40.0", "25.0", "2", "0.80", "–", "–"});
  // No 1-node finetune result: that side is missing, no efficiency.
  CHECK(t->rows[2].label == "finetune 50 steps — fsdp 2 nodes (80G)");
  CHECK(Texts(t->rows[2]) == std::vector<std::string>{"–", "10.0", "2", "–", "–", "–"});
  CHECK(t->note.find("T1 / (N · TN)") != std::string::npos);
  CHECK(t->efficiency.empty());
}

TEST_CASE("report extras: no multi-node result, no scaling table; an extrapolated side marks the efficiency *") {
  auto none = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 600)})});
  CHECK(FindTable(none.models[0], "scaling") == nullptr);
  auto data = Compute(
      {RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "share", 1, "", "steps", 1000, 6000),
                            Extrapolated(TrainCase("b", "m", "pretrain", "share", 2, "10G", "steps", 100, 300), "steps",
                                         1000, 2000, "1000 × 2 s")})});
  const ReportTable* t = FindTable(data.models[0], "scaling");
  REQUIRE(t != nullptr);
  REQUIRE(t->rows.size() == 2);  // b's measured 100 steps (no 1-node side), then 1000 steps
  CHECK(t->rows[1].label.find("pretrain 1000 steps") == 0);
  CHECK(Texts(t->rows[1]) == std::vector<std::string>{"100.0", "33.3 *", "2", "1.50 *", "–", "–"});
  CHECK(t->rows[1].cells[3].provenance == "extrapolated");
}

}  // namespace
}  // namespace protocol

namespace protocol {
namespace {

// ---- 3. quality and cost beside speed ------------------------------------------

ReportCaseInput WithMetrics(ReportCaseInput c, const std::vector<std::pair<std::string, double>>& metrics) {
  for (const auto& [name, value] : metrics) c.measurements.push_back(M(name, value, Provenance::kMeasured, ""));
  return c;
}

TEST_CASE("report extras: quality & cost shows held-out losses, bytes in human units and merge time") {
  auto b = WithMetrics(TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 6000),
                       {{metric::kEvalLoss, 2.95}, {metric::kFinalLoss, 2.80}, {metric::kBytesCommunicated, 512}});
  auto s = WithMetrics(TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 100, 2000),
                       {{metric::kEvalLoss, 3.1}, {"best_group_eval_loss", 3.02}, {metric::kFinalLoss, 2.7},
                        {metric::kBytesCommunicated, 1536}, {"merge_seconds", 12.5}});
  auto s2 = WithMetrics(TrainCase("c", "m", "pretrain", "share", 2, "10G", "steps", 100, 1000),
                        {{metric::kBytesCommunicated, 3.25 * 1024 * 1024}});
  auto data = Compute({RunWith(MakeRun(1), {b, s, s2})});
  const ModelReport& m = data.models[0];
  const ReportTable* q = FindTable(m, "quality");
  REQUIRE(q != nullptr);
  CHECK(q->columns == std::vector<std::string>{"eval loss", "best group eval loss", "final loss",
                                               "bytes communicated", "merge time (s)"});
  REQUIRE(q->rows.size() == 3);
  CHECK(q->rows[0].label == "pretrain 100 steps — fsdp 1 node");
  CHECK(Texts(q->rows[0]) == std::vector<std::string>{"2.9500", "–", "2.8000", "512 B", "–"});
  CHECK(Texts(q->rows[1]) == std::vector<std::string>{"3.1000", "3.0200", "2.7000", "1.50 KiB", "12.5"});
  CHECK(Texts(q->rows[2]) == std::vector<std::string>{"–", "–", "–", "3.25 MiB", "–"});
  CHECK(*q->rows[2].cells[3].value == doctest::Approx(3.25 * 1024 * 1024));  // the value stays in bytes
  REQUIRE(m.sentences.size() == 1);
  CHECK(m.sentences[0] ==
        "share is 3.00× faster than fsdp on 1 node (300 %) for pretrain 100 steps, but its held-out loss is 3.1000 "
        "vs 2.9500 for fsdp; no interval (fewer than 3 repeats).");
}

TEST_CASE("report extras: optional quality columns are left out when absent; a better or equal loss adds nothing") {
  auto b = WithMetrics(TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 1000),
                       {{metric::kEvalLoss, 3.2}, {metric::kBytesCommunicated, 5.0 * 1024 * 1024 * 1024}});
  auto s = WithMetrics(TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 100, 2000), {{metric::kEvalLoss, 3.1}});
  auto data = Compute({RunWith(MakeRun(1), {b, s})});
  const ReportTable* q = FindTable(data.models[0], "quality");
  REQUIRE(q != nullptr);
  CHECK(q->columns == std::vector<std::string>{"eval loss", "final loss", "bytes communicated"});
  CHECK(Texts(q->rows[0]) == std::vector<std::string>{"3.2000", "–", "5.00 GiB"});
  CHECK(data.models[0].sentences[0] ==
        "share is 2.00× slower than fsdp on 1 node (50 %) for pretrain 100 steps; no interval (fewer than 3 "
        "repeats).");
  // Slower and worse: "and … also worse".
  s.measurements[1].value = 3.3;
  auto worse = Compute({RunWith(MakeRun(1), {b, s})});
  CHECK(worse.models[0].sentences[0] ==
        "share is 2.00× slower than fsdp on 1 node (50 %) for pretrain 100 steps, and its held-out loss is also "
        "worse: 3.3000 vs 3.2000 for fsdp; no interval (fewer than 3 repeats).");
}

}  // namespace
}  // namespace protocol

namespace protocol {
namespace {

// ---- 4. provenance of every cell, history over all runs ----------------------

RunRecord PlannedRun(int64_t id, const std::string& plan_sha) {
  RunRecord r = MakeRun(id);
  r.plan_sha256 = plan_sha;
  return r;
}

ReportCaseInput Logged(ReportCaseInput c, const std::string& sha) {
  c.record.log_sha256 = sha;
  return c;
}

TEST_CASE("report extras: every figure of every cell has its run, case, how, method or source and sha256s") {
  auto data = Compute(
      {RunWith(PlannedRun(2, "p2"),
               {Logged(TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 600, 0), "log-a0"),
                TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 660, 1),
                Logged(Extrapolated(TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 10, 30), "steps", 100,
                                    300, "100 × 3 s"),
                       "log-b")}),
       RunWith(MakeRun(3, "import", "vendor <table>"),
               {Imported(TrainCase("f", "m", "finetune", "fsdp", 1, "", "steps", 50, 120), "vendor <table>")})});
  const auto& p = data.models[0].provenance;
  REQUIRE(p.size() == 5);
  CHECK(p[0].row == "pretrain 10 steps");  // b's own, measured length
  CHECK(p[0].source.case_id == "b");
  CHECK(p[1].table == "Training (minutes)");
  CHECK(p[1].row == "pretrain 100 steps");
  CHECK(p[1].column == "fsdp 1 node");
  CHECK(p[1].source.run_id == 2);
  CHECK(p[1].source.case_id == "a");
  CHECK(p[1].source.repeat == 0);
  CHECK(p[1].source.value_text == "10.0 min");
  CHECK(p[1].source.how == "measured");
  CHECK(p[1].source.detail == "");
  CHECK(p[1].source.log_sha256 == "log-a0");
  CHECK(p[1].source.plan_sha256 == "p2");
  CHECK(p[2].source.repeat == 1);
  CHECK(p[2].source.value_text == "11.0 min");
  CHECK(p[2].source.log_sha256 == "");
  CHECK(p[3].column == "share 1 node");
  CHECK(p[3].source.value_text == "5.0 min *");
  CHECK(p[3].source.how == "extrapolated");
  CHECK(p[3].source.detail == "100 × 3 s");
  CHECK(p[3].source.log_sha256 == "log-b");
  CHECK(p[4].row == "finetune 50 steps");
  CHECK(p[4].source.how == "imported");
  CHECK(p[4].source.detail == "vendor <table>");
  CHECK(p[4].source.run_id == 3);
}

TEST_CASE("report extras: history charts cover every run of the input, selected or not, up to history_through") {
  std::vector<ReportRunInput> runs;
  runs.push_back(RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 600)}));
  runs.push_back(RunWith(MakeRun(2), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 720),
                                      TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 840, 1),
                                      TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 780, 2),
                                      TrainCase("s", "m", "pretrain", "share", 1, "", "steps", 100, 300)}));
  runs.push_back(RunWith(MakeRun(3), {Failed(TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 0),
                                             CaseStatus::kFailed, "oom")}));
  runs.push_back(RunWith(MakeRun(4), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 660)}));
  ReportOptions only4;
  only4.run_ids = {4};
  auto data = Compute(runs, only4);
  REQUIRE(data.runs.size() == 1);  // the tables read run 4 only
  const auto& h = data.models[0].history;
  REQUIRE(h.size() == 1);  // the share cell has one point: no chart
  CHECK(h[0].identity == "pretrain 100 steps fsdp 1 node");
  CHECK(h[0].y_label == "wall time (min)");
  CHECK(h[0].chart.x_label == "run id");
  REQUIRE(h[0].chart.series.size() == 1);
  const auto& markers = h[0].chart.series[0].markers;
  REQUIRE(markers.size() == 3);  // runs 1, 2, 4 (run 3 failed)
  CHECK(markers[0].title == "run 1: 10.0 min");
  CHECK(markers[1].title == "run 2: 13.0 min (median of 3)");
  CHECK(markers[2].title == "run 4: 11.0 min");
  std::vector<std::string> ticks;
  for (const auto& t : h[0].chart.x_ticks) ticks.push_back(t.label);
  CHECK(ticks == std::vector<std::string>{"1", "2", "3", "4"});
  CHECK(markers[0].cx == doctest::Approx(h[0].chart.left));
  CHECK(markers[2].cx == doctest::Approx(h[0].chart.right));

  ReportOptions through2 = only4;
  through2.history_through = 2;
  auto bounded = Compute(runs, through2);
  REQUIRE(bounded.models[0].history.size() == 1);
  CHECK(bounded.models[0].history[0].chart.series[0].markers.size() == 2);
  through2.history_through = 1;
  CHECK(Compute(runs, through2).models[0].history.empty());  // one point: no chart
}

TEST_CASE("report extras: inference history plots tokens per second") {
  auto i1 = WithInferenceFigures(InferenceCase("i", "m", "fsdp", 1, "", ""), 10, 0.1, 10);
  auto i2 = WithInferenceFigures(InferenceCase("i", "m", "fsdp", 1, "", ""), 8, 0.08, 12.5);
  auto data = Compute({RunWith(MakeRun(5), {i1}), RunWith(MakeRun(9), {i2})});
  const auto& h = data.models[0].history;
  REQUIRE(h.size() == 1);
  CHECK(h[0].identity == "inference fsdp 1 node");
  CHECK(h[0].y_label == "tokens per second");
  CHECK(h[0].chart.series[0].markers[1].title == "run 9: 12.50 tokens/s");
}


TEST_CASE("report extras: energy per token in the verdict and the metrics table; GPU use and link against time") {
  // Two nodes each side; share used less energy per token and its GPUs were busier.
  auto sampled = [](ReportCaseInput c, double joules_per_token, double utilization, double bytes_per_second) {
    Measurement e = M(metric::kEnergyPerToken, joules_per_token);
    e.unit = "J/token";
    c.measurements.push_back(e);
    for (double t : {0.0, 1.0, 2.0}) {
      c.samples.push_back({t, "", "gpu0", quantity::kGpuUtilization, utilization});
      c.samples.push_back({t, "rig1", "eth0", quantity::kNetSent, bytes_per_second * t});
      c.samples.push_back({t, "rig1", "eth0", quantity::kNetReceived, 0});
    }
    return c;
  };
  auto data = Compute({RunWith(MakeRun(1), {sampled(TrainCase("a", "m", "pretrain", "fsdp", 2, "", "steps", 1000, 600),
                                                    0.66, 40, 2e6),
                                            sampled(TrainCase("b", "m", "pretrain", "share", 2, "", "steps", 1000, 300),
                                                    0.41, 90, 1e5)})});
  const ModelReport& m = data.models[0];
  REQUIRE(m.verdict.size() == 1);
  CHECK(m.verdict[0].energy == "energy per token 0.410 J vs 0.660 J for fsdp, -37.9 %");
  CHECK(m.verdict[0].energy_cell == "0.410 vs 0.660 J (-37.9 %)");
  CHECK(m.verdict[0].text.find(", energy per token 0.410 J vs 0.660 J for fsdp, -37.9 %") != std::string::npos);
  const ReportTable* metrics = FindTable(m, "metrics");
  REQUIRE(metrics != nullptr);
  CHECK(std::find(metrics->columns.begin(), metrics->columns.end(), "energy per token (J)") != metrics->columns.end());
  REQUIRE(m.hardware.size() == 1);
  CHECK(m.hardware[0].compared == m.verdict[0].compared);
  REQUIRE(m.hardware[0].gpu.series.size() == 2);
  CHECK(m.hardware[0].gpu.series[0].label == "fsdp (run 1, case a)");
  CHECK(m.hardware[0].gpu.series[1].label == "share (run 1, case b)");
  CHECK(m.hardware[0].gpu.x_label == "seconds since the case began");
  REQUIRE(m.hardware[0].link.series.size() == 2);
  CHECK(m.hardware[0].link.y_label == "link, sent + received (MB/s)");
  CHECK(m.hardware[0].link.series[0].markers.at(0).title == "1.0 s: 2.0 MB/s");
  Json j = ReportView(data)["models"][0];
  CHECK(j["has_energy"] == true);
  CHECK(j["has_hardware"] == true);
  CHECK(j["hardware"][0]["has_link"] == true);
}

TEST_CASE("report extras: no energy cell where a side has none; no hardware chart without samples") {
  ReportCaseInput fsdp = TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 600);
  ReportCaseInput share = TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 1000, 300);
  share.measurements.push_back(M(metric::kEnergyPerToken, 0.4));
  auto data = Compute({RunWith(MakeRun(1), {fsdp, share})});
  REQUIRE(data.models[0].verdict.size() == 1);
  CHECK(data.models[0].verdict[0].energy.empty());
  CHECK(data.models[0].hardware.empty());
  CHECK(ReportView(data)["models"][0]["has_energy"] == false);
}

}  // namespace
}  // namespace protocol
