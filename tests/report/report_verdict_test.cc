// The verdict a report opens with (docs/report.md, "Verdict"), the scaling
// row whose nodes are one host, and the one rule of number formats.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report/formats/numbers.h"
#include "report/report_data.h"
#include "report/tables/verdict.h"
#include "report_fixtures.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

using namespace report_test;

ReportCaseInput With(ReportCaseInput c, const std::vector<std::pair<const char*, double>>& figures) {
  for (const auto& [name, value] : figures) c.measurements.push_back(M(name, value, Provenance::kMeasured, ""));
  return c;
}

// A resolved plan of one fsdp and one share case on 2 nodes; `cluster` is
// its cluster section.
std::string PlanText(const std::string& cluster) {
  return R"yaml(protocol: 1
name: hosts
models:
  m: {preset: tiny}
datasets:
  corpus: {format: text, path: corpus.txt}
)yaml" + cluster +
         R"yaml(defaults:
  training: {batch_size: 8, seq_len: 128, device: cpu}
stages:
  - name: s
    cases:
      - {id: f1, workload: pretrain, backend: fsdp, model: m, dataset: corpus, nodes: 1, steps: 100}
      - {id: f2, workload: pretrain, backend: fsdp, model: m, dataset: corpus, nodes: 2, steps: 100}
      - {id: s1, workload: pretrain, backend: share, model: m, dataset: corpus, topology: "n0:2x1", steps: 100}
      - {id: s2, workload: pretrain, backend: share, model: m, dataset: corpus, topology: "n0:1x1 n1:1x1", steps: 100}
)yaml";
}

// A cluster section: nodes n0 and n1 on these hosts.
std::string Cluster(const std::string& launcher, const std::string& host0, const std::string& host1) {
  return "cluster:\n  launcher: " + launcher + "\n  nodes:\n    - {name: n0, host: " + host0 +
         "}\n    - {name: n1, host: " + host1 + "}\n";
}

ReportData ComputeOnCluster(const std::string& cluster) {
  RunRecord run = MakeRun(1);
  run.plan_text = PlanText(cluster);
  return Compute({RunWith(run, {TrainCase("f1", "m", "pretrain", "fsdp", 1, "", "steps", 100, 600),
                                TrainCase("f2", "m", "pretrain", "fsdp", 2, "", "steps", 100, 400),
                                TrainCase("s1", "m", "pretrain", "share", 1, "", "steps", 100, 300),
                                TrainCase("s2", "m", "pretrain", "share", 2, "", "steps", 100, 200)})});
}

std::vector<std::string> VerdictTexts(const ModelReport& m) {
  std::vector<std::string> out;
  for (const VerdictLine& v : m.verdict) out.push_back(v.text);
  return out;
}

}  // namespace

TEST_CASE("report verdict: one sentence per row with a ratio: speed-up, held-out loss, bytes moved") {
  ReportCaseInput fsdp = With(TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 2000, 7200),
                              {{metric::kEvalLoss, 2.29}});
  ReportCaseInput share = With(TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 2000, 5070),
                               {{metric::kEvalLoss, 2.31},
                                {metric::kBytesWithinGroups, 3.1 * 1024 * 1024 * 1024},
                                {metric::kBytesBetweenGroups, 200.0 * 1024 * 1024},
                                {metric::kBytesCommunicated, 3.1 * 1024 * 1024 * 1024 + 200.0 * 1024 * 1024}});
  ReportData data = Compute({RunWith(MakeRun(1), {fsdp, share})});
  const ModelReport& m = data.models.at(0);
  REQUIRE(m.verdict.size() == 1);
  const VerdictLine& v = m.verdict[0];
  CHECK(v.table == "training");
  CHECK(v.row == "pretrain 2000 steps");
  CHECK(v.scope == "1 node");
  CHECK(v.text ==
        "m pretrain 2000 steps, 1 node: share is 1.42× faster than fsdp (held-out loss 2.3100 vs 2.2900 for fsdp, "
        "+0.873 %), moving 3.10 GiB within groups and 200.00 MiB between groups; no interval (fewer than 3 "
        "repeats).");
  CHECK(m.sentences.size() == 1);  // and its conclusion, as before
}

