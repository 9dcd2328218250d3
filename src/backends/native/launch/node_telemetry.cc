#include "backends/native/launch/node_telemetry.h"

#include <cstdlib>
#include <optional>

#include "runner/base/text.h"
#include "runner/exec/net_dev.h"
#include "runner/exec/process.h"
#include "runner/exec/telemetry.h"

namespace protocol {
namespace native {

std::map<std::string, std::string> NodeTelemetryEnv(double interval_seconds, int nodes, int local_rank,
                                                    bool gpus) {
  if (interval_seconds <= 0 || nodes < 2 || local_rank != 0) return {};
  std::map<std::string, std::string> env = {{kTelemetryIntervalVariable, FormatFigure(interval_seconds)}};
  if (gpus) env[kTelemetryGpusVariable] = "1";
  return env;
}

struct NodeTelemetry::Impl {
  std::unique_ptr<ProcessRunner> processes;
  ProcNetMeter net;
  std::optional<TelemetrySampler> sampler;
};

NodeTelemetry::NodeTelemetry(const std::string& node, std::function<void(const TelemetrySample&)> send) {
  const char* interval = std::getenv(kTelemetryIntervalVariable);
  const double seconds = interval ? std::atof(interval) : 0;
  if (seconds <= 0) return;
  impl_ = std::make_unique<Impl>();
  const char* gpus = std::getenv(kTelemetryGpusVariable);
  if (gpus && std::string(gpus) == "1") impl_->processes = MakeSystemProcessRunner();
  TelemetrySources sources;
  sources.processes = impl_->processes.get();
  sources.net = &impl_->net;
  sources.on_samples = [node, send](const std::vector<TelemetrySample>& samples) {
    for (TelemetrySample s : samples) {
      s.node = node;
      send(s);
    }
  };
  impl_->sampler.emplace(sources, seconds);
}

NodeTelemetry::~NodeTelemetry() {
  if (impl_ && impl_->sampler) impl_->sampler->Stop();  // its last reading goes out too
}

}  // namespace native
}  // namespace protocol
