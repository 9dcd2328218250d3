// The accelerator peak table: which CUDA names get which dense bf16 peak, and
// that an unknown device gets none (no guessed MFU).
#include <doctest/doctest.h>

#include "backends/native/platform/device_peak.h"

namespace protocol {
namespace native {
namespace {

TEST_CASE("device peak: CUDA device names map to their datasheet bf16 peak") {
  CHECK(PeakBf16Tflops("NVIDIA H100 80GB HBM3") == 989.0);
  CHECK(PeakBf16Tflops("NVIDIA H100 PCIe") == 756.0);
  CHECK(PeakBf16Tflops("NVIDIA H100 NVL") == 835.0);
  CHECK(PeakBf16Tflops("NVIDIA H200") == 989.0);
  CHECK(PeakBf16Tflops("NVIDIA A100-SXM4-80GB") == 312.0);
  CHECK_FALSE(PeakBf16Tflops("NVIDIA GeForce RTX 4090").has_value());
  CHECK_FALSE(PeakBf16Tflops("").has_value());
}

TEST_CASE("device peak: achieved TFLOP/s is FLOPs per token times tokens per second") {
  // 6·N for N = 1e9 at 10 000 tokens/s = 60 TFLOP/s.
  CHECK(AchievedTflops(6e9, 1e4) == doctest::Approx(60.0));
}

}  // namespace
}  // namespace native
}  // namespace protocol
