// SwiGLU's gating (swiglu.h): the composite ops' forward and gradients, bit
// for bit, the backward against central differences, and a graph that keeps
// gate and up only.
#include "native_test_support.h"

#include <c10/core/GradMode.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autograd_reference.h"
#include "backends/native/model/swiglu.h"
#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

using testing::AutogradOf;
using testing::AutogradResult;
using testing::CompositeSwiglu;

// silu(gate)·up through swiglu or the composite ops.
at::Tensor Gating(const at::Tensor& gate, const at::Tensor& up, bool composite) {
  return composite ? CompositeSwiglu(gate, up) : swiglu(gate, up);
}

// y = silu(gate)·up through swiglu or the composite ops, and the gradients of
// Σ y·g: grad_a for gate, grad_b for up.
AutogradResult Run(const at::Tensor& gate, const at::Tensor& up, const at::Tensor& g, bool composite) {
  return AutogradOf([composite](const at::Tensor& a, const at::Tensor& b) { return Gating(a, b, composite); }, gate,
                    up, g);
}

TEST_CASE("swiglu: forward and gradients are autograd's through the composite ops, bit for bit") {
  at::manual_seed(2);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const at::Tensor gate = (at::randn({4, 9, 64}) * 4).to(dtype), up = at::randn({4, 9, 64}).to(dtype);
    const at::Tensor g = at::randn({4, 9, 64}).to(dtype);
    const AutogradResult fused = Run(gate, up, g, false), composite = Run(gate, up, g, true);
    CHECK(at::equal(fused.y, composite.y));
    CHECK(at::equal(fused.grad_a, composite.grad_a));
    CHECK(at::equal(fused.grad_b, composite.grad_b));
    c10::NoGradGuard no_grad;  // a checkpointed layer's first pass: the same bits
    CHECK(at::equal(swiglu(gate, up), composite.y));
  }
}

TEST_CASE("swiglu: the backward equals central differences in float64") {
  at::manual_seed(3);
  const at::Tensor gate = at::randn({2, 3, 8}, at::kDouble) * 3, up = at::randn({2, 3, 8}, at::kDouble);
  const at::Tensor g = at::randn({2, 3, 8}, at::kDouble);
  const AutogradResult analytic = Run(gate, up, g, false);
  auto loss = [&](const at::Tensor& gi, const at::Tensor& ui) { return (swiglu(gi, ui) * g).sum().item<double>(); };
  const double h = 1e-6;
  double worst = 0;
  for (int64_t i = 0; i < gate.numel(); ++i) {
    for (int which = 0; which < 2; ++which) {
      const at::Tensor& x = which == 0 ? gate : up;
      at::Tensor plus = x.clone(), minus = x.clone();
      plus.view({-1})[i] += h;
      minus.view({-1})[i] -= h;
      const double numeric = which == 0 ? (loss(plus, up) - loss(minus, up)) / (2 * h)
                                        : (loss(gate, plus) - loss(gate, minus)) / (2 * h);
      const at::Tensor& a = which == 0 ? analytic.grad_a : analytic.grad_b;
      worst = std::max(worst, std::abs(numeric - a.view({-1})[i].item<double>()));
    }
  }
  MESSAGE("largest |analytic − central difference|: " << worst);
  CHECK(worst < 1e-8);
}

TEST_CASE("swiglu: the backward runs one op more than the composite's, silu again") {
  at::manual_seed(4);
  at::Tensor gate = at::randn({8, 32}).requires_grad_(true), up = at::randn({8, 32}).requires_grad_(true);
  const at::Tensor g = at::randn({8, 32});
  at::Tensor y = swiglu(gate, up), z = CompositeSwiglu(gate, up);
  compat::OpCounter backward;
  y.backward(g);
  MESSAGE("backward: " << backward.Describe());
  CHECK(backward.counts().at("aten::silu") == 1);
  CHECK(backward.counts().at("aten::mul_") == 1);
  CHECK(backward.counts().at("aten::mul") == 1);
  CHECK(backward.counts().at("aten::silu_backward") == 1);
  compat::OpCounter composite;
  z.backward(g);
  MESSAGE("composite backward: " << composite.Describe());
  CHECK(composite.counts().count("aten::silu") == 0);
  CHECK(composite.counts().at("aten::mul") == 2);
  CHECK(composite.counts().at("aten::silu_backward") == 1);
}

TEST_CASE("swiglu: the graph keeps gate and up, not silu(gate)") {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const int64_t n = 64 * 1024, bytes = n * static_cast<int64_t>(c10::elementSize(dtype));
    at::Tensor gate = at::randn({n}).to(dtype).requires_grad_(true), up = at::randn({n}).to(dtype).requires_grad_(true);
    auto kept = [&](bool composite) {
      compat::CpuMemoryWatch watch;
      at::Tensor y = Gating(gate, up, composite);
      return watch.live_bytes();
    };
    CHECK(kept(false) == bytes);     // y; gate and up were there before
    CHECK(kept(true) == 2 * bytes);  // y and silu(gate), saved by the product
  }
}

TEST_CASE("swiglu: forward and backward together peak a tensor of gate's size below the composite's") {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const int64_t n = 64 * 1024, bytes = n * static_cast<int64_t>(c10::elementSize(dtype));
    const at::Tensor gate0 = at::randn({n}).to(dtype), up0 = at::randn({n}).to(dtype), g = at::randn({n}).to(dtype);
    auto peak = [&](bool composite) {
      at::Tensor gate = gate0.clone().requires_grad_(true), up = up0.clone().requires_grad_(true);
      compat::CpuMemoryWatch watch;
      {
        at::Tensor y = Gating(gate, up, composite);
        y.backward(g);
      }
      return watch.peak_bytes();
    };
    const int64_t fused = peak(false), composite = peak(true);
    MESSAGE("peak: swiglu " << fused / bytes << " tensors, composite " << composite / bytes);
    // y and the two gradients, one temporary at a time: 3; the composite also holds silu(gate).
    CHECK(fused == 3 * bytes);
    CHECK(composite == 4 * bytes);
  }
}

}  // namespace
}  // namespace native
}  // namespace protocol
