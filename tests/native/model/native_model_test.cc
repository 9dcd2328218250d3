// The native Llama-2 model: presets, config.json, forward pass, KV-cache generation.
#include "native_test_support.h"

#include <c10/core/GradMode.h>

#include <algorithm>

#include "backends/native/model/generate.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/estimate/time_estimate.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/training/train.h"

namespace protocol {
namespace native {
namespace {

// A model small enough for a test: 2 layers, 4 query heads sharing 2 kv heads.
ModelConfig TestConfig() { return testing::TinyTestConfig(); }

Model TestModel(uint64_t seed = 7) {
  Model m = model_create(TestConfig(), at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, seed);
  return m;
}

// Greedy generation after the prompt {1, 7, 3} with `options`: with the KV
// cache (first) and without it (second, the reference).
std::pair<Generation, Generation> CachedAndReference(const Model& m, GenerateOptions options) {
  options.use_kv_cache = true;
  auto cached = generate_greedy(m, {1, 7, 3}, options);
  options.use_kv_cache = false;
  auto reference = generate_greedy(m, {1, 7, 3}, options);
  REQUIRE(cached.ok());
  REQUIRE(reference.ok());
  return {std::move(*cached), std::move(*reference)};
}

}  // namespace

TEST_CASE("native model presets have the published Llama-2 parameter counts") {
  // Counts of the HF checkpoints meta-llama/Llama-2-{7,13,70}b-hf.
  CHECK(PresetConfig("llama2-7b")->ParameterCount() == 6738415616LL);
  CHECK(PresetConfig("llama2-13b")->ParameterCount() == 13015864320LL);
  CHECK(PresetConfig("llama2-70b")->ParameterCount() == 68976648192LL);
  CHECK(PresetConfig("llama2-70b")->n_kv_heads == 8);
  const int64_t tiny = PresetConfig("tiny")->ParameterCount();
  CHECK(tiny > 1000000);
  CHECK(tiny < 5000000);
  const int64_t small = PresetConfig("small-100m")->ParameterCount();
  CHECK(small > 90000000);
  CHECK(small < 110000000);
  // TinyLlama-1.1B's published count.
  CHECK(PresetConfig("llama-1b")->ParameterCount() == 1100048384LL);
  // 14 layers of 4·768² + 3·768·2048 + 2·768, and 2 × 1024 × 768 + 768 outside them.
  CHECK(PresetConfig("layers-100m")->ParameterCount() == 14 * (4 * 768 * 768 + 3 * 768 * 2048 + 2 * 768) + 2 * 1024 * 768 + 768);
  for (const std::string& name : PresetNames()) CHECK(PresetConfig(name)->Validate().empty());
  auto unknown = PresetConfig("llama2-8b");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message() ==
        "unknown model preset 'llama2-8b' (known: llama2-7b, llama2-13b, llama2-70b, tiny, small-100m, llama-1b, layers-100m)");
}

TEST_CASE("native model FLOPs per token follow 6(N - N_emb) + 12 L H Q T") {
  ModelConfig c = TestConfig();
  // N = 2·50·32 (embed + lm_head) + 2·(attention 32·32+2·32·16+32·32 + mlp 3·32·64 + norms 64) + 32
  const int64_t attention = 32 * 32 + 2 * 32 * 16 + 32 * 32;
  const int64_t per_layer = attention + 3 * 32 * 64 + 2 * 32;
  const int64_t n = 2 * 50 * 32 + 2 * per_layer + 32;
  CHECK(c.ParameterCount() == n);
  CHECK(c.TrainingFlopsPerToken(16) == doctest::Approx(6.0 * (n - 50 * 32) + 12.0 * 2 * 4 * 8 * 16));
  Model m = TestModel();
  CHECK(model_parameter_count(m) == n);
}

TEST_CASE("native model config.json round-trips and names what is wrong") {
  ModelConfig c = TestConfig();
  c.norm_eps = 1e-6;
  c.rope_theta = 500000;
  auto back = ParseHfConfig(c.ToHfJson(), "/m/config.json");
  REQUIRE(back.ok());
  CHECK(back->name == "m");
  CHECK(back->dim == 32);
  CHECK(back->n_kv_heads == 2);
  CHECK(back->hidden_dim == 64);
  CHECK(back->norm_eps == 1e-6);
  CHECK(back->rope_theta == 500000);

  auto missing = ParseHfConfig(R"({"hidden_size": 8, "vocab_size": 10})", "x/config.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "x/config.json: missing or non-integer key(s): num_hidden_layers, num_attention_heads, intermediate_size");
  auto tied = ParseHfConfig(R"({"tie_word_embeddings": true})", "x/config.json");
  CHECK(tied.status().message() ==
        "x/config.json: tie_word_embeddings=true is not supported (Llama-2 has an untied lm_head)");
  auto bad = ParseHfConfig(R"({"hidden_size": 30, "num_hidden_layers": 1, "num_attention_heads": 4,
                               "intermediate_size": 8, "vocab_size": 10})", "x/config.json");
  CHECK(bad.status().message() ==
        "x/config.json: model 'x': hidden_size 30 is not a multiple of num_attention_heads 4");
  CHECK(ReadHfConfig("/nonexistent-dir").status().message() == "/nonexistent-dir/config.json: no such file");
}

TEST_CASE("native model forward is causal and deterministic per seed") {
  Model a = TestModel(7), b = TestModel(7), other = TestModel(8);
  CHECK(at::equal(a.layers[1].wq, b.layers[1].wq));
  CHECK_FALSE(at::equal(a.layers[1].wq, other.layers[1].wq));
  c10::NoGradGuard no_grad;
  at::Tensor t1 = at::tensor(std::vector<int64_t>{3, 14, 15, 9, 2, 6}).view({1, 6});
  at::Tensor t2 = t1.clone();
  t2[0][5] = 40;  // change only the last token
  at::Tensor l1 = model_forward(a, t1), l2 = model_forward(a, t2);
  CHECK(l1.sizes() == at::IntArrayRef({1, 6, 50}));
  // Earlier positions cannot see the last token.
  CHECK(at::allclose(l1.narrow(1, 0, 5), l2.narrow(1, 0, 5)));
  CHECK_FALSE(at::allclose(l1.narrow(1, 5, 1), l2.narrow(1, 5, 1)));
}

TEST_CASE("native model forward of an empty batch gives (0,T,V) logits and a zero loss (an FSDP rank with no eval sequences)") {
  Model m = TestModel();
  BatchTensors b = batch_tensors({}, 8, at::kCPU);
  CHECK(b.inputs.sizes().vec() == std::vector<int64_t>{0, 8});
  at::Tensor logits = model_forward(m, b.inputs);
  CHECK(logits.sizes().vec() == std::vector<int64_t>{0, 8, m.config.vocab_size});
  CHECK(masked_loss(logits, b, 10.0).item<double>() == 0.0);
}

TEST_CASE("native model KV cache: chunked forward matches full forward") {
  Model m = TestModel();
  c10::NoGradGuard no_grad;
  at::Tensor tokens = at::tensor(std::vector<int64_t>{1, 5, 9, 13, 17, 21, 25, 29}).view({1, 8});
  at::Tensor full = model_forward(m, tokens);
  KvCache cache = kv_cache_create(m, 1, 8);
  at::Tensor a = model_forward(m, tokens.narrow(1, 0, 3), &cache);  // prefill
  at::Tensor b = model_forward(m, tokens.narrow(1, 3, 4), &cache);  // a chunk after a prefix
  at::Tensor c = model_forward(m, tokens.narrow(1, 7, 1), &cache);  // one token
  CHECK(cache.length == 8);
  at::Tensor chunked = at::cat({a, b, c}, 1);
  CHECK((chunked - full).abs().max().item<double>() < 1e-5);
}

TEST_CASE("native model KV-cache generation equals no-cache generation token for token") {
  Model m = TestModel();
  GenerateOptions with_cache;
  with_cache.max_new_tokens = 20;
  const auto [g1, g2] = CachedAndReference(m, with_cache);
  CHECK(g1.tokens.size() == 20);
  CHECK(g1.tokens == g2.tokens);

  // ignore_eos=false stops right after the end token: make the first greedy token "eos".
  Model stop_model = TestModel();
  stop_model.config.eos_id = g1.tokens[0];
  GenerateOptions until_eos = with_cache;
  until_eos.ignore_eos = false;
  auto g3 = generate_greedy(stop_model, {1, 7, 3}, until_eos);
  REQUIRE(g3.ok());
  CHECK(g3->tokens == std::vector<int>{g1.tokens[0]});
  CHECK(g3->ended_at_eos);

  StopFlag stop;
  stop.Request();
  auto g4 = generate_greedy(m, {1, 7, 3}, with_cache, &stop);
  REQUIRE(g4.ok());
  CHECK(g4->interrupted);
  CHECK(g4->tokens.empty());
}

TEST_CASE("native model decode with the cache reads the answer back once, not once per token") {
  Model m = TestModel();
  GenerateOptions with_cache;
  with_cache.max_new_tokens = 20;
  const auto [cached, reference] = CachedAndReference(m, with_cache);
  CHECK(cached.tokens == reference.tokens);
  CHECK(cached.host_reads == 1);      // the whole answer, in one copy
  CHECK(reference.host_reads == 20);  // the reference: one per token
  // And no op of the generation reads a scalar back on the way (the one read is that copy).
  CHECK(testing::ScalarReadsIn([&] { REQUIRE(generate_greedy(m, {1, 7, 3}, with_cache).ok()); }) == 0);
  // Stopping at end-of-sequence: the tokens are read every kEosCheckTokens, cut after the first end token.
  const std::vector<int>& all = cached.tokens;
  for (size_t at : {size_t{0}, size_t{5}, size_t{11}}) {
    Model stop_model = TestModel();
    stop_model.config.eos_id = all[at];
    const size_t first = static_cast<size_t>(std::find(all.begin(), all.end(), all[at]) - all.begin());
    GenerateOptions until_eos = with_cache;
    until_eos.ignore_eos = false;
    const auto [g, r] = CachedAndReference(stop_model, until_eos);
    CAPTURE(at);
    CHECK(g.tokens == std::vector<int>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(first) + 1));
    CHECK(g.tokens == r.tokens);
    CHECK(g.ended_at_eos);
    CHECK(g.host_reads == static_cast<int64_t>(first / kEosCheckTokens + 1));
  }
}

