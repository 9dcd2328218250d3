#include "backends/native/quant/quantized_model.h"

#include <c10/core/GradMode.h>

#include <fstream>
#include <map>
#include <utility>

#include "backends/native/quant/nf4_linear.h"
#include "backends/native/model/safetensors.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

constexpr Projection kAll[kProjectionCount] = {Projection::kQ,    Projection::kK,  Projection::kV,   Projection::kO,
                                               Projection::kGate, Projection::kUp, Projection::kDown};

}  // namespace


at::Tensor Nf4Projections::Forward(size_t layer, Projection p, const at::Tensor& x) const {
  // The dequantized weight is a temporary of nf4_linear, in forward and again in
  // backward: autograd keeps the 4-bit storage only; no gradient reaches the base.
  if (!dequantized.empty() && !c10::GradMode::is_enabled()) {
    at::Tensor y = at::linear(x, dequantized[layer][static_cast<size_t>(p)]);
    if (lora) y = y + lora_forward(*lora, layer, p, x);
    return y;
  }
  at::Tensor y = nf4_linear(x, layers[layer][static_cast<size_t>(p)]);
  if (lora) y = y + lora_forward(*lora, layer, p, x);
  return y;
}

void model_quantize_nf4(Model& model, bool double_quant) {
  auto q = std::make_shared<Nf4Projections>();
  q->layers.resize(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    for (Projection p : kAll) {
      at::Tensor& w = layer_projection(model.layers[i], p);
      q->layers[i][static_cast<size_t>(p)] = nf4_quantize(w, double_quant);
      w = at::Tensor();  // the full-precision copy is gone
    }
    // ... and the storage of the joined projections (model.h), which held them.
    model.layers[i].wqkv = at::Tensor();
    model.layers[i].w_gate_up = at::Tensor();
  }
  model.projections = std::move(q);
}

Status model_fill_nf4(Model& model, const ParameterFill& fill, bool double_quant) {
  c10::NoGradGuard no_grad;
  auto q = std::make_shared<Nf4Projections>();
  q->layers.resize(model.layers.size());
  // Where each projection's tensor field is: (layer, slot in Projection order).
  std::map<const at::Tensor*, std::pair<size_t, size_t>> projection;
  for (size_t l = 0; l < model.layers.size(); ++l)
    for (size_t k = 0; k < kProjectionCount; ++k) projection[&layer_projection(model.layers[l], kAll[k])] = {l, k};
  for (const NamedParameter& p : model_parameters(model)) {
    auto found = projection.find(p.tensor);
    if (found == projection.end()) {  // the embedding, a norm, lm_head: the model's own tensor
      if (Status s = fill({p}); !s.ok()) return s;
      continue;
    }
    const auto [layer, slot] = found->second;
    *p.tensor = at::Tensor();  // the model never holds it in full precision; the transient below does
    // In the layer's dtype and on its device, as the model's own tensor would be.
    at::Tensor transient = at::empty(p.shape, model.layers[layer].input_norm.options());
    if (Status s = fill({{p.name, &transient, p.shape}}); !s.ok()) return s;
    q->layers[layer][slot] = nf4_quantize(transient, double_quant);
  }  // each transient is released here, before the next tensor is read
  model.projections = std::move(q);
  return Status::Ok();
}

const Nf4Projections* model_nf4(const Model& model) {
  return dynamic_cast<const Nf4Projections*>(model.projections.get());
}

int64_t nf4_weight_bytes(const Model& model) {
  const Nf4Projections* q = model_nf4(model);
  if (q == nullptr) return 0;
  int64_t bytes = 0;
  for (const auto& layer : q->layers)
    for (const Nf4Tensor& t : layer) bytes += nf4_tensor_bytes(t);
  return bytes;
}

int64_t nf4_expected_weight_bytes(const ModelConfig& config, bool double_quant) {
  int64_t per_layer = 0;
  for (Projection p : kAll) {
    const auto shape = projection_shape(config, p);
    per_layer += nf4_storage_bytes(shape[0] * shape[1], double_quant);
  }
  return config.n_layers * per_layer;
}

