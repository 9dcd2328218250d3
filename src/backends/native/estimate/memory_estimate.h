#ifndef PROTOCOL_BACKENDS_NATIVE_ESTIMATE_MEMORY_ESTIMATE_H_
#define PROTOCOL_BACKENDS_NATIVE_ESTIMATE_MEMORY_ESTIMATE_H_

// Expected peak memory per device (per rank process on CPU) of the native
// backends' training and inference, from the model's dimensions alone: pure
// arithmetic, no libtorch, so `protocol validate` prints it for a plan on any
// machine (docs/estimates.md has the same formulas with the shipped plans'
// figures). It models what the code does — FSDP FULL_SHARD units
// (fsdp_sharded.h), activation checkpointing (train.h), 4-bit NF4 storage and
// its whole-block sharding (nf4.h, nf4_shard.h), LoRA (lora.h), the loss
// (train.cc), generation with a KV cache (generate.h) and the balanced layer
// placement (placement.h) — term by term, so that each term can be checked
// against the code and the total against a measured peak.
//
// Letters (model_config.h): N parameters, L layers, C width, F MLP width,
// V vocabulary, NH / NKV query / key-value heads, HD head dim; B sequences per
// rank per forward (micro-batch), T sequence length, W the ranks a unit is
// sharded over (fsdp: all ranks of the case, or with hybrid sharding the
// ranks of one node; share: K, the ranks of one group), k =
// training.checkpoint_every, e = bytes of the compute dtype (2: bf16 on CUDA,
// 4: float32 on CPU), f = 1 when e ≠ 4 else 0 (a float32 copy exists only when
// the compute dtype is not float32). ⌈a/b⌉ is a ceiling.
//
// Units (FSDP's): u0 = embedding (V·C), u1..uL = decoder layers
//   P = C·NH·HD + 2·C·NKV·HD + NH·HD·C + 3·C·F + 2·C     (q, k, v, o, gate, up, down, 2 norms)
// and u_{L+1} = [final norm + lm_head] (C + V·C). Sharded, rank i keeps
// S_u = ⌈n_u/W⌉ elements of each unit (padding included).
//
// ---- training, full precision -------------------------------------------
// Resident (the whole step):
//   sharded (W ranks):   master 4·ΣS_u, AdamW m and v 8·ΣS_u
//   one process:         weights e·N, float32 master copy 4·f·N, m and v 8·N
// Gradients: sharded 4·S_u per unit (float32 slice), one process e·n_u,
//   formed unit by unit as the backward reaches it (all of them from the
//   first backward on when grad_accum > 1).
// Activations per token of a decoder layer whose graph is kept (float32 where
// the code computes in float32):
//   a = 2·(2·e·C + 4)                 two RMSNorms (rms_norm.h): input, output (× gain), inverse RMS
//     + 3·e·NH·HD                      q, k, v after rotary (k, v repeated to NH heads; where
//                                      attention takes them grouped, 2·NKV: an upper bound)
//     + e·NH·HD                        attention output (o_proj's input)
//     + attn                           CUDA (fused kernel): e·NH·HD + 4·NH (output, log-sum-exp)
//                                      CPU (math path): 4·NH·T + f·e·NH·T (probabilities)
//     + 3·e·F                          gate, up (swiglu.h keeps no silu(gate)), silu(gate)·up
// Checkpointed layer (layer l with k > 0 and l mod k = 0): its input only, e·C.
// Loss (train.cc masked_loss, chunked_loss.h): the logits kept for the
//   cross-entropy's backward and their gradient, e each, and float32 chunks
//   of the vocabulary, the widened copy and the softmax (one when e = 4):
//   2·e·B·T·V + w·min(B·T·V, max(2^22, V)), w = 8 (4 when e = 4).
// Phases of the backward, each on top of the resident state, the gradients
// formed so far and the activations not yet consumed:
//   head     gathered head (e·Ŝ) + its gradients (e·n) → float32 flat gradient
//            (4·Ŝ): e·n + max(e, 4)·Ŝ, Ŝ = W·S_u; plus the loss
//   layer l  the same for the layer unit, plus one layer's activations a·B·T
//            (recomputed when checkpointed; its gradients otherwise)
//   step     all gradients, plus AdamW's temporaries: sharded 8·(largest
//            slice); one process the float32 copies of a run's bf16
//            gradients, f·4·R with R = min(N, max(V·C, 2^24)) its largest
//            run (train.h: runs of at most 2^24 elements, or one larger
//            tensor); resident besides: AdamW's workspace 4·R (√v̂ + ε).
//            With the fused AdamW (fused_adamw: compat::FusedAdamWAvailable
//            for the device) there is no workspace and no sharded temporary;
//            the one-process copies of bf16 gradients remain
// With prefetch (fsdp_schedule.h), the head's and each layer's phase also
// hold the next unit of the backward gathered (e·Ŝ of layer l−1; nothing
// for the embedding, which is not gathered for its backward) and the previous
// unit's flat gradient while its reduce-scatter is in flight (r·Ŝ of unit
// l+1, r the reduce dtype's bytes).
// (one process: nothing is gathered; the head/layer phases keep only the loss
// and a·B·T.)
// peak = resident + max over phases.
//
// ---- training, 4-bit (QLoRA) --------------------------------------------
// Resident: the decoder projections in NF4 — sharded by whole records over W
//   (nf4_shard.h): L · ⌈R/W⌉ · r_b with R records per layer, r_b = 36 bytes
//   per block of 64 (8456 per group of 256 blocks with double_quant); one
//   process: L · Σ_p nf4_storage_bytes(n_p) —; the embedding, norms and
//   lm_head in the compute dtype, sharded like FSDP and frozen: e·Σ⌈n/W⌉;
//   LoRA adapters (rank r, lora.h) replicated on every rank in float32 with
//   their gradients and AdamW moments: 16 bytes per adapter parameter
//   (lora_freeze_a: 4 for each A, 16 for each B).
// Resident too: AdamW's workspace for the adapters, 4·min(trained, 2^24)
//   (float32 √v̂ + ε of its largest run; train.h), unless fused_adamw.
// Phases: layer: the gathered NF4 layer (R·r_b; nothing gathered in one
//   process) + one projection being dequantized (nf4.cc: the float32 result,
//   on CUDA with its int32 table index and its compute-dtype copy: 8 bytes per
//   weight of the largest projection, F·C) + a·B·T; head: the gathered head (e·Ŝ, no gradient) + the
//   loss. With prefetch both also hold the next layer's gathered NF4 records
//   (R·r_b), and the layer phase the previous layer's adapter gradients in
//   flight (r per adapter parameter of a layer).
// Load: each projection is read, quantized and freed before the next
//   (model_fill_nf4; ShardedQlora::Create): beyond the NF4 already made, one
//   projection in the compute dtype and its quantization workspace,
//   e·F·C + 17·min(F·C, 2^20); sharded, also the layer's NF4 records before they are cut
//   to the rank's shard (R·r_b). An upper bound: the adapters' gradients and
//   AdamW moments do not exist yet while the model loads.
//
// ---- the share protocol's merges (outer_step.h) ---------------------------
// P_m: the elements a rank merges (full precision: its slices Σ S_u; 4-bit:
// its trained adapters), n_m the largest of its merged tensors, m the merge
// dtype's bytes. Unless plain float32 averaging (η = 1, μ = 0, m = 4):
//   θ_global 4·P_m, and with μ > 0 the velocity 4·P_m; resident on the
//   device with training.outer_state: device, else on the host (said apart,
//   not in the peak).
// Merge phase (gradients freed, no activations): the flat buffer m·P_m and
//   one tensor's float32 temporaries 12·n_m (none for plain float32 averaging).
//
// ---- inference -----------------------------------------------------------
// The weights (compute dtype; NF4 projections + norms in the compute dtype
// for a 4-bit model) are placed over the replica's K devices by the balanced
// placement; device d holds its layers, the embedding (d = 0) and the head
// (last device), plus the KV cache of its layers for one request of the
// longest answer: 2·NKV·HD·(prompt + max_new_tokens)·e per layer (with decode
// buckets kept between requests, 2·NKV·HD·kv_cache_positions·e), plus the
// activations of the prompt's prefill through one layer (no graph):
//   prompt·(e·(2·C + (NH + 2·NKV)·HD) + 4·C + 4·e·F) + 2·e·NH·HD·S (k, v
//   repeated over S = prompt + max_new_tokens positions) + (CPU) 4·NH·prompt·S,
// the logits of the prefill on the last device (prompt·V·e), and for a 4-bit
// model one projection being dequantized (8·F·C). A 4-bit model is read one
// projection at a time, each quantized and freed before the next is read
// (model_fill_nf4): the load phase holds, beyond the NF4 weights already made,
// one projection in the compute dtype and its quantization workspace,
// e·F·C + 17·min(F·C, 2^20) for the largest (17 bytes per weight of the
// 2^20 weights nf4_quantize works on at a time: their float32 copy,
// normalised values, int64 level indices and codes).
//
// Not counted: the CUDA context and allocator slack (about 0.5–1 GB per GPU),
// the process's own code and libraries (the CPU baseline of a rank, ~0.3 GB),
// the dataset's tokens, communication buffers inside Gloo/NCCL.

