#ifndef PROTOCOL_RUNNER_EXEC_CALIBRATION_H_
#define PROTOCOL_RUNNER_EXEC_CALIBRATION_H_

// Where `protocol calibrate` keeps what it measured: a small JSON file
// beside the database, `calibration.json` in the database's folder, one entry
// per host (a results folder copied to another machine keeps the first
// machine's figures, and they are not used there):
//
//   {"format": 1, "hosts": {"HOST": {"measured_at": "...", "cpu_flops": ...,
//    "memory_bytes_per_second": ..., "op_seconds": ..., "process_start_seconds": ...,
//    "threads": N, "contention": ...}}}
//
// The time estimate's CPU entry reads this host's entry; without one it
// uses the device table's assumed CPU figures and says "assumed".

#include <optional>
#include <string>

#include "runner/base/status.h"
#include "runner/exec/estimate.h"

namespace protocol {

// "results/calibration.json" for "results/protocol.db"; "calibration.json" for "x.db".
std::string CalibrationPathFor(const std::string& db_path);
// This host's entry; nullopt when the file is absent or has none for `host`.
// kCorruption when the file is there but is not such JSON (named, with the reason).
Result<std::optional<HostCalibration>> ReadCalibration(const std::string& path, const std::string& host);
// Writes (replaces) `c.host`'s entry, keeping the other hosts'; creates the file.
Status WriteCalibration(const std::string& path, const HostCalibration& c);
// The name of this machine (gethostname), as calibration entries are keyed.
std::string ThisHost();
// Whether `c` was measured on a busy machine: other processes took
// metric::kContendedShare of the CPU or more while it ran.
bool CalibrationContended(const HostCalibration& c);
// "measured while other processes took 45 % of the CPU" for a contended
// calibration; empty otherwise.
std::string CalibrationContentionNote(const HostCalibration& c);
// Of a stored calibration measured on a busy machine and one measured again
// now, the one the time estimate should use: the new one when other processes
// took less of the CPU while it ran (its rates are the less disturbed), the
// stored one otherwise (a tie keeps the stored one, measured for longer by
// `protocol calibrate` or the first run alike).
bool PreferRemeasured(const HostCalibration& stored, const HostCalibration& remeasured);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_CALIBRATION_H_
