// NF4 dequantization straight into the compute dtype (nf4.h): the CPU one-pass
// kernel and the ATen-only path (what CUDA runs) give, bit for bit, what the
// former four passes gave (bytes → int32 → float32 levels from a table copied
// per call → scaled in place → converted to the dtype), on every shape class:
// whole and partial last blocks, block counts below, at and beyond the
// kernel's parallel grain and not a multiple of it, with and without double
// quantization, in float32, bfloat16 and float16.
#include "native_test_support.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include "backends/native/quant/nf4.h"

namespace protocol {
namespace native {
namespace {

// The absmax as dequantization used it before (repeat_interleave of the group
// scales; float32 multiply, then add the mean).
at::Tensor ReferenceAbsmax(const Nf4Tensor& q) {
  if (!q.double_quant()) return q.absmax;
  const int64_t blocks = q.absmax_codes.size(0);
  at::Tensor values = nf4_dq_levels().index_select(0, q.absmax_codes.to(at::kLong));
  at::Tensor scales = q.absmax_scales.repeat_interleave(kNf4DqGroupSize).narrow(0, 0, blocks);
  return values * scales + q.absmax_mean;
}

// The former four passes, kept here as the reference: the 256-entry pair table
// built on the host, the bytes widened to int32, the float32 levels looked up,
// scaled in place by the block's absmax, then converted to `dtype`.
at::Tensor ReferenceFourPass(const Nf4Tensor& q, at::ScalarType dtype) {
  at::Tensor levels = nf4_levels();
  at::Tensor table = at::stack({levels.repeat_interleave(16), levels.repeat({16})}, 1);  // (256, 2), high nibble first
  at::Tensor out = table.index_select(0, q.packed.to(at::kInt)).view({q.blocks(), kNf4BlockSize});
  out.mul_(ReferenceAbsmax(q).unsqueeze(1));
  return out.view({-1}).narrow(0, 0, q.numel).view(q.shape).to(dtype);
}

struct ShapeCase {
  const char* what;
  std::vector<int64_t> shape;
};

// Blocks of 64: 128 whole; 17 with a partial last; 1 partial; grain − 1 = 255
// (+ a partial); grain + 1 = 257; 766 (2 grains + 254, a partial last block);
// 2032 (7 grains + 240, several tasks): double quantization then has 1, 3 or 8
// groups of 256 blocks, the last one partial.
const ShapeCase kShapes[] = {
    {"64x128 whole blocks", {64, 128}},
    {"37x29 partial last block", {37, 29}},
    {"3x7 one partial block", {3, 7}},
    {"255 blocks + 5 weights", {255 * 64 + 5}},
    {"257 blocks", {257, 64}},
    {"700x70: 766 blocks", {700, 70}},
    {"1000x130: 2032 blocks", {1000, 130}},
};

}  // namespace

TEST_CASE("native nf4 dequantize: one pass and the ATen path equal the former four passes bit for bit") {
  static_assert(kNf4DequantizeGrain == 256, "the shapes above straddle a grain of 256 blocks");
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (const ShapeCase& s : kShapes) {
    CAPTURE(s.what);
    at::Tensor w = at::empty(s.shape, at::kFloat).normal_(0.0, 0.02, gen);
    // Blocks whose scale spans float16's range: products beyond 65504 round to inf in both.
    w.view({-1}).narrow(0, 0, std::min<int64_t>(w.numel(), 64)).mul_(3e6);
    for (bool dq : {false, true}) {
      CAPTURE(dq);
      const Nf4Tensor q = nf4_quantize(w, dq);
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        CAPTURE(dtype);
        const at::Tensor ref = ReferenceFourPass(q, dtype);
        const at::Tensor kernel = nf4_dequantize(q, dtype);
        const at::Tensor aten = nf4_dequantize_aten(q, dtype);
        CHECK((kernel.scalar_type() == dtype));
        CHECK((aten.scalar_type() == dtype));
        CHECK(kernel.sizes() == w.sizes());
        CHECK(aten.sizes() == w.sizes());
        CHECK(at::equal(kernel, ref));
        CHECK(at::equal(aten, ref));
      }
      CHECK(at::equal(nf4_absmax(q), ReferenceAbsmax(q)));
      // Another dtype: float32, then converted.
      CHECK(at::equal(nf4_dequantize(q, at::kDouble), ReferenceFourPass(q, at::kDouble)));
    }
  }
}

TEST_CASE("native nf4 dequantize: the default dtype is float32, as before") {
  at::Tensor w = at::randn({9, 64});
  const Nf4Tensor q = nf4_quantize(w);
  CHECK((nf4_dequantize(q).scalar_type() == at::kFloat));
  CHECK(at::equal(nf4_dequantize(q), ReferenceFourPass(q, at::kFloat)));
}

TEST_CASE("native nf4 dequantize: the lookup tables are made once per device and reused") {
  const at::Device cpu(at::kCPU);
  const at::Tensor pairs = nf4_pair_table(cpu);
  CHECK(pairs.sizes() == at::IntArrayRef({256, 2}));
  CHECK((pairs.scalar_type() == at::kFloat));
  CHECK(nf4_pair_table(cpu).data_ptr() == pairs.data_ptr());  // the cached tensor, not a new copy
  // Byte 0x3C holds codes 3 (high nibble, first) and 12.
  CHECK(pairs[0x3C][0].item<float>() == nf4_levels()[3].item<float>());
  CHECK(pairs[0x3C][1].item<float>() == nf4_levels()[12].item<float>());
  const at::Tensor dq = nf4_dq_level_table(cpu);
  CHECK(nf4_dq_level_table(cpu).data_ptr() == dq.data_ptr());
  CHECK(at::equal(dq, nf4_dq_levels()));
}

TEST_CASE("native nf4 dequantize: inside InferenceMode (generation) the tables stay ordinary tensors") {
  c10::InferenceMode inference;
  // Made here when this test runs first (alone: -tc); else made earlier and reused here.
  CHECK(!nf4_pair_table(at::Device(at::kCPU)).is_inference());
  CHECK(!nf4_dq_level_table(at::Device(at::kCPU)).is_inference());
  const Nf4Tensor q = nf4_quantize(at::randn({4, 64}), true);
  CHECK(at::equal(nf4_dequantize(q, at::kBFloat16), nf4_dequantize_aten(q, at::kBFloat16)));
}

}  // namespace native
}  // namespace protocol
