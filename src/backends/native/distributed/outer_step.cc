#include "backends/native/distributed/outer_step.h"

#include <c10/core/GradMode.h>

#include "runner/base/text.h"

namespace protocol {
namespace native {
bool SendsPseudoGradient(double lr, double momentum, at::ScalarType merge_dtype) {
  return !(lr == 1.0 && momentum == 0.0) || merge_dtype != at::kFloat;
}

OuterStep::OuterStep(const std::vector<at::Tensor>& start, const OuterStepOptions& options) : options_(options) {
  c10::NoGradGuard no_grad;
  for (const at::Tensor& t : start) {
    shapes_.push_back(t.sizes().vec());
    elements_ += t.numel();
  }
  if (!sends_pseudo_gradient()) return;
  const at::Device device = options_.state_on_host || start.empty() ? at::Device(at::kCPU) : start[0].device();
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  global_ = at::empty({elements_}, f32);
  int64_t offset = 0;
  for (const at::Tensor& t : start) {
    global_.narrow(0, offset, t.numel()).copy_(t.detach().reshape({-1}));
    offset += t.numel();
  }
  if (options_.momentum > 0) velocity_ = at::zeros({elements_}, f32);
}

int64_t OuterStep::state_bytes() const {
  return 4 * ((global_.defined() ? elements_ : 0) + (velocity_.defined() ? elements_ : 0));
}

Result<at::Tensor> OuterStep::Send(const std::vector<at::Tensor>& params) const {
  if (params.size() != shapes_.size())
    return Status::InvalidArgument(
        fmt::format("merge of {} tensors, but the outer step was set up for {}", params.size(), shapes_.size()));
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].sizes().vec() != shapes_[i])
      return Status::InvalidArgument(fmt::format("merged tensor {} has shape {}, expected {}", i,
                                                 ShapeText(params[i].sizes().vec()), ShapeText(shapes_[i])));
  c10::NoGradGuard no_grad;
  const at::Device device = params.empty() ? at::Device(at::kCPU) : params[0].device();
  at::Tensor flat = at::empty({elements_}, at::TensorOptions().dtype(options_.merge_dtype).device(device));
  int64_t offset = 0;
  for (const at::Tensor& p : params) {
    const int64_t n = p.numel();
    at::Tensor theta = p.detach().reshape({-1});
    if (sends_pseudo_gradient())  // Δ_g = θ_global − θ_g in float32, rounded once to the merge dtype
      flat.narrow(0, offset, n).copy_(global_.narrow(0, offset, n).to(device) - theta.to(at::kFloat));
    else
      flat.narrow(0, offset, n).copy_(theta);
    offset += n;
  }
  return flat;
}

Status OuterStep::Receive(std::vector<at::Tensor>& params, const at::Tensor& mean) {
  if (mean.numel() != elements_ || params.size() != shapes_.size())
    return Status::InvalidArgument(fmt::format("the groups' mean has {} elements, expected {}", mean.numel(), elements_));
  c10::NoGradGuard no_grad;
  const at::Tensor flat = mean.reshape({-1});
  int64_t offset = 0;
  for (at::Tensor& p : params) {
    const int64_t n = p.numel();
    at::Tensor target = p.detach().view({-1});
    if (!sends_pseudo_gradient()) {
      target.copy_(flat.narrow(0, offset, n));  // θ_global = the mean
      offset += n;
      continue;
    }
    at::Tensor global = global_.narrow(0, offset, n);
    const at::Tensor delta = flat.narrow(0, offset, n).to(global.device(), at::kFloat);  // Δ
    if (options_.momentum > 0) {
      at::Tensor velocity = velocity_.narrow(0, offset, n);
      velocity.mul_(options_.momentum).add_(delta);                            // v = μ·v + Δ
      global.sub_(delta + velocity * options_.momentum, options_.lr);          // θ −= η·(Δ + μ·v)
    } else {
      global.sub_(delta, options_.lr);  // θ −= η·Δ
    }
    target.copy_(global);
    offset += n;
  }
  return Status::Ok();
}

Status OuterStep::Merge(std::vector<at::Tensor>& params, const Average& average) {
  Result<at::Tensor> sent = Send(params);
  if (!sent.ok()) return sent.status();
  at::Tensor flat = std::move(*sent);
  average(flat);
  return Receive(params, flat);
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
