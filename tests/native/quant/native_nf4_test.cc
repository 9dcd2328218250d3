// NF4 quantization: exact on the levels themselves, bounded error otherwise,
// ~4.5 bits per weight; double quantization of the absmax (~4.127 bits per
// weight) within its stated bound of single quantization.
#include "native_test_support.h"

#include <ATen/CPUGeneratorImpl.h>

#include <c10/core/GradMode.h>

#include "backends/native/model/generate.h"
#include "backends/native/model/model.h"
#include "backends/native/quant/nf4.h"
#include "backends/native/quant/quantized_model.h"
#include "runner/base/text.h"

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

TEST_CASE("native nf4: quantizing chunk by chunk gives the codes and absmax of the whole tensor at once") {
  // Two whole chunks, then 2 blocks and a partial one: every chunk boundary and the padding.
  const int64_t n = (2 * kNf4QuantizeChunkBlocks + 2) * kNf4BlockSize + 17;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor w = (at::randn({n}, gen) * 0.02).to(dtype);
    // The whole tensor at once, as nf4_quantize did before it worked in chunks.
    const int64_t blocks = (n + kNf4BlockSize - 1) / kNf4BlockSize;
    at::Tensor flat = at::constant_pad_nd(w.to(at::kFloat), {0, blocks * kNf4BlockSize - n}, 0).view({blocks, kNf4BlockSize});
    const at::Tensor absmax = flat.abs().amax({1});
    const at::Tensor levels = nf4_levels();
    const at::Tensor midpoints = (levels.narrow(0, 0, 15) + levels.narrow(0, 1, 15)) / 2;
    const at::Tensor codes = at::bucketize(flat / absmax.clamp_min(1e-30).unsqueeze(1), midpoints).to(at::kByte)
                                 .view({blocks, kNf4BlockSize / 2, 2});
    const at::Tensor packed = (codes.select(2, 0).__lshift__(4)).bitwise_or(codes.select(2, 1)).reshape({-1});
    const Nf4Tensor q = nf4_quantize(w);
    CHECK(at::equal(q.packed, packed));
    CHECK(at::equal(q.absmax, absmax));
    const Nf4Tensor dq = nf4_quantize(w, /*double_quant=*/true);
    CHECK(at::equal(dq.packed, packed));
    CHECK(dq.absmax_codes.numel() == blocks);
  }
}

TEST_CASE("native nf4: the 8-bit dynamic levels of double quantization") {
  at::Tensor l = nf4_dq_levels();
  REQUIRE(l.numel() == 256);
  CHECK((l.narrow(0, 1, 255) > l.narrow(0, 0, 255)).all().item<bool>());  // strictly ascending
  CHECK(l[255].item<float>() == 1.0f);
  CHECK(l[127].item<float>() == 0.0f);  // 127 negatives, zero, 127 positives below one, one
  // Exponent 0 (×1): 64 midpoints of linspace(0.1, 1, 65), 0.9/64 apart.
  CHECK(l[254].item<double>() == doctest::Approx(0.1 + 0.9 * 63.5 / 64).epsilon(1e-7));
  CHECK(l[0].item<double>() == doctest::Approx(-(0.1 + 0.9 * 63.5 / 64)).epsilon(1e-7));
  // Exponent −6: ±10^−6 · 0.55 (one midpoint of linspace(0.1, 1, 2)).
  CHECK(l[128].item<double>() == doctest::Approx(0.55e-6).epsilon(1e-6));
  // e8 = half of the widest gap 0.9/64 (also the distance from −1 to the lowest level).
  CHECK(nf4_dq_max_error() == doctest::Approx(0.45 / 64).epsilon(1e-6));
}