TEST_CASE("report verdict table: a row's short cells, its conclusion, and the legend of what it uses") {
  ReportCaseInput fsdp = With(TrainCase("a", "m", "pretrain", "fsdp", 2, "", "steps", 100, 600),
                              {{metric::kEvalLoss, 2.5}, {metric::kBytesBetweenNodes, 300.0 * 1024 * 1024}});
  ReportCaseInput share = With(TrainCase("b", "m", "pretrain", "share", 2, "", "steps", 100, 300),
                               {{metric::kEvalLoss, 2.45}, {metric::kContention, 0.4}});
  ReportData data = Compute({RunWith(MakeRun(1), {fsdp, share})});
  const ModelReport& m = data.models.at(0);
  REQUIRE(m.verdict.size() == 1);
  const VerdictLine& v = m.verdict[0];
  CHECK(v.compared == "pretrain 100 steps, 2 nodes: share vs fsdp");
  CHECK(v.speedup == "2.00× (n=1)");
  CHECK(v.loss_difference == "-2.0 %");
  CHECK(v.bytes_between_nodes == "not stored vs 300.00 MiB");
  CHECK(v.caveats == std::vector<std::string>{"contended 40 %"});
  CHECK(v.equal_quality.empty());  // filled by the passes that compute them
  CHECK(v.expected.empty());
  CHECK(v.conclusion == "pretrain 100 steps, 2 nodes: share is 2.00× faster than fsdp, its held-out loss 2.0 % lower; "
                        "one repeat, so no interval yet; measured while the machine was busy, so less reliable.");
  // The legend: each tag used, once, then the n of a speed-up without an interval.
  REQUIRE(m.verdict_legend.size() == 2);
  CHECK(m.verdict_legend[0].tag == "contended N %");
  CHECK(m.verdict_legend[0].meaning.find("marked ! in the tables") != std::string::npos);
  CHECK(m.verdict_legend[1].tag == "n=1");
  // The main table marks the contended figure instead of saying it in the cell.
  const ReportTable* t = FindTable(m, "training");
  REQUIRE(t);
  CHECK(t->rows[0].cells[1].text == "5.0 !");
}

TEST_CASE("report verdict table: with 3 repeats a side the speed-up carries its interval; one crossing 1 is a caveat") {
  auto repeats = [](const char* system, const std::vector<double>& seconds) {
    std::vector<ReportCaseInput> out;
    for (size_t i = 0; i < seconds.size(); ++i) {
      ReportCaseInput c = TrainCase(std::string(system) + "-" + std::to_string(i), "m", "pretrain", system, 1, "",
                                    "steps", 100, seconds[i]);
      c.record.repeat = static_cast<int>(i) + 1;
      out.push_back(c);
    }
    return out;
  };
  auto compute = [&](const std::vector<double>& fsdp, const std::vector<double>& share) {
    std::vector<ReportCaseInput> cases = repeats("fsdp", fsdp);
    for (ReportCaseInput& c : repeats("share", share)) cases.push_back(c);
    return Compute({RunWith(MakeRun(1), cases)}).models.at(0);
  };
  const ModelReport clear = compute({600, 610, 590}, {300, 310, 290});
  REQUIRE(clear.verdict.size() == 1);
  CAPTURE(clear.verdict[0].speedup);
  CHECK(StartsWith(clear.verdict[0].speedup, "2.00× ("));
  CHECK(clear.verdict[0].speedup.find("n=") == std::string::npos);
  CHECK(clear.verdict[0].caveats.empty());
  CHECK(clear.verdict_legend.empty());
  CHECK(clear.verdict[0].conclusion == "pretrain 100 steps, 1 node: share is 2.00× faster than fsdp.");

  const ModelReport noise = compute({600, 610, 590}, {605, 590, 612});
  REQUIRE(noise.verdict.size() == 1);
  CHECK(noise.verdict[0].caveats == std::vector<std::string>{"not significant"});
  REQUIRE(noise.verdict_legend.size() == 1);
  CHECK(noise.verdict_legend[0].tag == "not significant");
  CHECK(EndsWith(noise.verdict[0].conclusion, "; its 95 % interval crosses 1, so the difference may be noise."));
}

