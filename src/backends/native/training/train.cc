#include "backends/native/training/train.h"

#include <cmath>
#include <c10/core/GradMode.h>

#include "backends/native/training/unit_function.h"

namespace protocol {
namespace native {
double lr_at_step(int64_t step, int64_t total, const TrainOptions& o) {
  const double lr = o.learning_rate, lr_min = o.learning_rate * o.min_lr_ratio;
  if (step < o.warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  const int64_t decay_steps = total - o.warmup_steps - 1;
  if (decay_steps <= 0) return lr;
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) / static_cast<double>(decay_steps));
  return lr_min + 0.5 * (lr - lr_min) * (1.0 + std::cos(M_PI * progress));
}

TrainOptions train_options(const TrainingSettings& settings, int64_t steps) {
  TrainOptions o;
  o.batch_size = settings.batch_size;
  o.grad_accum = settings.grad_accum;
  o.learning_rate = settings.learning_rate;
  o.warmup_steps = std::min<int64_t>(100, steps / 10);
  o.checkpoint_every = settings.checkpoint_every;
  return o;
}

bool layer_checkpointed(int64_t layer, int64_t checkpoint_every) {
  return checkpoint_every > 0 && layer % checkpoint_every == 0;
}

BatchTensors batch_tensors(const std::vector<const Sequence*>& batch, int64_t seq_len, const at::Device& device) {
  const int64_t B = static_cast<int64_t>(batch.size());
  const int64_t T = seq_len;
  std::vector<int64_t> tokens;
  std::vector<float> mask;
  tokens.reserve(static_cast<size_t>(B * (T + 1)));
  for (const Sequence* s : batch) {
    tokens.insert(tokens.end(), s->tokens.begin(), s->tokens.end());
    mask.insert(mask.end(), s->mask.begin(), s->mask.end());
  }
  at::Tensor all = at::tensor(tokens, at::kLong).view({B, T + 1}).to(device);
  BatchTensors out;
  out.inputs = all.narrow(1, 0, T);
  out.targets = all.narrow(1, 1, T);
  out.mask = at::tensor(mask, at::kFloat).view({B, T}).to(device);
  return out;
}

at::Tensor masked_loss(const at::Tensor& logits, const BatchTensors& b, double denominator) {
  const int64_t V = logits.size(-1);
  // Per-token −log softmax(logits)[target], in float32.
  at::Tensor per_token = at::cross_entropy_loss(logits.reshape({-1, V}).to(at::kFloat), b.targets.reshape({-1}),
                                                /*weight=*/{}, at::Reduction::None);
  return (per_token * b.mask.reshape({-1})).sum() / denominator;
}

at::Tensor train_forward(const Model& m, const at::Tensor& tokens, int64_t checkpoint_every) {
  at::Tensor x = embed_forward(m.embed, tokens);
  const RopeRows rope = rope_rows(m, 0, tokens.size(1), x.scalar_type());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!layer_checkpointed(static_cast<int64_t>(i), checkpoint_every)) {
      x = decoder_layer_forward(m, i, m.layers[i], x, rope, nullptr, 0);
      continue;
    }
    // The layer's own tensors are leaves that collect their .grad in the
    // recomputation (as do the adapters of a 4-bit model's override).
    auto layer = [&m, i, rope](const at::Tensor& h, const std::vector<at::Tensor>&) {
      return decoder_layer_forward(m, i, m.layers[i], h, rope, nullptr, 0);
    };
    x = unit_apply(layer, x, std::make_shared<LocalParameters>(std::vector<at::Tensor>{}), UnitMode::kRecompute);
  }
  return head_forward(m, m.norm, m.lm_head, x);
}

at::Tensor loss_forward(const Model& model, const std::vector<const Sequence*>& batch, double denominator,
                        int64_t checkpoint_every) {
  BatchTensors b = batch_tensors(batch, static_cast<int64_t>(batch[0]->mask.size()), model.embed.device());
  return masked_loss(train_forward(model, b.inputs, checkpoint_every), b, denominator);
}

