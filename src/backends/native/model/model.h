#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_H_

// The Llama-2 decoder in plain ATen tensors, written llm.c style: the weights
// are plain structs (one LayerWeights per decoder layer), and the forward pass
// is a straight line of module_verb functions. Dimension letters: see
// model_config.h.
//
//   tokens (B,T) ─ embedding ─ x (B,T,C)                embed_forward
//   for each layer:  x = x + attention(rmsnorm(x))      decoder_layer_forward: rotary q/k,
//                    x = x + mlp(rmsnorm(x))              grouped-query heads, SwiGLU
//   logits (B,T,V) = lm_head(rmsnorm(x))                head_forward (untied from the embedding)
//
// The three stage functions take their weights as arguments, so that FSDP
// (fsdp_sharded.h) can call each with parameters it has just all-gathered, and
// activation checkpointing (unit_function.h) can re-run one in backward.
//
// Weight layouts follow Hugging Face's LlamaForCausalLM ((out, in) matrices,
// rotate-half rotary convention), so HF checkpoints load without permutation.

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/model/model_config.h"
#include "backends/native/model/placement.h"
#include "runner/base/status.h"

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
  // wq, wk, wv as one ((NH+2·NKV)·HD, C) matrix, and w_gate, w_up as one
  // (2·F, C): the storage those views share when model_create allocated them
  // side by side (undefined otherwise). A forward under InferenceMode runs
  // one projection for each (joined_projection in model.cc checks that the
  // parts still lie there); elsewhere the parts are used, as autograd's
  // leaves. Code that drops the parts drops these too (model_quantize_nf4).
  at::Tensor wqkv;
  at::Tensor w_gate_up;
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
// Names and shapes come from the config, so this also describes a model whose
// tensors are undefined (model_create_unallocated).
std::vector<NamedParameter> model_parameters(Model& model);
// A decoder layer's nine tensors in Hugging Face order (input_norm, q, k, v, o,
// post_norm, gate, up, down), the order model_parameters lists them.
std::vector<at::Tensor*> layer_parameters(LayerWeights& w);
// Which tensors model_create and model_create_placed allocate: all of them,
// or all but the seven projections of every decoder layer (left undefined: a
// 4-bit model reads and quantizes them one at a time, model_fill_nf4 in
// quantized_model.h, and never holds them all in full precision).
enum class ProjectionTensors { kAllocate, kLeaveUndefined };
// Allocates a model with uninitialised weights of `options` (dtype, device).
// REQUIRES: config.Validate() is empty.
Model model_create(const ModelConfig& config, const at::TensorOptions& options,
                   ProjectionTensors projections = ProjectionTensors::kAllocate);
// The config and the rotary tables (on `device`) only; every parameter tensor
// left undefined. FSDP keeps the weights sharded elsewhere and hands the stage
// functions below the gathered tensors of one unit at a time.
Model model_create_unallocated(const ModelConfig& config, const at::Device& device);

// A model spread over several devices in one process (placement.h): the
// embedding and the rotary tables on devices[0], decoder layer i on
// devices[placement.layer_device[i]], the final norm and lm_head on
// devices[placement.head_device]. model_forward carries the activation to each
// layer's device and kv_cache_create puts each layer's cache beside it; the
// logits come out on the head's device. Several entries may name one device
// (several at::kCPU entries give the plain model's results, token for token).
// REQUIRES: placement is of config.n_layers layers over <= devices.size() devices.
Model model_create_placed(const ModelConfig& config, at::ScalarType dtype, const std::vector<at::Device>& devices,
                          const LayerPlacement& placement,
                          ProjectionTensors projections = ProjectionTensors::kAllocate);
// Seeded random initialisation as in HF (normal(0, 0.02) matrices, unit norms).
// Drawn on the CPU in float32 and then copied, so the same seed gives the same
// weights on every device and dtype.
void model_init_random(Model& model, uint64_t seed);
// The same draws for a run of parameters, continuing `gen` (a CPU generator):
// model_init_random(m, seed) is parameters_init_random(model_parameters(m),
// generator(seed)), so initialising the units of a model one after another in
// model_parameters order gives the same weights as initialising it whole.
// REQUIRES: every tensor is allocated.
void parameters_init_random(const std::vector<NamedParameter>& params, at::Generator& gen);
at::Generator init_generator(uint64_t seed);
// Sets a run of parameters (each *p.tensor allocated; the values converted to
// its dtype and device), called for the runs of a model in model_parameters
// order: a source read in order (the path's safetensors, one tensor at a time)
// or a seeded initialisation continuing one generator (parameters_init_random)
// gives the same weights however the parameters are grouped into runs, one
// parameter or the whole model. case_weights.h makes the fill of a case.
// Errors: the source's (a missing tensor, a wrong shape).
using ParameterFill = std::function<Status(const std::vector<NamedParameter>&)>;
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

// ---- the forward pass, one function per stage ------------------------------

// Rotary cos/sin rows for positions pos0..pos0+T-1, (T,HD) in `dtype`.
struct RopeRows {
  at::Tensor cos, sin;
};
RopeRows rope_rows(const Model& model, int64_t pos0, int64_t T, at::ScalarType dtype);

// x (B,T,C) = embed[tokens]; tokens (B,T) int64.
at::Tensor embed_forward(const at::Tensor& embed, const at::Tensor& tokens);

// One decoder layer with weights `w` (model.layers[layer], or a gathered copy):
//   x = x + attention(rmsnorm(x));  x = x + mlp(rmsnorm(x)).
// Projections go through model.projections when the model has one (then w's
// projection matrices are not read). pos0 = absolute position of x's first
// token; with a cache, this layer's keys/values are written at pos0.. .
at::Tensor decoder_layer_forward(const Model& model, size_t layer, const LayerWeights& w, const at::Tensor& x,
                                 const RopeRows& rope, KvCache* cache, int64_t pos0);

// logits (B,T,V) = lm_head(rmsnorm(x, norm)).
at::Tensor head_forward(const Model& model, const at::Tensor& norm, const at::Tensor& lm_head, const at::Tensor& x);

// Logits (B,T,V) in the model's dtype for tokens (B,T) int64 at positions
// cache->length .. cache->length+T-1 (0.. without a cache). With a cache, the
// new keys/values are appended and cache->length advances by T.
// REQUIRES: positions < config.max_seq_len; with a cache, length+T <= capacity.
at::Tensor model_forward(const Model& model, const at::Tensor& tokens, KvCache* cache = nullptr);

// A decode step whose position lives on the device: logits (B,1,V) for
// tokens (B,1) at position *pos, pos a (1) int64 tensor on the model's
// device (never read by the host). Each layer writes its key/value at pos
// (index_copy_) and attends over the cache's whole capacity with the
// positions after pos masked out, so every shape and every kernel argument
// is the same from step to step: the step can be captured once as a CUDA
// graph and replayed (generate.h). cache->length is not read or advanced
// (the caller keeps the position). Values: model_forward's at that
// position, up to the order of the attention's sums (masked positions add
// exact zeros). The RMSNorms and SiLU·up take fused_ops.h where it serves
// them; rotary and attention are composite ops (the fused ones take a host
// position). REQUIRES: one device for the whole model (not a placed model),
// 0 <= pos < the cache's capacity <= config.max_seq_len.
at::Tensor model_decode_step(const Model& model, const at::Tensor& tokens, const at::Tensor& pos, KvCache& cache);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_H_