TEST_CASE("report verdict table: caveats keep one order, each once, the larger contended share") {
  std::vector<std::string> caveats = {"random weights"};
  AddCaveats(&caveats, {"one host", "contended 20 %", "random weights", "a later pass's tag"});
  AddCaveats(&caveats, {"contended 45 %", "contended 30 %", "not significant"});
  CHECK(caveats ==
        std::vector<std::string>{"contended 45 %", "one host", "random weights", "not significant", "a later pass's tag"});
  VerdictLine a, b;
  a.caveats = {"one host"};
  b.caveats = {"one host", "different runs"};
  b.speedup = "1.50× (n=2)";
  std::vector<LegendEntry> legend = VerdictLegend({a, b});
  REQUIRE(legend.size() == 3);
  CHECK(legend[0].tag == "one host");
  CHECK(legend[1].tag == "different runs");
  CHECK(legend[2].tag == "n=1");
  b.row = "pretrain 100 steps";
  b.scope = "2 nodes";
  b.finding = "share is 1.50× faster than fsdp";
  CHECK(VerdictConclusion(b) == "pretrain 100 steps, 2 nodes: share is 1.50× faster than fsdp; 2 repeats, so no "
                                "interval yet; its nodes were one machine, so no network between machines was "
                                "measured; its sides come from different runs.");
}

TEST_CASE("report verdict: a figure not stored is said to be missing, never guessed") {
  ReportCaseInput fsdp = TrainCase("a", "m", "pretrain", "fsdp", 2, "", "steps", 100, 600);
  ReportCaseInput share = With(TrainCase("b", "m", "pretrain", "share", 2, "", "steps", 100, 800),
                               {{metric::kEvalLoss, 2.5}, {metric::kBytesCommunicated, 2048}});
  fsdp.measurements.push_back(M(metric::kBytesCommunicated, 1536, Provenance::kMeasured, "bytes"));
  ReportData data = Compute({RunWith(MakeRun(1), {fsdp, share})});
  CHECK(VerdictTexts(data.models.at(0)) ==
        std::vector<std::string>{"m pretrain 100 steps, 2 nodes: share is 1.33× slower than fsdp (held-out loss of "
                                 "fsdp not stored), moving 2.00 KiB, not split by group (fsdp 1.50 KiB); no interval "
                                 "(fewer than 3 repeats)."});
  ReportData none = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 600),
                                                  TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 100, 600)})});
  CHECK(VerdictTexts(none.models.at(0)) ==
        std::vector<std::string>{"m pretrain 100 steps, 1 node: share is as fast as fsdp (no held-out loss stored), "
                                 "bytes moved not stored; no interval (fewer than 3 repeats)."});
}

TEST_CASE("report verdict: a refused ratio says why; inference rows name their mode") {
  RunRecord a = MakeRun(1), b = MakeRun(2);
  ReportRunInput ra = RunWith(a, {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 100, 600),
                                  WithInferenceFigures(InferenceCase("i", "m", "fsdp", 1, "", ""), 30, 0.1, 10)});
  ReportRunInput rb = RunWith(b, {TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 100, 300),
                                  WithInferenceFigures(InferenceCase("j", "m", "share", 1, "", "single-stream"), 15,
                                                       0.05, 20)});
  ra.context = {{"cpu_cores", "8"}};
  rb.context = {{"cpu_cores", "16"}};
  ReportData data = Compute({ra, rb});
  const std::vector<std::string> texts = VerdictTexts(data.models.at(0));
  REQUIRE(texts.size() == 2);  // inference: one line per comparison, its total generation time
  CHECK(texts[0] == "m pretrain 100 steps, 1 node: no ratio: run 1 and run 2 ran on different machines (cpu_cores: 8 vs "
                    "16).");
  CHECK(texts[1] == "m inference, total generation time, single-stream on 1 node: no ratio: run 1 and run 2 ran on "
                    "different machines (cpu_cores: 8 vs 16).");
  const VerdictLine& v = data.models[0].verdict[1];
  CHECK(v.compared == "inference, single-stream on 1 node: share vs fsdp");
  CHECK(v.speedup == "no ratio");
  CHECK(v.caveats == std::vector<std::string>{"different machines"});
  CHECK(v.conclusion == "inference, total generation time, single-stream on 1 node: no ratio: run 1 and run 2 ran on "
                        "different machines (cpu_cores: 8 vs 16).");
}

