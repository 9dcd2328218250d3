#ifndef PROTOCOL_BACKENDS_NATIVE_PLATFORM_DEVICE_PEAK_H_
#define PROTOCOL_BACKENDS_NATIVE_PLATFORM_DEVICE_PEAK_H_

// One table of devices: what each accelerator (and a CPU host) can do at
// most, read by model FLOPs utilisation (MFU) of a measured run and by the
// time estimate `protocol validate` prints (time_estimate.h; docs/estimates.md
// has the table with its sources).
//
//   MFU = achieved FLOP/s / peak FLOP/s, achieved = FLOPs per token × tokens/s,
//   FLOPs per token from ModelConfig::TrainingFlopsPerToken (PaLM, appendix B,
//   as torchtitan computes it).
//
// A device that is not in the table gets no MFU: never a guessed peak.

#include <optional>
#include <string>
#include <vector>

namespace protocol {
namespace native {

// One row. Figures are the vendor's datasheet values, dense (no sparsity), in
// 10^12 FLOP/s and 10^9 bytes/s; `link_gb_per_s` is the bandwidth one device
// sends to another device of its node with, one direction (NVLink where the
// board has it, else PCIe).
struct DeviceFigures {
  const char* name;            // as a plan names it (cluster.nodes[].gpu_model): "H100 SXM"
  const char* name_contains;   // matched against the CUDA device name: "H100 80GB HBM3"
  double bf16_tflops;          // tensor cores, bf16 in, fp32 accumulate
  double fp32_tflops;          // plain fp32 (no TF32)
  double memory_gb_per_s;      // device memory bandwidth
  double link_gb_per_s;        // to another device of the node, one direction
};

// Every row, most specific first (the first whose pattern a CUDA name
// contains wins): H100 PCIe, H100 NVL, H100 SXM, H200 NVL, H200, A100, A800,
// L40S, A10G, RTX 4090, RTX 3090.
const std::vector<DeviceFigures>& DeviceTable();
// The row a plan names, case-insensitively ("h100 sxm"); nullptr when none.
const DeviceFigures* FindDevice(const std::string& plan_name);
// "H100 SXM, H100 PCIe, ..." for messages.
std::string DeviceNames();

// The fraction of the peak that training is assumed to achieve on a GPU
// (MFU) when the plan does not say (cluster.nodes[].gpu_mfu): 0.40, what
// Llama 3's pretraining reached on 16,384 H100s (38–43 % bf16 MFU, "The Llama
// 3 Herd of Models", 2024, table 4), the same fraction for every row.
inline constexpr double kAssumedGpuMfu = 0.40;
// The fraction of the memory bandwidth a decode step's reads achieve: 0.80
// (STREAM-like copies reach 80–90 % of HBM's datasheet figure).
inline constexpr double kAssumedMemoryEfficiency = 0.80;
// A kernel launch's cost on a GPU, the floor of a small op: 5 µs (CUDA's
// launch latency, as NVIDIA's CUDA Graphs material quotes it).
inline constexpr double kAssumedGpuOpSeconds = 5e-6;

// The CPU entry, per host (every core together), used when `protocol
// calibrate` measured nothing on this host (calibration.h): an assumption,
// said so wherever it is used. The figures of a small 2-core cloud machine.
inline constexpr double kAssumedCpuGflops = 50.0;       // fp32 matmul, every thread
inline constexpr double kAssumedCpuMemoryGbPerS = 10.0;  // a large copy
inline constexpr double kAssumedCpuOpSeconds = 10e-6;    // one small libtorch op on the host

// The row whose pattern a CUDA device name contains (the first, most
// specific), e.g. "NVIDIA H100 80GB HBM3" → H100 SXM; nullptr when unknown.
const DeviceFigures* FindCudaDevice(const std::string& device_name);
// Dense (no sparsity) bf16 tensor-core TFLOP/s from the vendor's datasheet for
// that device, e.g. "NVIDIA H100 80GB HBM3" → 989 (H100 SXM). nullopt when unknown.
std::optional<double> PeakBf16Tflops(const std::string& device_name);

// Achieved TFLOP/s of training at `tokens_per_second`, given FLOPs per token.
inline double AchievedTflops(double flops_per_token, double tokens_per_second) {
  return flops_per_token * tokens_per_second / 1e12;
}

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PLATFORM_DEVICE_PEAK_H_
