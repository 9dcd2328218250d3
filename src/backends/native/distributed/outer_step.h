#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_OUTER_STEP_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_OUTER_STEP_H_

// The share protocol's merge of G groups (DiLoCo, Douillard et al. 2023,
// "DiLoCo: Distributed Low-Communication Training of Language Models"), apart
// from the communication that averages the groups' tensors:
//
//   Δ = θ_global − mean over groups of θ_group             (the outer gradient)
//   μ > 0:  v = μ·v + Δ,  θ_global −= η·(Δ + μ·v)          (Nesterov momentum)
//   μ = 0:  θ_global −= η·Δ
//
// with η the outer learning rate and μ the outer momentum. η = 1, μ = 0 is
// plain averaging: θ_global = the mean, and no state is kept. Every group
// continues from θ_global. Memory: a copy of the merged tensors (θ_global)
// unless plain averaging, and the velocity v when μ > 0.

#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "backends/native/quant/lora.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

class OuterStep {
 public:
  // In place: `tensor` = its mean over the groups (e.g. an all-reduce SUM
  // across groups, then a division by G). Called once per merged tensor, in order.
  using Average = std::function<void(at::Tensor& tensor)>;

  // `start`: the tensors as every group starts (θ_global before the first merge).
  OuterStep(const std::vector<at::Tensor>& start, double outer_lr, double outer_momentum);

  // One merge: averages each tensor of `params` (this group's θ) with `average`
  // and sets it to the new θ_global. Errors (kInvalidArgument): a count or a
  // shape that differs from `start`'s, or an average that changed a shape;
  // `params` may then be partly merged.
  Status Merge(std::vector<at::Tensor>& params, const Average& average);

  bool plain() const { return lr_ == 1.0 && momentum_ == 0.0; }

 private:
  double lr_, momentum_;
  std::vector<at::Tensor> global_, velocity_;
  std::vector<std::vector<int64_t>> shapes_;
};

// The exact late merge of the groups' LoRA adapters: `all_gather(all, flat)`
// fills `all` (G·flat.numel() elements) with every group's flattened adapters
// in group order (an all-gather across groups); the result stacks them
// (lora_merge_stack: rank G·r, ΔW = mean over groups of each group's ΔW).
using GatherAcrossGroups = std::function<void(at::Tensor& all, const at::Tensor& flat)>;
Result<LoraAdapters> StackGroupAdapters(LoraAdapters& mine, int groups, const GatherAcrossGroups& all_gather);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_OUTER_STEP_H_
