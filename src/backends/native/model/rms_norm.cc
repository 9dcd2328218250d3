#include "backends/native/model/rms_norm.h"

#include <torch/csrc/autograd/custom_function.h>

#include "backends/native/platform/torch_compat.h"

#include <c10/core/GradMode.h>

namespace protocol {
namespace native {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// float64 for float64 x, float32 otherwise (no at::promote_types: it is a dispatched op, counted per layer).
at::ScalarType StatisticDtype(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// n = x_s · r; r (..., 1) into *inv_rms.
at::Tensor Normalize(const at::Tensor& x, double eps, at::Tensor* inv_rms) {
  at::Tensor xs = x.to(StatisticDtype(x));
  *inv_rms = at::rsqrt(xs.pow(2).mean({-1}, /*keepdim=*/true) + eps);
  return xs * *inv_rms;
}

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps) {
    at::Tensor inv_rms;
    at::Tensor n = Normalize(x, eps, &inv_rms);
    ctx->save_for_backward({x, weight, inv_rms});
    return weight * n.to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& inv_rms = saved[2];
    const at::Tensor& g = grad_outputs[0];
    const at::Tensor n = x.to(StatisticDtype(x)) * inv_rms;  // the forward's n, recomputed by the same ops
    at::Tensor grad_x, grad_weight;
    if (ctx->needs_input_grad(0)) {
      const at::Tensor gn = (g * weight).to(n.scalar_type());
      grad_x = (inv_rms * (gn - n * (gn * n).mean({-1}, /*keepdim=*/true))).to(x.scalar_type());
    }
    if (ctx->needs_input_grad(1)) grad_weight = (g * n.to(x.scalar_type())).reshape({-1, weight.numel()}).sum(0);
    return {grad_x, grad_weight, at::Tensor()};
  }
};

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (compat::AtenFusedRmsNormAvailable(x, weight)) return compat::AtenFusedRmsNorm(x, weight, eps);
  return rms_norm_closed_form(x, weight, eps);
}

at::Tensor rms_norm_closed_form(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (c10::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()))
    return RmsNormFunction::apply(x, weight, eps);
  at::Tensor inv_rms;
  return weight * Normalize(x, eps, &inv_rms).to(x.scalar_type());
}

}  // namespace native
}  // namespace protocol
