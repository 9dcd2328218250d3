#include "runner/exec/telemetry.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "runner/base/clock.h"
#include "runner/base/text.h"
#include "runner/exec/nvidia_smi.h"

namespace protocol {
namespace {

constexpr const char* kLoopback = "lo";

// gpu2 before gpu10.
bool DeviceOrder(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

std::string Listed(std::vector<std::string> names) {
  std::sort(names.begin(), names.end(), DeviceOrder);
  return Join(names, ", ");
}

}  // namespace

std::vector<TelemetrySample> NetSamples(const std::vector<InterfaceCounters>& reading, double seconds, bool first,
                                        std::map<std::string, InterfaceCounters>& baseline) {
  std::vector<TelemetrySample> out;
  for (const InterfaceCounters& now : reading) {
    if (now.name == kLoopback) continue;
    InterfaceCounters& base = baseline.emplace(now.name, now).first->second;
    // The counters were reset (the interface came back): count from here.
    if (now.sent_bytes < base.sent_bytes || now.received_bytes < base.received_bytes) base = now;
    const uint64_t sent = now.sent_bytes - base.sent_bytes;
    const uint64_t received = now.received_bytes - base.received_bytes;
    if (!first && sent == 0 && received == 0) continue;
    for (const auto& [quantity, value] : {std::pair{quantity::kNetSent, sent}, std::pair{quantity::kNetReceived, received}}) {
      TelemetrySample s;
      s.seconds = seconds;
      s.device = now.name;
      s.quantity = quantity;
      s.value = static_cast<double>(value);
      out.push_back(std::move(s));
    }
  }
  return out;
}

TelemetrySampler::TelemetrySampler(const TelemetrySources& sources, double interval_seconds)
    : sources_(sources), interval_seconds_(interval_seconds), start_(SteadySeconds()) {
  TakeInterval(0, /*first=*/true);
  interval_thread_ = std::thread([this] { IntervalLoop(); });
  if (sources_.processes) gpu_thread_ = std::thread([this] { GpuLoop(); });
}

TelemetrySampler::~TelemetrySampler() { JoinThreads(); }

void TelemetrySampler::JoinThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  gpu_stop_.Request();
  if (interval_thread_.joinable()) interval_thread_.join();
  if (gpu_thread_.joinable()) gpu_thread_.join();
}

double TelemetrySampler::Now() const { return SteadySeconds() - start_; }

void TelemetrySampler::TakeInterval(double seconds, bool first) {
  std::vector<TelemetrySample> taken;
  if (sources_.net) {
    if (std::optional<std::vector<InterfaceCounters>> reading = sources_.net->Read()) {
      taken = NetSamples(*reading, seconds, first, net_baseline_);
    } else if (first) {
      net_problem_ = "counters not readable";
    }
  }
  if (sources_.cpu) {
    std::optional<CpuReading> now = sources_.cpu->Read();
    if (now && last_cpu_) {
      const double elapsed = now->at_seconds - last_cpu_->at_seconds;
      if (elapsed > 0 && now->cores > 0) {
        TelemetrySample s;
        s.seconds = seconds;
        s.device = "cpu";
        s.quantity = quantity::kCpuBusy;
        s.value = std::clamp((now->busy_seconds - last_cpu_->busy_seconds) / (now->cores * elapsed), 0.0, 1.0);
        taken.push_back(std::move(s));
      }
    }
    if (now) last_cpu_ = now;
    else if (first) cpu_problem_ = "counters not readable";
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, counters] : net_baseline_)
      if (std::find(interfaces_seen_.begin(), interfaces_seen_.end(), name) == interfaces_seen_.end())
        interfaces_seen_.push_back(name);
  }
  Keep(std::move(taken));
}

