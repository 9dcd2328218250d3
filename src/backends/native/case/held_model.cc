#include "backends/native/case/held_model.h"

#include <utility>

#include "backends/native/case/case_device.h"
#include "backends/native/case/case_weights.h"
#include "backends/native/distributed/fsdp_qlora.h"
#include "backends/native/distributed/fsdp_sharded.h"
#include "backends/native/model/model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/quant/quantized_model.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

// The update of tensors this process holds whole (every parameter, or the
// adapters): clip to `grad_clip`, AdamW at `lr`, gradients cleared. Returns
// the norm before clipping (a device scalar, not read back).
at::Tensor ClipAndStep(AdamW& optimizer, double grad_clip, double lr) {
  at::Tensor norm = grad_clip_norm(optimizer.params(), grad_clip);
  optimizer.step(lr);
  optimizer.zero_grad();
  return norm;
}

// The model and AdamW in this process: every parameter, or the LoRA adapters
// on a frozen 4-bit base.
class WholeModel : public HeldModel {
 public:
  WholeModel(Model model, std::shared_ptr<LoraAdapters> lora, std::vector<at::Tensor> trainable,
             const TrainOptions& options, std::string memory_text)
      : model_(std::move(model)), optimizer_(std::move(trainable), options), options_(options) {
    lora_ = std::move(lora);
    memory_text_ = std::move(memory_text);
  }
  at::Tensor Forward(const at::Tensor& tokens) override {
    return train_forward(model_, tokens, options_.checkpoint_every);
  }
  void SetGradientSync(bool) override {}
  at::Tensor Update(double lr) override { return ClipAndStep(optimizer_, options_.grad_clip, lr); }
  std::vector<at::Tensor> MergedTensors() override { return optimizer_.params(); }
  Status SaveModel(const std::string& dir, bool writer) override {
    return writer ? model_save(model_, dir) : Status::Ok();
  }
  void UseAdapters(std::shared_ptr<LoraAdapters> lora) override {
    if (Status s = model_attach_lora(model_, std::move(lora)); !s.ok()) throw std::runtime_error(s.message());
  }

 private:
  Model model_;
  AdamW optimizer_;
  TrainOptions options_;
};

// FSDP: this rank's float32 slices of every unit (fsdp_sharded.h).
class ShardedModel : public HeldModel {
 public:
  explicit ShardedModel(std::unique_ptr<ShardedParams> params) : params_(std::move(params)) {
    memory_text_ = fmt::format("the rank holds {} float32 shard elements", params_->shard_elements());
  }
  at::Tensor Forward(const at::Tensor& tokens) override { return params_->Forward(tokens); }
  void SetGradientSync(bool on) override { params_->SetGradientSync(on); }
  at::Tensor Update(double lr) override { return params_->Step(lr); }
  std::vector<at::Tensor> MergedTensors() override { return params_->shards(); }
  Status SaveModel(const std::string& dir, bool writer) override { return params_->Save(dir, writer); }
  void UseAdapters(std::shared_ptr<LoraAdapters>) override {}

 private:
  std::unique_ptr<ShardedParams> params_;
};

// FSDP-QLoRA: this rank's slices of the 4-bit base, the adapters whole
// (fsdp_qlora.h); AdamW on the adapters, whose gradients the last backward
// summed over the group.
class ShardedQloraModel : public HeldModel {
 public:
  ShardedQloraModel(std::unique_ptr<ShardedQlora> base, std::shared_ptr<LoraAdapters> lora,
                    std::vector<at::Tensor> trainable, const TrainOptions& options, std::string memory_text)
      : base_(std::move(base)), optimizer_(std::move(trainable), options), options_(options) {
    lora_ = std::move(lora);
    memory_text_ = std::move(memory_text);
    base_->SetTrainable(optimizer_.params());
  }
  at::Tensor Forward(const at::Tensor& tokens) override { return base_->Forward(tokens); }
  void SetGradientSync(bool on) override { base_->SetGradientSync(on); }
  at::Tensor Update(double lr) override { return ClipAndStep(optimizer_, options_.grad_clip, lr); }
  std::vector<at::Tensor> MergedTensors() override { return optimizer_.params(); }
  Status SaveModel(const std::string&, bool) override {
    return Status::Internal("a 4-bit model saves its LoRA adapters, not the model");
  }
  void UseAdapters(std::shared_ptr<LoraAdapters> lora) override { base_->UseAdapters(std::move(lora)); }

 private:
  std::unique_ptr<ShardedQlora> base_;
  AdamW optimizer_;
  TrainOptions options_;
};

std::shared_ptr<LoraAdapters> CreateAdapters(const WorkerCase& wc, const CaseSetup& s) {
  return std::make_shared<LoraAdapters>(lora_create(s.config, wc.training.LoraRank(), wc.training.LoraAlpha(),
                                                    static_cast<uint64_t>(wc.training.seed), s.device));
}

std::string QloraMethod(const WorkerCase& wc, const LoraAdapters& lora) {
  return qlora_method(lora, wc.workload == Workload::kPretrain ? QloraKind::kContinuedPretraining : QloraKind::kFinetune,
                      wc.double_quant, wc.training.lora_freeze_a);
}

