#ifndef PROTOCOL_RUNNER_EXEC_CPU_METER_H_
#define PROTOCOL_RUNNER_EXEC_CPU_METER_H_

// How much of the machine's CPU other processes took while a case ran
// (contention). A case measured beside other work is not a fair side of a
// ratio; the runner stores this figure with every case so that the report,
// `compare` and `run` can say so.
//
// Definitions, per sampling interval [t0, t1] (CLOCK_MONOTONIC seconds):
//
//     busy   = Δ(user + nice + system + irq + softirq + steal) of /proc/stat's
//              "cpu" line, in seconds (every core; steal is time the
//              hypervisor gave to someone else)
//     own    = Δ CPU seconds of the case's processes: the runner and every
//              process below it, live or reaped (Σ over the live tree of
//              utime + stime + cutime + cstime, /proc/<pid>/stat)
//     others = max(0, busy − own)
//     share  = others / (cores × (t1 − t0))        in [0, 1]
//
// The case's figure is the share over the whole case (first to last sample);
// its peak is the largest share of one interval. Work a command hands to a
// daemon (e.g. the processes of a `docker run` container, which are children
// of the container runtime, not of the command) runs outside the tree and
// counts as others.

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runner/store/records.h"

namespace protocol {

// One reading of the counters above.
struct CpuReading {
  double at_seconds = 0;     // monotonic time of the reading
  double busy_seconds = 0;   // machine busy CPU time since boot, all cores
  double own_seconds = 0;    // CPU time of this process and its descendants
  int cores = 1;             // online cores counted in busy_seconds
};

// The outside thing: where readings come from (/proc here; a script in tests).
class CpuMeter {
 public:
  virtual ~CpuMeter() = default;
  // nullopt when the counters cannot be read (no /proc): nothing is stored.
  virtual std::optional<CpuReading> Read() = 0;
};

// Reads /proc/stat, /proc/<pid>/stat for every process below this one, and
// the monotonic clock.
class ProcCpuMeter : public CpuMeter {
 public:
  std::optional<CpuReading> Read() override;
};

// Share of the machine's CPU time others took between two readings (formula
// above); nullopt when no time passed or the readings are inconsistent.
std::optional<double> OthersShare(const CpuReading& from, const CpuReading& to);

// Samples a meter every `interval_seconds` on a thread of its own from
// construction to Stop(). Stop() takes the last reading and returns the case's
// measurements: metric::kContention (whole case) and metric::kContentionPeak
// (largest interval), unit "fraction", with a method saying how they were
// sampled; empty when the meter could not be read twice.
class ContentionSampler {
 public:
  ContentionSampler(CpuMeter& meter, double interval_seconds);
  ~ContentionSampler();
  ContentionSampler(const ContentionSampler&) = delete;
  ContentionSampler& operator=(const ContentionSampler&) = delete;

  std::vector<Measurement> Stop();

 private:
  void Loop();
  void Take();

  CpuMeter& meter_;
  const double interval_seconds_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<CpuReading> readings_;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_CPU_METER_H_
