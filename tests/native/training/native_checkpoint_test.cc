// Activation checkpointing in the one-process trainer (train_forward,
// TrainOptions::checkpoint_every): recomputing decoder layers in backward
// changes no weight — for a full model and for a 4-bit model's LoRA adapters.
#include "native_test_support.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/function.h>

#include <set>

#include "backends/native/training/data.h"
#include "backends/native/quant/lora.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/training/train.h"

namespace protocol {
namespace native {
namespace {

ModelConfig TestConfig() { return testing::TinyTestConfig(259, 3); }

DataSplit Corpus() {
  Document doc;
  for (int i = 0; i < 30; ++i)
    for (unsigned char ch : std::string("the cat sat on the mat. ")) {
      doc.tokens.push_back(ch + 3);
      doc.loss_mask.push_back(1);
    }
  return data_split(data_pack({doc}, 32, 0), 0.1, 1);
}

TrainOptions Options(int64_t checkpoint_every) {
  TrainOptions o;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.learning_rate = 1e-2;
  o.checkpoint_every = checkpoint_every;
  return o;
}

void Train(Model& m, AdamW& opt, const DataSplit& split, const TrainOptions& o, int steps) {
  for (int step = 0; step < steps; ++step) {
    std::vector<const Sequence*> batch;
    for (int i = 0; i < 4; ++i) batch.push_back(&split.train[static_cast<size_t>(step * 4 + i) % split.train.size()]);
    train_step(m, opt, batch, o, lr_at_step(step, steps, o));
  }
}

double MaxDiff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

// Nodes of the autograd graph behind `t` whose name mentions `what`.
int CountNodes(const at::Tensor& t, const std::string& what) {
  std::set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo = {t.grad_fn().get()};
  int n = 0;
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node).second) continue;
    if (node->name().find(what) != std::string::npos) ++n;
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return n;
}

}  // namespace

TEST_CASE("native checkpoint: train_forward puts exactly the checkpointed layers behind a recomputing node") {
  Model m = model_create(TestConfig(), at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 3);
  model_trainable(m);
  at::Tensor tokens = at::randint(0, 259, {2, 8}, at::kLong);
  CHECK(CountNodes(train_forward(m, tokens, 1), "UnitFunction") == 3);
  CHECK(CountNodes(train_forward(m, tokens, 2), "UnitFunction") == 2);  // layers 0 and 2
  CHECK(CountNodes(train_forward(m, tokens, 0), "UnitFunction") == 0);
  CHECK(at::allclose(train_forward(m, tokens, 1), model_forward(m, tokens), 0, 1e-6));
}

TEST_CASE("native checkpoint: layers recomputed in backward (every 1, every 2) give the weights of no checkpointing after 3 steps") {
  at::set_num_threads(2);
  CHECK(layer_checkpointed(0, 1));
  CHECK(layer_checkpointed(2, 1));
  CHECK(layer_checkpointed(0, 2));
  CHECK_FALSE(layer_checkpointed(1, 2));
  CHECK_FALSE(layer_checkpointed(0, 0));
  const DataSplit split = Corpus();
  auto run = [&](int64_t every) {
    Model m = model_create(TestConfig(), at::TensorOptions().dtype(at::kFloat));
    model_init_random(m, 3);
    AdamW opt(model_trainable(m), Options(every));
    Train(m, opt, split, Options(every), 3);
    std::vector<at::Tensor> out;
    for (NamedParameter& p : model_parameters(m)) out.push_back(p.tensor->detach().clone());
    return out;
  };
  const std::vector<at::Tensor> none = run(0), every = run(1), alternate = run(2);
  Model init = model_create(TestConfig(), at::TensorOptions().dtype(at::kFloat));
  model_init_random(init, 3);
  CHECK((none[1] - *model_parameters(init)[1].tensor).abs().max().item<double>() > 1e-3);  // the weights moved
  MESSAGE("max abs weight difference, checkpoint_every 1 vs 0: " << MaxDiff(every, none)
                                                                 << ", 2 vs 0: " << MaxDiff(alternate, none));
  CHECK(MaxDiff(every, none) < 1e-6);
  CHECK(MaxDiff(alternate, none) < 1e-6);
}

TEST_CASE("native checkpoint: a 4-bit model's LoRA adapters train the same with and without checkpointing") {
  at::set_num_threads(2);
  const DataSplit split = Corpus();
  auto run = [&](int64_t every) {
    Model m = model_create(TestConfig(), at::TensorOptions().dtype(at::kFloat));
    model_init_random(m, 3);
    for (NamedParameter& p : model_parameters(m)) p.tensor->requires_grad_(false);
    model_quantize_nf4(m);
    auto lora = std::make_shared<LoraAdapters>(lora_create(m.config, 4, 8, 11));
    REQUIRE(model_attach_lora(m, lora).ok());
    AdamW opt(lora_trainable(*lora), Options(every));
    Train(m, opt, split, Options(every), 3);
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : lora_trainable(*lora)) out.push_back(t.detach().clone());
    return out;
  };
  const std::vector<at::Tensor> none = run(0), every = run(1);
  CHECK(none.back().abs().max().item<double>() > 1e-4);  // B started at zero and moved (layer 2's down_proj)
  MESSAGE("max abs adapter difference, checkpoint_every 1 vs 0: " << MaxDiff(every, none));
  CHECK(MaxDiff(every, none) < 1e-6);
}

}  // namespace native
}  // namespace protocol
