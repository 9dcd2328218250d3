#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SHARDED_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SHARDED_H_

// Fully sharded data parallelism over the W ranks of one FSDP group, with
// PyTorch FSDP's mixed precision (accelerate's bf16 policy): float32 sharded
// master, gather and compute in the model's dtype, gradients reduced in
// FsdpSetup::reduce_dtype (the compute dtype by default). Two shardings
// (training.sharding):
//   full     (FULL_SHARD, ZeRO-3) every unit sharded over the W ranks: W' = W
//   hybrid   (HYBRID_SHARD) sharded over the W' = S ranks of each node and
//            replicated over the R nodes; after a unit's reduce-scatter within
//            the node, its gradient slice is all-reduced across the replicas
//            (on the last micro-batch of a step), so only gradient slices
//            cross between nodes
// When each collective is issued and waited: fsdp_schedule.h (prefetch).
//
// Units: the embedding; each decoder layer; [final norm + lm_head]. A unit's
// parameters are flattened in model_parameters order and padded to a multiple
// of W'; S = padded / W'. At rest rank i (of W') keeps, per unit, only
//   master   its float32 slice [i·S, (i+1)·S) of the flat parameters
//   m, v     the AdamW moments of that slice (float32)
//   grad     the slice's float32 gradient (master.grad(): from the first
//            backward of a step until Step, which frees it)
// i.e. 16 bytes per parameter / W' (+ padding): no rank ever holds the whole
// model, also not while it is built (units are initialised or read one at a
// time) or saved (gathered and written one at a time).
//
// Forward (Forward: model_forward's straight line, unit by unit; each unit
// one autograd node, unit_function.h):
//   all-gather the unit in the compute dtype (float32 on CPU, bf16 on CUDA),
//   compute, free the gathered copy (the head stays gathered for the backward).
// Backward, unit by unit in reverse:
//   all-gather again (not the head: kept; not the embedding: its backward
//   reads no weight); for a checkpointed decoder layer recompute its forward,
//   otherwise refill the storage its kept graph views; backward through the
//   unit; copy its gradients into a flat buffer in the reduce dtype;
//   reduce-scatter (SUM) into this rank's slice, which is added to master.grad
//   once it arrived (so micro-batches accumulate in the slice); free.
// Step(lr): global L2 norm from an all-reduce of the slices' squared norms
//   (over the shard group: replicas hold the same slices); clipping; AdamW on
//   the slice (decay only on elements of matrices).
//
// Activation checkpointing (TrainOptions::checkpoint_every, layer_checkpointed
// in train.h). Per decoder layer between its forward and its backward:
//   checkpointed   its input activation (B,T,C) only
//   not            its input and internal activations (the autograd graph),
//                  with the gathered parameters' storage freed (PyTorch FSDP's
//                  resharding after forward) and re-gathered before backward
// The embedding and head units always keep their (small) graphs this way.
// Transient on top of the state at rest: one unit gathered in the forward;
// in a unit's backward its gathered parameters, their gradients and the
// float32 flat gradient (about three units' worth).
//
// Collectives of one micro-batch (forward + backward), bytes as torch_compat.h
// counts them, for a unit of S elements per rank, e bytes per element of the
// compute dtype and r of the reduce dtype:
//   forward all-gather        (W'−1)·S·e
//   backward all-gather       (W'−1)·S·e   every unit but the embedding and the head
//   reduce-scatter            (W'−1)·S·r   — an all-reduce on libtorch 1.13
//                                             Gloo: 2·(W'−1)·S·r
//   hybrid, last micro-batch  2·(R−1)/R·S·r  all-reduce across the replicas
// and per step one all-reduce of the 8-byte squared norm (2·(W'−1)/W'·8).
// A forward without grad mode (eval, Save) gathers each unit once.
//
// The sum of the ranks' gradients is exactly the one-process gradient of the
// global batch, so W ranks follow the one-process trajectory up to float
// rounding (tests/native/distributed/dist_fsdp_test.cc states the tolerance).
//
// Extending the units: a unit is a UnitParameters (unit_function.h) over a
// flat payload. A frozen 4-bit layer would be a unit whose payload is its NF4
// codes and scales as raw bytes (uint8, gathered as is, no gradient slice);
// its replicated LoRA adapters are ordinary leaves the unit's compute uses,
// whose .grad the unit backward fills and the caller all-reduces.

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/model/model.h"
#include "backends/native/distributed/communicator.h"
#include "backends/native/distributed/fsdp_schedule.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/train.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

class ShardedUnit;