// One process: model_create, then the weights loaded or seeded in one pass
// (a 4-bit model: each projection read, quantized and freed in turn).
Result<std::unique_ptr<HeldModel>> HoldWhole(const WorkerCase& wc, CaseSetup& s, const CaseWeights& weights,
                                             const TrainOptions& options,
                                             const std::function<void(const std::string&)>& log) {
  const bool nf4 = wc.quantization == Quantization::kNf4;
  Model model = model_create(s.config, at::TensorOptions().dtype(s.dtype).device(s.device), CaseProjectionTensors(nf4));
  if (Status st = nf4 ? LoadOrInitNf4Weights(model, weights, wc.model_path, wc.training.seed, wc.double_quant)
                      : LoadOrInitWeights(model, weights, wc.model_path, wc.training.seed);
      !st.ok())
    return st;
  const char* as_read = nf4 ? " (each projection quantized to NF4 as it is read)" : "";
  if (weights.source == WeightsSource::kPath) log(fmt::format("weights loaded from {}{}", wc.model_path, as_read));
  else log(fmt::format("weights: seeded random initialisation (seed {}){}", wc.training.seed, as_read));
  if (!nf4) {
    std::vector<at::Tensor> trainable = model_trainable(model);
    return std::unique_ptr<HeldModel>(std::make_unique<WholeModel>(
        std::move(model), nullptr, std::move(trainable), options,
        fmt::format("the process holds the whole model ({} parameters) and its AdamW state", s.config.ParameterCount())));
  }
  std::shared_ptr<LoraAdapters> lora = CreateAdapters(wc, s);
  if (Status st = model_attach_lora(model, lora); !st.ok()) return st;
  const std::string method = QloraMethod(wc, *lora);
  s.AddNote(method);
  const int64_t base_bytes = nf4_weight_bytes(model);
  log(fmt::format("{} ({} bytes of 4-bit projection weights)", method, base_bytes));
  std::vector<at::Tensor> trainable = lora_trainable(*lora, wc.training.lora_freeze_a);
  return std::unique_ptr<HeldModel>(std::make_unique<WholeModel>(
      std::move(model), lora, std::move(trainable), options,
      fmt::format("the process holds {} bytes of 4-bit projection weights and {} float32 adapter parameters",
                  base_bytes, lora_parameter_count(s.config, wc.training.LoraRank()))));
}

// More than one rank: built sharded, unit by unit; no rank ever holds the model whole.
Result<std::unique_ptr<HeldModel>> HoldSharded(const WorkerCase& wc, CaseSetup& s, const CaseWeights& weights,
                                               ProcessGroups& g, const TrainOptions& options,
                                               const std::function<void(const std::string&)>& log) {
  FsdpSetup fsdp;
  fsdp.shard = g.shard_comm.get();
  fsdp.replica = g.replica_comm.get();
  fsdp.prefetch = wc.training.prefetch;
  fsdp.reduce_dtype = ResolveReduceDtype(wc.training.reduce_dtype, s.dtype);
  auto fill = CaseWeightsFill(weights, wc.model_path, wc.training.seed);
  if (!fill.ok()) return fill.status();
  if (wc.quantization != Quantization::kNf4) {
    auto created = ShardedParams::Create(s.config, s.dtype, s.device, fsdp, options, *fill);
    if (!created.ok()) return created.status();
    return std::unique_ptr<HeldModel>(std::make_unique<ShardedModel>(std::move(*created)));
  }
  std::shared_ptr<LoraAdapters> lora = CreateAdapters(wc, s);
  auto created = ShardedQlora::Create(s.config, s.dtype, s.device, fsdp, options, wc.double_quant, lora, *fill);
  if (!created.ok()) return created.status();
  const std::string method =
      QloraMethod(wc, *lora) +
      (g.replicas > 1 ? fmt::format("; base sharded over each node's {} rank(s), replicated over {} nodes, as equal "
                                    "byte ranges of each layer's NF4 records",
                                    g.shard_comm->size(), g.replicas)
                      : fmt::format("; base sharded over the group's {} rank(s) as equal byte ranges of each layer's "
                                    "NF4 records",
                                    g.group_size));
  s.AddNote(method);
  if (g.rank == 0) log(method);
  const std::string memory = fmt::format(
      "the rank holds {} bytes of the 4-bit base (its NF4 shards, embedding and head slices, norms) and {} float32 "
      "adapter parameters",
      (*created)->base_bytes(), lora_parameter_count(s.config, wc.training.LoraRank()));
  // freeze A: only B is trained and averaged (exact); otherwise A and B are
  // averaged separately at a periodic merge (not exact: mean(B)·mean(A) ≠ mean(B·A)).
  std::vector<at::Tensor> trainable = lora_trainable(*lora, wc.training.lora_freeze_a);
  return std::unique_ptr<HeldModel>(
      std::make_unique<ShardedQloraModel>(std::move(*created), lora, std::move(trainable), options, memory));
}

}  // namespace

Result<std::unique_ptr<HeldModel>> HoldModel(const WorkerCase& wc, CaseSetup& setup, ProcessGroups& g,
                                             const TrainOptions& options,
                                             const std::function<void(const std::string&)>& log) {
  const bool nf4 = wc.quantization == Quantization::kNf4;
  // Where the weights come from (the rule Check applied before the run); never
  // run on weights nobody asked for.
  auto weights = DecideWeights(wc.workload, nf4, wc.init_random, wc.model_path, wc.training.seed, wc.model_name);
  if (!weights.ok()) return weights.status();
  setup.AddNote(weights->note);
  if (g.world == 1) return HoldWhole(wc, setup, *weights, options, log);
  return HoldSharded(wc, setup, *weights, g, options, log);
}

}  // namespace native
}  // namespace protocol