TEST_CASE("report verdict: a line takes further qualifiers before its text is composed") {
  VerdictLine v;
  v.row = "pretrain 100 steps";
  v.scope = "2 nodes";
  v.claim = "share is 1.50× faster than fsdp";
  v.quality = "held-out loss 2.3100 vs 2.2900 for fsdp, +0.873 %";
  v.bytes = "moving 0 B within groups and 15.01 MiB between groups";
  v.qualifiers = {"the 2 nodes of fsdp and share are one host (localhost)"};
  v.notes = {"no interval (fewer than 3 repeats)"};
  v.qualifiers.push_back("contended: load average 4.0 on 2 cores");  // e.g. a later pass
  CHECK(VerdictText("m", v) ==
        "m pretrain 100 steps, 2 nodes: share is 1.50× faster than fsdp (held-out loss 2.3100 vs 2.2900 for fsdp, "
        "+0.873 %), moving 0 B within groups and 15.01 MiB between groups; the 2 nodes of fsdp and share are one "
        "host (localhost); contended: load average 4.0 on 2 cores; no interval (fewer than 3 repeats).");
}

TEST_CASE("report: a scaling row whose nodes are one host says so, in the row and its verdict") {
  ReportData data = ComputeOnCluster(Cluster("local", "localhost", "127.0.0.1"));
  const ReportTable* t = FindTable(data.models.at(0), "scaling");
  REQUIRE(t);
  REQUIRE(t->rows.size() == 2);
  CHECK(t->rows[0].label == "pretrain 100 steps — fsdp 2 nodes, one host");
  CHECK(t->rows[1].label == "pretrain 100 steps — share 2 nodes, one host");
  CHECK(t->note.find("One host: the N \"nodes\" of that row ran on one machine") != std::string::npos);
  std::vector<std::string> texts = VerdictTexts(data.models[0]);
  REQUIRE(texts.size() == 4);
  CHECK(texts[1] == "m pretrain 100 steps, 2 nodes: share is 2.00× faster than fsdp (no held-out loss stored), "
                    "bytes moved not stored; the 2 nodes of fsdp and share are one host (localhost); no interval "
                    "(fewer than 3 repeats).");
  CHECK(texts[3] == "m pretrain 100 steps, share 1 → 2 nodes: scaling efficiency 0.75 (5.0 min on 1 node, 3.3 min "
                    "on 2 nodes); the 2 nodes of share are one host (localhost): the scaling measures no network "
                    "between machines.");

  // Two machines: nothing said. One machine named twice (ssh): said.
  ReportData apart = ComputeOnCluster(Cluster("ssh", "gpu-a", "gpu-b"));
  CHECK(FindTable(apart.models.at(0), "scaling")->rows[1].label == "pretrain 100 steps — share 2 nodes");
  for (const std::string& text : VerdictTexts(apart.models[0])) CHECK(text.find("one host") == std::string::npos);
  ReportData twice = ComputeOnCluster(Cluster("ssh", "gpu-a", "gpu-a"));
  CHECK(FindTable(twice.models.at(0), "scaling")->rows[1].label == "pretrain 100 steps — share 2 nodes, one host");
  CHECK(VerdictTexts(twice.models[0])[3].find("the 2 nodes of share are one host (gpu-a)") != std::string::npos);
}

TEST_CASE("report formats: one rule: a figure's decimals, widened below 1; ratios 2 decimals; half away from zero") {
  CHECK(FormatMinutes(12.25) == "12.3");   // a binary tie rounds away from zero
  CHECK(FormatMinutes(0.01234) == "0.0123");
  CHECK(FormatSeconds(0.5) == "0.500");
  CHECK(FormatSecondsPerToken(0.0525) == "0.0525");
  CHECK(FormatSecondsPerToken(0.00833333) == "0.00833");
  CHECK(FormatTokensPerSecond(19.05) == "19.05");
  CHECK(FormatTokensPerSecond(0.5) == "0.500");
  CHECK(FormatLoss(2.95) == "2.9500");
  CHECK(FormatOne(350.5) == "350.5");
  CHECK(FormatMfu(0.42) == "42.0");
  CHECK(FormatGiB(1.5 * 1024 * 1024 * 1024) == "1.50");
  CHECK(FormatBinaryBytes(512) == "512 B");
  CHECK(FormatBinaryBytes(1536) == "1.50 KiB");
  CHECK(FormatCount(3) == "3");
  CHECK(FormatRequestSeconds(1.2344) == "1.234");
  CHECK(FormatRequestSeconds(0.0123) == "0.0123");
  CHECK(FormatSignedPercent(0.873) == "+0.873 %");
  CHECK(FormatSignedPercent(-12.34) == "-12.3 %");
  CHECK(FormatRatio(3.125) == "3.13");
  CHECK(FormatRatio(0.004) == "0.00");  // a ratio is never widened
  CHECK(FormatPercent(3.214) == "321");
  CHECK(FormatPercent(3.125) == "313");
}

}  // namespace protocol
