// The fused ops of a decoder layer (fused_ops.h) against model.cc's composite
// ATen forms, and a whole model with and without them.
#include "native_test_support.h"

#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include "autograd_reference.h"
#include "backends/native/model/fused_ops.h"
#include "backends/native/model/model.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/quantized_model.h"

namespace protocol {
namespace native {
namespace {

// The composite forms, as model.cc writes them (RMSNorm: autograd_reference.h).
using testing::CompositeRmsNorm;

at::Tensor RopeComposite(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

TEST_CASE("fused ops: where they serve") {
  at::Tensor x = at::randn({2, 4});
  CHECK_FALSE(fused::Available(x));  // an autograd graph may be recorded: the composite ops have a backward
  {
    // Without a graph inside training (a checkpointed layer's first pass): the composite
    // ops, whose bits the recomputation in backward gives again.
    c10::NoGradGuard no_grad;
    CHECK_FALSE(fused::Available(x));
  }
  c10::InferenceMode inference;
  CHECK(fused::Available(x));
  CHECK_FALSE(fused::Available(x.to(at::kDouble)));
  CHECK_FALSE(fused::Available(x.to(at::kBFloat16)));
  // The CUDA kernels are off until a caller turns them on, and only a build that has them can.
  CHECK_FALSE(fused::CudaKernels());
  CHECK(fused::SetCudaKernels(true) == fused::CudaKernelsBuilt());
  CHECK(fused::Available(x));  // the CPU's kernels either way
  CHECK_FALSE(fused::SetCudaKernels(false));
  CHECK(fused::AttentionAvailable(x, 1024));  // no head-dimension limit on the CPU
}

TEST_CASE("fused ops: RMSNorm, alone and after the residual's add, equal the composite within float32 rounding") {
  c10::InferenceMode inference;
  at::manual_seed(3);
  at::Tensor x = at::randn({2, 3, 32}) * 4, r = at::randn({2, 3, 32}), w = at::rand({32}) + 0.5;
  const at::Tensor expected = CompositeRmsNorm(x, w, 1e-5);
  CHECK(at::allclose(fused::RmsNorm(x, w, 1e-5), expected, /*rtol=*/2e-6, /*atol=*/1e-7));
  auto [h, y] = fused::AddRmsNorm(x, r, w, 1e-5);
  CHECK(at::equal(h, x + r));  // one float32 addition per element, as the composite's
  CHECK(at::allclose(y, CompositeRmsNorm(x + r, w, 1e-5), 2e-6, 1e-7));
  // A non-contiguous input is read as its values.
  at::Tensor t = at::randn({32, 5}).t();
  CHECK(at::allclose(fused::RmsNorm(t, w, 1e-5), CompositeRmsNorm(t, w, 1e-5), 2e-6, 1e-7));
}

TEST_CASE("fused ops: SiLU(gate)·up over the joined projection equals the composite within float32 rounding") {
  c10::InferenceMode inference;
  at::manual_seed(4);
  at::Tensor gate_up = at::randn({3, 1, 2 * 24}) * 3;
  const at::Tensor expected = at::silu(gate_up.narrow(-1, 0, 24)) * gate_up.narrow(-1, 24, 24);
  at::Tensor y = fused::SiluMul(gate_up);
  CHECK(y.sizes().vec() == std::vector<int64_t>{3, 1, 24});
  CHECK(at::allclose(y, expected, 1e-6, 1e-7));
}

TEST_CASE("fused ops: rope_cache rotates q and k as the composite does, bit for bit, and writes k and v at their positions") {
  c10::InferenceMode inference;
  at::manual_seed(5);
  const int64_t B = 2, T = 3, NH = 4, NKV = 2, HD = 8, capacity = 10, pos = 4;
  at::Tensor qkv = at::randn({B, T, (NH + 2 * NKV) * HD});
  at::Tensor angles = at::rand({T, HD}) * 6;
  at::Tensor cos = angles.cos(), sin = angles.sin();
  at::Tensor k_cache = at::full({B, NKV, capacity, HD}, 7.0f), v_cache = at::full({B, NKV, capacity, HD}, 7.0f);
  at::Tensor q = fused::RopeCache(qkv, cos, sin, k_cache, v_cache, pos, NH, NKV);
  // The composite: split into heads (B,H,T,HD), rotate q and k.
  std::vector<at::Tensor> parts = qkv.split_with_sizes({NH * HD, NKV * HD, NKV * HD}, -1);
  at::Tensor q_ref = RopeComposite(parts[0].view({B, T, NH, HD}).transpose(1, 2), cos, sin);
  at::Tensor k_ref = RopeComposite(parts[1].view({B, T, NKV, HD}).transpose(1, 2), cos, sin);
  at::Tensor v_ref = parts[2].view({B, T, NKV, HD}).transpose(1, 2);
  CHECK(q.sizes().vec() == std::vector<int64_t>{B, T, NH, HD});
  CHECK(at::equal(q.transpose(1, 2), q_ref));
  CHECK(at::equal(k_cache.narrow(2, pos, T), k_ref));
  CHECK(at::equal(v_cache.narrow(2, pos, T), v_ref));
  // Nothing else of the cache is written.
  CHECK(at::equal(k_cache.narrow(2, 0, pos), at::full({B, NKV, pos, HD}, 7.0f)));
  CHECK(at::equal(v_cache.narrow(2, pos + T, capacity - pos - T), at::full({B, NKV, capacity - pos - T, HD}, 7.0f)));
}

TEST_CASE("fused ops: decode attention over grouped heads equals softmax(q·Kᵀ/√HD)·V of each head's K/V group") {
  c10::InferenceMode inference;
  at::manual_seed(6);
  const int64_t B = 2, NH = 6, NKV = 2, HD = 8, capacity = 12, length = 9;
  at::Tensor q = at::randn({B, 1, NH, HD});
  at::Tensor k_cache = at::randn({B, NKV, capacity, HD}), v_cache = at::randn({B, NKV, capacity, HD});
  at::Tensor y = fused::DecodeAttention(q, k_cache, v_cache, length);
  CHECK(y.sizes().vec() == std::vector<int64_t>{B, 1, NH * HD});
  // Reference in float64, head by head: query head h reads K/V head h / 3.
  at::Tensor expected = at::empty({B, NH, HD}, at::kDouble);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h) {
      at::Tensor K = k_cache[b][h / 3].narrow(0, 0, length).to(at::kDouble);
      at::Tensor V = v_cache[b][h / 3].narrow(0, 0, length).to(at::kDouble);
      at::Tensor p = at::softmax(at::mv(K, q[b][0][h].to(at::kDouble)) / std::sqrt(8.0), 0);
      expected[b][h] = at::mv(V.t(), p);
    }
  CHECK(at::allclose(y.view({B, NH, HD}).to(at::kDouble), expected, 1e-6, 1e-7));
  // Cached positions at and past `length` are not read.
  k_cache.narrow(2, length, capacity - length).fill_(1e6);
  CHECK(at::equal(fused::DecodeAttention(q, k_cache, v_cache, length), y));
}

TEST_CASE("fused ops: rope_cache_at and decode_attention_at read the position from a tensor: the same bits, one op each") {
  c10::InferenceMode inference;
  at::manual_seed(7);
  const int64_t B = 1, NH = 4, NKV = 2, HD = 8, capacity = 12, pos = 6;
  at::Tensor qkv = at::randn({B, 1, (NH + 2 * NKV) * HD});
  at::Tensor angles = at::rand({1, HD}) * 6;
  at::Tensor cos = angles.cos(), sin = angles.sin();
  at::Tensor k_host = at::randn({B, NKV, capacity, HD}), v_host = at::randn({B, NKV, capacity, HD});
  at::Tensor k_at = k_host.clone(), v_at = v_host.clone();
  const at::Tensor position = at::full({1}, pos, at::kLong);
  at::Tensor q_host = fused::RopeCache(qkv, cos, sin, k_host, v_host, pos, NH, NKV);
  compat::OpCounter counter;
  at::Tensor q_at = fused::RopeCacheAt(qkv, cos, sin, k_at, v_at, position, NH, NKV);
  at::Tensor y_at = fused::DecodeAttentionAt(q_at, k_at, v_at, position);
  CHECK(counter.Describe() == "protocol::decode_attention_at 1, protocol::rope_cache_at 1");
  CHECK(at::equal(q_at, q_host));
  CHECK(at::equal(k_at, k_host));  // written at the same position, nothing else
  CHECK(at::equal(v_at, v_host));
  CHECK(at::equal(y_at, fused::DecodeAttention(q_host, k_host, v_host, pos + 1)));  // positions 0..pos
  // The position is one int64 on the tensors' device, and inside the cache.
  CHECK_THROWS_WITH_AS(fused::DecodeAttentionAt(q_at, k_at, v_at, at::full({1}, pos, at::kInt)),
                       doctest::Contains("decode_attention_at: the position is one int64 on the tensors' device"),
                       c10::Error);
  CHECK_THROWS_WITH_AS(fused::RopeCacheAt(qkv, cos, sin, k_at, v_at, at::full({1}, capacity, at::kLong), NH, NKV),
                       doctest::Contains("outside the cache's 12"), c10::Error);
}

Model JoinedModel() {
  Model m = model_create(testing::TinyTestConfig(), at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 9);
  return m;
}

TEST_CASE("fused ops: model_create lays each layer's q, k, v and gate, up side by side") {
  Model m = JoinedModel();
  const LayerWeights& w = m.layers[1];
  REQUIRE(w.wqkv.defined());
  CHECK(w.wq.data_ptr() == w.wqkv.data_ptr());
  CHECK(static_cast<char*>(w.wk.data_ptr()) == static_cast<char*>(w.wq.data_ptr()) + w.wq.nbytes());
  CHECK(static_cast<char*>(w.wv.data_ptr()) == static_cast<char*>(w.wk.data_ptr()) + w.wk.nbytes());
  CHECK(w.w_gate_up.size(0) == 2 * m.config.hidden_dim);
  CHECK(static_cast<char*>(w.w_up.data_ptr()) == static_cast<char*>(w.w_gate.data_ptr()) + w.w_gate.nbytes());
  // Seeded initialisation fills the parts as it fills separate tensors.
  Model separate = model_create_unallocated(m.config, at::kCPU);
  for (NamedParameter& p : model_parameters(separate)) *p.tensor = at::empty(p.shape, at::kFloat);
  model_init_random(separate, 9);
  CHECK(at::equal(separate.layers[1].wv, w.wv));
  CHECK(at::equal(separate.layers[1].w_up, w.w_up));
  CHECK_FALSE(separate.layers[1].wqkv.defined());
}

TEST_CASE("fused ops: a whole model's logits, prefill and decode, equal the composite forward within float32 rounding") {
  Model m = JoinedModel();
  const std::vector<int64_t> ids = {3, 14, 15, 9, 2, 6, 5, 35};
  at::Tensor tokens = at::tensor(ids, at::kLong).view({1, 8});
  // With a graph recorded nothing is fused or joined: the composite forward, the reference.
  at::Tensor reference = model_forward(m, tokens).detach();
  c10::InferenceMode inference;
  CHECK(at::allclose(model_forward(m, tokens), reference, 1e-5, 1e-5));
  // A prefill of 5 through the cache, then 3 decode steps, against the same positions' logits.
  KvCache cache = kv_cache_create(m, 1, 8);
  at::Tensor chunked = model_forward(m, tokens.narrow(1, 0, 5), &cache);
  std::vector<at::Tensor> steps = {chunked};
  for (int64_t t = 5; t < 8; ++t) steps.push_back(model_forward(m, tokens.narrow(1, t, 1), &cache));
  CHECK(at::allclose(at::cat(steps, 1), reference, 1e-5, 1e-5));
  // A model whose projections are separate tensors takes the unjoined path and agrees too.
  Model separate = model_create_unallocated(m.config, at::kCPU);
  for (NamedParameter& p : model_parameters(separate)) *p.tensor = at::empty(p.shape, at::kFloat);
  model_init_random(separate, 9);
  KvCache again = kv_cache_create(separate, 1, 8);
  (void)model_forward(separate, tokens.narrow(1, 0, 7), &again);
  CHECK(at::allclose(model_forward(separate, tokens.narrow(1, 7, 1), &again), reference.narrow(1, 7, 1), 1e-5, 1e-5));
}

TEST_CASE("fused ops: a 4-bit model's logits, prefill and decode, equal its composite forward within float32 rounding") {
  // The override computes q, k and v apart; the fused path sets them side by side for the rotation.
  for (bool kept : {false, true}) {
    CAPTURE(kept);
    Model m = JoinedModel();
    model_quantize_nf4(m);
    if (kept) nf4_keep_dequantized(m, at::kFloat);
    const std::vector<int64_t> ids = {3, 14, 15, 9, 2, 6, 5, 35};
    at::Tensor tokens = at::tensor(ids, at::kLong).view({1, 8});
    at::Tensor reference;
    {
      c10::NoGradGuard no_grad;  // no InferenceMode: the composite ops
      reference = model_forward(m, tokens);
    }
    c10::InferenceMode inference;
    KvCache cache = kv_cache_create(m, 1, 8);
    std::vector<at::Tensor> steps = {model_forward(m, tokens.narrow(1, 0, 5), &cache)};
    for (int64_t t = 5; t < 8; ++t) steps.push_back(model_forward(m, tokens.narrow(1, t, 1), &cache));
    CHECK(at::allclose(at::cat(steps, 1), reference, 1e-5, 1e-5));
  }
}

}  // namespace
}  // namespace native
}  // namespace protocol