// Where and how a sharded model communicates.
struct FsdpSetup {
  // The ranks each unit is sharded over (rank() is this rank's slice): the
  // whole group, or with hybrid sharding the group's ranks on this node.
  Communicator* shard = nullptr;
  // Hybrid sharding over R > 1 nodes: the ranks holding the same slice on the
  // other nodes, where gradient slices are all-reduced. Null otherwise.
  Communicator* replica = nullptr;
  bool prefetch = true;                      // training.prefetch (fsdp_schedule.h)
  at::ScalarType reduce_dtype = at::kFloat;  // the dtype gradients are reduced in
};

// A unit's all-gather over setup.shard: every rank's `shard` into `buffer`
// (a fresh tensor, or compat::StorageRefill of a released one, so that the
// views autograd saved read the gathered bytes again), issued and not waited for.
InFlightGather IssueUnitGather(const FsdpSetup& setup, at::Tensor buffer, const at::Tensor& shard);

// Sets the full float32 CPU tensors of one unit's parameters (allocated by
// the caller): called for each unit in model_parameters order, so a seeded
// initialisation can continue one generator (parameters_init_random) and
// give exactly model_init_random's weights.
using UnitFill = std::function<Status(const std::vector<NamedParameter>&)>;

// A unit's parameters flattened in order and zero-padded to a multiple of W
// (padded = shard·W): what a rank takes its slice [rank·shard, (rank+1)·shard) of.
struct FlatUnit {
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    int64_t offset = 0, numel = 0;  // in the flat parameters
  };
  std::vector<Entry> entries;
  int64_t numel = 0, padded = 0, shard = 0;
  at::Tensor full;  // float32 (padded), CPU
  // The unit's tensors as views of a flat buffer of `padded` elements (a gathered unit).
  std::vector<at::Tensor> Views(const at::Tensor& buffer) const;
};
// Allocates `params` (float32, CPU), sets them with `fill`, flattens them into
// a FlatUnit and releases them: the unit exists in full only in the result's
// `full`. Errors: those of `fill`.
Result<FlatUnit> unit_flatten_filled(const std::vector<NamedParameter>& params, int world, const UnitFill& fill);

class ShardedParams {
 public:
  using Fill = UnitFill;

  // Builds this rank's slices unit by unit: each unit is materialised in full
  // (float32, CPU) only while `fill` sets it and its slice is taken.
  // `dtype`/`device`: the compute dtype and the device of the shards.
  // `setup`'s communicators count the bytes this rank sends; they must outlive
  // the result. Every rank of the group must call it, and every method below,
  // in the same order (they issue collectives). Errors: those of `fill`.
  static Result<std::unique_ptr<ShardedParams>> Create(const ModelConfig& config, at::ScalarType dtype,
                                                       const at::Device& device, const FsdpSetup& setup,
                                                       const TrainOptions& options, const Fill& fill);
  ~ShardedParams();

  // Logits (B,T,V) in the compute dtype for tokens (B,T), unit by unit as
  // described above. With grad mode on it builds the graph whose backward
  // reduce-scatters the gradients; without, it only gathers and computes.
  // A batch of zero sequences still takes part in every collective.
  at::Tensor Forward(const at::Tensor& tokens);
  // Whether the next backward completes the step's gradients (its last
  // micro-batch): only then are gradient slices all-reduced across replicas
  // (hybrid sharding). Default true.
  void SetGradientSync(bool on) { schedule_.set_gradient_sync(on); }
  // Clipping and AdamW on the slices from the gradients the backward passes
  // since the last Step accumulated. Returns the global gradient norm before
  // clipping, a float64 scalar tensor on the device (nothing is read back);
  // frees the gradient slices.
  at::Tensor Step(double lr);
  // Gathers every unit (no grad) and, on the rank with `write`, saves the
  // model as model_save does (config.json + one model.safetensors in the
  // compute dtype), one unit at a time. Every rank of the group must call it.
  Status Save(const std::string& dir, bool write);

  // This rank's float32 master slices, one per unit (share merges average them in place).
  std::vector<at::Tensor>& shards() { return masters_; }
  int64_t shard_elements() const;
  const Model& skeleton() const { return model_; }
  // The schedule of the units' collectives (tests trace it).
  FsdpSchedule& schedule() { return schedule_; }

 private:
  explicit ShardedParams(bool prefetch) : schedule_(prefetch) {}
  Model model_;  // config and rotary tables; its parameter tensors stay undefined
  at::ScalarType dtype_ = at::kFloat;
  FsdpSetup setup_;
  TrainOptions options_;
  FsdpSchedule schedule_;
  std::vector<std::shared_ptr<ShardedUnit>> units_;  // embedding, layers 0..L-1, head
  std::vector<at::Tensor> masters_;
  std::vector<at::Tensor> m_, v_;
  int64_t t_ = 0;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SHARDED_H_
