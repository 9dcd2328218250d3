// `protocol calibrate` and the time estimate through the real binary: the
// figures stored beside the database, read back by validate for the CPU
// entry; validate's rig-hours for the methodology's plans. (The quick
// start's estimate against its measured wall time is checked in cli_test.cc,
// on the run that test makes anyway.)

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "cli_support.h"
#include "runner/base/json.h"
#include "runner/exec/calibration.h"

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
