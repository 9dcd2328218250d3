// The sharded optimizer step (fsdp_sharded.h ShardedParams::Step) in one
// process (SoloGroups: a mesh of one rank): its gradient norm takes each
// slice's norm in one multi-tensor kernel, never a g² temporary per slice.

#include "native_test_support.h"

#include <c10/core/GradMode.h>

#include <cmath>

#include "backends/native/distributed/fsdp_sharded.h"
#include "backends/native/distributed/process_group.h"
#include "backends/native/model/model_config.h"
#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

// A model sharded over a mesh of one rank (SoloGroups), its weights drawn from
// normal(0, 0.02) after at::manual_seed(7).
struct SoloSharded {
  ProcessGroups solo = SoloGroups();
  FsdpSetup setup;
  std::unique_ptr<ShardedParams> params;
  SoloSharded(const ModelConfig& config, const TrainOptions& options) {
    setup.shard = solo.shard_comm.get();
    at::manual_seed(7);
    auto fill = [](const std::vector<NamedParameter>& ps) {
      for (const NamedParameter& p : ps) p.tensor->normal_(0.0, 0.02);
      return Status::Ok();
    };
    auto created = ShardedParams::Create(config, at::kFloat, at::Device(at::kCPU), setup, options, fill);
    REQUIRE(created.ok());
    params = std::move(*created);
  }
};

}  // namespace

TEST_CASE("sharded step: the gradient norm squares the slices' norms, not the gradients") {
  auto config = PresetConfig("tiny");
  REQUIRE(config.ok());
  SoloSharded model(*config, TrainOptions());
  ShardedParams* sharded = model.params.get();
  at::Tensor tokens = at::randint(0, config->vocab_size, {2, 8}, at::TensorOptions().dtype(at::kLong));
  at::Tensor loss = sharded->Forward(tokens).to(at::kFloat).pow(2).mean();
  loss.backward();
  at::Tensor norm;
  int64_t pows = 0;
  std::string ops;
  {
    compat::OpCounter counter;
    norm = sharded->Step(1e-3);
    pows = counter.counts().count("aten::pow") ? counter.counts().at("aten::pow") : 0;
    ops = counter.Describe();
  }
  INFO(ops);
  const double n = compat::ReadToHost(norm)[0];
  CHECK(std::isfinite(n));
  CHECK(n > 0);
  // One pow: the vector of the units' norms (embedding, each layer, head), squared in float64.
  CHECK(pows == 1);
  CHECK(config->n_layers + 2 >= 3);
}

TEST_CASE("sharded step: the fused AdamW steps the slices as the multi-tensor ops do, within float32 rounding") {
  REQUIRE(compat::FusedAdamWAvailable(at::kCPU));
  auto config = PresetConfig("tiny");
  REQUIRE(config.ok());
  at::Tensor tokens = at::randint(0, config->vocab_size, {2, 8}, at::TensorOptions().dtype(at::kLong));
  // Logits after 3 steps (weight decay on the matrices' ranges of each slice), and before them.
  auto train = [&](bool fused, at::Tensor* before) {
    TrainOptions options;
    options.weight_decay = 0.1;
    options.fused_adamw = fused;
    SoloSharded model(*config, options);
    ShardedParams& sharded = *model.params;
    {
      c10::NoGradGuard no_grad;
      *before = sharded.Forward(tokens);
    }
    for (int step = 0; step < 3; ++step) {
      sharded.Forward(tokens).to(at::kFloat).pow(2).mean().backward();
      (void)sharded.Step(1e-2);
    }
    c10::NoGradGuard no_grad;
    return sharded.Forward(tokens);
  };
  at::Tensor start_fused, start_multi;
  const at::Tensor fused = train(true, &start_fused), multi = train(false, &start_multi);
  CHECK(at::equal(start_fused, start_multi));
  CHECK_FALSE(at::allclose(fused, start_fused, 1e-3, 1e-3));  // the steps moved the model
  CHECK(at::allclose(fused, multi, 1e-5, 1e-6));
}

}  // namespace native
}  // namespace protocol
