// ComputeReport: cells, markers, ratios, sentences, appendix (docs/report.md).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report/report_data.h"
#include "report_fixtures.h"

namespace protocol {
namespace {

using namespace report_test;

TEST_CASE("report: training ratio is baseline time over share time per node count") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 7200),
                                            TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 1000, 2400),
                                            TrainCase("c", "m", "pretrain", "fsdp", 2, "80G", "steps", 1000, 6000),
                                            TrainCase("d", "m", "pretrain", "share", 2, "10G", "steps", 1000, 1500)})});
  REQUIRE(data.models.size() == 1);
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  CHECK(t->columns == std::vector<std::string>{"fsdp 1 node", "share 1 node", "fsdp 2 nodes (80G)", "share 2 nodes"});
  REQUIRE(t->rows.size() == 1);
  CHECK(t->rows[0].label == "pretrain 1000 steps");
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"120.0", "40.0", "100.0", "25.0"});
  CHECK(Texts(t->efficiency[0]) == std::vector<std::string>{"3.00", "1", "4.00", "1"});
  CHECK(*t->efficiency[0].cells[0].value == doctest::Approx(3.0));
  CHECK(*t->efficiency[0].cells[2].value == doctest::Approx(4.0));
}

TEST_CASE("report: one baseline 2-node column per network label, in label order") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 2, "other cloud", "steps", 100, 600),
                                            TrainCase("b", "m", "pretrain", "fsdp", 2, "80G", "steps", 100, 1200),
                                            TrainCase("c", "m", "pretrain", "share", 2, "10G", "steps", 100, 300)})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  CHECK(t->columns ==
        std::vector<std::string>{"fsdp 2 nodes (80G)", "fsdp 2 nodes (other cloud)", "share 2 nodes"});
  CHECK(Texts(t->efficiency[0]) == std::vector<std::string>{"4.00", "2.00", "1"});
  REQUIRE(data.models[0].sentences.size() == 2);
  CHECK(data.models[0].sentences[0] ==
        "share is 4.00× faster than fsdp on 2 nodes (400 %) for pretrain 100 steps (fsdp over 80G, share over 10G); no interval (fewer than 3 repeats).");
}

TEST_CASE("report: with candidate columns on two networks, each row's ratio uses the one that has a value") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 2, "80G", "steps", 100, 1200),
                                            TrainCase("b", "m", "pretrain", "share", 2, "10G", "steps", 100, 300),
                                            TrainCase("c", "m", "pretrain", "fsdp", 2, "80G", "steps", 200, 2400),
                                            TrainCase("d", "m", "pretrain", "share", 2, "1G", "steps", 200, 1200)})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  REQUIRE(t->columns.size() == 3);
  REQUIRE(t->rows.size() == 2);
  // Row 100 steps: only the 10G column has a value; row 200 steps: only the 1G column.
  REQUIRE(t->efficiency[0].cells[0].value);
  REQUIRE(t->efficiency[1].cells[0].value);
  CHECK(*t->efficiency[0].cells[0].value == doctest::Approx(4.0));
  CHECK(*t->efficiency[1].cells[0].value == doctest::Approx(2.0));
  REQUIRE(data.models[0].sentences.size() == 2);
  CHECK(data.models[0].sentences[0].find("(fsdp over 80G, share over 10G)") != std::string::npos);
  CHECK(data.models[0].sentences[1].find("(fsdp over 80G, share over 1G)") != std::string::npos);
}

TEST_CASE("report: rows are pretrain then finetune, steps ascending then epochs, never compared across rows") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "finetune", "fsdp", 1, "", "epochs", 1, 600),
                                            TrainCase("b", "m", "finetune", "share", 1, "", "steps", 500, 60),
                                            TrainCase("c", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 600),
                                            TrainCase("d", "m", "pretrain", "share", 1, "", "steps", 100, 60)})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  REQUIRE(t->rows.size() == 4);
  CHECK(t->rows[0].label == "pretrain 100 steps");
  CHECK(t->rows[1].label == "pretrain 1000 steps");
  CHECK(t->rows[2].label == "finetune 500 steps");
  CHECK(t->rows[3].label == "finetune 1 epoch");
  for (const auto& eff : t->efficiency) CHECK(eff.cells[0].text == "–");
  CHECK(data.models[0].sentences.empty());
}

