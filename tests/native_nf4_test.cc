// NF4 quantization: exact on the levels themselves, bounded error otherwise,
// ~4.5 bits per weight.
#include "native_test_support.h"

#include <ATen/CPUGeneratorImpl.h>

#include "backends/native/nf4.h"

namespace protocol {
namespace native {

TEST_CASE("native nf4: values on the levels round-trip exactly, packed two per byte") {
  // One block: the 16 levels scaled by 2.5, four times over.
  at::Tensor levels = nf4_levels();
  at::Tensor w = at::cat({levels, levels.flip(0), levels, levels}) * 2.5f;
  Nf4Tensor q = nf4_quantize(w);
  CHECK(q.packed.numel() == 32);
  CHECK(q.absmax.numel() == 1);
  CHECK(q.absmax.item<float>() == 2.5f);
  CHECK(q.packed[0].item<uint8_t>() == 0x01);  // codes 0 and 1: first in the high nibble
  CHECK(q.packed[7].item<uint8_t>() == 0xEF);  // codes 14 and 15
  CHECK(at::equal(nf4_dequantize(q), w));
}

TEST_CASE("native nf4: error is at most half the widest level gap of each block's absmax") {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor w = at::empty({37, 29}, at::kFloat);  // 1073 values: 17 blocks, the last padded
  w.normal_(0.0, 0.02, gen);
  Nf4Tensor q = nf4_quantize(w);
  CHECK(q.absmax.numel() == 17);
  CHECK(q.packed.numel() == 17 * 32);
  at::Tensor back = nf4_dequantize(q);
  CHECK(back.sizes() == w.sizes());
  // Widest gap: −1 to −0.6961928 → error ≤ 0.1519·absmax ≤ 0.1519·max|w|.
  const double bound = 0.5 * (1.0 - 0.6961928009986877) * w.abs().max().item<double>();
  CHECK((back - w).abs().max().item<double>() <= bound + 1e-7);
  // Most values land much closer than the bound; the mean error is small.
  CHECK((back - w).abs().mean().item<double>() < 0.1 * w.abs().max().item<double>());
  CHECK(at::equal(nf4_dequantize(nf4_quantize(at::zeros({3, 64}))), at::zeros({3, 64})));
}

}  // namespace native
}  // namespace protocol
