// The model's RMSNorm (rms_norm.h): its forward is the composite ops' bits;
// its closed-form backward agrees with central differences in float64 and
// with autograd through the composite ops in float32 and bfloat16. On the CPU
// rms_norm is the closed form; libtorch's fused kernel, for CUDA tensors, is
// checked in tests/backends/gpu_test.cc.
#include "native_test_support.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "autograd_reference.h"
#include "backends/native/model/rms_norm.h"
#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

using testing::AutogradOf;
using testing::AutogradResult;
using testing::CompositeRmsNorm;
using testing::RelativeMaxError;

bool SameValues(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b);
}

// y = rms_norm(x, w) or the composite ops', and the gradients of Σ y·g:
// grad_a for x, grad_b for w.
AutogradResult Run(const at::Tensor& x, const at::Tensor& w, const at::Tensor& g, bool composite) {
  return AutogradOf(
      [composite](const at::Tensor& xi, const at::Tensor& wi) {
        return composite ? CompositeRmsNorm(xi, wi, 1e-5) : rms_norm(xi, wi, 1e-5);
      },
      x, w, g);
}

TEST_CASE("rms_norm: the forward is the composite ops' bits, with and without a graph") {
  at::manual_seed(1);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const at::Tensor x = (at::randn({3, 5, 64}, at::kFloat) * 3).to(dtype);
    const at::Tensor w = (1 + at::randn({64}, at::kFloat) * 0.1).to(dtype);
    CHECK(SameValues(rms_norm(x, w, 1e-5), CompositeRmsNorm(x, w, 1e-5)));
    const AutogradResult fused = Run(x, w, at::randn({3, 5, 64}, at::kDouble), false);
    CHECK(SameValues(fused.y, CompositeRmsNorm(x, w, 1e-5)));
  }
}

TEST_CASE("rms_norm: the backward equals central differences in float64") {
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 3, 8}, at::kDouble);
  const at::Tensor w = 1 + at::randn({8}, at::kDouble) * 0.1;
  const at::Tensor g = at::randn({2, 3, 8}, at::kDouble);
  const AutogradResult analytic = Run(x, w, g, false);
  auto loss = [&](const at::Tensor& xi, const at::Tensor& wi) { return (rms_norm(xi, wi, 1e-5) * g).sum().item<double>(); };
  const double h = 1e-6;
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    at::Tensor plus = x.clone(), minus = x.clone();
    plus.view({-1})[i] += h;
    minus.view({-1})[i] -= h;
    const double numeric = (loss(plus, w) - loss(minus, w)) / (2 * h);
    worst = std::max(worst, std::abs(numeric - analytic.grad_a.view({-1})[i].item<double>()));
  }
  for (int64_t i = 0; i < w.numel(); ++i) {
    at::Tensor plus = w.clone(), minus = w.clone();
    plus[i] += h;
    minus[i] -= h;
    const double numeric = (loss(x, plus) - loss(x, minus)) / (2 * h);
    worst = std::max(worst, std::abs(numeric - analytic.grad_b[i].item<double>()));
  }
  MESSAGE("largest |analytic − central difference|: " << worst);
  CHECK(worst < 1e-7);
}

TEST_CASE("rms_norm: gradients equal autograd through the composite ops within their dtype's rounding") {
  at::manual_seed(3);
  struct Case {
    at::ScalarType dtype;
    double tolerance;  // max |Δ| / max |reference|
  };
  for (Case c : {Case{at::kFloat, 1e-5}, Case{at::kBFloat16, 2e-2}}) {
    CAPTURE(std::string(c10::toString(c.dtype)));
    const at::Tensor x = (at::randn({4, 7, 96}, at::kFloat) * 2).to(c.dtype);
    const at::Tensor w = (1 + at::randn({96}, at::kFloat) * 0.1).to(c.dtype);
    const at::Tensor g = at::randn({4, 7, 96}, at::kDouble);
    const AutogradResult fused = Run(x, w, g, false), composite = Run(x, w, g, true);
    auto check = [&](const at::Tensor& got, const at::Tensor& want) {
      REQUIRE((got.scalar_type() == c.dtype));
      CHECK(RelativeMaxError(got, want) < c.tolerance);
    };
    check(fused.grad_a, composite.grad_a);
    check(fused.grad_b, composite.grad_b);
  }
}

TEST_CASE("rms_norm: no graph without grad mode, or when nothing requires a gradient") {
  const at::Tensor x = at::randn({2, 16}, at::kFloat), w = at::ones({16}, at::kFloat);
  CHECK_FALSE(rms_norm(x, w, 1e-5).requires_grad());
  at::Tensor wg = w.clone().requires_grad_(true);
  CHECK(rms_norm(x, wg, 1e-5).requires_grad());
  c10::NoGradGuard no_grad;
  CHECK_FALSE(rms_norm(x, wg, 1e-5).requires_grad());
}

TEST_CASE("rms_norm: on the CPU it is the closed form, never libtorch's fused kernel") {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const at::Tensor x = at::randn({4, 32}, at::kFloat).to(dtype), w = at::ones({32}, dtype);
    CHECK_FALSE(compat::AtenFusedRmsNormAvailable(x, w));
    const at::Tensor xg = x.clone().requires_grad_(true);
    const at::Tensor y = rms_norm(xg, w, 1e-5), closed = rms_norm_closed_form(xg, w, 1e-5);
    CHECK(SameValues(y, closed));
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(y.grad_fn()->name() == closed.grad_fn()->name());
  }
}

}  // namespace
}  // namespace native
}  // namespace protocol
