#ifndef PROTOCOL_TESTS_FAKE_CPU_METER_H_
#define PROTOCOL_TESTS_FAKE_CPU_METER_H_

// A CpuMeter that returns scripted readings in order, then the last one again.

#include <mutex>
#include <optional>
#include <vector>

#include "runner/exec/cpu_meter.h"

namespace protocol {

class ScriptedCpuMeter : public CpuMeter {
 public:
  explicit ScriptedCpuMeter(std::vector<CpuReading> readings) : readings_(std::move(readings)) {}
  std::optional<CpuReading> Read() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (readings_.empty()) return std::nullopt;
    const CpuReading r = readings_[std::min(next_, readings_.size() - 1)];
    ++next_;
    return r;
  }
  // An idle-then-busy pair per case: `cases` cases of `seconds` each on
  // `cores` cores, others taking `share` of the machine during each.
  static std::vector<CpuReading> PerCase(int cases, double seconds, int cores, double share) {
    std::vector<CpuReading> out;
    for (int i = 0; i < cases; ++i) {
      const double t = 100.0 * i;
      out.push_back({t, 50.0 * i, 10.0 * i, cores});
      out.push_back({t + seconds, 50.0 * i + share * cores * seconds + 1, 10.0 * i + 1, cores});
    }
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<CpuReading> readings_;
  size_t next_ = 0;
};

}  // namespace protocol

#endif  // PROTOCOL_TESTS_FAKE_CPU_METER_H_