TEST_CASE("native nf4: double quantization bytes: 33 per block + 4 per 256 blocks + 4 (4.127 bits/weight)") {
  // Single: 36 bytes per started block of 64.
  CHECK(nf4_storage_bytes(64, false) == 36);
  CHECK(nf4_storage_bytes(65, false) == 72);
  // Double: 32 code bytes + 1 absmax code per block, a float32 scale per group of 256 blocks, one float32 mean.
  CHECK(nf4_storage_bytes(64, true) == 32 + 1 + 4 + 4);
  CHECK(nf4_storage_bytes(64 * 256, true) == 256 * 33 + 4 + 4);
  CHECK(nf4_storage_bytes(64 * 257, true) == 257 * 33 + 2 * 4 + 4);
  // Bits per weight for n = 64·256·1000: 4 + 8/64 + 32/(64·256) + 32/n (the mean).
  const int64_t n = 64 * 256 * 1000;
  CHECK(8.0 * static_cast<double>(nf4_storage_bytes(n, true)) / static_cast<double>(n) ==
        doctest::Approx(4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / static_cast<double>(n)).epsilon(1e-12));
  CHECK(8.0 * static_cast<double>(nf4_storage_bytes(n, false)) / static_cast<double>(n) == 4.5);
  // A Llama-2-70B decoder projection q_proj (8192 × 8192): 37,748,736 bytes single, 34,619,396 double.
  CHECK(nf4_storage_bytes(8192LL * 8192, false) == 37748736);
  CHECK(nf4_storage_bytes(8192LL * 8192, true) == 34619396);

  // The tensors hold exactly that: 300·256 = 76800 weights = 1200 blocks = 4 full groups + 176 blocks.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  at::Tensor w = at::empty({300, 256}, at::kFloat).normal_(0.0, 0.02, gen);
  Nf4Tensor d = nf4_quantize(w, /*double_quant=*/true);
  CHECK(d.double_quant());
  CHECK_FALSE(d.absmax.defined());
  CHECK(d.absmax_codes.numel() == 1200);
  CHECK((d.absmax_codes.scalar_type() == at::kByte));
  CHECK(d.absmax_scales.numel() == 5);
  CHECK(d.absmax_mean.numel() == 1);
  CHECK(nf4_tensor_bytes(d) == 1200 * 32 + 1200 + 5 * 4 + 4);
  CHECK(nf4_tensor_bytes(d) == nf4_storage_bytes(76800, true));
  CHECK(nf4_tensor_bytes(nf4_quantize(w)) == nf4_storage_bytes(76800, false));
}

TEST_CASE("native nf4: double quantization keeps the codes and stays within its bound of single quantization") {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(9);
  // 1100 blocks: 5 groups, the last of 76 blocks; a few large rows give the absmax a spread.
  at::Tensor w = at::empty({1100, 64}, at::kFloat).normal_(0.0, 0.02, gen);
  w.narrow(0, 500, 3).mul_(20);
  Nf4Tensor s = nf4_quantize(w);
  Nf4Tensor d = nf4_quantize(w, true);
  // The 4-bit codes are computed with the exact absmax: identical.
  CHECK(at::equal(s.packed, d.packed));
  // Mean of the absmax kept; the reconstructed absmax is within e8 · its group's scale.
  CHECK(d.absmax_mean.item<float>() == doctest::Approx(s.absmax.mean().item<float>()).epsilon(1e-6));
  at::Tensor scale_per_block = d.absmax_scales.repeat_interleave(256).narrow(0, 0, 1100);
  at::Tensor absmax_err = (nf4_absmax(d) - s.absmax).abs();
  CHECK((absmax_err <= nf4_dq_max_error() * scale_per_block + 1e-7).all().item<bool>());
  CHECK(absmax_err.max().item<double>() > 0);  // it is a real quantization, not a copy
  // Per weight: |w' − w| ≤ ½·g4·absmax_b + e8·scale_group (g4 = 1 − 0.6961928, the widest NF4 gap).
  const double half_g4 = 0.5 * (1.0 - 0.6961928009986877);
  at::Tensor bound = (half_g4 * s.absmax + nf4_dq_max_error() * scale_per_block).unsqueeze(1);
  at::Tensor err_d = (nf4_dequantize(d) - w).abs();
  at::Tensor err_s = (nf4_dequantize(s) - w).abs();
  CHECK((err_s <= half_g4 * s.absmax.unsqueeze(1) + 1e-7).all().item<bool>());
  CHECK((err_d <= bound + 1e-7).all().item<bool>());
  // And in the mean: double quantization adds well under 1% to the single-quantization error.
  const double mean_s = err_s.mean().item<double>(), mean_d = err_d.mean().item<double>();
  INFO("mean |error| single " << mean_s << " double " << mean_d);
  CHECK(mean_d < 1.01 * mean_s);
  CHECK(mean_d != mean_s);
  // Zero blocks stay zero; a tensor whose blocks share one absmax reconstructs it exactly (mean, zero spread).
  CHECK(at::equal(nf4_dequantize(nf4_quantize(at::zeros({3, 64}), true)), at::zeros({3, 64})));
  at::Tensor same = nf4_levels().repeat({4}) * 0.5f;
  CHECK(at::equal(nf4_dequantize(nf4_quantize(same, true)), same));
}

}  // namespace native
}  // namespace protocol

