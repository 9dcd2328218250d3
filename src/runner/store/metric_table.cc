#include "runner/store/metric_table.h"

#include <algorithm>

#include "runner/store/records.h"

namespace protocol {
namespace {

using B = Better;
using T = ReportSection;
using N = ReportNumber;
using R = FromRanks;

// name, unit, better, report table, column header, number, column only when present, from ranks
const std::vector<MetricRow> kRows = {
    // Compared by default, in this order.
    {metric::kWallSeconds, "s", B::kLower},
    {metric::kTotalGenerationSeconds, "s", B::kLower},
    {metric::kSecondsPerToken, "s/token", B::kLower},
    {metric::kTokensPerSecond, "tokens/s", B::kHigher},
    {metric::kStepSecondsMean, "s", B::kLower},
    {metric::kTrainTokensPerSecond, "tokens/s", B::kHigher},
    {metric::kTgs, "tokens/s", B::kHigher, T::kMetrics, "TGS (tokens/GPU/s)", N::kOne},
    {metric::kTflops, "TFLOP/s", B::kHigher, T::kMetrics, "TFLOP/s per device", N::kOne},
    {metric::kMfu, "", B::kHigher, T::kMetrics, "MFU (%)", N::kPercent},
    // Distributed training: the share of communication time computation hid.
    {metric::kCommHiddenShare, "", B::kNone, T::kMetrics, "communication hidden (%)", N::kPercent, true},
    {metric::kSamplesPerSecond, "samples/s", B::kHigher, T::kMetrics, "samples/s", N::kTwo},
    {metric::kPeakDeviceMemory, "bytes", B::kLower, T::kMetrics, "peak device memory (GiB)", N::kGiB, false,
     R::kLargest},
    {metric::kPeakHostRss, "bytes", B::kLower, T::kMetrics, "peak host RSS (GiB)", N::kGiB, false, R::kLargest},
    // Distributed training (stragglers.h).
    {metric::kStragglers, "ranks", B::kNone, T::kMetrics, "stragglers (ranks)", N::kCount, true},
    // Held-out loss first in its table, so that a speed-up is read next to it.
    {metric::kEvalLoss, "", B::kLower, T::kQuality, "eval loss", N::kLoss},
    {metric::kBestGroupEvalLoss, "", B::kNone, T::kQuality, "best group eval loss", N::kLoss, true},
    {metric::kFinalLoss, "", B::kLower, T::kQuality, "final loss", N::kLoss},
    {metric::kBytesCommunicated, "bytes", B::kNone, T::kQuality, "bytes communicated", N::kBinaryBytes},
    // Multi-node cases: the part of bytes communicated that crossed between nodes.
    {metric::kBytesBetweenNodes, "bytes", B::kNone, T::kQuality, "bytes between nodes", N::kBinaryBytes, true},
    {metric::kMergeSeconds, "s", B::kNone, T::kQuality, "merge time (s)", N::kSeconds, true},
    {metric::kStepSeconds, "s", B::kLower},
    {metric::kTrainRuntimeSeconds, "s", B::kLower},
    {metric::kRequestThroughput, "requests/s", B::kHigher},
    {metric::kOutputTokensPerSecond, "tokens/s", B::kHigher},
    {metric::kTotalTokensPerSecond, "tokens/s", B::kHigher},
    {metric::kTtftMeanSeconds, "s", B::kLower},
    {metric::kTpotMeanSeconds, "s", B::kLower},
    {metric::kItlMeanSeconds, "s", B::kLower},
    {metric::kLatencyMeanSeconds, "s", B::kLower},
    // The hardware samples (telemetry_figures.h): energy per token is compared.
    {metric::kEnergyPerToken, "J/token", B::kLower, T::kMetrics, "energy per token (J)", N::kTwo, true},
    {metric::kGpuUtilizationMean, "%", B::kNone, T::kMetrics, "GPU use, mean (%)", N::kOne, true},
    {metric::kGpuMemoryPeakDriver, "bytes", B::kNone, T::kMetrics, "GPU memory, driver (GiB)", N::kGiB, true},
    {metric::kLinkThroughputMean, "bytes/s", B::kNone, T::kMetrics, "link, mean per s", N::kBinaryBytes, true},
    // Not compared by default, not a column.
    {metric::kExpectedWallSeconds, "s"},
    {metric::kGeneratedTokens, "tokens"},
    {metric::kPeakHostRssAboveBaseline, "bytes", B::kNone, T::kNone, "", N::kOne, false, R::kLargest},
    {metric::kEvalSeconds, "s"},
    {metric::kBytesWithinGroups, "bytes"},
    {metric::kBytesBetweenGroups, "bytes"},
    {metric::kBytesBetweenNodesPerStep, "bytes"},
    {metric::kCommExposedSeconds, "s", B::kNone, T::kNone, "", N::kOne, false, R::kMean},
    {metric::kCommInFlightSeconds, "s", B::kNone, T::kNone, "", N::kOne, false, R::kMean},
    {metric::kHostReadsPerStep, "reads", B::kNone, T::kNone, "", N::kOne, false, R::kLargest},
    {metric::kLinkBusBandwidth, "bytes/s"},
    {metric::kLinkLatency, "s"},
    {metric::kContention, ""},
    {metric::kContentionPeak, ""},
    {metric::kGpuUtilizationPeak, "%"},
    {metric::kEnergy, "J"},
    {metric::kEnergyPerStep, "J/step"},
    {metric::kLinkBytesSent, "bytes"},
    {metric::kLinkBytesReceived, "bytes"},
    {metric::kLinkThroughputPeak, "bytes/s"},
};

const std::vector<TelemetryQuantity> kQuantities = {
    {quantity::kGpuUtilization, "%", "nvidia-smi utilization.gpu"},
    {quantity::kGpuMemoryUsed, "bytes", "nvidia-smi memory.used (MiB x 2^20)"},
    {quantity::kGpuPower, "W", "nvidia-smi power.draw"},
    {quantity::kGpuSmClock, "MHz", "nvidia-smi clocks.sm"},
    {quantity::kGpuTemperature, "C", "nvidia-smi temperature.gpu"},
    {quantity::kNetSent, "bytes", "/proc/net/dev transmit bytes, since the case began"},
    {quantity::kNetReceived, "bytes", "/proc/net/dev receive bytes, since the case began"},
    {quantity::kCpuBusy, "fraction", "/proc/stat busy time of every core, since the previous sample"},
};

}  // namespace

const std::vector<MetricRow>& MetricTable() { return kRows; }

const std::vector<TelemetryQuantity>& TelemetryQuantities() { return kQuantities; }

const TelemetryQuantity* FindTelemetryQuantity(const std::string& name) {
  for (const TelemetryQuantity& q : kQuantities)
    if (name == q.name) return &q;
  return nullptr;
}

const MetricRow* FindMetric(const std::string& name) {
  for (const MetricRow& row : kRows)
    if (name == row.name) return &row;
  return nullptr;
}

std::vector<const MetricRow*> ReportColumns(ReportSection table) {
  std::vector<const MetricRow*> out;
  for (const MetricRow& row : kRows)
    if (row.report == table) out.push_back(&row);
  return out;
}

}  // namespace protocol