double grad_clip_norm(const std::vector<at::Tensor>& params, double max_norm) {
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

AdamW::AdamW(std::vector<at::Tensor> params, const TrainOptions& options)
    : params_(std::move(params)), options_(options) {
  c10::NoGradGuard no_grad;
  for (const at::Tensor& p : params_) {
    master_.push_back(p.scalar_type() == at::kFloat ? at::Tensor() : p.detach().to(at::kFloat).clone());
    m_.push_back(at::zeros(p.sizes(), p.options().dtype(at::kFloat)));
    v_.push_back(at::zeros(p.sizes(), p.options().dtype(at::kFloat)));
  }
}

void AdamW::zero_grad() {
  for (at::Tensor& p : params_)
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
}

void AdamW::step(double lr) {
  c10::NoGradGuard no_grad;
  ++t_;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(t_));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(t_));
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    at::Tensor theta = master_[i].defined() ? master_[i] : p.detach();
    at::Tensor g = p.grad().to(at::kFloat);
    m_[i].mul_(b1).add_(g, 1.0 - b1);
    v_[i].mul_(b2).addcmul_(g, g, 1.0 - b2);
    if (p.dim() >= 2 && options_.weight_decay > 0) theta.mul_(1.0 - lr * options_.weight_decay);
    at::Tensor denom = (v_[i] / bias2).sqrt_().add_(options_.eps);
    theta.addcdiv_(m_[i], denom, -lr / bias1);
    if (master_[i].defined()) p.detach().copy_(theta);
  }
}

std::vector<at::Tensor> model_trainable(Model& model) {
  std::vector<at::Tensor> out;
  for (NamedParameter& p : model_parameters(model)) {
    p.tensor->requires_grad_(true);
    out.push_back(*p.tensor);
  }
  return out;
}

StepStats train_step(Model& model, AdamW& optimizer, const std::vector<const Sequence*>& batch,
                     const TrainOptions& o, double lr) {
  StepStats stats;
  stats.lr = lr;
  double counted = 0;
  for (const Sequence* s : batch)
    for (uint8_t m : s->mask) counted += m;
  const double denominator = std::max(counted, 1.0);
  optimizer.zero_grad();
  const size_t micro = std::max<size_t>(1, batch.size() / static_cast<size_t>(std::max<int64_t>(1, o.grad_accum)));
  for (size_t start = 0; start < batch.size(); start += micro) {
    std::vector<const Sequence*> part(batch.begin() + static_cast<std::ptrdiff_t>(start),
                                      batch.begin() + static_cast<std::ptrdiff_t>(std::min(batch.size(), start + micro)));
    at::Tensor loss = loss_forward(model, part, denominator, o.checkpoint_every);
    loss.backward();
    stats.loss += loss.item<double>();
    stats.tokens += static_cast<int64_t>(part.size() * part[0]->mask.size());
  }
  stats.grad_norm = grad_clip_norm(optimizer.params(), o.grad_clip);
  optimizer.step(lr);
  return stats;
}

std::optional<double> eval_loss(const Model& model, const std::vector<Sequence>& seqs, int64_t batch_size) {
  c10::InferenceMode no_grad;
  double counted = 0;
  for (const Sequence& s : seqs)
    for (uint8_t m : s.mask) counted += m;
  if (counted == 0) return std::nullopt;
  double total = 0;
  const size_t bs = static_cast<size_t>(std::max<int64_t>(1, batch_size));
  for (size_t start = 0; start < seqs.size(); start += bs) {
    std::vector<const Sequence*> part;
    for (size_t i = start; i < std::min(seqs.size(), start + bs); ++i) part.push_back(&seqs[i]);
    total += loss_forward(model, part, counted).item<double>();
  }
  return total;
}

}  // namespace native
}  // namespace protocol
