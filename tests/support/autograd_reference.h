#ifndef PROTOCOL_TESTS_AUTOGRAD_REFERENCE_H_
#define PROTOCOL_TESTS_AUTOGRAD_REFERENCE_H_

// The references the training step's hand-written autograd functions
// (rms_norm.h, swiglu.h) are held to: the composite ATen ops they replace,
// whose gradients autograd derives, and one runner that takes y = f(a, b)
// and autograd's gradients on fresh leaves. Used on the CPU
// (tests/native/model) and on CUDA (tests/backends/gpu_test.cc) alike.
//
// Include after native_test_support.h (ATen before doctest).

#include <ATen/ATen.h>

#include <functional>

namespace protocol::testing {

// RMSNorm as the model ran it before rms_norm.h (and still does without grad
// mode): y = w ⊙ (x / √(mean(x²) + ε)), the normalization in float32 (float64
// for a float64 x), cast back to x's dtype before the weight.
inline at::Tensor CompositeRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xs = x.to(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  const at::Tensor inv_rms = at::rsqrt(xs.pow(2).mean({-1}, /*keepdim=*/true) + eps);
  return weight * (xs * inv_rms).to(x.scalar_type());
}

// SwiGLU's gating as composite ops: silu(gate) ⊙ up.
inline at::Tensor CompositeSwiglu(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

// y = f(a, b) and autograd's gradients of Σ y ⊙ g with respect to a and b.
struct AutogradResult {
  at::Tensor y, grad_a, grad_b;
};

using BinaryOp = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

// Runs f on fresh leaves copied from a0 and b0 and back-propagates g, cast
// to y's dtype (the gradient y.to(g's dtype) ⊙ g would pass back to y).
// The inputs are left untouched.
inline AutogradResult AutogradOf(const BinaryOp& f, const at::Tensor& a0, const at::Tensor& b0, const at::Tensor& g) {
  const at::Tensor a = a0.detach().clone().requires_grad_(true);
  const at::Tensor b = b0.detach().clone().requires_grad_(true);
  const at::Tensor y = f(a, b);
  y.backward(g.to(y.scalar_type()));
  return {y.detach(), a.grad(), b.grad()};
}

// max |got − want| / max |want|, computed in float64: how the gradients of two
// summation orders are compared against their dtype's rounding.
inline double RelativeMaxError(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor a = got.to(at::kDouble), b = want.to(at::kDouble);
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_AUTOGRAD_REFERENCE_H_