TEST_CASE("report: a share cell not provided shows X and gives no ratio") {
  auto data = Compute(
      {RunWith(MakeRun(1, "import", "paper"),
               {Imported(TrainCase("f1", "m", "pretrain", "fsdp", 2, "80G", "steps", 100, 1200), "paper"),
                Imported(TrainCase("f2", "m", "pretrain", "share", 2, "10G", "steps", 100, 0), "paper", "not-provided")})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"20.0", "X"});
  CHECK(t->rows[0].cells[1].marker == "X");
  CHECK(!t->rows[0].cells[1].value.has_value());
  CHECK(Texts(t->efficiency[0]) == std::vector<std::string>{"–", "X"});
  CHECK(data.models[0].appendix[1].text == "imported from paper (run 1, case f2: not provided)");
}

TEST_CASE("report: an extrapolated case sits on its own row and its report_as row, marked *, and the sentence says so") {
  auto data = Compute(
      {RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 2000, 6000),
                            Extrapolated(TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 100, 150), "steps",
                                         2000, 3000, "2000 × 1.5 s")})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  REQUIRE(t->rows.size() == 2);
  CHECK(t->rows[0].label == "pretrain 100 steps");  // the measured length: share only, no ratio
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"\u2013", "2.5"});
  CHECK(t->rows[1].label == "pretrain 2000 steps");
  CHECK(Texts(t->rows[1]) == std::vector<std::string>{"100.0", "50.0 *"});
  CHECK(t->rows[1].cells[1].marker == "*");
  CHECK(t->rows[1].cells[1].provenance == "extrapolated");
  CHECK(Texts(t->efficiency[1]) == std::vector<std::string>{"2.00 *", "1"});
  CHECK(data.models[0].sentences ==
        std::vector<std::string>{"share is 2.00× faster than fsdp on 1 node (200 %) for pretrain 2000 steps; share "
                                 "figure extrapolated; no interval (fewer than 3 repeats)."});
  bool listed = false;
  for (const auto& a : data.models[0].appendix)
    listed |= a.text == "run 1, case b (extrapolated: 50.0 min; method: 2000 × 1.5 s)";
  CHECK(listed);
}

TEST_CASE("report: the newest run wins a cell") {
  auto data = Compute({RunWith(MakeRun(7), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 120)}),
                       RunWith(MakeRun(3), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 60)})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  CHECK(t->rows[0].cells[0].text == "2.0");
  CHECK(t->rows[0].cells[0].origin == "run 7, case a (measured: 2.0 min)");
  // Run 3 gave no figure shown: the runs read are the one behind the cell.
  REQUIRE(data.runs.size() == 1);
  CHECK(data.runs[0].id == 7);
}

TEST_CASE("report: repeats give the median, their spread goes to the appendix") {
  auto data = Compute({RunWith(MakeRun(2), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 600, 0),
                                            TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 780, 1),
                                            TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 720, 2),
                                            TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 660, 3)})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  CHECK(t->rows[0].cells[0].text == "11.5");  // median of 10, 11, 12, 13 min
  REQUIRE(data.models[0].appendix.size() == 1);
  CHECK(data.models[0].appendix[0].text == "run 2, case a (repeats 4: median 11.5 min, spread 10.0–13.0)");
}

