// The candidate against each baseline (docs/report.md, "Against each
// baseline"): the methodology's fsdp and a further baseline (fsdp-hybrid, by
// default) beside share on the same node count, with the ratios' rules and
// markers, bytes between nodes, the verdict, and the refusals.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/formats/csv.h"
#include "report/formats/report_json.h"
#include "report/report.h"
#include "report/report_data.h"
#include "report/verify.h"
#include "report_fixtures.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

using namespace report_test;

constexpr double kMiB = 1024.0 * 1024.0;

ReportCaseInput With(ReportCaseInput c, const std::vector<std::pair<const char*, double>>& figures) {
  for (const auto& [name, value] : figures) c.measurements.push_back(M(name, value, Provenance::kMeasured, ""));
  return c;
}

// One run: fsdp and share on 1 node; fsdp (80G), fsdp-hybrid (10G) and share
// (10G) on 2 nodes, 100 steps each, with bytes between nodes and held-out losses.
std::vector<ReportCaseInput> TwoBaselines() {
  return {
      TrainCase("f1", "m", "pretrain", "fsdp", 1, "", "steps", 100, 300),
      TrainCase("s1", "m", "pretrain", "share", 1, "", "steps", 100, 150),
      With(TrainCase("f2", "m", "pretrain", "fsdp", 2, "80G", "steps", 100, 600),
           {{metric::kEvalLoss, 2.5}, {metric::kBytesCommunicated, 600 * kMiB}, {metric::kBytesBetweenNodes, 300 * kMiB}}),
      With(TrainCase("h2", "m", "pretrain", "fsdp-hybrid", 2, "10G", "steps", 100, 400),
           {{metric::kEvalLoss, 2.4},
            {metric::kBytesCommunicated, 500 * kMiB},
            {metric::kBytesBetweenNodes, 40 * kMiB},
            {metric::kCommHiddenShare, 0.7352}}),
      With(TrainCase("s2", "m", "pretrain", "share", 2, "10G", "steps", 100, 200),
           {{metric::kEvalLoss, 2.6}, {metric::kBytesCommunicated, 20 * kMiB}, {metric::kBytesBetweenNodes, 10 * kMiB}}),
  };
}

std::vector<std::string> Columns(const ReportTable& t) { return t.columns; }

std::vector<std::string> VerdictTexts(const ModelReport& m, const std::string& table) {
  std::vector<std::string> out;
  for (const VerdictLine& v : m.verdict)
    if (v.table == table) out.push_back(v.text);
  return out;
}

}  // namespace

