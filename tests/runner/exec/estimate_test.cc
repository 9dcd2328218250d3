// The time estimate's runner side: the band flag, the plan's total, and the
// calibration file `protocol calibrate` writes beside the database.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "runner/exec/calibration.h"
#include "runner/exec/estimate.h"
#include "runner/store/records.h"
#include "test_files.h"

namespace protocol {
namespace {

TEST_CASE("estimate band: a measured time outside 0.5-2x of the expected is flagged with the largest term") {
  CHECK_FALSE(EstimateBandFlag(10, 10, "compute 8 s").has_value());
  CHECK_FALSE(EstimateBandFlag(19.9, 10, "compute 8 s").has_value());
  CHECK_FALSE(EstimateBandFlag(5.1, 10, "compute 8 s").has_value());
  CHECK(EstimateBandFlag(25, 10, "compute 8 s") ==
        std::optional<std::string>("2.5x its estimate (10 s expected, 25 s measured; outside 0.5-2x); the term "
                                   "most likely at fault: compute 8 s"));
  CHECK(EstimateBandFlag(4, 10, "") ==
        std::optional<std::string>("0.4x its estimate (10 s expected, 4 s measured; outside 0.5-2x)"));
  CHECK_FALSE(EstimateBandFlag(4, 0, "x").has_value());  // no estimate, no flag
}

TEST_CASE("time estimate: the largest counted term; an overlapped term is shown but not added") {
  TimeEstimate e;
  e.terms = {{"start-up", 2, ""}, {"compute", 5, ""}, {"communication", 9, "", /*counted=*/false}};
  e.seconds = 7;
  REQUIRE(e.Largest() != nullptr);
  CHECK(e.Largest()->name == "compute");
  CHECK(e.Describe() == "7 s: start-up 2 s + compute 5 s + communication 9 s [overlapped, not added]");
  CHECK(FormatDuration(2.5e-5) == "25 us");
  CHECK(FormatDuration(0.0123) == "12.3 ms");
  CHECK(FormatDuration(600) == "10 min");
  CHECK(FormatDuration(4 * 3600) == "4 h");
}

TEST_CASE("calibration: written beside the database, one entry per host, read back for this host only") {
  testing::TempDir dir;
  const std::string db = (dir.path / "results" / "protocol.db").string();
  const std::string path = CalibrationPathFor(db);
  CHECK(path == (dir.path / "results" / "calibration.json").string());
  auto none = ReadCalibration(path, "h1");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());  // no file: the estimate says "assumed"
  HostCalibration c;
  c.host = "h1";
  c.measured_at = "2026-11-26T00:00:00Z";
  c.cpu_flops = 5e10;
  c.memory_bytes_per_second = 8e9;
  c.op_seconds = 4e-6;
  c.process_start_seconds = 0.4;
  c.threads = 2;
  c.contention = 0.45;
  REQUIRE(WriteCalibration(path, c).ok());
  c.host = "h2";
  c.cpu_flops = 1e11;
  c.contention = 0.05;
  REQUIRE(WriteCalibration(path, c).ok());
  auto h1 = ReadCalibration(path, "h1");
  REQUIRE(h1.ok());
  REQUIRE(h1->has_value());
  CHECK((*h1)->cpu_flops == 5e10);
  CHECK((*h1)->memory_bytes_per_second == 8e9);
  CHECK((*h1)->op_seconds == 4e-6);
  CHECK((*h1)->process_start_seconds == 0.4);
  CHECK((*h1)->threads == 2);
  CHECK((*h1)->measured_at == "2026-11-26T00:00:00Z");
  CHECK((*h1)->contention == 0.45);
  CHECK((*ReadCalibration(path, "h2"))->cpu_flops == 1e11);
  CHECK((*ReadCalibration(path, "h2"))->contention == 0.05);
  CHECK_FALSE(ReadCalibration(path, "h3")->has_value());
  // A damaged file is an error that names it (and calibrate replaces it).
  std::ofstream(path) << "not json";
  auto bad = ReadCalibration(path, "h1");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find(path + ": not a calibration file") == 0);
  REQUIRE(WriteCalibration(path, c).ok());
  CHECK(ReadCalibration(path, "h2")->has_value());
}

TEST_CASE("calibration: one taken on a busy machine says so; a file without the figure reads as idle") {
  HostCalibration c;
  c.cpu_flops = 5e10;
  c.memory_bytes_per_second = 8e9;
  c.contention = 0.19;
  CHECK_FALSE(CalibrationContended(c));
  CHECK(CalibrationContentionNote(c).empty());
  c.contention = metric::kContendedShare;
  CHECK(CalibrationContended(c));
  c.contention = 0.456;
  CHECK(CalibrationContentionNote(c) == "measured while other processes took 46 % of the CPU");
  // Written before the contention was measured: no "contention" key.
  testing::TempDir dir;
  const std::string path = (dir.path / "calibration.json").string();
  std::ofstream(path) << R"({"format": 1, "hosts": {"h": {"measured_at": "2026-11-20T00:00:00Z",)"
                      << R"( "cpu_flops": 5e10, "memory_bytes_per_second": 8e9, "threads": 2}}})";
  auto old = ReadCalibration(path, "h");
  REQUIRE(old.ok());
  REQUIRE(old->has_value());
  CHECK((*old)->contention == 0);
  CHECK_FALSE(CalibrationContended(**old));
}

TEST_CASE("calibration: measured again, the quieter machine's figures are kept") {
  HostCalibration stored, again;
  stored.contention = 0.45;
  again.contention = 0.10;
  CHECK(PreferRemeasured(stored, again));
  again.contention = 0.60;
  CHECK_FALSE(PreferRemeasured(stored, again));  // busier still: the stored ones stay
  again.contention = 0.45;
  CHECK_FALSE(PreferRemeasured(stored, again));  // a tie keeps the stored ones
}

}  // namespace
}  // namespace protocol
