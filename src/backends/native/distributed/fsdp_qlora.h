#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_QLORA_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_QLORA_H_

// FSDP-QLoRA: a 4-bit model (quantized_model.h) whose LoRA adapters are
// trained by the W ranks of one process group, the frozen base sharded at
// rest as byte ranges of each layer's flat NF4 bytes (nf4_shard.h: FSDP's
// flat-parameter layout, as Answer.AI's fsdp_qlora shards NF4 codes).
//
// At rest rank i of W keeps, with e the bytes of the compute dtype (float32
// on CPU, bf16 on CUDA):
//   embedding            its slice of the V·C weights      ceil(V·C/W)·e bytes
//   each decoder layer   its shard of the layer's NF4 bytes
//                        (nf4_shard_bytes: ceil(blocks/W)·36, double quant
//                        ceil(groups/W)·8456) and the layer's two RMSNorm
//                        gains, replicated (2·C·e bytes)
//   final norm + lm_head its slice                         ceil((C+V·C)/W)·e
//   LoRA adapters        replicated: all of them in float32 (lora.h), with
//                        their gradients and the AdamW moments the caller keeps
// The base is frozen: no gradient and no optimizer state for any of it.
//
// Forward, unit by unit (unit_function.h):
//   embedding  all-gather, look up, free (no graph: nothing before it trains)
//   layer l    all-gather the uint8 shards of its records, take the seven NF4
//              projections as views of the gathered buffer (no copy),
//              compute through nf4_linear (which keeps the 4-bit storage,
//              never a dequantized weight) plus the LoRA adapters, free. A checkpointed layer (TrainOptions::
//              checkpoint_every) keeps its input only and is re-gathered and
//              recomputed in backward; another keeps its graph, its gathered
//              NF4 storage freed after the forward and re-gathered into the
//              same storage before its backward.
//   head       all-gather, compute; kept gathered for the backward (∂L/∂x
//              needs lm_head), freed after it
// When each gather is issued and waited: fsdp_schedule.h (prefetch).
// Backward leaves each rank's adapter gradients (from its own sequences) in
// their .grad; on the last micro-batch of a step each layer's are summed over
// the group as the backward leaves the layer (SetTrainable), so every rank
// holds the gradient of the group's whole batch, takes the same AdamW step and
// the replicas stay identical.
//
// With hybrid sharding (FsdpSetup: W' = the ranks of one node, R nodes) the
// base is sharded over the node's W' ranks, so no layer crosses between nodes,
// and a layer's adapter gradients are reduce-scattered within the node, the
// slice all-reduced across the R replicas and all-gathered back.
//
// Bytes one rank sends (torch_compat.h's ring volumes), W' the shard group,
// S_e, S_h the slice elements of the embedding and head units, B_l =
// nf4_shard_bytes, P_l a layer's trainable adapter elements, r the reduce
// dtype's bytes:
//   per micro-batch   (W'−1)·S_e·e  +  L·2·(W'−1)·B_l  +  (W'−1)·S_h·e
//   per step, full    Σ_l 2·(W−1)/W·r·P_l  (one all-reduce per layer)
//   per step, hybrid  Σ_l [(W'−1)/W'·r·P̂_l (2·that on libtorch 1.13 Gloo)
//                        + 2·(R−1)/R·r·P̂_l/W' + (W'−1)·r·P̂_l/W'],
//                     P̂_l = P_l padded to a multiple of W'
//   a forward without grad mode (eval) gathers each unit once:
//                     (W'−1)·(S_e·e + L·B_l + S_h·e)

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backends/native/distributed/fsdp_sharded.h"
#include "backends/native/quant/lora.h"
#include "backends/native/model/model.h"
#include "backends/native/quant/nf4.h"
#include "backends/native/distributed/nf4_shard.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/train.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

class FrozenSlicedUnit;
class Nf4LayerUnit;
class Nf4Projections;

class ShardedQlora {
 public:
  // As ShardedParams::Fill (fsdp_sharded.h): sets full float32 CPU tensors,
  // called in model_parameters order: the embedding; each tensor of a decoder
  // layer on its own (one call per tensor); [norm, lm_head]. A fill that reads
  // its source in order or continues one generator gives the same weights
  // however the calls group the tensors.
  using Fill = UnitFill;

  // Builds this rank's shards unit by unit: each of a layer's seven
  // projections is filled, converted to `dtype` on `device` and quantized
  // there exactly as model_quantize_nf4 quantizes a model of that dtype (so
  // the gathered codes are bit-identical to one-process quantization) and
  // freed before the next is filled, so that no more than one projection is
  // held in full precision; the layer's NF4 projections are then flattened
  // into records and cut to this rank's shard; the rest of the unit is dropped. `lora`:
  // the adapters the forward adds (every rank creates them from the same seed).
  // Every rank of `group` calls it and every method below in the same order.
  static Result<std::unique_ptr<ShardedQlora>> Create(const ModelConfig& config, at::ScalarType dtype,
                                                      const at::Device& device, const FsdpSetup& setup,
                                                      const TrainOptions& options, bool double_quant,
                                                      std::shared_ptr<const LoraAdapters> lora, const Fill& fill);
  ~ShardedQlora();

  // Logits (B,T,V) in the compute dtype for tokens (B,T), as described above.
  at::Tensor Forward(const at::Tensor& tokens);
  // The adapters the optimizer updates (of the adapters Create was given):
  // after a backward with gradient sync on, the .grad of each (undefined
  // counts as zero) is its SUM over the group's ranks. Each layer's are
  // reduced as the backward leaves the layer (fsdp_schedule.h), in the reduce
  // dtype. Call before the first backward.
  void SetTrainable(const std::vector<at::Tensor>& trainable);
  // Whether the next backward completes the step's gradients (its last
  // micro-batch): only then are the adapters' gradients reduced. Default true.
  void SetGradientSync(bool on) { schedule_.set_gradient_sync(on); }
  // The schedule of the units' collectives (tests trace it).
  FsdpSchedule& schedule() { return schedule_; }
  // The adapters the forward adds from now on (e.g. the merged adapter for eval).
  void UseAdapters(std::shared_ptr<const LoraAdapters> lora);
  // Every layer's seven NF4 projections, gathered (every rank calls it).
  std::vector<std::vector<Nf4Tensor>> GatherLayers();
  // Bytes of the base this rank keeps: the embedding and head slices, its NF4
  // shards and the replicated norms.
  int64_t base_bytes() const;
  // nf4_shard_bytes of one decoder layer for this group.
  int64_t layer_shard_bytes() const;

 private:
  explicit ShardedQlora(bool prefetch) : schedule_(prefetch) {}
  Model model_;  // config, rotary tables and the projection override; parameter tensors undefined
  std::shared_ptr<Nf4Projections> projections_;
  at::ScalarType dtype_ = at::kFloat;
  FsdpSetup setup_;
  TrainOptions options_;
  FsdpSchedule schedule_;
  Nf4UnitLayout layout_;
  std::shared_ptr<FrozenSlicedUnit> embed_, head_;  // after schedule_: they go first
  std::vector<std::shared_ptr<Nf4LayerUnit>> layers_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_QLORA_H_