#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/model/model_config.h"
#include "backends/native/model/placement.h"

namespace protocol {
namespace native {

// ---- the pieces (each tested against the code it models) -----------------

// P: parameters of one decoder layer.
int64_t layer_parameter_count(const ModelConfig& c);
// Parameters of each FSDP unit: [embedding, layer 0 .. L−1, final norm + lm_head].
std::vector<int64_t> unit_parameter_counts(const ModelConfig& c);
// S = ⌈n/W⌉: the elements one of W ranks keeps of a unit of n.
int64_t shard_elements(int64_t n, int64_t world);
// n_p of the seven projections, in Projection order (q, k, v, o, gate, up, down).
std::vector<int64_t> projection_numels(const ModelConfig& c);
// L · r · Σ_p (in + out) (equals lora_parameter_count); and the A part, L · r · Σ_p in.
int64_t adapter_parameter_count(const ModelConfig& c, int64_t rank);
int64_t adapter_a_parameter_count(const ModelConfig& c, int64_t rank);
// NF4 bytes of a tensor of n weights (nf4_storage_bytes).
int64_t nf4_bytes(int64_t n, bool double_quant);
// NF4 records of one decoder layer (nf4_shard.h): single quantization one per
// block of 64 weights, double quantization one per group of 256 blocks.
int64_t nf4_layer_records(const ModelConfig& c, bool double_quant);
int64_t nf4_record_bytes(bool double_quant);  // 36 | 8456
// ⌈R/W⌉·r_b: one rank's bytes of one layer's NF4 records (nf4_shard_bytes).
int64_t nf4_layer_shard_bytes(const ModelConfig& c, bool double_quant, int64_t world);
// a: activation bytes per token of one decoder layer whose graph is kept.
int64_t layer_activation_bytes_per_token(const ModelConfig& c, int64_t dtype_bytes, int64_t seq_len,
                                         bool attention_probs_kept);
// 2·e·B·T·V + w·min(B·T·V, max(2^22, V)) (the loss term above).
int64_t loss_bytes(const ModelConfig& c, int64_t micro_batch, int64_t seq_len, int64_t dtype_bytes);
// Workspace of one projection of n weights being dequantized (8·n) / quantized
// (17·min(n, 2^20): nf4_quantize works on 2^20 weights at a time).
int64_t dequantize_workspace_bytes(int64_t n);
int64_t quantize_workspace_bytes(int64_t n);
// Decoder layers checkpointed by checkpoint_every k among L (those with l mod k = 0; none for k = 0).
int64_t checkpointed_layers(int64_t n_layers, int64_t checkpoint_every);

// ---- estimates -------------------------------------------------------------

struct MemoryTerm {
  std::string name;  // e.g. "AdamW m, v (float32 slice)"
  int64_t bytes = 0;
};

struct MemoryEstimate {
  std::vector<MemoryTerm> resident;  // held through the whole step / the whole run
  std::string peak_phase;            // the phase at the peak, e.g. "backward of decoder layer 79"
  std::vector<MemoryTerm> at_peak;   // what that phase holds on top of the resident terms
  int64_t peak_bytes = 0;            // Σ resident + Σ at_peak
  int64_t host_bytes = 0;            // host memory of the rank not in the peak (a merge's outer state kept there)
  std::vector<MemoryTerm> phases;    // every candidate phase: its name and what it holds on top of the resident terms
  // "9.12 GB: NF4 projections 4.81 GB + ... ; at the peak (backward of the head): ..."
  std::string Describe() const;
};

struct TrainingMemoryShape {
  ModelConfig config;
  int64_t world = 1;             // W
  bool sharded = true;           // FSDP units over W ranks (worker ranks); false: the one-process path
  int64_t micro_batch = 1;       // B (sequences per rank per forward)
  int64_t seq_len = 128;         // T
  int64_t grad_accum = 1;        // > 1: gradients are formed in every phase
  int64_t checkpoint_every = 1;  // k
  bool fused_adamw = false;      // train.h AdamW's fused path: no workspace, no temporaries on a slice
  int64_t dtype_bytes = 4;       // e
  bool attention_probs_kept = true;  // CPU math attention keeps (B,NH,T,T) probabilities
  bool nf4 = false;              // 4-bit base + LoRA (QLoRA; finetune and continued pretraining)
  bool double_quant = false;
  int64_t lora_rank = 8;
  bool lora_freeze_a = false;
  // training.prefetch (fsdp_schedule.h): in a unit's backward the next unit's
  // gather and the previous unit's gradient reduction are in flight too.
  bool prefetch = true;
  int64_t reduce_bytes = 4;      // r: bytes per element of the gradient reductions
  // share with more than one group: the merges (outer_step.h).
  bool merges = false;
  double outer_lr = 1.0;             // η
  double outer_momentum = 0.0;       // μ
  bool outer_state_on_device = false;  // training.outer_state: device
  int64_t merge_bytes = 4;           // m: bytes per element a merge sends
};
MemoryEstimate estimate_training_memory(const TrainingMemoryShape& shape);

struct InferenceMemoryShape {
  ModelConfig config;
  int devices = 1;              // K: devices the replica's model is placed over
  int64_t dtype_bytes = 4;      // e
  bool attention_probs_kept = true;
  bool nf4 = false;
  bool double_quant = false;
  int64_t prompt_tokens = 1;    // an upper bound is fine
  int64_t max_new_tokens = 0;   // the longest request of the schedule
  // Positions of KV cache held at once: 0 = prompt + max_new_tokens (one
  // cache per request, freed after it); a schedule that decodes into decode
  // buckets kept from request to request (inference.decode_step off the
  // host's position) holds the sum of their capacities (decode_bucket_positions).
  int64_t kv_cache_positions = 0;
};
// The positions of KV cache the decode buckets of a schedule hold at the end:
// the sum of the distinct bucket capacities (decode_bucket_capacity.h) its
// requests can decode into, for any prompt of 1 to `prompt_tokens` tokens (an
// upper bound of the prompt gives an upper bound), each request of
// `max_new_tokens[i]` new tokens.
int64_t decode_bucket_positions(int64_t prompt_tokens, const std::vector<int>& max_new_tokens, int64_t max_seq_len);
struct InferenceMemoryEstimate {
  LayerPlacement placement;              // over the replica's devices
  std::vector<MemoryEstimate> devices;   // one per used device (its weights, KV cache, activations)
  int64_t peak_bytes = 0;                // the largest device's
  int peak_device = 0;
};
// Bytes of each decoder layer as placed (compute dtype, or NF4 + norms) and of the embedding / head.
int64_t inference_layer_bytes(const ModelConfig& c, int64_t dtype_bytes, bool nf4, bool double_quant);
// The balanced placement of a model for inference over `devices` (placement.h):
// L layers of inference_layer_bytes, the embedding (e·V·C) first, the head (e·(C + V·C)) last.
// What the backends place a model by, and what the estimate assumes.
LayerPlacement inference_placement(const ModelConfig& c, int64_t dtype_bytes, bool nf4, bool double_quant,
                                   int devices);
InferenceMemoryEstimate estimate_inference_memory(const InferenceMemoryShape& shape);

// "9.12 GB" (10^9 bytes, as gpu_memory_gb), "512 MB", "12 kB".
std::string FormatBytes(int64_t bytes);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_ESTIMATE_MEMORY_ESTIMATE_H_