TEST_CASE("report baselines: share against fsdp and fsdp-hybrid on 2 nodes, each with its bytes between nodes") {
  ReportData data = Compute({RunWith(MakeRun(1), TwoBaselines())});
  CHECK(data.further_baseline_systems == std::vector<std::string>{"fsdp-hybrid"});
  const ModelReport& m = data.models.at(0);
  // The methodology's table is as before: no column of the further baseline.
  const ReportTable* training = FindTable(m, "training");
  REQUIRE(training);
  CHECK(Columns(*training) == std::vector<std::string>{"fsdp 1 node", "share 1 node", "fsdp 2 nodes (80G)",
                                                       "share 2 nodes"});
  const ReportTable* t = FindTable(m, "baselines");
  REQUIRE(t);
  CHECK(t->title == "share against each baseline");
  CHECK(Columns(*t) == std::vector<std::string>{"fsdp (80G) (min)", "fsdp (80G) / share",
                                                "fsdp (80G) bytes between nodes", "fsdp-hybrid (10G) (min)",
                                                "fsdp-hybrid (10G) / share", "fsdp-hybrid (10G) bytes between nodes",
                                                "share (10G) (min)", "share (10G) bytes between nodes"});
  REQUIRE(t->rows.size() == 1);  // the 1-node row has no further baseline
  CHECK(t->rows[0].label == "pretrain 100 steps — 2 nodes");
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"10.0", "3.00", "300.00 MiB", "6.7", "2.00", "40.00 MiB",
                                                      "3.3", "10.00 MiB"});
  CHECK(t->efficiency.empty());
  CHECK(t->note.find("fsdp-hybrid: PyTorch FSDP's HYBRID_SHARD") != std::string::npos);
  // The ratio cells name their runs, as every ratio does.
  CHECK(t->rows[0].cells[4].numerator_run_id == 1);
  CHECK(t->rows[0].cells[4].denominator_run_id == 1);
  // Tabulated: not a result in no table.
  CHECK(m.untabulated.empty());

  CHECK(VerdictTexts(m, "baselines") ==
        std::vector<std::string>{
            "m pretrain 100 steps, 2 nodes (fsdp over 80G, fsdp-hybrid over 10G, share over 10G): share is 3.00× "
            "faster than fsdp and 2.00× faster than fsdp-hybrid (held-out loss 2.6000 vs 2.5000 for fsdp (+4.0 %) "
            "and 2.4000 for fsdp-hybrid (+8.3 %)), moving 10.00 MiB between nodes (fsdp 300.00 MiB, fsdp-hybrid "
            "40.00 MiB); no interval (fewer than 3 repeats)."});
  // Its row of the verdict table: the further baseline only (fsdp's row is the training table's).
  const VerdictLine& row = m.verdict.at(2);
  CHECK(row.table == "baselines");
  CHECK(row.compared == "pretrain 100 steps, 2 nodes (fsdp over 80G, fsdp-hybrid over 10G, share over 10G): share vs "
                        "fsdp-hybrid");
  CHECK(row.speedup == "2.00× (n=1)");
  CHECK(row.loss_difference == "+8.3 %");
  CHECK(row.bytes_between_nodes == "10.00 MiB vs 40.00 MiB");
  CHECK(row.caveats.empty());
  CHECK(row.conclusion == "pretrain 100 steps, 2 nodes (fsdp over 80G, fsdp-hybrid over 10G, share over 10G): share "
                          "is 2.00× faster than fsdp-hybrid, its held-out loss 8.3 % higher; one repeat, so no "
                          "interval yet.");
  // The methodology's training line shows the bytes between nodes where stored.
  const std::vector<std::string> training_lines = VerdictTexts(m, "training");
  REQUIRE(training_lines.size() == 2);
  CHECK(training_lines[1] ==
        "m pretrain 100 steps, 2 nodes (fsdp over 80G, share over 10G): share is 3.00× faster than fsdp (held-out "
        "loss 2.6000 vs 2.5000 for fsdp, +4.0 %), moving 20.00 MiB, not split by group, 10.00 MiB of it between "
        "nodes (fsdp 600.00 MiB, 300.00 MiB of it between nodes); no interval (fewer than 3 repeats).");
  // One sentence for the further baseline's ratio (fsdp's is the training table's), with its worse loss.
  CHECK(std::count(m.sentences.begin(), m.sentences.end(),
                   "share is 2.00× faster than fsdp-hybrid on 2 nodes (200 %) for pretrain 100 steps (fsdp-hybrid "
                   "over 10G, share over 10G), but its held-out loss is 2.6000 vs 2.4000 for fsdp-hybrid; no "
                   "interval (fewer than 3 repeats).") == 1);
  CHECK(m.sentences.size() == 3);
  // Appendix and provenance: the further baseline's time, not the repeated cells.
  int appendix = 0;
  for (const AppendixEntry& a : m.appendix)
    if (a.table == t->title) {
      ++appendix;
      CHECK(a.column == "fsdp-hybrid (10G) (min)");
    }
  CHECK(appendix == 1);
  // The ratios list holds both ratios of the new table.
  int ratios = 0;
  for (const RatioEntry& r : m.ratios) ratios += r.table == t->title;
  CHECK(ratios == 2);
}

