#include "backends/native/distributed/outer_step.h"

#include <c10/core/GradMode.h>

#include "runner/base/text.h"

namespace protocol {
namespace native {
OuterStep::OuterStep(const std::vector<at::Tensor>& start, double outer_lr, double outer_momentum)
    : lr_(outer_lr), momentum_(outer_momentum) {
  c10::NoGradGuard no_grad;
  for (const at::Tensor& t : start) {
    shapes_.push_back(t.sizes().vec());
    if (plain()) continue;
    global_.push_back(t.detach().clone());
    if (momentum_ > 0) velocity_.push_back(at::zeros_like(global_.back()));
  }
}

Status OuterStep::Merge(std::vector<at::Tensor>& params, const Average& average) {
  if (params.size() != shapes_.size())
    return Status::InvalidArgument(
        fmt::format("merge of {} tensors, but the outer step was set up for {}", params.size(), shapes_.size()));
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].sizes().vec() != shapes_[i])
      return Status::InvalidArgument(fmt::format("merged tensor {} has shape {}, expected {}", i,
                                                 ShapeText(params[i].sizes().vec()), ShapeText(shapes_[i])));
    at::Tensor mean = params[i].detach().clone();
    average(mean);
    if (mean.sizes().vec() != shapes_[i])
      return Status::InvalidArgument(fmt::format("the average of tensor {} has shape {}, expected {}", i,
                                                 ShapeText(mean.sizes().vec()), ShapeText(shapes_[i])));
    if (plain()) {
      params[i].detach().copy_(mean);
      continue;
    }
    const at::Tensor delta = global_[i] - mean;  // Δ
    if (momentum_ > 0) {
      velocity_[i].mul_(momentum_).add_(delta);                  // v = μ·v + Δ
      global_[i].sub_(delta + velocity_[i] * momentum_, lr_);    // θ −= η·(Δ + μ·v)
    } else {
      global_[i].sub_(delta, lr_);  // θ −= η·Δ
    }
    params[i].detach().copy_(global_[i]);
  }
  return Status::Ok();
}

Result<LoraAdapters> StackGroupAdapters(LoraAdapters& mine, int groups, const GatherAcrossGroups& all_gather) {
  c10::NoGradGuard no_grad;
  at::Tensor flat = lora_flatten(mine);
  at::Tensor all = at::empty({groups * flat.numel()}, flat.options());
  all_gather(all, flat);
  std::vector<LoraAdapters> each;
  for (int i = 0; i < groups; ++i) each.push_back(lora_unflatten(mine, all.narrow(0, i * flat.numel(), flat.numel())));
  std::vector<const LoraAdapters*> views;
  for (const LoraAdapters& a : each) views.push_back(&a);
  return lora_merge_stack(views);
}

}  // namespace native
}  // namespace protocol
