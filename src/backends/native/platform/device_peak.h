#ifndef PROTOCOL_BACKENDS_NATIVE_PLATFORM_DEVICE_PEAK_H_
#define PROTOCOL_BACKENDS_NATIVE_PLATFORM_DEVICE_PEAK_H_

// Peak dense bf16 throughput of accelerators, for model FLOPs utilisation
// (MFU). One table, read by the backends and the benchmark.
//
//   MFU = achieved FLOP/s / peak FLOP/s, achieved = FLOPs per token × tokens/s,
//   FLOPs per token from ModelConfig::TrainingFlopsPerToken (PaLM, appendix B,
//   as torchtitan computes it).
//
// A device that is not in the table gets no MFU: never a guessed peak.

#include <optional>
#include <string>

namespace protocol {
namespace native {

// Dense (no sparsity) bf16 tensor-core TFLOP/s from the vendor's datasheet for
// the device whose CUDA name contains a row's pattern, e.g.
// "NVIDIA H100 80GB HBM3" → 989 (H100 SXM). nullopt when unknown.
std::optional<double> PeakBf16Tflops(const std::string& device_name);

// Achieved TFLOP/s of training at `tokens_per_second`, given FLOPs per token.
inline double AchievedTflops(double flops_per_token, double tokens_per_second) {
  return flops_per_token * tokens_per_second / 1e12;
}

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PLATFORM_DEVICE_PEAK_H_