TEST_CASE("report baselines: quality & cost shows bytes between nodes, additional metrics the share hidden") {
  ReportData data = Compute({RunWith(MakeRun(1), TwoBaselines())});
  const ModelReport& m = data.models.at(0);
  const ReportTable* q = FindTable(m, "quality");
  REQUIRE(q);
  CHECK(Columns(*q) == std::vector<std::string>{"eval loss", "final loss", "bytes communicated", "bytes between nodes"});
  std::vector<std::string> labels;
  for (const ReportRow& r : q->rows) labels.push_back(r.label);
  CHECK(labels == std::vector<std::string>{"pretrain 100 steps — fsdp 2 nodes (80G)",
                                           "pretrain 100 steps — share 2 nodes",
                                           "pretrain 100 steps — fsdp-hybrid 2 nodes (10G)"});
  CHECK(Texts(q->rows[2]) == std::vector<std::string>{"2.4000", "–", "500.00 MiB", "40.00 MiB"});
  const ReportTable* metrics = FindTable(m, "metrics");
  REQUIRE(metrics);
  const auto col = std::find(metrics->columns.begin(), metrics->columns.end(), "communication hidden (%)");
  REQUIRE(col != metrics->columns.end());
  REQUIRE(metrics->rows.size() == 1);
  CHECK(metrics->rows[0].label == "pretrain 100 steps — fsdp-hybrid 2 nodes (10G)");
  CHECK(metrics->rows[0].cells[col - metrics->columns.begin()].text == "73.5");
}

TEST_CASE("report baselines: only the methodology's baseline gives no new table") {
  ReportData data = ComputeReport(MethodologyInput(), ReportOptions());
  for (const ModelReport& m : data.models) {
    CAPTURE(m.model);
    CHECK(FindTable(m, "baselines") == nullptr);
    CHECK(VerdictTexts(m, "baselines").empty());
  }
  std::vector<ReportCaseInput> cases = TwoBaselines();
  cases.erase(cases.begin() + 3);  // no fsdp-hybrid
  ReportData no_hybrid = Compute({RunWith(MakeRun(1), cases)});
  CHECK(FindTable(no_hybrid.models.at(0), "baselines") == nullptr);
  // No quality column for a figure no row has.
  const ReportTable* metrics = FindTable(no_hybrid.models.at(0), "metrics");
  CHECK((metrics == nullptr || std::find(metrics->columns.begin(), metrics->columns.end(),
                                         "communication hidden (%)") == metrics->columns.end()));
}

TEST_CASE("report baselines: the set of further baselines is an option; without it the hybrid is in no table") {
  ReportOptions none;
  none.further_baselines = {};
  ReportData data = Compute({RunWith(MakeRun(1), TwoBaselines())}, none);
  const ModelReport& m = data.models.at(0);
  CHECK(FindTable(m, "baselines") == nullptr);
  REQUIRE(m.untabulated.size() == 1);
  CHECK(StartsWith(m.untabulated[0], "pretrain 100 steps fsdp-hybrid 2 nodes (10G): newest ok result run 1"));
  // Another system as the further baseline; the baseline and the candidate themselves are ignored.
  ReportOptions other;
  other.further_baselines = {"fsdp", "ddp", "share", "ddp"};
  CHECK(FurtherBaselines(other) == std::vector<std::string>{"ddp"});
  std::vector<ReportCaseInput> cases = TwoBaselines();
  cases[3].record.system = "ddp";
  const ReportTable* t = FindTable(Compute({RunWith(MakeRun(1), cases)}, other).models.at(0), "baselines");
  REQUIRE(t);
  CHECK(t->columns[3] == "ddp (10G) (min)");
  CHECK(t->note.find("HYBRID_SHARD") == std::string::npos);
}

