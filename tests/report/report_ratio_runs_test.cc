// A ratio names the runs of its two sides: one run (nothing to mark), two
// runs on one machine (marked †, sentence and appendix name them), two
// machines (refused: – with the reason, as `protocol compare` refuses
// different environment fingerprints). docs/report.md, "Ratios from one run".

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "report/formats/csv.h"
#include "report/render.h"
#include "report/report_data.h"
#include "report/formats/report_json.h"
#include "report_fixtures.h"

namespace protocol {
namespace {

using namespace report_test;

// The fingerprint facts of a machine, as the runner stores them.
RunContextFacts Machine(const std::string& cpu_cores, const std::string& host = "rig0") {
  return {{"hostname", host},          {"cpu_model", "Xeon 8480"}, {"cpu_cores", cpu_cores},
          {"libtorch_version", "2.3"}, {"cuda_version", "12.1"},   {"nccl_version", "2.20"},
          {"gpu_names", "8 x H100"}};
}

ReportRunInput Run(int64_t id, const RunContextFacts& context, std::vector<ReportCaseInput> cases,
                   const std::string& kind = "run") {
  ReportRunInput r = RunWith(MakeRun(id, kind), std::move(cases));
  r.context = context;
  return r;
}

ReportCaseInput Fsdp() { return TrainCase("2.1.1.1", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 7200); }
ReportCaseInput Share() { return TrainCase("2.2.1.1", "m", "pretrain", "share", 1, "", "steps", 1000, 2400); }

std::string RenderHtml(const ReportData& data) {
  std::ifstream in(std::string(PROTOCOL_SOURCE_DIR) + "/templates/report.html.mustache", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  auto out = RenderTemplate(text.str(), "report.html.mustache", ReportView(data), Escape::kHtml);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return out.value();
}

}  // namespace

TEST_CASE("report ratio runs: both sides from one run — no mark, the run named everywhere") {
  ReportData data = Compute({Run(1, Machine("16"), {Fsdp(), Share()})});
  const ModelReport& m = data.models[0];
  const ReportCell& ratio = FindTable(m, "training")->efficiency[0].cells[0];
  CHECK(ratio.text == "3.00");
  CHECK(ratio.marker == "");
  CHECK(ratio.numerator_run_id == 1);
  CHECK(ratio.denominator_run_id == 1);
  CHECK(ratio.refused == "");
  CHECK(ratio.origin == "120.0 (run 1) / 40.0 (run 1); no interval (fewer than 3 repeats)");
  CHECK(m.sentences == std::vector<std::string>{"share is 3.00× faster than fsdp on 1 node (300 %) for pretrain "
                                                "1000 steps; no interval (fewer than 3 repeats)."});
  REQUIRE(m.ratios.size() == 1);
  CHECK(m.ratios[0].table == "Training (minutes)");
  CHECK(m.ratios[0].row == "pretrain 1000 steps");
  CHECK(m.ratios[0].column == "fsdp 1 node");
  CHECK(m.ratios[0].text == "3.00");
  CHECK(m.ratios[0].note == "same run");
  Json j = ReportToJson(data)["models"][0];
  CHECK(j["tables"][0]["efficiency"][0]["cells"][0]["numerator_run_id"] == 1);
  CHECK(j["tables"][0]["efficiency"][0]["cells"][0]["denominator_run_id"] == 1);
  CHECK(j["tables"][0]["rows"][0]["cells"][1]["run_id"] == 1);
  CHECK(j["ratios"][0]["note"] == "same run");
  CHECK(ReportToCsv(data).find(",1,1,1,same run\n") != std::string::npos);
}

TEST_CASE("report ratio runs: sides from two runs on one machine are marked † and named") {
  // Runs 1 and 2 on the same machine type (a different hostname is not a different machine).
  ReportData data = Compute({Run(1, Machine("16", "rig0"), {Fsdp()}), Run(2, Machine("16", "rig1"), {Share()})});
  const ModelReport& m = data.models[0];
  const ReportCell& ratio = FindTable(m, "training")->efficiency[0].cells[0];
  CHECK(ratio.text == "3.00 †");
  CHECK(ratio.marker == "†");
  CHECK(*ratio.value == doctest::Approx(3.0));
  CHECK(ratio.numerator_run_id == 1);
  CHECK(ratio.denominator_run_id == 2);
  CHECK(ratio.origin ==
        "120.0 (run 1) / 40.0 (run 2); sides from different runs; no interval (fewer than 3 repeats)");
  CHECK(m.sentences == std::vector<std::string>{
                           "share is 3.00× faster than fsdp on 1 node (300 %) for pretrain 1000 steps; sides from "
                           "different runs (fsdp run 1, share run 2); no interval (fewer than 3 repeats)."});
  REQUIRE(m.ratios.size() == 1);
  CHECK(m.ratios[0].text == "3.00 †");
  CHECK(m.ratios[0].numerator_run_id == 1);
  CHECK(m.ratios[0].denominator_run_id == 2);
  CHECK(m.ratios[0].note == "sides from different runs");
  Json j = ReportToJson(data)["models"][0];
  CHECK(j["tables"][0]["efficiency"][0]["cells"][0]["marker"] == "†");
  CHECK(j["tables"][0]["efficiency"][0]["cells"][0]["denominator_run_id"] == 2);
  CHECK(j["ratios"][0]["denominator_run_id"] == 2);
  CHECK(ReportToCsv(data).find(",3.00,\"run 1, case 2.1.1.1 (measured: 120.0 min)\",1,1,2,"
                               "sides from different runs\n") != std::string::npos);
  const std::string html = RenderHtml(data);
  CHECK(html.find("<h3>Appendix: the runs behind every ratio</h3>") != std::string::npos);
  CHECK(html.find("<tr><td>Training (minutes)</td><td>pretrain 1000 steps</td><td>fsdp 1 node</td><td>3.00 †</td>"
                  "<td>1</td><td>2</td><td class=\"text\">sides from different runs</td></tr>") != std::string::npos);

  // With an extrapolated side and 3 repeats each whose interval crosses 1: "* † ~".
  std::vector<ReportCaseInput> base, cand;
  for (int i = 0; i < 3; ++i) {
    base.push_back(TrainCase("a", "m", "pretrain", "fsdp", 1, "", "steps", 1000, 600 + 30 * i, i));
    cand.push_back(Extrapolated(TrainCase("b", "m", "pretrain", "share", 1, "", "steps", 100, 60, i), "steps", 1000,
                                640 - 25 * i, "x10"));
  }
  ReportData marked = Compute({Run(1, Machine("16"), base), Run(2, Machine("16"), cand)});
  const ReportTable* marked_training = FindTable(marked.models[0], "training");
  REQUIRE(marked_training->rows.size() == 2);  // the share side's measured 100 steps, then 1000 steps
  const ReportCell& both = marked_training->efficiency[1].cells[0];
  CHECK(both.marker == "* † ~");
  CHECK(both.text == FormatRatio(*both.value) + " * † ~");
}

TEST_CASE("report ratio runs: sides from two machines are refused with the reason, in every table") {
  // Run 2 ran on a machine with another core count: no ratio, as `protocol compare` refuses.
  std::vector<ReportCaseInput> one = {Fsdp(),
                                      WithInferenceFigures(InferenceCase("i1", "m", "fsdp", 1, "", "single-stream"),
                                                           300, 0.04, 25),
                                      TrainCase("s1", "m", "pretrain", "share", 1, "", "steps", 100, 2400)};
  std::vector<ReportCaseInput> two = {Share(),
                                      WithInferenceFigures(InferenceCase("i2", "m", "share", 1, "", "single-stream"),
                                                           150, 0.02, 50),
                                      TrainCase("s2", "m", "pretrain", "share", 2, "10G", "steps", 100, 1500)};
  ReportData data = Compute({Run(1, Machine("8"), one), Run(2, Machine("16"), two)});
  const ModelReport& m = data.models[0];
  const std::string why = "no ratio: run 1 and run 2 ran on different machines (cpu_cores: 8 vs 16)";

  const ReportCell& training = FindTable(m, "training")->efficiency[1].cells[0];  // pretrain 1000 steps
  CHECK(FindTable(m, "training")->efficiency[1].label == "pretrain 1000 steps");
  CHECK(training.text == "–");
  CHECK(training.marker == "–");
  CHECK_FALSE(training.value.has_value());
  CHECK(training.refused == why);
  CHECK(training.numerator_run_id == 1);
  CHECK(training.denominator_run_id == 2);
  CHECK(training.origin == "120.0 (run 1) / 40.0 (run 2); sides from different runs; " + why);

  const ReportTable* inference = FindTable(m, "inference-single-stream");
  REQUIRE(inference != nullptr);
  // Time rows divide the baseline by the candidate, tokens per second the other way round.
  const std::string why_swapped = "no ratio: run 2 and run 1 ran on different machines (cpu_cores: 16 vs 8)";
  for (size_t i = 0; i < inference->efficiency.size(); ++i) {
    CHECK(inference->efficiency[i].cells[1].text == "–");
    CHECK(inference->efficiency[i].cells[1].refused == (i < 2 ? why : why_swapped));
  }
  const ReportTable* scaling = FindTable(m, "scaling");
  REQUIRE(scaling != nullptr);
  CHECK(Texts(scaling->rows[0]) == std::vector<std::string>{"40.0", "25.0", "2", "–", "–", "–"});
  CHECK(scaling->rows[0].cells[3].refused == why);

  // No sentence states a ratio; each refused one says why.
  for (const std::string& s : m.sentences) CHECK(s.rfind("No ratio of ", 0) == 0);
  CHECK(m.sentences[0] ==
        "No ratio of share to fsdp on 1 node for pretrain 1000 steps: run 1 and run 2 ran on different machines "
        "(cpu_cores: 8 vs 16).");
  CHECK(m.sentences[1] ==
        "No ratio of share single-stream on 1 node to fsdp on 1 node for total generation time: run 1 and run 2 "
        "ran on different machines (cpu_cores: 8 vs 16).");
  CHECK(m.sentences.size() == 4);
  for (const RatioEntry& r : m.ratios) CHECK((r.note == why || r.note == why_swapped));
  CHECK(m.ratios.size() == 5);  // training, 3 inference rows, scaling
  Json j = ReportToJson(data)["models"][0];
  CHECK(j["tables"][0]["efficiency"][1]["cells"][0]["refused"] == why);
  CHECK(j["tables"][0]["efficiency"][1]["cells"][0]["value"].is_null());
  CHECK(ReportToCsv(data).find(",–,\"run 1, case 2.1.1.1 (measured: 120.0 min)\",1,1,2," + why + "\n") !=
        std::string::npos);
  CHECK(RenderHtml(data).find("<td>–</td><td>1</td><td>2</td><td class=\"text\">" + why + "</td>") !=
        std::string::npos);
}

TEST_CASE("report ratio runs: an import records no machine, so its ratios are marked †, not refused") {
  ReportCaseInput published = Imported(Fsdp(), "paper, table 2");
  ReportData data = Compute({Run(1, {}, {published}, "import"), Run(2, Machine("16"), {Share()})});
  const ReportCell& ratio = FindTable(data.models[0], "training")->efficiency[0].cells[0];
  CHECK(ratio.text == "3.00 †");
  CHECK(ratio.refused == "");
  // A run of kind "run" without the fingerprint facts is a different machine as far as anyone can tell.
  ReportData unknown = Compute({Run(1, {}, {Fsdp()}), Run(2, Machine("16"), {Share()})});
  const ReportCell& refused = FindTable(unknown.models[0], "training")->efficiency[0].cells[0];
  CHECK(refused.text == "–");
  CHECK(refused.refused.rfind("no ratio: run 1 and run 2 ran on different machines (gpu_names: (none) vs 8 x H100; ",
                              0) == 0);
}

}  // namespace protocol
