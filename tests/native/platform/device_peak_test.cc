// The accelerator peak table: which CUDA names get which dense bf16 peak, and
// that an unknown device gets none (no guessed MFU).
#include <doctest/doctest.h>

#include "backends/native/platform/device_peak.h"

#include <string>

namespace protocol {
namespace native {
namespace {

TEST_CASE("device peak: CUDA device names map to their datasheet bf16 peak") {
  CHECK(PeakBf16Tflops("NVIDIA H100 80GB HBM3") == 989.0);
  CHECK(PeakBf16Tflops("NVIDIA H100 PCIe") == 756.0);
  CHECK(PeakBf16Tflops("NVIDIA H100 NVL") == 835.0);
  CHECK(PeakBf16Tflops("NVIDIA H200") == 989.0);
  CHECK(PeakBf16Tflops("NVIDIA H200 NVL") == 835.0);  // not the SXM part's row
  CHECK(PeakBf16Tflops("NVIDIA A100-SXM4-80GB") == 312.0);
  CHECK(PeakBf16Tflops("NVIDIA A800-SXM4-80GB") == 312.0);
  CHECK(PeakBf16Tflops("NVIDIA GeForce RTX 4090") == 165.2);
  CHECK(PeakBf16Tflops("NVIDIA GeForce RTX 3090") == 71.0);
  CHECK_FALSE(PeakBf16Tflops("NVIDIA GeForce GTX 1080").has_value());
  CHECK_FALSE(PeakBf16Tflops("").has_value());
}

TEST_CASE("device peak: a CUDA device name finds its row, memory bandwidth included") {
  const DeviceFigures* h100 = FindCudaDevice("NVIDIA H100 80GB HBM3");
  REQUIRE(h100 != nullptr);
  CHECK(std::string(h100->name) == "H100 SXM");
  CHECK(h100->memory_gb_per_s == 3350.0);
  const DeviceFigures* h200 = FindCudaDevice("NVIDIA H200");
  REQUIRE(h200 != nullptr);
  CHECK(std::string(h200->name) == "H200");
  CHECK(h200->memory_gb_per_s == 4800.0);
  CHECK(FindCudaDevice("NVIDIA GeForce GTX 1080") == nullptr);
}

TEST_CASE("device table: a plan names a row case-insensitively; each row has every figure") {
  const DeviceFigures* sxm = FindDevice("h100 sxm");
  REQUIRE(sxm != nullptr);
  CHECK(std::string(sxm->name) == "H100 SXM");
  CHECK(sxm->memory_gb_per_s == 3350.0);
  CHECK(FindDevice("H100") == nullptr);  // ambiguous: SXM or PCIe, the plan must say
  for (const char* name : {"H100 SXM", "H100 PCIe", "A100", "A800", "RTX 4090", "RTX 3090"}) {
    const DeviceFigures* row = FindDevice(name);
    REQUIRE(row != nullptr);
    CHECK(row->bf16_tflops > row->fp32_tflops);
    CHECK(row->memory_gb_per_s > 0);
    CHECK(row->link_gb_per_s > 0);
  }
  CHECK(DeviceNames().rfind("H100 PCIe, H100 NVL, H100 SXM", 0) == 0);
}

TEST_CASE("device peak: achieved TFLOP/s is FLOPs per token times tokens per second") {
  // 6·N for N = 1e9 at 10 000 tokens/s = 60 TFLOP/s.
  CHECK(AchievedTflops(6e9, 1e4) == doctest::Approx(60.0));
}

}  // namespace
}  // namespace native
}  // namespace protocol
