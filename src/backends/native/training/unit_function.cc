#include "backends/native/training/unit_function.h"

// The one place that includes libtorch's autograd-function headers (present in
// libtorch 1.13 and 2.x alike).
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>

namespace protocol {
namespace native {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One application of a unit: what its backward needs.
struct UnitCall : torch::CustomClassHolder {
  UnitCompute compute;
  std::shared_ptr<UnitParameters> params;
  UnitMode mode = UnitMode::kRecompute;
  bool x_requires_grad = false;  // x is a differentiable activation (not tokens, not a frozen prefix's output)
  UnitTensors tensors;  // kKeepGraph: the gathered tensors (data freed between forward and backward)
  at::Tensor x_in, y;   // kKeepGraph: the unit's graph, from its detached input to its output
};

// x_in for the unit's own graph: x detached, a leaf that collects dL/dx when x is differentiable.
at::Tensor GraphInput(const at::Tensor& x, bool requires_grad) {
  at::Tensor x_in = x.detach();
  if (requires_grad) x_in.requires_grad_(true);
  return x_in;
}

struct UnitFunction : torch::autograd::Function<UnitFunction> {
  // Inputs: x; an anchor that always requires grad (so that backward runs);
  // the parameters' stand-ins (params->Inputs()); the call (not a tensor).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& anchor,
                               at::TensorList inputs, const c10::intrusive_ptr<UnitCall>& call) {
    UnitCall& c = *call;
    ctx->saved_data["call"] = c10::IValue::make_capsule(call);
    c.x_requires_grad = x.is_floating_point() && x.requires_grad();
    if (c.mode == UnitMode::kRecompute) {
      ctx->save_for_backward({x});
      UnitTensors t = c.params->Gather(UnitPass::kForward);  // dropped at the end of this scope
      return {c.compute(x, t.params)};
    }
    // kKeepGraph: build the unit's graph here (the node runs forward without grad mode).
    at::AutoGradMode grad_mode(true);
    c.x_in = GraphInput(x, c.x_requires_grad);
    c.tensors = c.params->Gather(UnitPass::kForward);
    c.y = c.compute(c.x_in, c.tensors.params);
    c.params->Free(c.tensors);
    return {c.y.detach()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    c10::intrusive_ptr<torch::CustomClassHolder> holder = ctx->saved_data["call"].toCapsule();
    UnitCall& c = *static_cast<UnitCall*>(holder.get());
    at::Tensor x_in, y;
    {
      at::AutoGradMode grad_mode(true);
      if (c.mode == UnitMode::kRecompute) {
        x_in = GraphInput(ctx->get_saved_variables()[0], c.x_requires_grad);
        c.tensors = c.params->Gather(UnitPass::kBackward);
        y = c.compute(x_in, c.tensors.params);
      } else {
        c.params->Refill(c.tensors);
        x_in = c.x_in;
        y = c.y;
        c.x_in = c.y = at::Tensor();
      }
    }
    // Backward through the unit's own graph: dL/dx into x_in.grad, parameter
    // gradients into the leaves' .grad.
    if (y.requires_grad()) torch::autograd::backward({y}, {grad_outputs[0]});
    at::Tensor grad_x = x_in.requires_grad() ? x_in.grad() : at::Tensor();
    x_in = y = at::Tensor();
    std::vector<at::Tensor> input_grads = c.params->ReduceGradients(c.tensors);
    c.tensors = UnitTensors{};
    variable_list out = {grad_x, at::Tensor()};
    out.insert(out.end(), input_grads.begin(), input_grads.end());
    out.push_back(at::Tensor());  // the call
    return out;
  }
};

}  // namespace

at::Tensor unit_apply(UnitCompute compute, const at::Tensor& x, std::shared_ptr<UnitParameters> params, UnitMode mode) {
  if (!at::GradMode::is_enabled()) {  // eval / inference: no graph, nothing kept
    UnitTensors t = params->Gather(UnitPass::kForwardOnly);
    return compute(x, t.params);
  }
  std::vector<at::Tensor> inputs = params->Inputs();
  auto call = c10::make_intrusive<UnitCall>();
  call->compute = std::move(compute);
  call->params = std::move(params);
  call->mode = mode;
  at::Tensor anchor = at::empty({0}, x.options().dtype(at::kFloat)).requires_grad_(true);
  return UnitFunction::apply(x, anchor, at::TensorList(inputs), call)[0];
}

void LocalParameters::Free(UnitTensors&) {
  throw std::logic_error("unit_apply: kKeepGraph needs parameters that can be freed and re-gathered (FSDP units)");
}
void LocalParameters::Refill(UnitTensors&) {
  throw std::logic_error("unit_apply: kKeepGraph needs parameters that can be freed and re-gathered (FSDP units)");
}

}  // namespace native
}  // namespace protocol
