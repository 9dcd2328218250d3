#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SHARDED_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SHARDED_H_

// Fully sharded data parallelism (FSDP FULL_SHARD, ZeRO-3) over one process
// group of W ranks, with torchtitan's mixed precision: float32 sharded master,
// gather and compute in the model's dtype, gradients reduced in float32.
//
// Units: the embedding; each decoder layer; [final norm + lm_head]. A unit's
// parameters are flattened in model_parameters order and padded to a multiple
// of W; S = padded / W. At rest rank i keeps, per unit, only
//   master   its float32 slice [i·S, (i+1)·S) of the flat parameters
//   m, v     the AdamW moments of that slice (float32)
//   grad     the slice's float32 gradient (master.grad(): from the first
//            backward of a step until Step, which frees it)
// i.e. 16 bytes per parameter / W (+ padding): no rank ever holds the whole
// model, also not while it is built (units are initialised or read one at a
// time) or saved (gathered and written one at a time).
//
// Forward (Forward: model_forward's straight line, unit by unit; each unit
// one autograd node, unit_function.h):
//   all-gather the unit in the compute dtype (float32 on CPU, bf16 on CUDA),
//   compute, free the gathered copy.
// Backward, unit by unit in reverse:
//   all-gather again; for a checkpointed decoder layer recompute its forward,
//   otherwise refill the storage its kept graph views; backward through the
//   unit; copy its gradients into a float32 flat buffer; reduce-scatter (SUM,
//   in float32) into this rank's slice, which autograd adds to master.grad
//   (so micro-batches accumulate in the slice); free.
// Step(lr): global L2 norm from an all-reduce of the slices' squared norms;
//   clipping; AdamW on the slice (decay only on elements of matrices).
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
// counts them, for a unit of S elements per rank and e bytes per element of
// the compute dtype:
//   forward all-gather        (W−1)·S·e
//   backward all-gather       (W−1)·S·e
//   reduce-scatter (float32)  (W−1)·S·4     — an all-reduce on libtorch 1.13
//                                              Gloo: 2·(W−1)·S·4
// and per step one all-reduce of the 8-byte squared norm (2·(W−1)/W·8).
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
#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/train.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

class ShardedUnit;

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
  // `comm` (the group's communicator) counts the bytes this rank sends.
  // Every rank of the group must call it, and every method below, in the same
  // order (they issue collectives). Errors: those of `fill`.
  static Result<std::unique_ptr<ShardedParams>> Create(const ModelConfig& config, at::ScalarType dtype,
                                                       const at::Device& device, Communicator& comm,
                                                       int group_rank, const TrainOptions& options, const Fill& fill);
  ~ShardedParams();

  // Logits (B,T,V) in the compute dtype for tokens (B,T), unit by unit as
  // described above. With grad mode on it builds the graph whose backward
  // reduce-scatters the gradients; without, it only gathers and computes.
  // A batch of zero sequences still takes part in every collective.
  at::Tensor Forward(const at::Tensor& tokens);
  // Clipping and AdamW on the slices from the gradients the backward passes
  // since the last Step accumulated. Returns the global gradient norm before
  // clipping; frees the gradient slices.
  double Step(double lr);
  // Gathers every unit (no grad) and, on the rank with `write`, saves the
  // model as model_save does (config.json + one model.safetensors in the
  // compute dtype), one unit at a time. Every rank of the group must call it.
  Status Save(const std::string& dir, bool write);

  // This rank's float32 master slices, one per unit (share merges average them in place).
  std::vector<at::Tensor>& shards() { return masters_; }
  int64_t shard_elements() const;
  const Model& skeleton() const { return model_; }

 private:
  ShardedParams() = default;
  Model model_;  // config and rotary tables; its parameter tensors stay undefined
  at::ScalarType dtype_ = at::kFloat;
  Communicator* comm_ = nullptr;  // counts the bytes this rank sends
  int world_ = 1;
  TrainOptions options_;
  std::vector<std::shared_ptr<ShardedUnit>> units_;  // embedding, layers 0..L-1, head
  std::vector<at::Tensor> masters_;
  std::vector<at::Tensor> m_, v_;
  int64_t t_ = 0;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SHARDED_H_
