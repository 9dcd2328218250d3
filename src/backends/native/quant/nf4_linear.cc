#include "backends/native/quant/nf4_linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include "backends/native/quant/nf4_gemv.h"

namespace protocol {
namespace native {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Saved tensors, in this order (undefined when the form does not use them).
enum Saved { kPacked, kAbsmax, kAbsmaxCodes, kAbsmaxScales, kAbsmaxMean, kSavedCount };

class Nf4LinearFunction : public torch::autograd::Function<Nf4LinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Nf4Tensor& w) {
    ctx->save_for_backward({w.packed, w.absmax, w.absmax_codes, w.absmax_scales, w.absmax_mean});
    ctx->saved_data["shape"] = w.shape;
    ctx->saved_data["numel"] = w.numel;
    return at::linear(x, nf4_dequantize(w, x.scalar_type()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    Nf4Tensor w;
    w.packed = saved[kPacked];
    w.absmax = saved[kAbsmax];
    w.absmax_codes = saved[kAbsmaxCodes];
    w.absmax_scales = saved[kAbsmaxScales];
    w.absmax_mean = saved[kAbsmaxMean];
    w.shape = ctx->saved_data["shape"].toIntVector();
    w.numel = ctx->saved_data["numel"].toInt();
    const at::Tensor& grad_y = grad_outputs[0];
    at::Tensor grad_x = at::matmul(grad_y, nf4_dequantize(w, grad_y.scalar_type()));
    return {grad_x, at::Tensor()};  // x; the NF4 weight (not a tensor input: no gradient)
  }
};

static_assert(kSavedCount == 5, "save_for_backward lists five tensors");

}  // namespace

at::Tensor nf4_linear(const at::Tensor& x, const Nf4Tensor& w) {
  if (nf4_gemv_available(x, w)) return nf4_gemv(x, w);  // one decode row, under InferenceMode: no graph
  return Nf4LinearFunction::apply(x, w);
}

}  // namespace native
}  // namespace protocol
