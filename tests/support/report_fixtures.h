#ifndef PROTOCOL_TESTS_REPORT_FIXTURES_H_
#define PROTOCOL_TESTS_REPORT_FIXTURES_H_

// Builders of report inputs for the report tests: runs, training and
// inference cases with exact figures, failures and imports.

#include <string>
#include <vector>

#include "report/report_data.h"

namespace protocol {
namespace report_test {

inline RunRecord MakeRun(int64_t id, const std::string& kind = "run", const std::string& source = "") {
  RunRecord r;
  r.id = id;
  r.kind = kind;
  r.plan_name = kind == "import" ? "" : "methodology";
  r.source = source;
  r.started_at = "2024-05-0" + std::to_string(id % 10) + "T10:00:00Z";
  r.status = "ok";
  return r;
}

inline Measurement M(const std::string& name, double value, Provenance how = Provenance::kMeasured,
                     const std::string& unit = "s") {
  Measurement m;
  m.name = name;
  m.value = value;
  m.unit = unit;
  m.how = how;
  return m;
}

inline ReportCaseInput TrainCase(const std::string& case_id, const std::string& model, const std::string& workload,
                                 const std::string& system, int nodes, const std::string& network,
                                 const std::string& unit, int64_t count, double wall_seconds, int repeat = 0) {
  ReportCaseInput c;
  c.record.case_id = case_id;
  c.record.repeat = repeat;
  c.record.model = model;
  c.record.workload = workload;
  c.record.backend = system;
  c.record.system = system;
  c.record.nodes = nodes;
  c.record.network = network;
  c.record.length_unit = unit;
  c.record.length_count = count;
  c.record.status = CaseStatus::kOk;
  c.measurements.push_back(M(metric::kWallSeconds, wall_seconds));
  return c;
}

// Measured `count` steps in wall_seconds (already stored), reported also as
// `as_count` steps through an extrapolated figure carrying that length.
inline ReportCaseInput Extrapolated(ReportCaseInput c, const std::string& as_unit, int64_t as_count,
                                    double extrapolated_seconds, const std::string& method) {
  Measurement m = M(metric::kWallSeconds, extrapolated_seconds, Provenance::kExtrapolated);
  m.method = method;
  m.length_unit = as_unit;
  m.length_count = as_count;
  c.measurements.push_back(m);
  return c;
}

// An imported figure as StoreImport writes it: backend "import", one kImported measurement.
inline ReportCaseInput Imported(ReportCaseInput c, const std::string& source, const std::string& marker = "") {
  c.record.backend = "import";
  for (auto& m : c.measurements) {
    m.how = Provenance::kImported;
    m.source = source;
    m.marker = marker;
    if (marker == "not-provided") m.value.reset();
  }
  return c;
}

// A multi-node case's link as its ranks measured it before the first step
// (`busbw` bytes/s, 85 µs), beside its network label `network` at a nominal
// `bits_per_second` (the facts the dist backend stores).
inline ReportCaseInput WithLink(ReportCaseInput c, double busbw, const std::string& network = "10G",
                                const std::string& bits_per_second = "1e+10") {
  c.measurements.push_back(M(metric::kLinkBusBandwidth, busbw, Provenance::kMeasured, "bytes/s"));
  c.measurements.push_back(M(metric::kLinkLatency, 85e-6, Provenance::kMeasured, "s"));
  c.facts.emplace_back(fact::kNetwork, network);
  c.facts.emplace_back(fact::kNetworkRate, bits_per_second);
  return c;
}

inline ReportCaseInput Failed(ReportCaseInput c, CaseStatus status, const std::string& reason) {
  c.record.status = status;
  c.record.reason = reason;
  c.measurements.clear();
  return c;
}

inline ReportCaseInput InferenceCase(const std::string& case_id, const std::string& model, const std::string& system,
                                     int nodes, const std::string& network, const std::string& variant) {
  ReportCaseInput c;
  c.record.case_id = case_id;
  c.record.model = model;
  c.record.workload = "inference";
  c.record.backend = system;
  c.record.system = system;
  c.record.nodes = nodes;
  c.record.network = network;
  c.record.variant = variant;
  c.record.status = CaseStatus::kOk;
  return c;
}

inline ReportCaseInput WithInferenceFigures(ReportCaseInput c, double total, double spt, double tps) {
  c.measurements.push_back(M(metric::kTotalGenerationSeconds, total));
  c.measurements.push_back(M(metric::kSecondsPerToken, spt, Provenance::kMeasured, "s/token"));
  c.measurements.push_back(M(metric::kTokensPerSecond, tps, Provenance::kMeasured, "tokens/s"));
  return c;
}

inline RequestSample Req(int index, int tokens, double seconds, const std::string& answer = "yes") {
  RequestSample r;
  r.index = index;
  r.max_new_tokens = tokens;
  r.prompt_tokens = 20;
  r.generated_tokens = tokens;
  r.seconds = seconds;
  r.answer = answer;
  return r;
}

inline ReportRunInput RunWith(RunRecord run, std::vector<ReportCaseInput> cases) {
  ReportRunInput r;
  r.run = std::move(run);
  r.cases = std::move(cases);
  return r;
}

// The methodology's layout with exact figures (golden files use it).
inline ReportInput MethodologyInput() {
  const std::string k70 = "llama2-70b", k7 = "llama2-7b";
  ReportInput in;
  // Run 1: stage 1, the FSDP baseline.
  auto b1 = TrainCase("2.1.1.1", k70, "pretrain", "fsdp", 1, "", "steps", 1000, 7200, 0);
  b1.measurements.push_back(M(metric::kTgs, 350.5, Provenance::kMeasured, "tokens/s"));
  b1.measurements.push_back(M(metric::kMfu, 0.42, Provenance::kMeasured, ""));
  b1.measurements.push_back(M(metric::kEvalLoss, 2.95, Provenance::kMeasured, ""));
  in.runs.push_back(RunWith(
      MakeRun(1),
      {b1, TrainCase("2.1.1.1", k70, "pretrain", "fsdp", 1, "", "steps", 1000, 7260, 1),
       TrainCase("2.1.1.1", k70, "pretrain", "fsdp", 1, "", "steps", 1000, 7140, 2),
       TrainCase("2.1.1.2", k70, "pretrain", "fsdp", 2, "80G", "steps", 100, 2400),
       TrainCase("2.1.1.3", k70, "finetune", "fsdp", 1, "", "steps", 500, 3000),
       Failed(TrainCase("2.1.1.4", k70, "finetune", "fsdp", 2, "80G", "steps", 100, 0), CaseStatus::kFailed,
              "NCCL timeout: lost rank 9"),
       [&] {
         auto c = WithInferenceFigures(InferenceCase("2.1.1.5", k70, "fsdp", 1, "", ""), 31.5, 0.0525, 19.05);
         c.requests = {Req(0, 100, 5.0), Req(1, 200, 10.5), Req(2, 300, 16.0)};
         return c;
       }(),
       TrainCase("2.1.2.1", k7, "pretrain", "fsdp", 1, "", "steps", 1000, 1000),
       TrainCase("2.1.2.3", k7, "finetune", "fsdp", 1, "", "epochs", 1, 500)}));
  // Run 2: stage 2, the share protocol.
  auto s2 = TrainCase("2.2.1.1", k70, "pretrain", "share", 2, "10G", "steps", 1000, 1800);
  s2.measurements.push_back(M(metric::kFinalLoss, 2.5, Provenance::kMeasured, ""));
  s2.measurements.push_back(M(metric::kBytesCommunicated, 1073741824.0, Provenance::kMeasured, "bytes"));
  s2.measurements.push_back(M(metric::kTgs, 700.0, Provenance::kMeasured, "tokens/s"));
  auto s1 = TrainCase("2.2.1.1", k70, "pretrain", "share", 1, "", "steps", 1000, 2400);
  s1.measurements.push_back(M(metric::kTgs, 1050.0, Provenance::kMeasured, "tokens/s"));
  s1.measurements.push_back(M(metric::kEvalLoss, 3.1, Provenance::kMeasured, ""));
  s1.measurements.push_back(M("best_group_eval_loss", 3.02, Provenance::kMeasured, ""));
  s1.measurements.push_back(M("merge_seconds", 12.5, Provenance::kMeasured, "s"));
  in.runs.push_back(RunWith(
      MakeRun(2),
      {s1, s2,
       Extrapolated(TrainCase("2.2.1.2", k70, "finetune", "share", 1, "", "steps", 50, 90), "steps", 500, 960,
                    "wall_seconds(50 steps) + 450 × step_seconds_mean 1.933 s"),
       [&] {
         auto c = WithInferenceFigures(InferenceCase("2.2.1.3", k70, "share", 1, "", "single-stream"), 15.6, 0.026,
                                       38.46);
         c.requests = {Req(0, 100, 2.5), Req(1, 200, 5.2), Req(2, 300, 7.9)};
         return c;
       }(),
       WithInferenceFigures(InferenceCase("2.2.1.3", k70, "share", 1, "", "multi-inference"), 8, 0.013333, 75),
       [&] {
         auto c = InferenceCase("2.2.1.3", k70, "share", 2, "10G", "multi-inference");
         c.requests = {Req(0, 100, 1.0), Req(1, 200, 1.5), Req(2, 300, 2.5)};  // derived: 5 s, 600 tokens
         return c;
       }(),
       TrainCase("2.2.2.1", k7, "pretrain", "share", 1, "", "steps", 1000, 1250),
       TrainCase("2.2.2.2", k7, "finetune", "share", 1, "", "epochs", 1, 625)}));
  // Run 3: published figures.
  in.runs.push_back(RunWith(
      MakeRun(3, "import", "other-cloud results, table 4"),
      {Imported(TrainCase("fig-1", k70, "pretrain", "fsdp", 2, "other cloud", "steps", 100, 1200),
                "other-cloud results, table 4", "extrapolated"),
       Imported(TrainCase("fig-2", k70, "pretrain", "share", 2, "10G", "steps", 100, 0),
                "other-cloud results, table 4", "not-provided")}));
  // Run 4: a newer baseline run for one 7B cell (newest wins: 1500 s, not 1000 s).
  in.runs.push_back(
      RunWith(MakeRun(4), {TrainCase("2.1.2.1", k7, "pretrain", "fsdp", 1, "", "steps", 1000, 1500)}));
  return in;
}

// The table `id` of a model's report, or nullptr.
inline const ReportTable* FindTable(const ModelReport& m, const std::string& id) {
  for (const auto& t : m.tables) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

// The cell texts of a row.
inline std::vector<std::string> Texts(const ReportRow& row) {
  std::vector<std::string> out;
  for (const auto& c : row.cells) out.push_back(c.text);
  return out;
}

// ComputeReport over these runs.
inline ReportData Compute(std::vector<ReportRunInput> runs, ReportOptions options = ReportOptions()) {
  ReportInput in;
  in.runs = std::move(runs);
  return ComputeReport(in, options);
}

}  // namespace report_test
}  // namespace protocol

#endif  // PROTOCOL_TESTS_REPORT_FIXTURES_H_
