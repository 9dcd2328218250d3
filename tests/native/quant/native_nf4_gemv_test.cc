// The batch-1 4-bit GEMV's CPU twin (nf4_gemv.h), which gives the GPU
// kernel's bits (tests/backends/gpu_test.cc holds the kernel to it):
//   - a one-hot row reads back each weight exactly as nf4_dequantize writes
//     it (the codes' order, the nibbles, the block and group of each scale),
//     single and double quantization, float32, bfloat16 and float16;
//   - a random row equals dequantize-then-linear within the error bound of a
//     float32 sum, |Δ| ≤ 2·n·2⁻²⁴·Σ|w·x| plus half a unit of the output's dtype;
//   - where the GEMV serves (nowhere on a CPU) and its refusals.
#include "native_test_support.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "backends/native/model/fused_ops.h"
#include "backends/native/quant/nf4.h"
#include "backends/native/quant/nf4_gemv.h"
#include "backends/native/quant/nf4_linear.h"

namespace protocol {
namespace native {
namespace {

bool SameValues(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b);
}

Nf4Tensor RandomWeights(int64_t out, int64_t in, bool double_quant, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor w = at::randn({out, in}, at::kFloat) * 0.02;
  // Rows of very different scale, so that each block's absmax (and each group's) matters.
  w.mul_(at::linspace(0.1, 3.0, out, at::kFloat).unsqueeze(1));
  return nf4_quantize(w, double_quant);
}

TEST_CASE("nf4 GEMV twin: a one-hot row reads back each weight as nf4_dequantize writes it") {
  // 256 rows × 128: two chunks per row (lanes 0 and 1) and, double-quantized,
  // two groups of 256 blocks (rows 128..255 in the second).
  for (bool double_quant : {false, true}) {
    const Nf4Tensor w = RandomWeights(256, 128, double_quant, 5);
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      CAPTURE(double_quant);
      CAPTURE(std::string(c10::toString(dtype)));
      const at::Tensor dequantized = nf4_dequantize(w, dtype);  // (256, 128)
      for (int64_t i : {0, 1, 31, 32, 63, 64, 97, 127}) {
        CAPTURE(i);
        at::Tensor x = at::zeros({1, 1, 128}, at::TensorOptions().dtype(dtype));
        x[0][0][i] = 1.0;
        const at::Tensor y = nf4_gemv_reference(x, w);
        REQUIRE(y.sizes() == at::IntArrayRef({1, 1, 256}));
        CHECK(SameValues(y.view({256}), dequantized.select(1, i).contiguous()));
      }
    }
  }
}

TEST_CASE("nf4 GEMV twin: a random row equals dequantize-then-linear within a float32 sum's error") {
  struct Shape {
    int64_t out, in;
  };
  // 4096: four chunks a lane; 11008 (Llama-2-7B's down_proj input): 344 chunks, lanes unequal; 64: one chunk.
  for (Shape s : {Shape{48, 4096}, Shape{9, 11008}, Shape{70, 64}}) {
    for (bool double_quant : {false, true}) {
      const Nf4Tensor w = RandomWeights(s.out, s.in, double_quant, 17);
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        CAPTURE(s.in);
        CAPTURE(double_quant);
        CAPTURE(std::string(c10::toString(dtype)));
        const at::Tensor x = at::randn({1, s.in}, at::kFloat).to(dtype);
        const at::Tensor got = nf4_gemv_reference(x, w).to(at::kDouble);
        const at::Tensor wd = nf4_dequantize(w, dtype).to(at::kDouble);
        const at::Tensor xd = x.to(at::kDouble);
        const at::Tensor exact = at::linear(xd, wd);                   // the sum in float64
        const at::Tensor magnitude = at::linear(xd.abs(), wd.abs());  // Σ|w·x|
        const double unit = dtype == at::kFloat ? std::ldexp(1.0, -24) : dtype == at::kBFloat16 ? std::ldexp(1.0, -8)
                                                                                               : std::ldexp(1.0, -11);
        const at::Tensor bound = magnitude * (2.0 * s.in * std::ldexp(1.0, -24)) + exact.abs() * unit + 1e-30;
        CHECK(((got - exact).abs() <= bound).all().item<bool>());
        if (dtype == at::kFloat) {  // and against the library's own float32 GEMV
          const at::Tensor library = at::linear(x, nf4_dequantize(w, dtype)).to(at::kDouble);
          CHECK(((got - library).abs() <= 2.0 * bound).all().item<bool>());
        }
      }
    }
  }
}

TEST_CASE("nf4 GEMV: never served on a CPU; the twin refuses what the kernel cannot take") {
  const Nf4Tensor w = RandomWeights(8, 128, false, 3);
  const at::Tensor x = at::randn({1, 1, 128}, at::kFloat);
  c10::InferenceMode inference;
  fused::SetCudaKernels(true);  // no effect where the build has no CUDA kernels, and none on CPU tensors
  CHECK_FALSE(nf4_gemv_available(x, w));
  fused::SetCudaKernels(false);
  // nf4_linear on a CPU row keeps dequantize-then-linear.
  CHECK(SameValues(nf4_linear(x, w), at::linear(x, nf4_dequantize(w, at::kFloat))));
  const Nf4Tensor odd = RandomWeights(8, 96, false, 3);  // 96 is not whole blocks per row
  CHECK_THROWS(nf4_gemv_reference(at::randn({1, 96}, at::kFloat), odd));
  CHECK_THROWS(nf4_gemv_reference(at::randn({2, 128}, at::kFloat), w));  // two rows
}

}  // namespace
}  // namespace native
}  // namespace protocol
