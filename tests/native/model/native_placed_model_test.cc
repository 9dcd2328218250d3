// A model spread over a list of devices (model_create_placed, placement.h):
// with several at::kCPU entries it must generate exactly what the plain model
// generates, token for token, in full precision and in 4 bits; each layer's
// KV cache sits beside its layer.
#include "native_test_support.h"

#include "backends/native/model/generate.h"
#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/model/model.h"
#include "backends/native/quant/quantized_model.h"

namespace protocol {
namespace native {
namespace {

ModelConfig Small() {
  ModelConfig c = *PresetConfig("tiny");
  c.n_layers = 5;  // uneven over 3 devices
  return c;
}

std::vector<int> Generate(const Model& m, int64_t tokens) {
  GenerateOptions o;
  o.max_new_tokens = tokens;
  auto g = generate_greedy(m, {1, 17, 300, 42, 9}, o);
  REQUIRE(g.ok());
  return g->tokens;
}

}  // namespace

TEST_CASE("placed model: several CPU devices generate exactly what one does") {
  const ModelConfig c = Small();
  Model plain = model_create(c, at::TensorOptions().dtype(at::kFloat));
  model_init_random(plain, 11);
  const std::vector<at::Device> cpus(3, at::Device(at::kCPU));
  const LayerPlacement placement = inference_placement(c, 4, false, false, 3);
  REQUIRE(placement.devices == 3);
  CHECK(placement.layer_device.size() == 5);
  Model placed = model_create_placed(c, at::kFloat, cpus, placement);
  model_init_random(placed, 11);  // the same draws, tensor by tensor
  for (NamedParameter& p : model_parameters(plain)) {
    CAPTURE(p.name);
    bool found = false;
    for (NamedParameter& q : model_parameters(placed))
      if (q.name == p.name) {
        found = true;
        CHECK(at::equal(*p.tensor, *q.tensor));
      }
    CHECK(found);
  }
  const std::vector<int> expected = Generate(plain, 24);
  CHECK(Generate(placed, 24) == expected);
  // Without the KV cache too (the whole sequence through every device each step).
  GenerateOptions no_cache;
  no_cache.max_new_tokens = 8;
  no_cache.use_kv_cache = false;
  CHECK(generate_greedy(placed, {1, 17, 300, 42, 9}, no_cache)->tokens ==
        std::vector<int>(expected.begin(), expected.begin() + 8));
  KvCache cache = kv_cache_create(placed, 1, 16);
  REQUIRE(cache.k.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(cache.k[i].device() == placed.layers[i].input_norm.device());

  // 4-bit: both quantized, still token for token.
  model_quantize_nf4(plain, false);
  model_quantize_nf4(placed, false);
  CHECK(Generate(placed, 16) == Generate(plain, 16));
}

TEST_CASE("placed model: the tensors are on the devices the placement names") {
  // Two distinct devices are not available on a CPU-only machine; the device
  // of each tensor is what model_create_placed was told (meta stands in for a
  // second device: it allocates nothing).
  const ModelConfig c = Small();
  LayerPlacement p;
  p.devices = 2;
  p.layer_device = {0, 0, 0, 1, 1};
  p.embed_device = 0;
  p.head_device = 1;
  Model m = model_create_placed(c, at::kFloat, {at::Device(at::kCPU), at::Device(at::kMeta)}, p);
  CHECK(m.embed.device().is_cpu());
  CHECK(m.rope_cos.device().is_cpu());
  for (size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(m.layers[i].wq.device().type() == (i < 3 ? at::kCPU : at::kMeta));
    CHECK(m.layers[i].w_down.device().type() == (i < 3 ? at::kCPU : at::kMeta));
  }
  CHECK(m.norm.device().type() == at::kMeta);
  CHECK(m.lm_head.device().type() == at::kMeta);
}

}  // namespace native
}  // namespace protocol