TEST_CASE("report baselines: a ratio between different work is refused, and the verdict says why") {
  // The stored plan: the hybrid case trains on other sequences than share's.
  RunRecord run = MakeRun(1);
  run.plan_text = R"yaml(protocol: 1
name: w
models:
  m: {preset: tiny}
datasets:
  corpus: {format: text, path: corpus.txt}
cluster:
  launcher: local
  nodes:
    - {name: n0, host: localhost, gpus: 0}
    - {name: n1, host: localhost, gpus: 0}
defaults:
  training: {batch_size: 8, seq_len: 128, device: cpu}
stages:
  - name: s
    cases:
      - {id: f2, workload: pretrain, backend: fsdp, model: m, dataset: corpus, nodes: 2, steps: 100}
      - {id: h2, workload: pretrain, backend: fsdp, model: m, dataset: corpus, nodes: 2, steps: 100,
         training: {sharding: hybrid, seq_len: 64}}
      - {id: s2, workload: pretrain, backend: share, model: m, dataset: corpus, topology: "n0:1x1 n1:1x1",
         steps: 100}
)yaml";
  ReportData data = Compute({RunWith(run, {TrainCase("f2", "m", "pretrain", "fsdp", 2, "", "steps", 100, 600),
                                           TrainCase("h2", "m", "pretrain", "fsdp-hybrid", 2, "", "steps", 100, 400),
                                           TrainCase("s2", "m", "pretrain", "share", 2, "", "steps", 100, 200)})});
  const ModelReport& m = data.models.at(0);
  const ReportTable* t = FindTable(m, "baselines");
  REQUIRE(t);
  REQUIRE(t->rows.size() == 1);
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"10.0", "3.00", "–", "6.7", "–", "–", "3.3", "–"});
  CHECK(t->rows[0].cells[4].refused == "no ratio: the sides did different work (seq_len: 64 vs 128)");
  CHECK(VerdictTexts(m, "baselines") ==
        std::vector<std::string>{
            "m pretrain 100 steps, 2 nodes: share is 3.00× faster than fsdp; no ratio to fsdp-hybrid: the sides did "
            "different work (seq_len: 64 vs 128) (no held-out loss stored), bytes between nodes of share not stored "
            "(fsdp not stored, fsdp-hybrid not stored); the 2 nodes of fsdp and fsdp-hybrid and share are one host "
            "(localhost); no interval (fewer than 3 repeats)."});
  CHECK(std::count(m.sentences.begin(), m.sentences.end(),
                   "No ratio of share to fsdp-hybrid on 2 nodes for pretrain 100 steps: the sides did different work "
                   "(seq_len: 64 vs 128).") == 1);
}

TEST_CASE("report baselines: markers *, † and contended as the efficiency coefficients; bytes of a case's own length") {
  // As the shipped plans: the baselines measured at 100 steps and extrapolated
  // to 1000, share measured at 1000 and not provided at 100, in another run.
  ReportCaseInput hybrid = Extrapolated(
      With(TrainCase("h2", "m", "pretrain", "fsdp-hybrid", 2, "10G", "steps", 100, 400),
           {{metric::kBytesBetweenNodes, 40 * kMiB}, {metric::kContention, 0.5}}),
      "steps", 1000, 4000, "wall_seconds(100 steps) × 10");
  ReportCaseInput share = With(TrainCase("s2", "m", "pretrain", "share", 2, "10G", "steps", 1000, 1200),
                               {{metric::kBytesBetweenNodes, 10 * kMiB}});
  Measurement x = M(metric::kWallSeconds, 0, Provenance::kDeclared);
  x.value.reset();
  x.marker = "not-provided";
  x.length_unit = "steps";
  x.length_count = 100;
  share.measurements.push_back(x);
  ReportData data = Compute({RunWith(MakeRun(1), {hybrid}), RunWith(MakeRun(2), {share})});
  const ModelReport& m = data.models.at(0);
  const ReportTable* t = FindTable(m, "baselines");
  REQUIRE(t);
  CHECK(Columns(*t) == std::vector<std::string>{"fsdp-hybrid (10G) (min)", "fsdp-hybrid (10G) / share",
                                                "fsdp-hybrid (10G) bytes between nodes", "share (10G) (min)",
                                                "share (10G) bytes between nodes"});
  REQUIRE(t->rows.size() == 2);
  INFO(Join(Texts(t->rows[0]), " | "));
  INFO(Join(Texts(t->rows[1]), " | "));
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"6.7 !", "–", "40.00 MiB", "X", "–"});
  CHECK(Texts(t->rows[1]) == std::vector<std::string>{"66.7 * !", "3.33 * †", "–", "20.0", "10.00 MiB"});
  const std::vector<std::string> lines = VerdictTexts(m, "baselines");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "m pretrain 1000 steps, 2 nodes (fsdp-hybrid over 10G, share over 10G): share is 3.33× faster than "
        "fsdp-hybrid (no held-out loss stored), moving 10.00 MiB between nodes (fsdp-hybrid 40.00 MiB over its own "
        "100 steps); fsdp-hybrid figure extrapolated; contended: other processes took 50 % of the CPU while "
        "fsdp-hybrid's figure was measured (less reliable); sides from different runs (fsdp-hybrid run 1, share run "
        "2); no interval (fewer than 3 repeats).");
}

