// plans/log-formats.yaml through the real binary: each case prints a saved
// log of one system with `cat` (data/logs/) and its log format stores the
// canonical figures, with the medians after warm-up and the units of
// docs/backends.md ("Log formats").

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

TEST_CASE("cli: the log-formats plan stores every format's canonical figures") {
  TempDir dir;
  const fs::path src = PROTOCOL_SOURCE_DIR;
  const fs::path db = dir.path / "f.db";
  Output run = Protocol({"run", (src / "plans/log-formats.yaml").string(), "--db", db.string(), "--logs",
                         (dir.path / "logs").string(), "--set",
                         "defaults.output_dir=" + (dir.path / "out/{case_id}").string()},
                        src);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto store = OpenStore(db.string());
  REQUIRE(store.ok());
  // case id -> figure name -> (value, unit)
  std::map<std::string, std::map<std::string, Measurement>> figures;
  std::map<std::string, size_t> steps;
  for (const CaseRecord& c : CasesOf(db, 1)) {
    INFO(c.case_id << ": " << c.reason);
    CHECK(c.status == CaseStatus::kOk);
    auto measurements = (*store)->MeasurementsOfCase(c.row_id);
    REQUIRE(measurements.ok());
    for (const Measurement& m : *measurements) figures[c.case_id][m.name] = m;
    auto samples = (*store)->StepsOfCase(c.row_id);
    REQUIRE(samples.ok());
    steps[c.case_id] = samples->size();
  }
  REQUIRE(figures.size() == 10);
  auto value = [&](const std::string& id, const std::string& name) {
    CAPTURE(id);
    CAPTURE(name);
    REQUIRE(figures[id].count(name) == 1);
    return *figures[id][name].value;
  };
  CHECK(value("lf.xtuner", metric::kTgs) == doctest::Approx(2403.3));  // median of steps 20..50
  CHECK(figures["lf.xtuner"][metric::kTgs].unit == "tokens/s");
  CHECK(figures["lf.xtuner"][metric::kTgs].method ==
        "parsed from xtuner output, median of 4 steps after warm-up (steps 20..50; spread 2389.1..2412.5)");
  CHECK(value("lf.xtuner", metric::kTflops) == doctest::Approx(151.35));
  CHECK(steps["lf.xtuner"] == 5);
  CHECK(value("lf.internevo", metric::kTgs) == doctest::Approx(3459.05));
  CHECK(value("lf.deepspeed", metric::kSamplesPerSecond) == doctest::Approx(12.52));
  CHECK(value("lf.deepspeed", metric::kPeakDeviceMemory) == doctest::Approx(8.20 * 1024 * 1024 * 1024));
  CHECK(value("lf.megatron", metric::kStepSeconds) == doctest::Approx(5.4449));
  CHECK(figures["lf.megatron"][metric::kStepSeconds].unit == "s");
  CHECK(value("lf.megatron", metric::kTflops) == doctest::Approx(239.8));
  CHECK(value("lf.hf-trainer", metric::kTrainRuntimeSeconds) == doctest::Approx(125.43));
  CHECK(value("lf.hf-trainer", metric::kFinalLoss) == doctest::Approx(1.9876));
  CHECK(value("lf.vllm-serving", metric::kTtftMeanSeconds) == doctest::Approx(0.12045));
  CHECK(value("lf.vllm-serving", metric::kRequestThroughput) == doctest::Approx(8.30));
  CHECK(value("lf.vllm-throughput", metric::kOutputTokensPerSecond) == doctest::Approx(1234.56));
  CHECK(value("lf.vllm-latency", metric::kLatencyMeanSeconds) == doctest::Approx(1.2345));
  CHECK(value("lf.lightllm", metric::kRequestThroughput) == doctest::Approx(8.30));
  CHECK(value("lf.tgi", "decode_tokens_per_second") == doctest::Approx(79.06));
  // Never printed by its system: absent, not zero.
  CHECK(figures["lf.megatron"].count(metric::kTgs) == 0);
  CHECK(figures["lf.vllm-latency"].count(metric::kRequestThroughput) == 0);
}
