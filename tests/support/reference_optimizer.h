#ifndef PROTOCOL_TESTS_SUPPORT_REFERENCE_OPTIMIZER_H_
#define PROTOCOL_TESTS_SUPPORT_REFERENCE_OPTIMIZER_H_

// AdamW and gradient clipping one tensor at a time, as train.cc did them
// before its multi-tensor path: the reference the optimizer test compares
// against bit for bit, and the "before" of bench/optimizer_bench.cc. Same
// formulas as train.h's AdamW; clipping reads every tensor's sum of squares
// back to the host (.item(): one device wait per tensor).

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <vector>

#include "backends/native/training/train.h"

namespace protocol::testing {

using native::TrainOptions;

struct ReferenceAdamW {
  std::vector<at::Tensor> params, master, m, v;
  TrainOptions o;
  int64_t t = 0;
  ReferenceAdamW(std::vector<at::Tensor> p, const TrainOptions& options) : params(std::move(p)), o(options) {
    for (const at::Tensor& x : params) {
      master.push_back(x.scalar_type() == at::kFloat ? at::Tensor() : x.detach().to(at::kFloat).clone());
      m.push_back(at::zeros(x.sizes(), x.options().dtype(at::kFloat)));
      v.push_back(at::zeros(x.sizes(), x.options().dtype(at::kFloat)));
    }
  }
  void step(double lr) {
    c10::NoGradGuard no_grad;
    ++t;
    const double bias1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
    const double bias2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;
      at::Tensor theta = master[i].defined() ? master[i] : p.detach();
      at::Tensor g = p.grad().to(at::kFloat);
      m[i].mul_(o.beta1).add_(g, 1.0 - o.beta1);
      v[i].mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);
      if (p.dim() >= 2 && o.weight_decay > 0) theta.mul_(1.0 - lr * o.weight_decay);
      at::Tensor denom = (v[i] / bias2).sqrt_().add_(o.eps);
      theta.addcdiv_(m[i], denom, -lr / bias1);
      if (master[i].defined()) p.detach().copy_(theta);
    }
  }
};

// Returns the norm before clipping; scales the gradients to max_norm when above it.
inline double ReferenceClip(const std::vector<at::Tensor>& params, double max_norm) {
  c10::NoGradGuard no_grad;
  double sum_sq = 0;
  for (const at::Tensor& p : params)
    if (p.grad().defined()) sum_sq += p.grad().to(at::kFloat).pow(2).sum().item<double>();
  const double norm = std::sqrt(sum_sq);
  if (max_norm > 0 && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const at::Tensor& p : params)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  return norm;
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_SUPPORT_REFERENCE_OPTIMIZER_H_