TEST_CASE("report: a failed case shows – and the failure is listed with its reason") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("ok", "m", "pretrain", "share", 1, "", "steps", 10, 60),
                                            Failed(TrainCase("2.1.1.1", "m", "pretrain", "fsdp", 1, "", "steps", 10, 0),
                                                   CaseStatus::kTimeout, "exceeded 3600 s")})});
  const ModelReport& m = data.models[0];
  const ReportTable* t = FindTable(m, "training");
  REQUIRE(t != nullptr);
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"–", "1.0"});
  CHECK(Texts(t->efficiency[0]) == std::vector<std::string>{"–", "1"});
  REQUIRE(m.failures.size() == 1);
  CHECK(m.failures[0].status == "timeout");
  CHECK(m.failures[0].text == "run 1, case 2.1.1.1 (repeat 0): timeout — exceeded 3600 s");
  CHECK(m.appendix[0].text == "no ok result: run 1, case 2.1.1.1 (repeat 0): timeout — exceeded 3600 s");
  CHECK(m.sentences.empty());
}

TEST_CASE("report: an older ok result shown under a newer failure says so") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 60)}),
                       RunWith(MakeRun(2), {Failed(TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 0),
                                                   CaseStatus::kFailed, "NaN loss at step 7")})});
  const ModelReport& m = data.models[0];
  CHECK(m.tables[0].rows[0].cells[0].text == "1.0");
  CHECK(m.appendix[0].text ==
        "run 1, case a (measured: 1.0 min); newer, not ok: run 2, case a (repeat 0): failed — NaN loss at step 7");
  REQUIRE(m.failures.size() == 1);
}

TEST_CASE("report: imported fsdp and share figures give coefficients equal to baseline over share") {
  auto data = Compute(
      {RunWith(MakeRun(5, "import", "vendor table"),
               {Imported(TrainCase("f1", "m", "finetune", "fsdp", 1, "", "steps", 500, 3210), "vendor table"),
                Imported(TrainCase("f2", "m", "finetune", "share", 1, "", "steps", 500, 1000), "vendor table")})});
  const ModelReport& m = data.models[0];
  const ReportTable* t = FindTable(m, "training");
  REQUIRE(t != nullptr);
  CHECK(*t->efficiency[0].cells[0].value == doctest::Approx(3.21));
  CHECK(t->efficiency[0].cells[0].text == "3.21");
  CHECK(t->rows[0].cells[0].provenance == "imported");
  CHECK(m.sentences == std::vector<std::string>{"share is 3.21× faster than fsdp on 1 node (321 %) for finetune 500 "
                                                "steps; fsdp figure imported, share figure imported; no interval (fewer than 3 repeats)."});
  CHECK(m.appendix[0].text == "imported from vendor table (run 5, case f1: 53.5 min)");
}

TEST_CASE("report: sentences say slower with the inverse below one, as fast at one") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 800),
                                            TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 10, 1000),
                                            TrainCase("c", "m", "finetune", "fsdp", 1, "", "steps", 10, 500),
                                            TrainCase("d", "m", "finetune", "share", 1, "", "steps", 10, 500)})});
  CHECK(data.models[0].sentences ==
        std::vector<std::string>{"share is 1.25× slower than fsdp on 1 node (80 %) for pretrain 10 steps; no interval (fewer than 3 repeats).",
                                 "share is as fast as fsdp on 1 node (100 %) for finetune 10 steps; no interval (fewer than 3 repeats)."});
}

