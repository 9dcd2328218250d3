#ifndef PROTOCOL_RUNNER_EXEC_ESTIMATE_H_
#define PROTOCOL_RUNNER_EXEC_ESTIMATE_H_

// A case's expected wall time, as a backend estimates it before the case runs
// (the native backends: time_estimate.h; docs/estimates.md), and what the
// runner does with it: `validate` and `run --dry-run` print it with its terms
// and the plan's total in rig-hours; `run` stores it with the case as the
// measurement expected_wall_seconds (provenance estimated, the terms in its
// method) and flags a case whose measured wall time leaves the band below.
//
// Also here: what `protocol calibrate` measured on a host (HostCalibration),
// which a backend's CPU figures come from when present, and the file it is
// kept in beside the database (calibration.h reads and writes it).

#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include "runner/store/records.h"

namespace protocol {

// One term of an estimate: "compute" 12.4 s "6.1 TFLOP at 40 % of 8 x 989 TFLOP/s".
struct TimeTerm {
  std::string name;
  double seconds = 0;
  std::string how;      // the inputs, as people read them
  bool counted = true;  // false: shown, but hidden behind another term (overlap), not in the sum
};

struct TimeEstimate {
  std::string why_not;           // not empty: no estimate, and why ("node 'rig0' does not say which GPU ...")
  bool estimated() const { return why_not.empty(); }
  double seconds = 0;            // the expected wall time of one repeat
  std::vector<TimeTerm> terms;   // in the order they happen
  int nodes = 1;                 // the nodes the case holds: a rig-hour is one node for an hour
  std::string device;            // "8 x H100 SXM per node, MFU 0.40 (assumed)", "CPU (calibrated on host h)"
  // "12.4 s: start-up 2.1 s (...) + compute 9.0 s (...) + ..."
  std::string Describe() const;
  // The counted term with the most seconds (what a case outside the band most likely got wrong).
  const TimeTerm* Largest() const;
};

// "1.2 s", "3.4 min", "5.6 h": a duration as the estimate prints it (3 significant digits).
std::string FormatDuration(double seconds);

// The note `validate` and `run --dry-run` print under a case:
// "expected wall time 12.4 s per repeat (x3 repeats) on 16 x H100 SXM, ...: 12.4 s: start-up ... + ..."
// or "no time estimate: WHY".
std::string DescribeCaseTime(const TimeEstimate& estimate, int repeats);

// The plan's total: every estimated case's time x its repeats, and in
// rig-hours (a rig is a node: a two-node case of one hour is 2 rig-hours).
struct PlanTimeTotal {
  double seconds = 0;
  double rig_hours = 0;
  int estimated = 0;
  std::vector<std::string> not_estimated;  // case ids, each once
  void Add(const std::string& case_id, const TimeEstimate& estimate, int repeats);
  // "plan total: 41.2 h of cases, 70.3 rig-hours (each case's time x its repeats x its nodes); 1 case not
  // estimated (2.1.2.3)"
  std::string Describe() const;
};

// The band a measured wall time is expected in: measured / expected in
// [kEstimateBandLow, kEstimateBandHigh]. Outside it the case is flagged (the
// report, `run`'s summary). Wide on purpose: the device figures are
// datasheet peaks times assumed fractions, and a case's start-up varies with
// the machine's caches (docs/estimates.md, "How far off").
// (metric::kEstimateBandLow, kEstimateBandHigh in records.h, which the report reads too.)
inline constexpr double kEstimateBandLow = metric::kEstimateBandLow;
inline constexpr double kEstimateBandHigh = metric::kEstimateBandHigh;
// The flag of a case whose measured / expected leaves the band, e.g.
// "3.1x its estimate (12.0 s expected, 37.2 s measured; largest term: compute 9.0 s)";
// nullopt inside the band or when either figure is not positive.
std::optional<std::string> EstimateBandFlag(double measured_seconds, double expected_seconds,
                                            const std::string& largest_term);

// What `protocol calibrate` measured on one host (every figure > 0 when set).
struct HostCalibration {
  std::string host;                  // gethostname()
  std::string measured_at;           // ISO 8601
  double cpu_flops = 0;              // fp32 matmul FLOP/s, every thread of the host
  double memory_bytes_per_second = 0;  // a large copy: bytes read + written per second
  double op_seconds = 0;             // one op of a decode step (the tiny preset's, per op)
  double process_start_seconds = 0;  // starting `protocol-native` and loading libtorch
  int threads = 0;                   // the threads the matmul used
  // The share of the machine's CPU other processes took while these figures
  // were measured (cpu_meter.h's formula, over the whole calibration); 0 where
  // it could not be read. At metric::kContendedShare or above the rates are
  // low and every estimate from them long: the estimate says so.
  double contention = 0;
  bool ok() const { return cpu_flops > 0 && memory_bytes_per_second > 0; }
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_ESTIMATE_H_