namespace {
// The count of `name` in an OpCounter::Describe() text; 0 when absent.
int64_t counter_of(const std::string& described, const std::string& name) {
  const size_t at = described.find(name + " ");
  return at == std::string::npos ? 0 : std::stoll(described.substr(at + name.size() + 1));
}
}  // namespace

namespace {
// The ATen ops decoder layer 0 of `m` dispatches at one decode position after a
// prompt of 3, under InferenceMode, as OpCounter::Describe() says them.
std::pair<int64_t, std::string> DecodeLayerOps(const Model& m) {
  c10::InferenceMode inference;
  KvCache cache = kv_cache_create(m, 1, 16);
  (void)model_forward(m, at::tensor(std::vector<int64_t>{1, 7, 3}, at::kLong).view({1, 3}), &cache);
  at::Tensor x = embed_forward(m.embed, at::tensor(std::vector<int64_t>{5}, at::kLong).view({1, 1}));
  const RopeRows rope = rope_rows(m, cache.length, 1, x.scalar_type());
  compat::OpCounter counter;
  (void)decoder_layer_forward(m, 0, m.layers[0], x, rope, &cache, cache.length);
  return {counter.total(), counter.Describe()};
}
}  // namespace

TEST_CASE("native model: the ATen ops of one decoder layer at one decode position, counted") {
  const auto [ops, which] = DecodeLayerOps(TestModel());
  INFO(which);
  // 10 ops (docs/performance.md): the fused RMSNorm, the joined q|k|v projection, rotation and
  // cache write in one op, attention in one, o, the residual's add fused with the second RMSNorm,
  // the joined gate|up projection, SiLU·up in one, down, the residual's add. Before the fused ops
  // and the joined projections it was 62 (RMSNorm as 8 ops twice, RoPE as 5 for q and for k, 7
  // projections, the cache written by copy, 17 views). A ceiling: no change adds ops unseen.
  CHECK(ops <= 12);
  CHECK(ops == kDecodeOpsPerLayerFused);  // what the time estimate's op floor counts on a CPU
  CHECK(counter_of(which, "aten::linear") == 4);  // q|k|v, o, gate|up, down
  CHECK(counter_of(which, "protocol::rope_cache") == 1);
  CHECK(counter_of(which, "protocol::decode_attention") == 1);
  // Counting stops with the counter: nothing is counted outside it.
  compat::OpCounter outside_check;
  CHECK(outside_check.total() == 0);
}