TEST_CASE("report: inference ratios use the baseline single-stream figure; tokens/s is inverted") {
  auto ss = WithInferenceFigures(InferenceCase("i1", "m", "fsdp", 1, "", "single-stream"), 300, 0.04, 25);
  auto multi1 = WithInferenceFigures(InferenceCase("i2", "m", "share", 1, "", "multi-inference"), 100, 0.0125, 80);
  auto multi2 = InferenceCase("i3", "m", "share", 2, "10G", "multi-inference");
  multi2.requests = {Req(0, 100, 20), Req(1, 300, 30)};  // derived: 50 s, 0.125 s/token, 8 tokens/s
  auto data = Compute({RunWith(MakeRun(1), {ss, multi1, multi2})});
  const ModelReport& m = data.models[0];
  const ReportTable* a = FindTable(m, "inference-single-stream");
  REQUIRE(a != nullptr);
  CHECK(a->columns == std::vector<std::string>{"fsdp 1 node", "share 1 node (single-stream)"});
  CHECK(Texts(a->rows[0]) == std::vector<std::string>{"300.0", "–"});
  CHECK(Texts(a->efficiency[0]) == std::vector<std::string>{"–", "–"});  // no candidate: no number
  const ReportTable* b = FindTable(m, "inference-multi");
  REQUIRE(b != nullptr);
  CHECK(b->columns == std::vector<std::string>{"fsdp", "share 1 node", "share 2 nodes"});
  CHECK(Texts(b->rows[0]) == std::vector<std::string>{"no solution", "100.0", "50.0"});
  CHECK(Texts(b->rows[1]) == std::vector<std::string>{"no solution", "0.0125", "0.1250"});
  CHECK(Texts(b->rows[2]) == std::vector<std::string>{"no solution", "80.00", "8.00"});
  CHECK(Texts(b->efficiency[0]) == std::vector<std::string>{"no solution", "3.00", "6.00"});
  CHECK(Texts(b->efficiency[1]) == std::vector<std::string>{"no solution", "3.20", "0.32"});
  CHECK(Texts(b->efficiency[2]) == std::vector<std::string>{"no solution", "3.20", "0.32"});
  CHECK(m.sentences[0] ==
        "share multi-inference on 1 node is 3.00× faster than fsdp on 1 node (300 %) for total generation time; no interval (fewer than 3 repeats).");
  CHECK(m.sentences[5] == "share multi-inference on 2 nodes over 10G is 3.13× slower than fsdp on 1 node (32 %) for "
                          "tokens per second; no interval (fewer than 3 repeats).");
  bool derived = false;
  for (const auto& e : m.appendix) {
    if (e.text == "run 1, case i3 (measured, derived from 2 requests: 0.1250 s/token)") derived = true;
  }
  CHECK(derived);
  REQUIRE(m.chart.series.size() == 1);  // series without request samples are not drawn
  CHECK(m.chart.series[0].label == "share 2 nodes multi-inference");
  CHECK(m.requests.size() == 2);
}

TEST_CASE("report: results that fit no column are listed, not dropped") {
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("x", "m", "pretrain", "deepspeed", 1, "", "steps", 10, 60),
                                            TrainCase("y", "m", "pretrain", "fsdp", 1, "", "steps", 10, 60)})});
  REQUIRE(data.models[0].untabulated.size() == 1);
  CHECK(data.models[0].untabulated[0] ==
        "pretrain 10 steps deepspeed 1 node: newest ok result run 1, case x (no table column for it)");
}

TEST_CASE("report: empty inputs and filters say why there is nothing") {
  CHECK(Compute({}).empty_message == "The store holds no runs: nothing to report.");
  ReportOptions only;
  only.model = "llama2-13b";
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 10, 60)})}, only);
  CHECK(data.models.empty());
  CHECK(data.empty_message == "No case of model 'llama2-13b' in the selected runs: nothing to report.");
  ReportOptions runs;
  runs.run_ids = {9};
  CHECK(Compute({RunWith(MakeRun(1), {})}, runs).empty_message ==
        "None of the selected runs is in the store: nothing to report.");
}

TEST_CASE("report: baseline and candidate system names come from the options") {
  ReportOptions o;
  o.baseline_system = "ddp";
  o.candidate_system = "fsdp";
  auto data = Compute({RunWith(MakeRun(1), {TrainCase("a", "m", "pretrain", "ddp", 1, "", "steps", 10, 120),
                                            TrainCase("b", "m", "pretrain", "fsdp", 1, "", "steps", 10, 60)})},
                      o);
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  CHECK(t->columns == std::vector<std::string>{"ddp 1 node", "fsdp 1 node"});
  CHECK(data.models[0].sentences[0] == "fsdp is 2.00× faster than ddp on 1 node (200 %) for pretrain 10 steps; no interval (fewer than 3 repeats).");
}


