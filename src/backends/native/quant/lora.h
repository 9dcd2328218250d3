#ifndef PROTOCOL_BACKENDS_NATIVE_QUANT_LORA_H_
#define PROTOCOL_BACKENDS_NATIVE_QUANT_LORA_H_

// LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
// Models"): a frozen projection W (out × in) gains a trainable low-rank update
//   y = x·Wᵀ + (alpha / r) · (x·Aᵀ)·Bᵀ,     A (r × in), B (out × r).
// A starts Kaiming-uniform as in PEFT (kaiming_uniform_(a=√5), i.e.
// U(−1/√in, 1/√in)), drawn on the CPU from the seed; B starts at zero, so an
// untrained adapter leaves the model's output exactly unchanged.
// One adapter on each of the seven projections of every decoder layer
// (q, k, v, o, gate, up, down). Adapters are stored float32 whatever the model
// dtype and run in the compute dtype (x's): lora_forward.
//
// Trainable parameters: L · r · Σ_projections (in + out)
//   = L · r · (4·C + 2·NKV·HD + 2·NH·HD + 3·(C + F))      (lora_parameter_count)
//
// Merging the adapters of G independent groups (the share protocol's merge;
// every group g trained its own A_g, B_g with the same r and alpha on the
// same frozen base, scale s = alpha/r, update ΔW_g = s·B_g·A_g):
//
//   late merge, exact (lora_merge_stack): the merged adapter is the stack
//     A* = [A_1; ...; A_G]   (G·r × in: the groups' rows, concatenated)
//     B* = [B_1 ... B_G]     (out × G·r: the groups' columns, concatenated)
//     B*·A* = Σ_g B_g·A_g, and with PEFT's scaling lora_alpha/r its update is
//     (alpha*/(G·r))·Σ_g B_g·A_g, which equals mean_g ΔW_g = (alpha/(G·r))·Σ_g B_g·A_g
//     exactly when alpha* = alpha: the merged adapter_config.json has
//     r = G·r and lora_alpha = alpha (rsLoRA's alpha/√r scaling is not used).
//
//   periodic merge with A frozen (training.lora_freeze_a; lora_average_b):
//     every group keeps A at the shared seeded start (lora_create with the
//     same seed) and trains only B; then mean_g s·B_g·A = s·(mean_g B_g)·A,
//     so averaging B is the exact mean of the updates and the merged adapter
//     keeps rank r. (Averaging A and B separately is not exact:
//     mean(B)·mean(A) ≠ mean(B·A).)
//
// Bytes a merge moves between groups (float32 adapters, 4 bytes a value;
// P = lora_parameter_count(config, r) = L·r·Σ(in + out), P_B = L·r·Σ out):
//   late merge:   each group sends its adapters once: 4·P bytes
//                 (lora_adapter_bytes); gathering all G stacks at every group
//                 receives (G−1)·4·P bytes per group; the merged adapter is
//                 G·4·P bytes.
//   freeze-A periodic merge, per merge: only B moves, 4·P_B bytes per group
//                 (lora_b_bytes); a ring all-reduce (mean) of B sends and
//                 receives 2·(G−1)/G·4·P_B bytes per group; A never moves
//                 (each group recreates it from the seed).

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/model/model.h"
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
// (alpha/r)·(x·Aᵀ)·Bᵀ for projection p of `layer`, computed in x's dtype: A
// and B cast to it (differentiably: their gradients arrive in float32), x
// never widened. Float32 x gives the float32 products exactly.
at::Tensor lora_forward(const LoraAdapters& lora, size_t layer, Projection p, const at::Tensor& x);
// Every adapter tensor under its PEFT name, e.g.
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight";
// layer 0..L-1, projections in Projection order, A before B.
std::vector<NamedParameter> lora_parameters(LoraAdapters& lora);
// The adapter tensors with requires_grad set (what the optimizer updates).
// freeze_a: only the B tensors (every A keeps requires_grad false and its
// seeded start).
std::vector<at::Tensor> lora_trainable(LoraAdapters& lora, bool freeze_a = false);
// L · r · Σ (in + out) over the seven projections.
int64_t lora_parameter_count(const ModelConfig& config, int64_t rank);
// Every adapter tensor in lora_parameters order, as one float32 vector of
// lora_parameter_count elements (what a merge sends between groups).
at::Tensor lora_flatten(LoraAdapters& lora);
// Adapters with the rank, alpha and tensor shapes of `like` holding the values
// of `flat` (lora_flatten's layout), on flat's device, float32.
// REQUIRES: flat.numel() == the element count of `like`'s tensors.
LoraAdapters lora_unflatten(LoraAdapters& like, const at::Tensor& flat);
// Float32 bytes of one group's adapters: 4 · lora_parameter_count.
int64_t lora_adapter_bytes(const ModelConfig& config, int64_t rank);
// Float32 bytes of one group's B tensors: 4 · L · r · Σ out.
int64_t lora_b_bytes(const ModelConfig& config, int64_t rank);
// Writes dir/adapter_model.safetensors (float32, PEFT names) and
// dir/adapter_config.json (PEFT's keys: peft_type LORA, r, lora_alpha,
// target_modules, ...). Creates dir. Errors name the file.
Status lora_save(LoraAdapters& lora, const std::string& dir, const std::string& base_model = "");
// Reads a PEFT LoRA adapter directory (adapter_config.json +
// adapter_model.safetensors) for a model of `config`: r, lora_alpha and every
// lora_A / lora_B tensor of the seven projections of each layer under the
// names lora_parameters uses, converted to float32 on `device`.
// Errors name the file: peft_type not LORA, use_rslora set, a projection
// missing from target_modules, a tensor missing, of the wrong shape, or not
// one of the model's adapters.
Result<LoraAdapters> lora_load(const std::string& dir, const ModelConfig& config, const at::Device& device = at::kCPU);

// The ΔW of projection p of `layer`: (alpha/r)·B·A (out × in, float32).
at::Tensor lora_delta(const LoraAdapters& lora, size_t layer, Projection p);
// The late merge above: rank G·r, lora_alpha alpha, A* and B* the stacks.
// kInvalidArgument when `groups` is empty or the groups differ in rank,
// alpha or layer count.
Result<LoraAdapters> lora_merge_stack(const std::vector<const LoraAdapters*>& groups);
// The freeze-A merge above: A of the first group, B the mean of the groups'
// B. kInvalidArgument when the groups differ in rank, alpha or layers, or any
// A is not bit-identical to the first group's (not a frozen shared start).
Result<LoraAdapters> lora_average_b(const std::vector<const LoraAdapters*>& groups);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_QUANT_LORA_H_
