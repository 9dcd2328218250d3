#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_H_

// The Llama-2 decoder in plain ATen tensors, written llm.c style: the weights
// are plain structs (one LayerWeights per decoder layer, so a later issue can
// shard layer by layer), and the forward pass is a straight line of
// module_verb functions. Dimension letters: see model_config.h.
//
//   tokens (B,T) ─ embedding ─ x (B,T,C)
//   for each layer:  x = x + attention(rmsnorm(x))      rotary q/k, grouped-query heads
//                    x = x + mlp(rmsnorm(x))            SwiGLU
//   logits (B,T,V) = lm_head(rmsnorm(x))                untied from the embedding
//
// Weight layouts follow Hugging Face's LlamaForCausalLM ((out, in) matrices,
// rotate-half rotary convention), so HF checkpoints load without permutation.

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/model_config.h"
#include "backends/native/placement.h"

namespace protocol {
namespace native {

struct LayerWeights {
  at::Tensor input_norm;  // (C)          input_layernorm.weight
  at::Tensor wq;          // (NH·HD, C)   self_attn.q_proj.weight
  at::Tensor wk;          // (NKV·HD, C)  self_attn.k_proj.weight
  at::Tensor wv;          // (NKV·HD, C)  self_attn.v_proj.weight
  at::Tensor wo;          // (C, NH·HD)   self_attn.o_proj.weight
  at::Tensor post_norm;   // (C)          post_attention_layernorm.weight
  at::Tensor w_gate;      // (F, C)       mlp.gate_proj.weight
  at::Tensor w_up;        // (F, C)       mlp.up_proj.weight
  at::Tensor w_down;      // (C, F)       mlp.down_proj.weight
};

// The seven matrices of a decoder layer, in Hugging Face order.
enum class Projection { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kProjectionCount = 7;
// The HF module name within a layer: "self_attn.q_proj", ..., "mlp.down_proj".
const char* projection_module(Projection p);
// The LayerWeights field holding projection p's (out, in) matrix.
at::Tensor& layer_projection(LayerWeights& w, Projection p);
const at::Tensor& layer_projection(const LayerWeights& w, Projection p);

// Computes the layer projections y = x·Wᵀ in place of the LayerWeights
// matrices when a Model carries one: a 4-bit model (quantized_model.h) keeps
// its projections as NF4 blocks, dequantizes them here and adds its LoRA
// adapters. x (..., in) -> (..., out), in x's dtype.
class ProjectionOverride {
 public:
  virtual ~ProjectionOverride() = default;
  virtual at::Tensor Forward(size_t layer, Projection p, const at::Tensor& x) const = 0;
};

struct Model {
  ModelConfig config;
  at::Tensor embed;                 // (V, C)  model.embed_tokens.weight
  std::vector<LayerWeights> layers; // L of them
  at::Tensor norm;                  // (C)     model.norm.weight
  at::Tensor lm_head;               // (V, C)  lm_head.weight
  // Rotary tables for positions 0..max_seq_len-1, float32, not parameters.
  at::Tensor rope_cos;              // (max_seq_len, HD)
  at::Tensor rope_sin;              // (max_seq_len, HD)
  // Null: the projections are the LayerWeights matrices. Set (4-bit model):
  // the forward calls it for every projection, and the seven LayerWeights
  // projection tensors are undefined (their weights live in the override).
  std::shared_ptr<const ProjectionOverride> projections;
};

// A parameter under its Hugging Face name, with the shape that name must have.
struct NamedParameter {
  std::string name;            // e.g. "model.layers.3.self_attn.q_proj.weight"
  at::Tensor* tensor;          // points into the Model
  std::vector<int64_t> shape;  // expected shape
};

// Every parameter in a fixed order (embedding, layer 0..L-1, norm, lm_head).
std::vector<NamedParameter> model_parameters(Model& model);
// Allocates a model with uninitialised weights of `options` (dtype, device).
// REQUIRES: config.Validate() is empty.
Model model_create(const ModelConfig& config, const at::TensorOptions& options);
// A model spread over several devices in one process (placement.h): the
// embedding and the rotary tables on devices[0], decoder layer i on
// devices[placement.layer_device[i]], the final norm and lm_head on
// devices[placement.head_device]. model_forward carries the activation to each
// layer's device and kv_cache_create puts each layer's cache beside it; the
// logits come out on the head's device. Several entries may name one device
// (several at::kCPU entries give the plain model's results, token for token).
// REQUIRES: placement is of config.n_layers layers over <= devices.size() devices.
Model model_create_placed(const ModelConfig& config, at::ScalarType dtype, const std::vector<at::Device>& devices,
                          const LayerPlacement& placement);
// Seeded random initialisation as in HF (normal(0, 0.02) matrices, unit norms).
// Drawn on the CPU in float32 and then copied, so the same seed gives the same
// weights on every device and dtype.
void model_init_random(Model& model, uint64_t seed);
// Elements of the defined parameter tensors (a 4-bit model's projections,
// held by its override, are not counted).
int64_t model_parameter_count(Model& model);

// Key/value cache for incremental decoding: per layer (B, NKV, capacity, HD),
// on the layer's device.
struct KvCache {
  std::vector<at::Tensor> k, v;
  int64_t length = 0;  // positions already filled
};
KvCache kv_cache_create(const Model& model, int64_t batch, int64_t capacity);

// Logits (B,T,V) in the model's dtype for tokens (B,T) int64 at positions
// cache->length .. cache->length+T-1 (0.. without a cache). With a cache, the
// new keys/values are appended and cache->length advances by T.
// REQUIRES: positions < config.max_seq_len; with a cache, length+T <= capacity.
at::Tensor model_forward(const Model& model, const at::Tensor& tokens, KvCache* cache = nullptr);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_H_
