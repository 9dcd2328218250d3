// 4-bit (NF4) models and QLoRA: what is stored in 4 bits and how many bytes it
// takes, inference from the 4-bit weights, LoRA adapters (count, names, files),
// QLoRA training that moves only the adapters, and QLoRA continued pretraining
// of a saved model's weights.
#include "native_test_support.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <c10/core/GradMode.h>

#include "backends/native/training/data.h"
#include "backends/native/model/generate.h"
#include "backends/native/quant/lora.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/training/train.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

// 2 layers, C 32, 4 query heads of 8 sharing 2 kv heads, F 64: every
// projection's size is a multiple of 64, so no block is padded.
ModelConfig TestConfig(int64_t vocab = 50) { return testing::TinyTestConfig(vocab); }

Model TestModel(int64_t vocab = 50, uint64_t seed = 7) {
  Model m = model_create(TestConfig(vocab), at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, seed);
  return m;
}

// Every full-precision tensor and every NF4 tensor of a 4-bit model, cloned.
std::vector<at::Tensor> BaseSnapshot(Model& m) {
  std::vector<at::Tensor> out;
  for (NamedParameter& p : model_parameters(m))
    if (p.tensor->defined()) out.push_back(p.tensor->detach().clone());
  for (const auto& layer : model_nf4(m)->layers)
    for (const Nf4Tensor& t : layer)
      for (const at::Tensor* s : {&t.packed, &t.absmax, &t.absmax_codes, &t.absmax_scales, &t.absmax_mean})
        if (s->defined()) out.push_back(s->clone());
  return out;
}

}  // namespace

TEST_CASE("native qlora: a 4-bit model keeps its projections as NF4 at 36 bytes per 64 weights") {
  Model full = TestModel();
  Model q = TestModel();
  model_quantize_nf4(q);
  REQUIRE(model_nf4(q) != nullptr);
  CHECK(model_nf4(full) == nullptr);
  // Per layer: q 32·32, k 16·32, v 16·32, o 32·32, gate/up/down 64·32 = 9216 weights; 2 layers.
  const int64_t weights = 2 * 9216;
  CHECK(weights % kNf4BlockSize == 0);
  const int64_t expected = weights / 2 + 4 * (weights / kNf4BlockSize);  // codes + one float32 absmax per block
  CHECK(expected == 10368);
  CHECK(nf4_weight_bytes(q) == expected);
  CHECK(nf4_expected_weight_bytes(q.config) == expected);
  // 1/8 of float32 plus 1/64; 1/4 of bf16 plus 1/32.
  CHECK(static_cast<double>(expected) / static_cast<double>(weights * 4) == 1.0 / 8 + 1.0 / 64);
  CHECK(static_cast<double>(expected) / static_cast<double>(weights * 2) == 1.0 / 4 + 1.0 / 32);
  // A projection whose size is no multiple of 64 pays for its last, padded block.
  ModelConfig odd_config = TestConfig();
  odd_config.hidden_dim = 65;  // gate/up/down: 65·32 = 2080 weights = 32.5 -> 33 blocks each
  Model odd = model_create(odd_config, at::TensorOptions().dtype(at::kFloat));
  model_init_random(odd, 1);
  model_quantize_nf4(odd);
  CHECK(nf4_weight_bytes(odd) == 2 * 36 * ((16 + 8 + 8 + 16) + 3 * 33));
  CHECK(nf4_expected_weight_bytes(odd_config) == nf4_weight_bytes(odd));

  // The projection matrices are released; embedding, norms and lm_head stay float32.
  CHECK_FALSE(q.layers[0].wq.defined());
  CHECK_FALSE(q.layers[1].w_down.defined());
  CHECK((q.embed.scalar_type() == at::kFloat));
  CHECK(at::equal(q.lm_head, full.lm_head));
  CHECK(at::equal(q.layers[1].post_norm, full.layers[1].post_norm));
  CHECK(model_parameter_count(q) == 50 * 32 * 2 + 2 * 2 * 32 + 32);
  // The stored codes are exactly nf4_quantize of the weights they replace.
  CHECK(at::equal(model_nf4(q)->layers[1][static_cast<size_t>(Projection::kUp)].packed,
                  nf4_quantize(full.layers[1].w_up).packed));

  // The forward uses the dequantized weights: close to the full model, not equal.
  c10::NoGradGuard no_grad;
  at::Tensor tokens = at::tensor(std::vector<int64_t>{3, 14, 15, 9, 2, 6}).view({1, 6});
  at::Tensor lf = model_forward(full, tokens), lq = model_forward(q, tokens);
  CHECK_FALSE(at::equal(lf, lq));
  CHECK((lq - lf).abs().max().item<double>() < 0.1 * lf.abs().max().item<double>());
  // ... and equals a full model whose projections are the dequantized values.
  Model deq = TestModel();
  for (size_t i = 0; i < deq.layers.size(); ++i)
    for (int p = 0; p < kProjectionCount; ++p)
      layer_projection(deq.layers[i], static_cast<Projection>(p)) = nf4_dequantize(model_nf4(q)->layers[i][p]);
  CHECK(at::allclose(model_forward(deq, tokens), lq, 1e-5, 1e-6));
}