namespace protocol {
namespace native {

TEST_CASE("native nf4: the byte-table dequantization equals levels[code] x absmax exactly") {
  at::manual_seed(5);
  for (bool dq : {false, true}) {
    CAPTURE(dq);
    at::Tensor w = at::randn({300, 70}) * 0.02;  // 21000 weights: a partial last block
    Nf4Tensor q = nf4_quantize(w, dq);
    // The reference: unpack, look up one level per code, scale by the block's absmax.
    at::Tensor codes = at::stack({q.packed.__rshift__(4), q.packed.bitwise_and(0x0f)}, 1).view({-1}).to(at::kLong);
    at::Tensor ref = (nf4_levels().index_select(0, codes).view({q.blocks(), kNf4BlockSize}) * nf4_absmax(q).unsqueeze(1))
                         .view({-1})
                         .narrow(0, 0, q.numel)
                         .view(q.shape);
    CHECK(at::equal(nf4_dequantize(q), ref));
  }
}

TEST_CASE("native nf4: inference with the dequantized projections kept generates the same tokens") {
  ModelConfig c = *PresetConfig("tiny");
  c.n_layers = 3;
  Model per_use = model_create(c, at::TensorOptions().dtype(at::kFloat));
  model_init_random(per_use, 11);
  model_quantize_nf4(per_use);
  Model kept = per_use;
  nf4_keep_dequantized(kept, at::kFloat);
  REQUIRE(model_nf4(kept));
  CHECK(model_nf4(kept)->dequantized.size() == 3);
  CHECK(model_nf4(per_use)->dequantized.empty());
  CHECK(nf4_dequantized_bytes(c, 4) == 3 * (2 * c.dim * c.dim + 2 * c.dim * (c.dim / c.n_heads) * c.n_kv_heads +
                                            3 * c.dim * c.hidden_dim) * 4);
  c10::NoGradGuard no_grad;
  GenerateOptions o;
  o.max_new_tokens = 24;
  auto a = generate_greedy(per_use, {1, 17, 300, 42, 9}, o);
  auto b = generate_greedy(kept, {1, 17, 300, 42, 9}, o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->tokens.size() == 24);
  CHECK(a->tokens == b->tokens);
  // The same logits, not only the same argmax.
  at::Tensor tokens = at::arange(1, 9, at::kLong).view({1, 8});
  CHECK(at::equal(model_forward(per_use, tokens), model_forward(kept, tokens)));
  // Where they would not fit (on CUDA: always), the method says they are dequantized on use.
  std::string why;
  CHECK_FALSE(nf4_keep_dequantized_fits(at::Device(at::kCUDA, 0), 1 << 20, &why));
  CHECK(why == "decoder projections dequantized on use (on cuda:0; kept they would take 0.00 GiB)");
  CHECK_FALSE(nf4_keep_dequantized_fits(at::Device(at::kCPU), int64_t(1) << 60, &why));
  CHECK(StartsWith(why, "decoder projections dequantized on use (kept they would take "));
  CHECK(nf4_keep_dequantized_fits(at::Device(at::kCPU), 1 << 20, &why));
  CHECK(StartsWith(why, "decoder projections dequantized once and kept (0.00 GiB; MemAvailable "));
}

}  // namespace native
}  // namespace protocol
