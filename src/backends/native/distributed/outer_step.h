#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_OUTER_STEP_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_OUTER_STEP_H_

// The share protocol's merge of G groups (DiLoCo, Douillard et al. 2023,
// "DiLoCo: Distributed Low-Communication Training of Language Models"), apart
// from the communication that averages across the groups:
//
//   Δ_g = θ_global − θ_g        each group's pseudo-gradient (outer gradient)
//   Δ   = mean over groups of Δ_g  (= θ_global − mean θ_g: θ_global is the same everywhere)
//   μ > 0:  v = μ·v + Δ,  θ_global −= η·(Δ + μ·v)          (Nesterov momentum)
//   μ = 0:  θ_global −= η·Δ
//
// with η the outer learning rate and μ the outer momentum. Every group
// continues from θ_global.
//
// What is sent (OpenDiLoCo, torchft local_sgd): one flat buffer of every
// merged tensor, in the merge dtype — the pseudo-gradients Δ_g, rounded once
// to it. The exception is plain averaging (η = 1, μ = 0) in float32: θ_g
// itself is averaged and no state is kept (θ_global = the mean, exactly).
// With η = 1, μ = 0 and a narrower merge dtype the pseudo-gradient is sent
// too, so that only the update, not the weights, is rounded.
//
// State (float32, one flat copy of the merged elements each): θ_global unless
// plain float32 averaging, the velocity v when μ > 0; on the host (the
// default, as torchft and PrimeIntellect's DiLoCo keep it; copied to and from
// the device tensor by tensor, only at a merge) or on the device. On the
// device during a merge: the flat buffer (merge dtype) and one tensor's
// float32 temporaries.

#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "backends/native/quant/lora.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct OuterStepOptions {
  double lr = 1.0;                           // η
  double momentum = 0.0;                     // μ
  bool state_on_host = true;                 // training.outer_state
  at::ScalarType merge_dtype = at::kFloat;   // training.merge_dtype, resolved
};

// Whether a merge sends the pseudo-gradient (and keeps θ_global): every case
// but plain float32 averaging (η = 1, μ = 0, merge dtype float32).
bool SendsPseudoGradient(double lr, double momentum, at::ScalarType merge_dtype);

class OuterStep {
 public:
  // In place: `flat` (one buffer of the merge dtype, on the tensors' device)
  // = its mean over the groups (e.g. one all-reduce SUM across groups, then a
  // division by G).
  using Average = std::function<void(at::Tensor& flat)>;

  // `start`: the tensors as every group starts (θ_global before the first
  // merge): float32, all on one device.
  OuterStep(const std::vector<at::Tensor>& start, const OuterStepOptions& options);

  // One merge: Send, `average`, Receive. Errors as theirs; `params` may then
  // be partly merged.
  Status Merge(std::vector<at::Tensor>& params, const Average& average);
  // The flat buffer this group sends: Δ_g of every tensor (or θ_g when
  // plain float32 averaging), in order, in the merge dtype. Errors
  // (kInvalidArgument): a count or a shape that differs from `start`'s.
  Result<at::Tensor> Send(const std::vector<at::Tensor>& params) const;
  // Applies the groups' mean of what they sent: every tensor of `params` is
  // set to the new θ_global. Errors: a mean of another size than Send's.
  Status Receive(std::vector<at::Tensor>& params, const at::Tensor& mean);

  bool plain() const { return options_.lr == 1.0 && options_.momentum == 0.0; }
  // Whether Δ_g is sent (and θ_global kept): every case but plain float32 averaging.
  bool sends_pseudo_gradient() const {
    return SendsPseudoGradient(options_.lr, options_.momentum, options_.merge_dtype);
  }
  int64_t elements() const { return elements_; }
  // Float32 bytes of the state: θ_global (when kept) and v (μ > 0).
  int64_t state_bytes() const;

 private:
  OuterStepOptions options_;
  std::vector<std::vector<int64_t>> shapes_;
  int64_t elements_ = 0;
  at::Tensor global_, velocity_;  // flat float32, on the host or the device
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