void TelemetrySampler::Keep(std::vector<TelemetrySample> samples) {
  if (samples.empty()) return;
  if (sources_.on_samples) {
    sources_.on_samples(samples);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.insert(pending_.end(), samples.begin(), samples.end());
}

void TelemetrySampler::AddArrived(TelemetrySample sample) {
  const double now = Now();
  std::lock_guard<std::mutex> lock(mutex_);
  // The sender's clock, placed on this one by the node's first arrival.
  sample.seconds += arrival_offset_.emplace(sample.node, now - sample.seconds).first->second;
  arrived_.insert(sample.node + ":" + sample.device);
  pending_.push_back(std::move(sample));
}

void TelemetrySampler::IntervalLoop() {
  const auto interval = std::chrono::duration<double>(interval_seconds_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    TakeInterval(Now(), /*first=*/false);
    lock.lock();
  }
}

void TelemetrySampler::GpuLoop() {
  ProcessSpec spec;
  spec.argv = NvidiaSmiArgv(interval_seconds_);
  spec.kill_grace_seconds = 1;
  std::set<std::string> gpus;
  std::string other;  // the last line that was not a reading (an error message)
  const ProcessResult r = sources_.processes->Run(spec, gpu_stop_, [&](std::string_view line) {
    std::optional<std::vector<TelemetrySample>> readings = ParseNvidiaSmiLine(line);
    if (!readings) {
      if (!Trim(line).empty()) other = Trim(line);
      return;
    }
    const double seconds = Now();
    for (TelemetrySample& s : *readings) {
      s.seconds = seconds;
      gpus.insert(s.device);
    }
    Keep(std::move(*readings));
  });
  const std::string said = other.empty() ? "" : fmt::format(" ({})", other);
  switch (r.ending) {
    case ProcessResult::Ending::kFailedToStart:
      gpu_problem_ = "nvidia-smi: " + r.error;
      break;
    case ProcessResult::Ending::kExited:
      if (r.exit_code != 0) gpu_problem_ = fmt::format("nvidia-smi exited with code {}{}", r.exit_code, said);
      else if (gpus.empty()) gpu_problem_ = "nvidia-smi printed no reading" + said;
      break;
    case ProcessResult::Ending::kSignaled:
      gpu_problem_ = fmt::format("nvidia-smi was killed by signal {}", r.signal);
      break;
    case ProcessResult::Ending::kTimedOut:
    case ProcessResult::Ending::kStopped:
      if (gpus.empty()) gpu_problem_ = "nvidia-smi gave no reading before the case ended" + said;
      break;
  }
  gpus_seen_.assign(gpus.begin(), gpus.end());
}

std::vector<TelemetrySample> TelemetrySampler::TakePending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(pending_);
}

TelemetrySampler::Ending TelemetrySampler::Stop() {
  JoinThreads();
  TakeInterval(Now(), /*first=*/false);

  Ending end;
  const std::string every = FormatFigure(interval_seconds_);
  std::vector<std::string> parts;
  if (sources_.processes) {
    end.gpu_problem = gpu_problem_;
    parts.push_back(gpu_problem_.empty()
                        ? fmt::format("gpus: {} (nvidia-smi every {} s)", Listed(gpus_seen_), every)
                        : fmt::format("gpus: not sampled ({})", gpu_problem_));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (sources_.net) {
    std::vector<std::string> named;
    for (const std::string& name : interfaces_seen_) named.push_back(name);
    parts.push_back(!net_problem_.empty() ? "network: not sampled (/proc/net/dev: " + net_problem_ + ")"
                    : named.empty()       ? "network: no interface but loopback (/proc/net/dev)"
                                          : fmt::format("network: {} (/proc/net/dev every {} s, loopback left out)",
                                                        Listed(named), every));
  }
  if (!arrived_.empty())
    parts.push_back(fmt::format("nodes: {} (read by each node's first rank)",
                                Join(std::vector<std::string>(arrived_.begin(), arrived_.end()), ", ")));
  if (sources_.cpu)
    parts.push_back(cpu_problem_.empty() ? fmt::format("cpu (/proc/stat every {} s)", every)
                                         : "cpu: not sampled (/proc/stat: " + cpu_problem_ + ")");
  end.description = Join(parts, "; ");
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const TelemetrySample& a, const TelemetrySample& b) { return a.seconds < b.seconds; });
  end.samples = std::move(pending_);
  return end;
}

}  // namespace protocol
