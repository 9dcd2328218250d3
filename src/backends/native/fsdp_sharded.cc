#include "backends/native/fsdp_sharded.h"

#include <cmath>

namespace protocol {
namespace native {

ShardedParams::ShardedParams(Model& model, compat::CommGroup& group, int group_rank, const TrainOptions& options,
                             int64_t* bytes)
    : model_(model), group_(group), group_rank_(group_rank), world_(compat::CommGroupSize(group)),
      options_(options), bytes_(bytes) {
  at::NoGradGuard no_grad;
  // Units: [embed, norm, lm_head], then each decoder layer.
  Unit outer;
  outer.params = {&model.embed, &model.norm, &model.lm_head};
  units_.push_back(outer);
  for (LayerWeights& l : model.layers) {
    Unit u;
    u.params = {&l.input_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.post_norm, &l.w_gate, &l.w_up, &l.w_down};
    units_.push_back(u);
  }
  for (Unit& u : units_) {
    std::vector<at::Tensor> flat, mask;
    for (at::Tensor* p : u.params) {
      p->requires_grad_(true);
      flat.push_back(p->detach().reshape({-1}).to(at::kFloat));
      mask.push_back(at::full({p->numel()}, p->dim() >= 2, p->options().dtype(at::kBool)));
      u.numel += p->numel();
    }
    u.shard = (u.numel + world_ - 1) / world_;
    u.padded = u.shard * world_;
    at::Tensor full = at::cat(flat), full_mask = at::cat(mask);
    const int64_t pad = u.padded - u.numel;
    if (pad > 0) {
      full = at::cat({full, at::zeros({pad}, full.options())});
      full_mask = at::cat({full_mask, at::zeros({pad}, full_mask.options())});
    }
    master_.push_back(full.narrow(0, group_rank_ * u.shard, u.shard).clone());
    decay_.push_back(full_mask.narrow(0, group_rank_ * u.shard, u.shard).clone());
    m_.push_back(at::zeros({u.shard}, full.options()));
    v_.push_back(at::zeros({u.shard}, full.options()));
  }
}

int64_t ShardedParams::shard_elements() const {
  int64_t n = 0;
  for (const Unit& u : units_) n += u.shard;
  return n;
}

void ShardedParams::Gather() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = units_[i];
    const at::ScalarType dtype = u.params[0]->scalar_type();
    at::Tensor shard = master_[i].to(dtype);
    at::Tensor full = at::empty({u.padded}, shard.options());
    *bytes_ += compat::AllGatherFlat(group_, full, shard);
    int64_t offset = 0;
    for (at::Tensor* p : u.params) {
      p->detach().copy_(full.narrow(0, offset, p->numel()).view(p->sizes()));
      offset += p->numel();
    }
  }
}

double ShardedParams::Step(double lr) {
  at::NoGradGuard no_grad;
  // Gradient slices of the global batch.
  std::vector<at::Tensor> grads;
  for (Unit& u : units_) {
    const at::Tensor& first = *u.params[0];
    at::Tensor full = at::zeros({u.padded}, first.options().dtype(first.grad().defined() ? first.grad().scalar_type()
                                                                                           : first.scalar_type()));
    int64_t offset = 0;
    for (at::Tensor* p : u.params) {
      if (p->grad().defined()) full.narrow(0, offset, p->numel()).copy_(p->grad().reshape({-1}));
      offset += p->numel();
    }
    at::Tensor shard = at::empty({u.shard}, full.options());
    *bytes_ += compat::ReduceScatterSum(group_, shard, full);
    grads.push_back(shard.to(at::kFloat));
    for (at::Tensor* p : u.params) p->mutable_grad() = at::Tensor();
  }
  // Global norm: Σ over ranks of each slice's squared norm (padding is zero).
  at::Tensor sum_sq = at::zeros({1}, grads[0].options().dtype(at::kDouble));
  for (const at::Tensor& g : grads) sum_sq += g.to(at::kDouble).pow(2).sum();
  *bytes_ += compat::AllReduceSum(group_, sum_sq);
  const double norm = std::sqrt(sum_sq.item<double>());
  if (options_.grad_clip > 0 && norm > options_.grad_clip) {
    const double scale = options_.grad_clip / (norm + 1e-6);
    for (at::Tensor& g : grads) g.mul_(scale);
  }
  // AdamW, exactly as train.h's, on the slices.
  ++t_;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(t_));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(t_));
  for (size_t i = 0; i < units_.size(); ++i) {
    at::Tensor& theta = master_[i];
    const at::Tensor& g = grads[i];
    m_[i].mul_(b1).add_(g, 1.0 - b1);
    v_[i].mul_(b2).addcmul_(g, g, 1.0 - b2);
    if (options_.weight_decay > 0) theta.copy_(at::where(decay_[i], theta * (1.0 - lr * options_.weight_decay), theta));
    at::Tensor denom = (v_[i] / bias2).sqrt_().add_(options_.eps);
    theta.addcdiv_(m_[i], denom, -lr / bias1);
  }
  return norm;
}

}  // namespace native
}  // namespace protocol
