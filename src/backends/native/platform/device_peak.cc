#include "backends/native/platform/device_peak.h"

namespace protocol {
namespace native {
namespace {

struct DevicePeak {
  const char* name_contains;
  double bf16_tflops;
};

// First match wins: the more specific names come first.
const DevicePeak kDevicePeaks[] = {
    {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.0}, {"H200", 989.0},
    {"A100", 312.0},      {"L40S", 362.0},     {"A10G", 70.0},
};

}  // namespace

std::optional<double> PeakBf16Tflops(const std::string& device_name) {
  for (const auto& row : kDevicePeaks)
    if (device_name.find(row.name_contains) != std::string::npos) return row.bf16_tflops;
  return std::nullopt;
}

}  // namespace native
}  // namespace protocol
