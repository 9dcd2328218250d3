#ifndef PROTOCOL_BACKENDS_NATIVE_FSDP_SHARDED_H_
#define PROTOCOL_BACKENDS_NATIVE_FSDP_SHARDED_H_

// Fully sharded parameters over one process group of W ranks (FSDP, ZeRO-3
// layout): the parameters are flattened per unit — one unit per decoder layer,
// plus one for the embedding, final norm and lm_head — each unit padded to a
// multiple of W, and rank i keeps the float32 slice [i·S, (i+1)·S) of it
// (S = padded/W) with its AdamW moments. Per step:
//
//   Gather()            all-gather every unit (in the model's dtype) into the
//                       model's full tensors; they stay until the backward pass
//                       ends (FSDP's "no reshard after forward": one gather per
//                       step serves forward and backward)
//   forward/backward    on this rank's slice of the global batch, loss divided by
//                       the counted targets of the GLOBAL batch
//   Step(lr)            reduce-scatter (SUM) each unit's gradient → this rank's
//                       slice of the global gradient; global L2 norm from an
//                       all-reduce of the slices' squared norms; clip; AdamW on
//                       the slice (decay only on elements of matrices)
//
// The sum of per-rank gradients is exactly the one-process gradient of the
// global batch, so W ranks follow the one-process trajectory up to float
// rounding (tests/dist_fsdp_test.cc states the tolerance).

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "backends/native/model.h"
#include "backends/native/torch_compat.h"
#include "backends/native/train.h"

namespace protocol {
namespace native {

class ShardedParams {
 public:
  // Takes this rank's slices of `model`'s current (identical on every rank)
  // weights. `bytes` accumulates the bytes this rank sends in `group`.
  ShardedParams(Model& model, compat::CommGroup& group, int group_rank, const TrainOptions& options, int64_t* bytes);

  void Gather();
  // Gradient reduce-scatter, clipping and AdamW. Returns the global gradient
  // norm before clipping.
  double Step(double lr);
  // This rank's float32 parameter slices, one per unit (merges average them).
  std::vector<at::Tensor>& shards() { return master_; }
  int64_t shard_elements() const;

 private:
  struct Unit {
    std::vector<at::Tensor*> params;
    int64_t numel = 0, padded = 0, shard = 0;
  };
  Model& model_;
  compat::CommGroup& group_;
  int group_rank_;
  int world_;
  TrainOptions options_;
  int64_t* bytes_;
  std::vector<Unit> units_;
  std::vector<at::Tensor> master_, m_, v_, decay_;
  int64_t t_ = 0;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_FSDP_SHARDED_H_