TEST_CASE("native qlora: 4-bit inference: KV cache and no cache agree token for token") {
  Model m = TestModel();
  model_quantize_nf4(m);
  GenerateOptions with_cache;
  with_cache.max_new_tokens = 20;
  GenerateOptions without = with_cache;
  without.use_kv_cache = false;
  auto g1 = generate_greedy(m, {1, 7, 3}, with_cache);
  auto g2 = generate_greedy(m, {1, 7, 3}, without);
  REQUIRE(g1.ok());
  REQUIRE(g2.ok());
  CHECK(g1->tokens.size() == 20);
  CHECK(g1->tokens == g2->tokens);
  // The step with its position on the device (an inference case's decode_step: device) reads the
  // same 4-bit projections through the same layers.
  GenerateOptions on_device = with_cache;
  on_device.decode_step = DecodeStep::kDevicePosition;
  auto g3 = generate_greedy(m, {1, 7, 3}, on_device);
  REQUIRE(g3.ok());
  CHECK(g3->tokens == g1->tokens);

  c10::NoGradGuard no_grad;
  at::Tensor tokens = at::tensor(std::vector<int64_t>{1, 5, 9, 13, 17, 21, 25, 29}).view({1, 8});
  at::Tensor full = model_forward(m, tokens);
  KvCache cache = kv_cache_create(m, 1, 8);
  at::Tensor a = model_forward(m, tokens.narrow(1, 0, 5), &cache);
  at::Tensor b = model_forward(m, tokens.narrow(1, 5, 3), &cache);
  CHECK((at::cat({a, b}, 1) - full).abs().max().item<double>() < 1e-5);
}

