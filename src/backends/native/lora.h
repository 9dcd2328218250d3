#ifndef PROTOCOL_BACKENDS_NATIVE_LORA_H_
#define PROTOCOL_BACKENDS_NATIVE_LORA_H_

// LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
// Models"): a frozen projection W (out × in) gains a trainable low-rank update
//   y = x·Wᵀ + (alpha / r) · (x·Aᵀ)·Bᵀ,     A (r × in), B (out × r).
// A starts Kaiming-uniform as in PEFT (kaiming_uniform_(a=√5), i.e.
// U(−1/√in, 1/√in)), drawn on the CPU from the seed; B starts at zero, so an
// untrained adapter leaves the model's output exactly unchanged.
// One adapter on each of the seven projections of every decoder layer
// (q, k, v, o, gate, up, down). Adapters are float32 whatever the model dtype.
//
// Trainable parameters: L · r · Σ_projections (in + out)
//   = L · r · (4·C + 2·NKV·HD + 2·NH·HD + 3·(C + F))      (lora_parameter_count)

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/model.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct LoraAdapter {
  at::Tensor a;  // (r, in)   lora_A.weight
  at::Tensor b;  // (out, r)  lora_B.weight
};

struct LoraAdapters {
  int64_t rank = 8;
  double alpha = 16;
  std::vector<std::array<LoraAdapter, kProjectionCount>> layers;  // L of them, in Projection order
  double scale() const { return alpha / static_cast<double>(rank); }
};

// The (out, in) shape of projection p in a model of config c.
std::array<int64_t, 2> projection_shape(const ModelConfig& c, Projection p);

// REQUIRES: rank >= 1, config.Validate() empty. Adapters on `device`.
LoraAdapters lora_create(const ModelConfig& config, int64_t rank, double alpha, uint64_t seed,
                         const at::Device& device = at::kCPU);
// (alpha/r)·(x·Aᵀ)·Bᵀ for projection p of `layer`, in x's dtype.
at::Tensor lora_forward(const LoraAdapters& lora, size_t layer, Projection p, const at::Tensor& x);
// Every adapter tensor under its PEFT name, e.g.
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight";
// layer 0..L-1, projections in Projection order, A before B.
std::vector<NamedParameter> lora_parameters(LoraAdapters& lora);
// The adapter tensors with requires_grad set (what the optimizer updates).
std::vector<at::Tensor> lora_trainable(LoraAdapters& lora);
// L · r · Σ (in + out) over the seven projections.
int64_t lora_parameter_count(const ModelConfig& config, int64_t rank);
// Writes dir/adapter_model.safetensors (float32, PEFT names) and
// dir/adapter_config.json (PEFT's keys: peft_type LORA, r, lora_alpha,
// target_modules, ...). Creates dir. Errors name the file.
Status lora_save(LoraAdapters& lora, const std::string& dir, const std::string& base_model = "");

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LORA_H_
