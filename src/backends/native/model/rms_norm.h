#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_RMS_NORM_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_RMS_NORM_H_

// RMSNorm (Zhang & Sennrich 2019) as the model trains it:
//   y = weight · cast(x_s · r),   x_s = x in s,   r = 1/√(mean(x_s²) + eps)
// where s, the statistic's dtype, is float32 for float32/bfloat16/float16 x
// (as Hugging Face's LlamaRMSNorm takes it) and float64 for float64 x, and
// cast rounds back to x's dtype.
//
// With gradients required it is one autograd function whose backward is the
// closed form (n = x_s · r, g_n = cast_s(g · weight)):
//   ∂L/∂x      = cast(r · (g_n − n · mean(g_n · n)))
//   ∂L/∂weight = Σ over rows of g · cast(n)
// It saves x, weight and r (one value per row), nothing else: the composite
// ops' graph also kept x_s (a float32 copy of x, 4 bytes per element, for
// bfloat16 x) and cast(n) (another copy of x's size), and ran about twice as
// many kernels in backward. The forward's values are the composite's, bit for
// bit; the backward's differ from composite autograd's by the rounding of a
// reordered float32 sum.
//
// On CUDA, where libtorch has RMSNorm as one fused kernel with a fused
// backward (torch_compat.h: AtenFusedRmsNormAvailable, libtorch 2.9 on), that
// kernel serves instead: one kernel forward and a fused backward, where the
// function above runs about eight ops forward and a dozen backward. It saves
// the same (x, weight and one inverse RMS per row); its values may differ
// from the form above by one rounding to x's dtype (tests/backends/gpu_test.cc
// bounds the difference).

#include <ATen/ATen.h>

namespace protocol {
namespace native {

// x (..., C), weight (C) → (..., C) in x's dtype. Differentiable in x and
// weight (as they require). libtorch's fused kernel where it has one for x,
// rms_norm_closed_form otherwise.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
// The form above on every device: the autograd function where a gradient is
// asked for; without grad mode, plain ops and no graph.
at::Tensor rms_norm_closed_form(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_RMS_NORM_H_
