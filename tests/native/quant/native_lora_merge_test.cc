// Merging the LoRA adapters of independent groups (lora.h): the stacked
// late merge is exactly the mean of the groups' updates, averaging B with A
// frozen is exact, and PEFT adapter directories round-trip through
// lora_save / lora_load.
#include "native_test_support.h"

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <c10/core/GradMode.h>

#include "backends/native/training/data.h"
#include "backends/native/quant/lora.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/training/train.h"
#include "runner/base/json.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

ModelConfig TestConfig() { return testing::TinyTestConfig(); }

// A group's adapters after training, stood in for by random B (and A from `a_seed`).
LoraAdapters GroupAdapters(const ModelConfig& c, uint64_t a_seed, uint64_t b_seed, int64_t rank = 4) {
  LoraAdapters lora = lora_create(c, rank, 8, a_seed);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(b_seed);
  for (auto& layer : lora.layers)
    for (LoraAdapter& ad : layer) ad.b.normal_(0.0, 0.05, gen);
  return lora;
}

at::Tensor MeanDelta(const std::vector<const LoraAdapters*>& groups, size_t layer, Projection p) {
  at::Tensor sum = lora_delta(*groups[0], layer, p);
  for (size_t g = 1; g < groups.size(); ++g) sum = sum + lora_delta(*groups[g], layer, p);
  return sum / static_cast<double>(groups.size());
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("native lora merge: the stacked adapter's update is the mean of the groups' updates") {
  const ModelConfig c = TestConfig();
  LoraAdapters g0 = GroupAdapters(c, 1, 10), g1 = GroupAdapters(c, 2, 11), g2 = GroupAdapters(c, 3, 12);
  const std::vector<const LoraAdapters*> groups = {&g0, &g1, &g2};
  auto merged = lora_merge_stack(groups);
  REQUIRE(merged.ok());
  CHECK(merged->rank == 3 * 4);
  CHECK(merged->alpha == 8);  // alpha* = alpha: (alpha/(G·r))·Σ B_g·A_g = mean_g (alpha/r)·B_g·A_g
  CHECK(merged->scale() == doctest::Approx(g0.scale() / 3));
  for (size_t layer = 0; layer < 2; ++layer) {
    for (int p = 0; p < kProjectionCount; ++p) {
      const Projection proj = static_cast<Projection>(p);
      CAPTURE(layer);
      CAPTURE(p);
      const auto [out, in] = projection_shape(c, proj);
      CHECK(merged->layers[layer][p].a.sizes() == at::IntArrayRef({12, in}));
      CHECK(merged->layers[layer][p].b.sizes() == at::IntArrayRef({out, 12}));
      // Rows of A* and columns of B* are the groups' own, in group order.
      CHECK(at::equal(merged->layers[layer][p].a.narrow(0, 4, 4), g1.layers[layer][p].a));
      CHECK(at::equal(merged->layers[layer][p].b.narrow(1, 8, 4), g2.layers[layer][p].b));
      at::Tensor mean = MeanDelta(groups, layer, proj);
      CHECK(mean.abs().max().item<double>() > 1e-3);  // not trivially zero
      CHECK((lora_delta(*merged, layer, proj) - mean).abs().max().item<double>() <= 1e-6);
    }
  }
  // The merge moves each group's adapters once: 4 bytes × L·r·Σ(in+out); B alone 4 × L·r·Σ out.
  CHECK(lora_adapter_bytes(c, 4) == 4 * lora_parameter_count(c, 4));
  CHECK(lora_adapter_bytes(c, 4) == 4 * 2 * 4 * 512);
  CHECK(lora_b_bytes(c, 4) == 4 * 2 * 4 * (32 + 16 + 16 + 32 + 64 + 64 + 32));

  LoraAdapters other_rank = GroupAdapters(c, 4, 13, 2);
  CHECK(lora_merge_stack({&g0, &other_rank}).status().message() ==
        "adapters of group 1 (rank 2, alpha 8, 2 layers) differ from group 0's (rank 4, alpha 8, 2 layers)");
  CHECK(lora_merge_stack({}).status().message() == "no adapters to merge");
}

TEST_CASE("native lora merge: with A frozen at the shared seeded start, averaging B is exact") {
  const ModelConfig c = TestConfig();
  // Same A seed on every group (lora_freeze_a): only B differs.
  LoraAdapters g0 = GroupAdapters(c, 7, 20), g1 = GroupAdapters(c, 7, 21), g2 = GroupAdapters(c, 7, 22),
               g3 = GroupAdapters(c, 7, 23);
  const std::vector<const LoraAdapters*> groups = {&g0, &g1, &g2, &g3};
  auto merged = lora_average_b(groups);
  REQUIRE(merged.ok());
  CHECK(merged->rank == 4);
  CHECK(merged->alpha == 8);
  for (size_t layer = 0; layer < 2; ++layer)
    for (int p = 0; p < kProjectionCount; ++p) {
      const Projection proj = static_cast<Projection>(p);
      CHECK(at::equal(merged->layers[layer][p].a, g0.layers[layer][p].a));
      CHECK((lora_delta(*merged, layer, proj) - MeanDelta(groups, layer, proj)).abs().max().item<double>() <= 1e-6);
    }
  // Groups whose A differ: averaging B (or A and B separately) is not the mean update, so it is refused.
  LoraAdapters free_a = GroupAdapters(c, 8, 24);
  CHECK(lora_average_b({&g0, &free_a}).status().message() ==
        "group 1's lora_A of layer 0 self_attn.q_proj differs from group 0's: averaging B is exact only with A frozen "
        "at a shared start");
  const std::vector<const LoraAdapters*> mixed = {&g0, &free_a};
  at::Tensor naive = at::matmul((g0.layers[0][0].b + free_a.layers[0][0].b) / 2,
                                (g0.layers[0][0].a + free_a.layers[0][0].a) / 2) * g0.scale();
  CHECK((naive - MeanDelta(mixed, 0, Projection::kQ)).abs().max().item<double>() > 1e-3);

  // Training with A frozen: the optimizer gets only the B tensors; A keeps its seeded start.
  LoraAdapters trained = lora_create(c, 4, 8, 7);
  const at::Tensor a_before = trained.layers[1][static_cast<size_t>(Projection::kUp)].a.clone();
  std::vector<at::Tensor> params = lora_trainable(trained, /*freeze_a=*/true);
  CHECK(params.size() == 2 * 7);
  CHECK_FALSE(trained.layers[0][0].a.requires_grad());
  CHECK(trained.layers[0][0].b.requires_grad());
  CHECK(lora_trainable(trained).size() == 2 * 7 * 2);  // both when not frozen
  lora_trainable(trained, true);
  Model m = model_create(TestConfig(), at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 3);
  model_quantize_nf4(m);
  auto shared = std::make_shared<LoraAdapters>(trained);
  REQUIRE(model_attach_lora(m, shared).ok());
  TrainOptions o;
  o.batch_size = 2;
  o.learning_rate = 1e-2;
  AdamW opt(params, o);
  Sequence s;
  for (int i = 0; i < 17; ++i) s.tokens.push_back(i % 7 + 1);
  s.mask.assign(16, 1);
  for (int step = 0; step < 3; ++step) train_step(m, opt, {&s, &s}, o, 1e-2);
  CHECK(at::equal(shared->layers[1][static_cast<size_t>(Projection::kUp)].a, a_before));
  CHECK(shared->layers[1][static_cast<size_t>(Projection::kUp)].b.abs().sum().item<double>() > 0);
}

TEST_CASE("native lora merge: a merged adapter saved as PEFT and loaded back gives the model of mean ΔW") {
  const ModelConfig c = TestConfig();
  LoraAdapters g0 = GroupAdapters(c, 1, 30), g1 = GroupAdapters(c, 2, 31);
  const std::vector<const LoraAdapters*> groups = {&g0, &g1};
  auto merged = lora_merge_stack(groups);
  REQUIRE(merged.ok());
  TempDir dir("protocol_lora_merge");
  REQUIRE(lora_save(*merged, dir.path.string(), "base").ok());
  auto text = ReadFileText((dir.path / "adapter_config.json").string());
  REQUIRE(text.ok());
  const Json config = Json::parse(*text);
  CHECK(config["r"] == 8);
  CHECK(config["lora_alpha"] == 8.0);
  CHECK(config["peft_type"] == "LORA");
  auto loaded = lora_load(dir.path.string(), c);
  REQUIRE(loaded.ok());
  CHECK(loaded->rank == 8);
  CHECK(loaded->alpha == 8);
  CHECK(at::equal(loaded->layers[1][6].b, merged->layers[1][6].b));

  // The 4-bit base with the loaded merged adapter ...
  Model base = model_create(c, at::TensorOptions().dtype(at::kFloat));
  model_init_random(base, 5);
  model_quantize_nf4(base);
  Model with = base;
  REQUIRE(model_attach_lora(with, std::make_shared<LoraAdapters>(*loaded)).ok());
  // ... equals a full-precision model whose projections are dequant(W) + mean_g ΔW_g.
  Model direct = base;
  direct.projections = nullptr;
  direct.layers = base.layers;
  for (size_t layer = 0; layer < 2; ++layer)
    for (int p = 0; p < kProjectionCount; ++p)
      layer_projection(direct.layers[layer], static_cast<Projection>(p)) =
          nf4_dequantize(model_nf4(base)->layers[layer][p]) + MeanDelta(groups, layer, static_cast<Projection>(p));
  c10::NoGradGuard no_grad;
  at::Tensor tokens = at::tensor(std::vector<int64_t>{3, 14, 15, 9, 2, 6, 5, 35}).view({1, 8});
  at::Tensor a = model_forward(with, tokens), b = model_forward(direct, tokens);
  CHECK((a - model_forward(base, tokens)).abs().max().item<double>() > 1e-3);  // the adapter changes the output
  CHECK((a - b).abs().max().item<double>() <= 1e-5);
}

TEST_CASE("native lora merge: lora_load names what is wrong with an adapter directory") {
  const ModelConfig c = TestConfig();
  TempDir dir("protocol_lora_load");
  const std::string d = dir.path.string();
  CHECK(lora_load(d, c).status().message().rfind(d + "/adapter_config.json: cannot read the adapter config: ", 0) == 0);
  LoraAdapters lora = GroupAdapters(c, 1, 2);
  REQUIRE(lora_save(lora, d).ok());
  // Another model's shape.
  ModelConfig wider = c;
  wider.hidden_dim = 96;
  CHECK(lora_load(d, wider).status().message() ==
        d + "/adapter_model.safetensors: tensor 'base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight' has "
            "shape [64, 4], expected [96, 4] (r 4 for this model)");
  // More layers than the file holds.
  ModelConfig deeper = c;
  deeper.n_layers = 3;
  CHECK(lora_load(d, deeper).status().message() ==
        d + "/adapter_model.safetensors: tensor 'base_model.model.model.layers.2.self_attn.q_proj.lora_A.weight' is "
            "not in this file");
  // Fewer layers: the extra tensors are not this model's adapters.
  ModelConfig shallower = c;
  shallower.n_layers = 1;
  CHECK(lora_load(d, shallower).status().message() ==
        d + "/adapter_model.safetensors: tensor 'base_model.model.model.layers.1.mlp.down_proj.lora_A.weight' is not a "
            "LoRA adapter of the seven projections of a 1-layer model");
  auto write_config = [&](const std::string& json) { std::ofstream(dir.path / "adapter_config.json") << json; };
  write_config(R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": true, "target_modules": []})");
  CHECK(lora_load(d, c).status().message() ==
        d + "/adapter_config.json: use_rslora (scale alpha/sqrt(r)) is not supported: adapters here scale by alpha/r");
  write_config(R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]})");
  CHECK(lora_load(d, c).status().message() ==
        d + "/adapter_config.json: target_modules lacks 'k_proj': adapters on all seven projections are needed");
  write_config(R"({"peft_type": "PREFIX_TUNING"})");
  CHECK(lora_load(d, c).status().message() == d + "/adapter_config.json: peft_type is not \"LORA\"");
  write_config("{");
  CHECK(lora_load(d, c).status().message().rfind(d + "/adapter_config.json: not JSON: ", 0) == 0);
}

}  // namespace native
}  // namespace protocol