int64_t nf4_dequantized_bytes(const ModelConfig& config, int64_t dtype_bytes) {
  int64_t weights = 0;
  for (Projection p : kAll) {
    const auto shape = projection_shape(config, p);
    weights += shape[0] * shape[1];
  }
  return config.n_layers * weights * dtype_bytes;
}

void nf4_keep_dequantized(Model& model, at::ScalarType dtype) {
  const Nf4Projections* q = model_nf4(model);
  if (q == nullptr) return;
  auto next = std::make_shared<Nf4Projections>(*q);  // shares the NF4 tensors and the adapters
  next->dequantized.resize(next->layers.size());
  for (size_t l = 0; l < next->layers.size(); ++l)
    for (size_t p = 0; p < kProjectionCount; ++p)
      next->dequantized[l][p] = nf4_dequantize(next->layers[l][p], dtype);  // as nf4_linear's forward
  model.projections = std::move(next);
}

bool nf4_keep_dequantized_fits(const at::Device& device, int64_t bytes, std::string* why) {
  const double gib = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  if (!device.is_cpu()) {
    *why = fmt::format("decoder projections dequantized on use (on {}; kept they would take {:.2f} GiB)", device.str(), gib);
    return false;
  }
  int64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit)
    if (key == "MemAvailable:") available = kb * 1024;
  const double available_gib = static_cast<double>(available) / (1024.0 * 1024.0 * 1024.0);
  if (available >= 2 * bytes) {
    *why = fmt::format("decoder projections dequantized once and kept ({:.2f} GiB; MemAvailable {:.1f} GiB)", gib,
                       available_gib);
    return true;
  }
  *why = fmt::format("decoder projections dequantized on use (kept they would take {:.2f} GiB; MemAvailable {:.1f} GiB "
                     "is under twice that)",
                     gib, available_gib);
  return false;
}

Status model_attach_lora(Model& model, std::shared_ptr<const LoraAdapters> lora) {
  const Nf4Projections* q = model_nf4(model);
  if (q == nullptr) return Status::InvalidArgument("LoRA adapters attach only to a 4-bit (nf4) model in this build");
  auto next = std::make_shared<Nf4Projections>(*q);  // shares the NF4 tensors
  next->lora = std::move(lora);
  model.projections = std::move(next);
  return Status::Ok();
}

std::string nf4_pretrain_missing_weights(const std::string& model_name, const std::string& path) {
  if (!path.empty() && model_dir_has_weights(path)) return "";
  const std::string where =
      path.empty() ? "no path"
                   : fmt::format("no model.safetensors or model.safetensors.index.json in its path '{}'", path);
  return fmt::format(
      "a 4-bit pretrain is QLoRA continued pretraining of the model's own weights, but model '{}' has {}; "
      "nothing was run",
      model_name, where);
}

std::string qlora_method(const LoraAdapters& lora, QloraKind kind, bool double_quant, bool freeze_a) {
  const std::string base = double_quant ? "4-bit NF4 base (double-quantized absmax)" : "4-bit NF4 base";
  const std::string adapters = fmt::format("LoRA rank {} alpha {} on q,k,v,o,gate,up,down{}", lora.rank, lora.alpha,
                                           freeze_a ? " (A frozen at its seeded start, B trained)" : "");
  if (kind == QloraKind::kContinuedPretraining)
    return fmt::format("QLoRA continued pretraining: {} (the model's weights) frozen, {}, causal-LM loss on every token",
                       base, adapters);
  return fmt::format("QLoRA: {} frozen, {}", base, adapters);
}

std::string nf4_inference_method(bool double_quant, const std::string& dequantization) {
  return fmt::format("4-bit NF4 weights{}: {}; embedding, norms, lm_head full precision",
                     double_quant ? " (double-quantized absmax)" : "", dequantization);
}

std::string nf4_prepare_inference(Model& model, const at::Device& device, at::ScalarType dtype, bool double_quant) {
  std::string how;
  if (nf4_keep_dequantized_fits(device, nf4_dequantized_bytes(model.config, c10::elementSize(dtype)), &how))
    nf4_keep_dequantized(model, dtype);
  return nf4_inference_method(double_quant, how);
}

}  // namespace native
}  // namespace protocol