TEST_CASE("native qlora: LoRA adapters: L·r·Σ(in+out) parameters, PEFT names, B zero leaves the output unchanged") {
  const ModelConfig c = TestConfig();
  // Per layer (in + out): q 64, k 48, v 48, o 64, gate 96, up 96, down 96 = 512.
  CHECK(lora_parameter_count(c, 8) == 2 * 8 * 512);
  CHECK(lora_parameter_count(c, 1) == 2 * 512);
  LoraAdapters lora = lora_create(c, 8, 16, 5);
  CHECK(lora.scale() == 2.0);
  std::vector<NamedParameter> params = lora_parameters(lora);
  REQUIRE(params.size() == 2 * 7 * 2);
  CHECK(params[0].name == "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  CHECK(params[0].tensor->sizes() == at::IntArrayRef({8, 32}));
  CHECK(params[3].name == "base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight");
  CHECK(params[3].tensor->sizes() == at::IntArrayRef({16, 8}));
  CHECK(params.back().name == "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  CHECK(params.back().tensor->sizes() == at::IntArrayRef({32, 8}));
  int64_t n = 0;
  for (const NamedParameter& p : params) n += p.tensor->numel();
  CHECK(n == lora_parameter_count(c, 8));
  // A: Kaiming-uniform within ±1/√in, seeded; B: zeros.
  const at::Tensor& down_a = lora.layers[1][static_cast<size_t>(Projection::kDown)].a;  // in = F = 64
  CHECK(down_a.abs().max().item<double>() <= 1.0 / 8);
  CHECK(down_a.abs().max().item<double>() > 0.1);
  CHECK(at::equal(down_a, lora_create(c, 8, 16, 5).layers[1][static_cast<size_t>(Projection::kDown)].a));
  CHECK_FALSE(at::equal(down_a, lora_create(c, 8, 16, 6).layers[1][static_cast<size_t>(Projection::kDown)].a));
  CHECK(lora.layers[0][0].b.abs().sum().item<double>() == 0.0);

  Model base = TestModel();
  model_quantize_nf4(base);
  Model with = TestModel();
  model_quantize_nf4(with);
  CHECK(model_attach_lora(with, std::make_shared<LoraAdapters>(lora)).ok());
  Model plain = TestModel();
  Status refused = model_attach_lora(plain, std::make_shared<LoraAdapters>(lora));
  CHECK(refused.message() == "LoRA adapters attach only to a 4-bit (nf4) model in this build");
  c10::NoGradGuard no_grad;
  at::Tensor tokens = at::tensor(std::vector<int64_t>{3, 14, 15, 9}).view({1, 4});
  CHECK(at::equal(model_forward(base, tokens), model_forward(with, tokens)));
}

TEST_CASE("native qlora: training a 4-bit model's adapters lowers the loss; the base stays bit-identical") {
  at::set_num_threads(2);
  // Bytes as tokens (id = byte + 3) of a small repeated text.
  auto corpus = [](const std::string& sentence) {
    Document doc;
    for (int i = 0; i < 40; ++i)
      for (unsigned char ch : sentence) {
        doc.tokens.push_back(ch + 3);
        doc.loss_mask.push_back(1);
      }
    return data_split(data_pack({doc}, 32, 0), 0.1, 1);
  };
  auto train = [](Model& model, AdamW& opt, const DataSplit& split, const TrainOptions& o, int steps) {
    std::vector<double> losses;
    for (int step = 0; step < steps; ++step) {
      std::vector<const Sequence*> batch;
      for (int i = 0; i < 4; ++i) batch.push_back(&split.train[static_cast<size_t>(step * 4 + i) % split.train.size()]);
      losses.push_back(train_step(model, opt, batch, o, lr_at_step(step, steps, o)).loss);
    }
    return losses;
  };
  TrainOptions o;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.learning_rate = 1e-2;
  o.warmup_steps = 2;
  // QLoRA adapts a trained base: a full-precision model first learns another text
  // (a random base, with its frozen unit norms and 0.02-scale lm_head, cannot
  // produce confident logits whatever its adapters do).
  Model m = TestModel(259, 3);
  {
    AdamW full(model_trainable(m), o);
    train(m, full, corpus("a quick brown fox jumps over the lazy dog. "), o, 30);
    for (NamedParameter& p : model_parameters(m)) {
      p.tensor->requires_grad_(false);
      p.tensor->mutable_grad() = at::Tensor();
    }
  }
  const DataSplit split = corpus("the cat sat on the mat. ");
  model_quantize_nf4(m);
  auto lora = std::make_shared<LoraAdapters>(lora_create(m.config, 8, 16, 11));
  REQUIRE(model_attach_lora(m, lora).ok());
  const std::vector<at::Tensor> before = BaseSnapshot(m);
  AdamW opt(lora_trainable(*lora), o);
  int64_t trainable = 0;
  for (const at::Tensor& p : opt.params()) trainable += p.numel();
  CHECK(trainable == lora_parameter_count(m.config, 8));
  CHECK(trainable == 2 * 8 * 512);

  const double eval_before = *eval_loss(m, split.eval, 4);
  std::vector<double> losses = train(m, opt, split, o, 30);
  const double eval_after = *eval_loss(m, split.eval, 4);
  INFO("first " << losses.front() << " last " << losses.back() << " eval " << eval_before << " -> " << eval_after);
  CHECK(opt.steps_taken() == 30);
  CHECK(losses.back() < 0.5 * losses.front());
  CHECK(eval_after < 0.5 * eval_before);
  // Only the adapters moved: no gradient reached the base, whose every byte is unchanged.
  CHECK_FALSE(m.embed.grad().defined());
  CHECK_FALSE(m.lm_head.grad().defined());
  CHECK(lora->layers[0][0].b.abs().sum().item<double>() > 0);
  const std::vector<at::Tensor> after = BaseSnapshot(m);
  REQUIRE(after.size() == before.size());
  CHECK(before.size() == 1 + 2 * 2 + 1 + 1 + 2 * 7 * 2);
  for (size_t i = 0; i < before.size(); ++i) CHECK(at::equal(before[i], after[i]));
}

TEST_CASE("native qlora: continued pretraining of a saved model: loss falls, NF4 codes unchanged, a loadable PEFT adapter") {
  at::set_num_threads(2);
  const fs::path root = fs::temp_directory_path() / ("protocol_qlora_cpt_" + std::to_string(getpid()));
  fs::remove_all(root);
  // Raw text, bytes as tokens (id = byte + 3), every target counted (a causal-LM loss on every token).
  auto text = [](const std::string& sentence) {
    Document doc;
    for (int i = 0; i < 40; ++i)
      for (unsigned char ch : sentence) {
        doc.tokens.push_back(ch + 3);
        doc.loss_mask.push_back(1);
      }
    return data_split(data_pack({doc}, 32, 0), 0.1, 1);
  };
  TrainOptions o;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.learning_rate = 1e-2;
  o.warmup_steps = 2;
  auto run = [&](Model& model, AdamW& opt, const DataSplit& split, int steps) {
    std::vector<double> losses;
    for (int step = 0; step < steps; ++step) {
      std::vector<const Sequence*> batch;
      for (int i = 0; i < 4; ++i) batch.push_back(&split.train[static_cast<size_t>(step * 4 + i) % split.train.size()]);
      losses.push_back(train_step(model, opt, batch, o, lr_at_step(step, steps, o)).loss);
    }
    return losses;
  };
  {  // A model with weights, saved with model_save: full-precision pretraining on one text.
    Model m = TestModel(259, 3);
    AdamW full(model_trainable(m), o);
    run(m, full, text("a quick brown fox jumps over the lazy dog. "), 30);
    REQUIRE(model_save(m, (root / "base").string()).ok());
  }
  // Continued pretraining in 4 bits on another text: the saved weights, quantized and frozen.
  auto loaded = model_load_dir((root / "base").string(), at::TensorOptions().dtype(at::kFloat));
  REQUIRE(loaded.ok());
  Model m = std::move(*loaded);
  model_quantize_nf4(m, /*double_quant=*/true);
  auto lora = std::make_shared<LoraAdapters>(lora_create(m.config, 8, 16, 11));
  REQUIRE(model_attach_lora(m, lora).ok());
  const std::vector<at::Tensor> before = BaseSnapshot(m);
  AdamW opt(lora_trainable(*lora), o);
  const DataSplit split = text("the cat sat on the mat. ");
  std::vector<double> losses = run(m, opt, split, 30);
  INFO("loss " << losses.front() << " -> " << losses.back());
  CHECK(losses.back() < 0.5 * losses.front());
  const std::vector<at::Tensor> after = BaseSnapshot(m);
  REQUIRE(after.size() == before.size());
  CHECK(before.size() == 1 + 2 * 2 + 1 + 1 + 2 * 7 * 4);  // embed, norms, norm, lm_head; packed + 3 absmax tensors
  for (size_t i = 0; i < before.size(); ++i) CHECK(at::equal(before[i], after[i]));

  // The adapters as a PEFT directory, loaded back onto a fresh 4-bit copy of the saved model: the same output.
  const std::string out = (root / "adapters").string();
  REQUIRE(lora_save(*lora, out, (root / "base").string()).ok());
  auto back = lora_load(out, m.config);
  REQUIRE(back.ok());
  CHECK(back->rank == 8);
  CHECK(back->alpha == 16);
  auto fresh = model_load_dir((root / "base").string(), at::TensorOptions().dtype(at::kFloat));
  REQUIRE(fresh.ok());
  model_quantize_nf4(*fresh, true);
  REQUIRE(model_attach_lora(*fresh, std::make_shared<LoraAdapters>(*back)).ok());
  c10::NoGradGuard no_grad;
  at::Tensor tokens = at::tensor(std::vector<int64_t>{3, 14, 15, 9, 2, 6}).view({1, 6});
  CHECK((model_forward(*fresh, tokens) - model_forward(m, tokens)).abs().max().item<double>() <= 1e-5);
  fs::remove_all(root);
}

TEST_CASE("native qlora: adapters are saved as adapter_model.safetensors and adapter_config.json") {
  const fs::path dir = fs::temp_directory_path() / ("protocol_lora_" + std::to_string(getpid()));
  fs::remove_all(dir);
  LoraAdapters lora = lora_create(TestConfig(), 4, 8, 1);
  REQUIRE(lora_save(lora, dir.string(), "/models/base").ok());
  auto file = SafetensorsFile::Open((dir / "adapter_model.safetensors").string());
  REQUIRE(file.ok());
  CHECK((*file)->entries().size() == 28);
  const SafetensorsEntry& a = (*file)->entries().at("base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight");
  CHECK(a.dtype == "F32");
  CHECK(a.shape == std::vector<int64_t>{4, 32});
  CHECK((*file)->entries().at("base_model.model.model.layers.1.mlp.gate_proj.lora_B.weight").shape ==
        std::vector<int64_t>{64, 4});
  auto view = (*file)->View("base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight");
  REQUIRE(view.ok());
  CHECK(at::equal(*view, lora.layers[0][static_cast<size_t>(Projection::kV)].a));
  std::ifstream in(dir / "adapter_config.json");
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() ==
        "{\n"
        "  \"peft_type\": \"LORA\",\n"
        "  \"task_type\": \"CAUSAL_LM\",\n"
        "  \"base_model_name_or_path\": \"/models/base\",\n"
        "  \"r\": 4,\n"
        "  \"lora_alpha\": 8.0,\n"
        "  \"lora_dropout\": 0.0,\n"
        "  \"bias\": \"none\",\n"
        "  \"target_modules\": [\n"
        "    \"q_proj\",\n"
        "    \"k_proj\",\n"
        "    \"v_proj\",\n"
        "    \"o_proj\",\n"
        "    \"gate_proj\",\n"
        "    \"up_proj\",\n"
        "    \"down_proj\"\n"
        "  ],\n"
        "  \"inference_mode\": true\n"
        "}\n");
  fs::remove_all(dir);
}

}  // namespace native
}  // namespace protocol
