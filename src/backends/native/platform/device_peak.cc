#include "backends/native/platform/device_peak.h"

#include <cctype>

namespace protocol {
namespace native {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// Sources: NVIDIA's datasheets (H100 Tensor Core GPU, H200, A100 80GB, L40S,
// A10G as AWS lists it, the Ada (RTX 4090) and Ampere GA102 (RTX 3090)
// whitepapers; the A800 is an A100 whose NVLink runs at 400 GB/s both
// directions). GeForce cards' bf16 figure is the one with fp32 accumulate.
// Links: NVLink 4 (H100 SXM, H200) 450 GB/s, NVLink 3 300 GB/s (A100) and 200
// (A800), one direction; the H100 NVL pair's bridge 300, the H200 NVL's
// bridge 450 (900 both ways); PCIe 5.0 x16 64 GB/s;
// PCIe 4.0 x16 32 GB/s.
const std::vector<DeviceFigures>& DeviceTable() {
  static const std::vector<DeviceFigures> table = {
      {"H100 PCIe", "H100 PCIe", 756.0, 51.0, 2000.0, 64.0},
      {"H100 NVL", "H100 NVL", 835.0, 60.0, 3900.0, 300.0},
      {"H100 SXM", "H100", 989.0, 67.0, 3350.0, 450.0},
      {"H200 NVL", "H200 NVL", 835.0, 60.0, 4800.0, 450.0},  // before "H200": names are matched by substring
      {"H200", "H200", 989.0, 67.0, 4800.0, 450.0},
      {"A100", "A100", 312.0, 19.5, 2039.0, 300.0},
      {"A800", "A800", 312.0, 19.5, 2039.0, 200.0},
      {"L40S", "L40S", 362.0, 91.6, 864.0, 32.0},
      {"A10G", "A10G", 70.0, 31.2, 600.0, 32.0},
      {"RTX 4090", "RTX 4090", 165.2, 82.6, 1008.0, 32.0},
      {"RTX 3090", "RTX 3090", 71.0, 35.6, 936.0, 32.0},
  };
  return table;
}

const DeviceFigures* FindDevice(const std::string& plan_name) {
  const std::string wanted = Lower(plan_name);
  for (const DeviceFigures& row : DeviceTable())
    if (Lower(row.name) == wanted) return &row;
  return nullptr;
}

std::string DeviceNames() {
  std::string out;
  for (const DeviceFigures& row : DeviceTable()) out += (out.empty() ? "" : ", ") + std::string(row.name);
  return out;
}

const DeviceFigures* FindCudaDevice(const std::string& device_name) {
  for (const DeviceFigures& row : DeviceTable())
    if (device_name.find(row.name_contains) != std::string::npos) return &row;
  return nullptr;
}

std::optional<double> PeakBf16Tflops(const std::string& device_name) {
  const DeviceFigures* row = FindCudaDevice(device_name);
  if (!row) return std::nullopt;
  return row->bf16_tflops;
}

}  // namespace native
}  // namespace protocol