TEST_CASE("native model: a 4-bit decode layer takes the fused rotation and attention over its three projections") {
  Model m = TestModel();
  model_quantize_nf4(m);
  nf4_keep_dequantized(m, at::kFloat);  // as a CPU serves it where the projections fit
  const auto [ops, which] = DecodeLayerOps(m);
  INFO(which);
  // 15: the two norms, seven projections (q, k, v apart: the override has no joined matrix), q|k|v
  // set side by side (one cat), rotation and cache write, attention, SiLU and ·up, the residual's
  // add. It was 47 with the composite rotation and attention.
  CHECK(ops <= 15);
  CHECK(counter_of(which, "aten::linear") == 7);
  CHECK(counter_of(which, "aten::cat") == 1);
  CHECK(counter_of(which, "protocol::rope_cache") == 1);
  CHECK(counter_of(which, "protocol::decode_attention") == 1);
  // Dequantized on use instead: each projection's dequantization adds its output and three views.
  Model on_use = TestModel();
  model_quantize_nf4(on_use);
  CHECK(DecodeLayerOps(on_use).first == kDecodeOpsPerLayerFusedNf4);  // what the time estimate counts
}

TEST_CASE("native model: a bf16 decode layer (a GPU's dtype) takes the composite ops, with the joined projections") {
  Model m = model_create(TestConfig(), at::TensorOptions().dtype(at::kBFloat16));
  model_init_random(m, 7);
  const auto [ops, which] = DecodeLayerOps(m);
  INFO(which);
  CHECK(counter_of(which, "aten::linear") == 4);
  CHECK(counter_of(which, "protocol::rms_norm") == 0);
  // The test model has grouped K/V heads (n_kv_heads < n_heads): a decode step groups the queries
  // instead of repeating the cached keys and values.
  REQUIRE(m.config.n_kv_heads < m.config.n_heads);
  CHECK(counter_of(which, "aten::repeat_interleave") == 0);
  // The time estimate's op floor for a GPU counts this libtorch's composite layer; libtorch 2.x
  // runs attention as one SDPA op where 1.13 runs its math (6 ops), so its count is lower.
  CHECK(ops <= kDecodeOpsPerLayerComposite);
  MESSAGE(("composite decode layer: " + std::to_string(ops) + " ops: " + which));
}