TEST_CASE("report: one case fills its own row, a shorter row from its first steps, a longer one extrapolated, and X") {
  ReportCaseInput base = TrainCase("b1", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 6000);
  Measurement prefix = M(metric::kWallSeconds, 660, Provenance::kPrefix);
  prefix.method = "computed from the first 100 of 1000 measured steps: overhead 60 s + steps 1..100 600 s";
  prefix.length_unit = "steps";
  prefix.length_count = 100;
  base.measurements.push_back(prefix);
  ReportCaseInput cand = TrainCase("c1", "m", "pretrain", "share", 1, "", "steps", 1000, 3000);
  Measurement x;
  x.name = metric::kWallSeconds;
  x.unit = "s";
  x.how = Provenance::kDeclared;
  x.marker = "not-provided";
  x.length_unit = "steps";
  x.length_count = 100;
  cand.measurements.push_back(x);
  cand.measurements.push_back(M(metric::kEvalLoss, 3.5));
  // The candidate ran beside other work.
  cand.measurements.push_back(M(metric::kContention, 0.48));
  auto data = Compute({RunWith(MakeRun(1), {base, cand})});
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  REQUIRE(t->rows.size() == 2);
  CHECK(t->rows[0].label == "pretrain 100 steps");
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"11.0 *", "X"});
  CHECK(t->rows[0].cells[0].provenance == "prefix");
  CHECK(t->rows[0].cells[1].provenance == "declared");
  CHECK(Texts(t->efficiency[0]) == std::vector<std::string>{"\u2013", "X"});
  CHECK(t->rows[1].label == "pretrain 1000 steps");
  CHECK(Texts(t->rows[1]) == std::vector<std::string>{"100.0", "50.0 !"});
  CHECK(*t->rows[1].cells[1].contended == doctest::Approx(0.48));
  // The sentence of the ratio says the candidate side was contended.
  REQUIRE(data.models[0].sentences.size() == 1);
  CHECK(data.models[0].sentences[0].find("contended: other processes took 48 % of the CPU while share's figure was "
                                         "measured (less reliable)") != std::string::npos);
  REQUIRE(!data.models[0].verdict.empty());
  CHECK(data.models[0].verdict[0].text.find("contended") != std::string::npos);
  // The verdict table says it once, as a caveat tag with the larger share of its sides.
  CHECK(data.models[0].verdict[0].caveats == std::vector<std::string>{"contended 48 %"});
  // Quality is the whole run's: shown at the case's own length only.
  const ReportTable* q = FindTable(data.models[0], "quality");
  REQUIRE(q != nullptr);
  for (const ReportRow& row : q->rows) CHECK(row.label.find("100 steps") == std::string::npos);
}

TEST_CASE("report: an idle run never says contended") {
  ReportCaseInput base = TrainCase("b1", "m", "pretrain", "fsdp", 1, "", "steps", 10, 60);
  ReportCaseInput cand = TrainCase("c1", "m", "pretrain", "share", 1, "", "steps", 10, 30);
  base.measurements.push_back(M(metric::kContention, 0.03));
  cand.measurements.push_back(M(metric::kContention, 0.19));
  auto data = Compute({RunWith(MakeRun(1), {base, cand})});
  for (const std::string& s : data.models[0].sentences) CHECK(s.find("contended") == std::string::npos);
  for (const VerdictLine& v : data.models[0].verdict) {
    CHECK(v.text.find("contended") == std::string::npos);
    CHECK(v.caveats.empty());
  }
  const ReportTable* t = FindTable(data.models[0], "training");
  REQUIRE(t != nullptr);
  CHECK(Texts(t->rows[0]) == std::vector<std::string>{"1.0", "0.500"});
}

}  // namespace
}  // namespace protocol
