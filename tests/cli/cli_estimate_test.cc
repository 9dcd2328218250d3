// `protocol calibrate` and the time estimate through the real binary: the
// figures stored beside the database, read back by validate for the CPU
// entry; validate's rig-hours for the methodology's plans. (The quick
// start's estimate against its measured wall time is checked in cli_test.cc,
// on the run that test makes anyway: a first run that measures this host
// itself, as on a fresh machine.)

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "cli_support.h"
#include "runner/base/json.h"
#include "runner/exec/calibration.h"
#include "runner/store/store.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

TEST_CASE("cli: calibrate stores this host's CPU figures beside the database, and validate uses them") {
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  const std::string db = (dir.path / "results" / "q.db").string();
  // Before: the CPU entry says assumed.
  Output before = Protocol({"validate", (src / "plans/quickstart.yaml").string(), "--db", db}, src);
  INFO(before.err);
  REQUIRE(before.exit_code == 0);
  CHECK(before.out.find("assumed (no `protocol calibrate` figures for this host)") != std::string::npos);
  Output cal = Protocol({"calibrate", "--db", db, "--seconds", "0.3"}, src, "OMP_NUM_THREADS=1");
  INFO(cal.err);
  REQUIRE(cal.exit_code == 0);
  const fs::path file = dir.path / "results" / "calibration.json";
  REQUIRE(fs::exists(file));
  CHECK_FALSE(fs::exists(db));  // calibrate creates no database
  auto stored = ReadCalibration(file.string(), ThisHost());
  REQUIRE(stored.ok());
  REQUIRE(stored->has_value());
  const HostCalibration& c = **stored;
  CHECK(c.cpu_flops > 1e8);                 // even a slow core does 0.1 GFLOP/s
  CHECK(c.memory_bytes_per_second > 1e8);
  CHECK(c.op_seconds > 0);
  CHECK(c.op_seconds < 1e-2);
  CHECK(c.process_start_seconds > 0);
  CHECK(c.threads == 1);
  CHECK(cal.out.find(file.string() + ": host " + ThisHost() + ", 1 threads: matmul ") == 0);
  Output after = Protocol({"validate", (src / "plans/quickstart.yaml").string(), "--db", db}, src);
  REQUIRE(after.exit_code == 0);
  CHECK(after.out.find("calibrated on this host (" + ThisHost() + ", " + c.measured_at + ")") != std::string::npos);
  CHECK(after.out.find("assumed (no `protocol calibrate`") == std::string::npos);
  CHECK(after.out.find("  plan total: ") != std::string::npos);
}

TEST_CASE("cli: validate prints the rig-hours of the methodology's plans on their H100 rigs") {
  fs::path src = PROTOCOL_SOURCE_DIR;
  for (const char* plan : {"plans/llama70b.yaml", "plans/llama7b.yaml"}) {
    CAPTURE(plan);
    Output v = Protocol({"validate", (src / plan).string()}, src);
    INFO(v.err);
    REQUIRE(v.exit_code == 0);
    CHECK(v.out.find(", 8 x H100 SXM, datasheet bf16 989 TFLOP/s, MFU 0.40 (assumed)") != std::string::npos);
    CHECK(v.out.find("rig-hours (each case's time x its repeats x its nodes)") != std::string::npos);
  }
}

TEST_CASE("cli: run --no-calibrate keeps the assumed CPU figures and stores no calibration") {
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  const std::string db = (dir.path / "q.db").string();
  Output run = Protocol({"run", (src / "plans/quickstart.yaml").string(), "--db", db, "--only", "qn.1.1", "--logs",
                         (dir.path / "logs").string(), "--no-calibrate", "--set",
                         "defaults.output_dir=" + (dir.path / "models/{case_id}").string()},
                        src, "OMP_NUM_THREADS=1");
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.err.find("measuring them for the time estimate") == std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "calibration.json"));
  auto store = OpenStore(db);
  REQUIRE(store.ok());
  auto cases = (*store)->CasesOfRun(1);
  REQUIRE(cases.ok());
  REQUIRE(cases->size() == 1);
  bool assumed = false;
  for (const Measurement& m : (*store)->MeasurementsOfCase(cases->at(0).row_id).value())
    if (m.name == metric::kExpectedWallSeconds) assumed = m.method.find("assumed") != std::string::npos;
  CHECK(assumed);
}

TEST_CASE("cli: a run measures again CPU figures stored from a busy machine, and keeps the quieter ones") {
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  const std::string db = (dir.path / "q.db").string();
  const fs::path file = dir.path / "calibration.json";
  // Figures from a machine as busy as can be read: any measurement now was taken on a quieter one
  // (this run's own calibration takes some of the CPU, so other processes take less than all).
  HostCalibration busy;
  busy.host = ThisHost();
  busy.measured_at = "2026-01-01T00:00:00Z";
  busy.cpu_flops = 1e6;
  busy.memory_bytes_per_second = 1e6;
  busy.op_seconds = 1e-3;
  busy.process_start_seconds = 1.0;
  busy.threads = 1;
  busy.contention = 1.0;
  REQUIRE(WriteCalibration(file.string(), busy).ok());
  Output run = Protocol({"run", (src / "plans/quickstart.yaml").string(), "--db", db, "--only", "qn.1.1", "--logs",
                         (dir.path / "logs").string(), "--set",
                         "defaults.output_dir=" + (dir.path / "models/{case_id}").string()},
                        src, "OMP_NUM_THREADS=1");
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.err.find("this host's CPU figures in " + file.string() +
                     " were measured while other processes took 100 % of the CPU: measuring them again") !=
        std::string::npos);
  auto stored = ReadCalibration(file.string(), ThisHost());
  REQUIRE(stored.ok());
  REQUIRE(stored->has_value());
  CHECK((*stored)->measured_at != busy.measured_at);
  CHECK((*stored)->contention < 1.0);
  CHECK((*stored)->cpu_flops > 1e8);
}
