#ifndef PROTOCOL_RUNNER_EXEC_TELEMETRY_H_
#define PROTOCOL_RUNNER_EXEC_TELEMETRY_H_

// The hardware while a case runs, sampled on the runner's host from the
// case's start to its end (docs/runner.md, "Sampling"):
//   - every GPU, through nvidia-smi left running in loop mode (nvidia_smi.h):
//     utilization, memory used, power draw, SM clock, temperature; one
//     sample per GPU per quantity as each line arrives;
//   - every network interface but loopback (net_dev.h): the bytes sent and
//     received since the case began, every interval;
//   - the CPU (cpu_meter.h): the busy share of every core over the interval.
// Times are seconds since the sampler started (the case's start).
//
// A part that cannot be read is left out and said so in the description
// (fact::kTelemetry): a missing or failing nvidia-smi never fails a case.
// nvidia-smi runs through the ProcessRunner, so it is killed when the case
// ends, however it ends, and dies with the runner (process.h).

#include <condition_variable>
#include <functional>
#include <set>
#include <mutex>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runner/base/stop_flag.h"
#include "runner/exec/cpu_meter.h"
#include "runner/exec/net_dev.h"
#include "runner/exec/process.h"
#include "runner/store/records.h"

namespace protocol {

// Where readings come from; a null source is not sampled.
struct TelemetrySources {
  ProcessRunner* processes = nullptr;  // runs nvidia-smi for the GPUs
  NetMeter* net = nullptr;             // the interfaces
  CpuMeter* cpu = nullptr;             // the CPU
  // When set, every reading goes here as it is taken (on the sampler's
  // threads, one call per reading), not to TakePending / Stop: the first rank
  // of a node sends its node's readings on to the runner this way.
  std::function<void(const std::vector<TelemetrySample>&)> on_samples = nullptr;
};

// The interface counters of one reading → samples since `baseline`
// (net_sent_bytes, net_received_bytes per interface, loopback left out). An
// interface seen for the first time joins the baseline at this reading; one
// whose counters went back (reset) rebases. Only interfaces that moved since
// the baseline are sampled, except at the first reading (`first`), where
// every interface gets its zeros: the start of the series.
std::vector<TelemetrySample> NetSamples(const std::vector<InterfaceCounters>& reading, double seconds, bool first,
                                        std::map<std::string, InterfaceCounters>& baseline);

class TelemetrySampler {
 public:
  // Starts sampling now, every `interval_seconds` (> 0).
  TelemetrySampler(const TelemetrySources& sources, double interval_seconds);
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  // The samples taken since the last call, for the store's batches.
  std::vector<TelemetrySample> TakePending();

  // A reading of another node, sent by one of the case's processes with the
  // time its sampler took it (seconds since that sampler began): kept with
  // this sampler's own, on this sampler's clock, the node's clock placed by
  // its first reading's arrival (so one node's readings keep their spacing;
  // the whole node is late by its first reading's transit, milliseconds).
  void AddArrived(TelemetrySample sample);

  struct Ending {
    std::vector<TelemetrySample> samples;  // those not taken before
    // What was read and how, or why a part was not:
    // "gpus: gpu0, gpu1 (nvidia-smi every 1 s); network: eth0 (/proc/net/dev, loopback left out); cpu (/proc/stat)"
    std::string description;
    std::string gpu_problem;  // "" when the GPUs were read (or not asked for); else why not
  };
  // Stops nvidia-smi and the interval thread after one last reading of the
  // interfaces and the CPU. Call once.
  Ending Stop();

 private:
  void JoinThreads();  // stops both threads (nvidia-smi killed) and waits for them; idempotent
  void IntervalLoop();
  void TakeInterval(double seconds, bool first);
  void GpuLoop();
  double Now() const;
  void Keep(std::vector<TelemetrySample> samples);  // to on_samples, else pending_

  const TelemetrySources sources_;
  const double interval_seconds_;
  const double start_;  // steady clock seconds at construction
  StopFlag gpu_stop_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<TelemetrySample> pending_;  // guarded by mutex_
  // The interval thread's own state.
  std::map<std::string, InterfaceCounters> net_baseline_;
  std::optional<CpuReading> last_cpu_;
  std::string net_problem_, cpu_problem_;
  // The GPU thread's results (read after it is joined).
  std::string gpu_problem_;
  std::vector<std::string> gpus_seen_;
  std::vector<std::string> interfaces_seen_;  // guarded by mutex_
  std::set<std::string> arrived_;  // "rig1:eth0", "rig1:gpu0": what other nodes sent; guarded by mutex_
  std::map<std::string, double> arrival_offset_;  // node → this clock minus its sender's; guarded by mutex_
  std::thread interval_thread_, gpu_thread_;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_TELEMETRY_H_
