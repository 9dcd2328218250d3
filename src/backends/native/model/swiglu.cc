#include "backends/native/model/swiglu.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace protocol {
namespace native {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The forward, with a graph or without: one expression, so a checkpointed
// layer's first pass and its recomputation are the same ops.
at::Tensor Gating(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

class SwiGluFunction : public torch::autograd::Function<SwiGluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return Gating(gate, up);
  }

  // The composite autograd's expressions: MulBackward's ĝ·up and ĝ·silu(gate)
  // (silu recomputed here: the same op on the same input, the same bits; a
  // product of two factors is the same either way round), then
  // SiluBackward's silu_backward. Each result is written over its own
  // temporary: one tensor of gate's size at a time beyond the two gradients,
  // where the composite's backward also held silu(gate) and a temporary.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& gate = saved[0];
    const at::Tensor& up = saved[1];
    const at::Tensor& g = grad_outputs[0];
    at::Tensor grad_gate, grad_up;
    if (ctx->needs_input_grad(1)) grad_up = at::silu(gate).mul_(g);
    if (ctx->needs_input_grad(0)) {
      grad_gate = g * up;
      at::silu_backward_out(grad_gate, grad_gate, gate);
    }
    return {grad_gate, grad_up};
  }
};

}  // namespace

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  if (c10::GradMode::is_enabled() && (gate.requires_grad() || up.requires_grad()))
    return SwiGluFunction::apply(gate, up);
  return Gating(gate, up);
}

}  // namespace native
}  // namespace protocol