TEST_CASE("report baselines: the verdict names each contended side once") {
  std::vector<ReportCaseInput> cases = TwoBaselines();
  for (size_t i : {2, 3, 4}) cases[i].measurements.push_back(M(metric::kContention, 0.3 + 0.1 * i));
  const ModelReport m = Compute({RunWith(MakeRun(1), cases)}).models.at(0);
  const std::vector<std::string> lines = VerdictTexts(m, "baselines");
  REQUIRE(lines.size() == 1);
  // Its table row shows the further baseline against share: the larger share of those two sides.
  CHECK(m.verdict.back().caveats == std::vector<std::string>{"contended 70 %"});
  CHECK(EndsWith(lines[0], "fsdp-hybrid 40.00 MiB); contended: other processes took 50 % of the CPU while fsdp's "
                           "figure was measured, other processes took 60 % of the CPU while fsdp-hybrid's figure was "
                           "measured, other processes took 70 % of the CPU while share's figure was measured (less "
                           "reliable); no interval (fewer than 3 repeats)."));
}

TEST_CASE("report baselines: a further baseline that failed is listed under failures, not as a result in no table") {
  ReportData data = Compute(
      {RunWith(MakeRun(1), {TrainCase("s2", "m", "pretrain", "share", 2, "10G", "steps", 100, 200),
                            Failed(TrainCase("h2", "m", "pretrain", "fsdp-hybrid", 2, "10G", "steps", 100, 0),
                                   CaseStatus::kFailed, "lost rank 1")})});
  const ModelReport& m = data.models.at(0);
  CHECK(m.untabulated.empty());
  REQUIRE(m.failures.size() == 1);
  const ReportTable* t = FindTable(m, "baselines");
  REQUIRE(t);
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"–", "–", "–", "3.3", "–"});
  CHECK(t->rows[0].cells[0].origin == "no ok result: run 1, case h2 (repeat 0): failed — lost rank 1");
  CHECK(VerdictTexts(m, "baselines").empty());
}

TEST_CASE("report baselines: Markdown, JSON and CSV carry the table; the option is written into the report comment") {
  ReportData data = Compute({RunWith(MakeRun(1), TwoBaselines())});
  auto md = RenderReport(data, ReportFormat::kMarkdown, "");
  REQUIRE(md.ok());
  CHECK(md->find("### share against each baseline\n\n| | fsdp (80G) (min) | fsdp (80G) / share |") != std::string::npos);
  CHECK(md->find("| pretrain 100 steps — 2 nodes | 10.0 | 3.00 | 300.00 MiB | 6.7 | 2.00 | 40.00 MiB | 3.3 | "
                 "10.00 MiB |") != std::string::npos);
  const std::string json = ReportToJson(data).dump();
  CHECK(json.find("\"further_baseline_systems\":[\"fsdp-hybrid\"]") != std::string::npos);
  CHECK(json.find("\"id\":\"baselines\"") != std::string::npos);
  const std::string csv = ReportToCsv(data);
  CHECK(csv.find("m,baselines,pretrain 100 steps — 2 nodes,fsdp-hybrid (10G) / share,2,,,measured,,") !=
        std::string::npos);

  ReportInvocation inv;
  inv.options.run_ids = {1};
  CHECK(InvocationText(inv) == "--run 1 --format md");
  inv.options.further_baselines = {"fsdp-hybrid", "ddp"};
  CHECK(InvocationText(inv) == "--run 1 --further-baseline fsdp-hybrid --further-baseline ddp --format md");
  auto back = ParseReportComment("<!-- protocol report: " + InvocationText(inv) + " -->\n");
  REQUIRE(back.ok());
  CHECK(back->options.further_baselines == inv.options.further_baselines);
  inv.options.further_baselines = {};
  CHECK(InvocationText(inv) == "--run 1 --further-baseline none --format md");
  back = ParseReportComment("<!-- protocol report: " + InvocationText(inv) + " -->\n");
  REQUIRE(back.ok());
  CHECK(back->options.further_baselines.empty());
  back = ParseReportComment("<!-- protocol report: --run 1 --format md -->\n");
  REQUIRE(back.ok());
  CHECK(back->options.further_baselines == std::vector<std::string>{"fsdp-hybrid"});
}

}  // namespace protocol
