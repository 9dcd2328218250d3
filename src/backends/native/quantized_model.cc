#include "backends/native/quantized_model.h"

#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

constexpr Projection kAll[kProjectionCount] = {Projection::kQ,    Projection::kK,  Projection::kV,   Projection::kO,
                                               Projection::kGate, Projection::kUp, Projection::kDown};

int64_t nf4_bytes_for(int64_t numel) {
  const int64_t blocks = (numel + kNf4BlockSize - 1) / kNf4BlockSize;
  return blocks * (kNf4BlockSize / 2 + static_cast<int64_t>(sizeof(float)));
}

}  // namespace

const char kNf4InferenceMethod[] =
    "4-bit NF4 weights: decoder projections dequantized on use; embedding, norms, lm_head full precision";

at::Tensor Nf4Projections::Forward(size_t layer, Projection p, const at::Tensor& x) const {
  // The dequantized weight is a temporary: no gradient flows into the 4-bit base.
  at::Tensor w = nf4_dequantize(layers[layer][static_cast<size_t>(p)]).to(x.scalar_type());
  at::Tensor y = at::linear(x, w);
  if (lora) y = y + lora_forward(*lora, layer, p, x);
  return y;
}

void model_quantize_nf4(Model& model) {
  auto q = std::make_shared<Nf4Projections>();
  q->layers.resize(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    for (Projection p : kAll) {
      at::Tensor& w = layer_projection(model.layers[i], p);
      q->layers[i][static_cast<size_t>(p)] = nf4_quantize(w);
      w = at::Tensor();  // the full-precision copy is gone
    }
  }
  model.projections = std::move(q);
}

const Nf4Projections* model_nf4(const Model& model) {
  return dynamic_cast<const Nf4Projections*>(model.projections.get());
}

int64_t nf4_weight_bytes(const Model& model) {
  const Nf4Projections* q = model_nf4(model);
  if (q == nullptr) return 0;
  int64_t bytes = 0;
  for (const auto& layer : q->layers)
    for (const Nf4Tensor& t : layer) bytes += t.packed.nbytes() + t.absmax.nbytes();
  return static_cast<int64_t>(bytes);
}

int64_t nf4_expected_weight_bytes(const ModelConfig& config) {
  int64_t per_layer = 0;
  for (Projection p : kAll) {
    const auto shape = projection_shape(config, p);
    per_layer += nf4_bytes_for(shape[0] * shape[1]);
  }
  return config.n_layers * per_layer;
}

Status model_attach_lora(Model& model, std::shared_ptr<const LoraAdapters> lora) {
  const Nf4Projections* q = model_nf4(model);
  if (q == nullptr) return Status::InvalidArgument("LoRA adapters attach only to a 4-bit (nf4) model in this build");
  auto next = std::make_shared<Nf4Projections>(*q);  // shares the NF4 tensors
  next->lora = std::move(lora);
  model.projections = std::move(next);
  return Status::Ok();
}

std::string nf4_workload_refusal(bool is_pretrain) {
  if (!is_pretrain) return "";
  return "pretraining a 4-bit model is not meaningful: QLoRA trains adapters on a loaded base; use finetune";
}

std::string qlora_method(const LoraAdapters& lora) {
  return fmt::format("QLoRA: 4-bit NF4 base frozen, LoRA rank {} alpha {} on q,k,v,o,gate,up,down", lora.rank,
                     lora.alpha);
}

}  // namespace native
}  // namespace protocol