namespace {
// The ATen ops of one generated token as generate_greedy runs it with `step`
// (the layers, the head, the argmax and the token's bookkeeping): the count
// of a 6-token generation less a 2-token one's, over 4 (the prompt's forward,
// the cache's making and the read-back are the same in both).
int64_t OpsPerToken(const Model& m, DecodeStep step) {
  auto count = [&](int64_t tokens) {
    GenerateOptions o;
    o.max_new_tokens = tokens;
    o.decode_step = step;
    compat::OpCounter counter;
    REQUIRE(generate_greedy(m, {1, 7, 3}, o).ok());
    return counter.total();
  };
  const int64_t two = count(2), six = count(6);
  CHECK((six - two) % 4 == 0);
  return (six - two) / 4;
}

// {ops per decoder layer, ops outside the layers} of a token: from models of 1 and 3 layers.
std::pair<int64_t, int64_t> TokenOps(at::ScalarType dtype, bool nf4, DecodeStep step) {
  int64_t per_token[2];
  for (int64_t layers : {1, 3}) {
    Model m = model_create(testing::TinyTestConfig(50, layers), at::TensorOptions().dtype(dtype));
    model_init_random(m, 7);
    if (nf4) model_quantize_nf4(m);
    per_token[layers == 3] = OpsPerToken(m, step);
  }
  const int64_t layer = (per_token[1] - per_token[0]) / 2;
  return {layer, per_token[0] - layer};
}
}  // namespace

TEST_CASE("native model: the ops of a generated token, what the time estimate's op floor counts") {
  const ModelConfig one_layer = testing::TinyTestConfig(50, 1);
  // The host's position on a CPU in float32 (the fused ops), plain and 4-bit: exactly the table's.
  CHECK(TokenOps(at::kFloat, false, DecodeStep::kHostPosition) ==
        std::pair<int64_t, int64_t>{kDecodeOpsPerLayerFused, kDecodeOpsHeadFused});
  CHECK(TokenOps(at::kFloat, true, DecodeStep::kHostPosition) ==
        std::pair<int64_t, int64_t>{kDecodeOpsPerLayerFusedNf4, kDecodeOpsHeadFused});
  CHECK(DecodeOpsPerToken(one_layer, true) == kDecodeOpsPerLayerFused + kDecodeOpsHeadFused);
  // The composite ops (bf16, a GPU's dtype) run libtorch's attention: counted on 1.13, where it is
  // written out; 2.x's one SDPA op makes them fewer.
  const bool written_out_attention = compat::TorchVersion().rfind("1.", 0) == 0;
  auto counted = [&](std::pair<int64_t, int64_t> ops, int64_t layer, int64_t rest) {
    CAPTURE(ops.first);
    CAPTURE(ops.second);
    CHECK(ops.second == rest);  // outside the layers: no attention
    if (written_out_attention) CHECK(ops.first == layer);
    else CHECK(ops.first <= layer);
  };
  counted(TokenOps(at::kBFloat16, false, DecodeStep::kHostPosition), kDecodeOpsPerLayerComposite,
          kDecodeOpsHeadComposite);
  // At a position on the device, with the fused ops: the same layer, the position read where it is.
  CHECK(TokenOps(at::kFloat, false, DecodeStep::kDevicePosition) ==
        std::pair<int64_t, int64_t>{kDecodeOpsPerLayerFused, kDecodeOpsHeadFused + kDecodeOpsDevicePositionFused});
  CHECK(TokenOps(at::kFloat, true, DecodeStep::kDevicePosition) ==
        std::pair<int64_t, int64_t>{kDecodeOpsPerLayerFusedNf4, kDecodeOpsHeadFused + kDecodeOpsDevicePositionFused});
  CHECK(DecodeOpsPerToken(one_layer, true, false, true) ==
        kDecodeOpsPerLayerFused + kDecodeOpsHeadFused + kDecodeOpsDevicePositionFused);
  // The composite step at the device's position stays within the composite layer's count.
  const auto [layer, rest] = TokenOps(at::kBFloat16, false, DecodeStep::kDevicePosition);
  CHECK(layer <= kDecodeOpsPerLayerComposite);
  CHECK(rest == kDecodeOpsHeadComposite + kDecodeOpsDevicePositionComposite);
  CHECK(DecodeOpsPerToken(one_layer, false, false, true) ==
        kDecodeOpsPerLayerComposite + kDecodeOpsHeadComposite + kDecodeOpsDevicePositionComposite);
}

TEST_CASE("native model generation rejects impossible requests with a reason") {
  Model m = TestModel();
  GenerateOptions o;
  o.max_new_tokens = 62;
  CHECK(generate_greedy(m, {1, 2, 3}, o).status().message() ==
        "generate: prompt (3 tokens) + max_new_tokens (62) = 65 exceeds the model's max_position_embeddings 64");
  CHECK(generate_greedy(m, {}, o).status().message() == "generate: the prompt has no tokens");
  o.max_new_tokens = 1;
  CHECK(generate_greedy(m, {1, 50}, o).status().message() ==
        "generate: prompt token 50 is outside the model's vocabulary [0, 50)");
}

}  // namespace native
}  // namespace protocol
