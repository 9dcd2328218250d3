#include "backends/native/training/train.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <c10/core/GradMode.h>

#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/chunked_loss.h"
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
  // `auto` is resolved before a case runs (native_check.h); unresolved, the safe side: every layer.
  o.checkpoint_every = settings.checkpoint_every == kCheckpointAuto ? 1 : settings.checkpoint_every;
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
  // Σ mask·(−log softmax(logits)[target]) / denominator, in float32, with no
  // float32 copy of the logits (chunked_loss.h).
  return chunked_cross_entropy(logits.reshape({-1, V}), b.targets.reshape({-1}),
                               b.mask.reshape({-1}) / denominator);
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

at::Tensor gradient_square_sum(const std::vector<at::Tensor>& grads) {
  // Each gradient's L2 norm in float32 — the float32 ones in one multi-tensor
  // kernel, any other accumulated in float32 by its own kernel (no float32
  // copy of it, and no norm rounded to bf16) — then Σ norm² in float64.
  // (float64 gradients, as the reference test trains, keep their own precision.)
  std::vector<at::Tensor> wide, norms;
  for (const at::Tensor& g : grads) {
    if (g.scalar_type() == at::kFloat) wide.push_back(g);
    else if (g.scalar_type() == at::kDouble) norms.push_back(at::linalg_vector_norm(g, 2));
    else norms.push_back(at::linalg_vector_norm(g, 2, c10::nullopt, false, at::kFloat).to(at::kDouble));
  }
  if (!wide.empty())
    for (const at::Tensor& n : at::_foreach_norm(wide, 2)) norms.push_back(n.to(at::kDouble));
  return at::stack(norms).pow(2).sum();
}

at::Tensor clip_gradients(const std::vector<at::Tensor>& grads, double max_norm) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> defined;
  for (const at::Tensor& g : grads)
    if (g.defined()) defined.push_back(g);
  if (defined.empty()) return at::zeros({}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor norm = gradient_square_sum(defined).sqrt();
  scale_to_max_norm(defined, norm, max_norm);
  return norm;
}

void scale_to_max_norm(const std::vector<at::Tensor>& grads, const at::Tensor& norm, double max_norm) {
  if (max_norm <= 0 || grads.empty()) return;
  c10::NoGradGuard no_grad;
  // min(1, max_norm / (norm + 1e-6)): 1 leaves a gradient's bits unchanged.
  const at::Tensor coefficient = (max_norm / (norm + 1e-6))
                                     .clamp_max(1.0)
                                     .to(grads[0].scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  compat::ForeachMulByScalarTensor(grads, coefficient);
}

at::Tensor grad_clip_norm(const std::vector<at::Tensor>& params, double max_norm) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) grads.push_back(p.grad());
  return clip_gradients(grads, max_norm);
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

bool adamw_fused(const TrainOptions& options, const at::Device& device) {
  return options.fused_adamw && compat::FusedAdamWAvailable(device);
}

void AdamWRun::Add(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& first,
                   const at::Tensor& second) {
  params.push_back(param);
  grads.push_back(grad);
  m.push_back(first);
  v.push_back(second);
}

void fused_adamw_step(const AdamWRun& decayed, const AdamWRun& kept, const TrainOptions& options, double lr,
                      int64_t t) {
  compat::AdamWHyper h{lr, options.beta1, options.beta2, options.eps, options.weight_decay, t};
  compat::FusedAdamW(decayed.params, decayed.grads, decayed.m, decayed.v, h);
  h.weight_decay = 0;
  compat::FusedAdamW(kept.params, kept.grads, kept.m, kept.v, h);
}

void AdamW::step(double lr) {
  c10::NoGradGuard no_grad;
  ++t_;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(t_));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(t_));
  // The parameters with a gradient, in order, cut into runs of at most
  // kAdamwChunkElements (a larger tensor is a run of its own). √v̂ + ε of a
  // run is formed in the workspace, kept from step to step: a fresh buffer
  // per step would be new pages to fault in on a CPU (measured 10x the whole
  // step for the 70B adapters), and a caching allocator's block on a GPU.
  const bool fused = !params_.empty() && adamw_fused(options_, params_[0].device());
  size_t i = 0;
  while (i < params_.size()) {
    std::vector<at::Tensor> theta, grad, m, v, decayed;
    std::vector<bool> decays;  // theta[k] is decayed
    int64_t elements = 0;
    for (; i < params_.size(); ++i) {
      const at::Tensor& p = params_[i];
      if (!p.grad().defined()) continue;
      if (!theta.empty() && elements + p.numel() > kAdamwChunkElements) break;
      elements += p.numel();
      theta.push_back(master_[i].defined() ? master_[i] : p.detach());
      grad.push_back(p.grad().scalar_type() == at::kFloat ? p.grad() : p.grad().to(at::kFloat));
      m.push_back(m_[i]);
      v.push_back(v_[i]);
      decays.push_back(p.dim() >= 2 && options_.weight_decay > 0);
      if (decays.back()) decayed.push_back(theta.back());
    }
    if (theta.empty()) break;
    if (fused) {  // the matrices with weight decay, the rest without
      AdamWRun decay, kept;
      for (size_t k = 0; k < theta.size(); ++k) (decays[k] ? decay : kept).Add(theta[k], grad[k], m[k], v[k]);
      fused_adamw_step(decay, kept, options_, lr, t_);
      continue;
    }
    at::_foreach_mul_(m, b1);
    at::_foreach_add_(m, grad, 1.0 - b1);
    at::_foreach_mul_(v, b2);
    at::_foreach_addcmul_(v, grad, grad, 1.0 - b2);
    grad.clear();
    if (!decayed.empty()) at::_foreach_mul_(decayed, 1.0 - lr * options_.weight_decay);
    if (workspace_.numel() < elements)
      workspace_ = at::empty({elements}, v[0].options());  // the largest run so far
    std::vector<at::Tensor> denom;
    int64_t offset = 0;
    for (const at::Tensor& x : v) {
      denom.push_back(workspace_.narrow(0, offset, x.numel()).view(x.sizes()));
      offset += x.numel();
    }
    compat::ForeachCopy(denom, v);
    at::_foreach_div_(denom, bias2);
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, options_.eps);
    at::_foreach_addcdiv_(theta, m, denom, -lr / bias1);
  }
  for (size_t k = 0; k < params_.size(); ++k)
    if (master_[k].defined() && params_[k].grad().defined()) params_[k].detach().copy_(master_[k]);
}

std::vector<at::Tensor> model_trainable(Model& model) {
  std::vector<at::Tensor> out;
  for (NamedParameter& p : model_parameters(model)) {
    p.tensor->requires_grad_(true);
    out.push_back(*p.tensor);
  }
  return out;
}

double counted_targets(const std::vector<const Sequence*>& batch) {
  double counted = 0;
  for (const Sequence* s : batch)
    for (uint8_t m : s->mask) counted += m;
  return counted;
}

at::Tensor backward_micro_batches(const std::function<at::Tensor(const at::Tensor& tokens)>& forward,
                                  const std::function<void(bool last)>& last_micro_batch,
                                  const std::vector<const Sequence*>& mine, int64_t grad_accum, double denominator,
                                  int64_t seq_len, const at::Device& device) {
  at::Tensor loss_sum = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
  const int64_t n = static_cast<int64_t>(mine.size());
  const int64_t micro = std::max<int64_t>(1, n / std::max<int64_t>(1, grad_accum));
  for (int64_t start = 0; start < n; start += micro) {
    std::vector<const Sequence*> part(mine.begin() + start, mine.begin() + std::min(n, start + micro));
    BatchTensors b = batch_tensors(part, seq_len, device);
    if (last_micro_batch) last_micro_batch(start + micro >= n);
    at::Tensor loss = masked_loss(forward(b.inputs), b, denominator);
    loss.backward();
    loss_sum += loss.detach().to(at::kDouble);  // summed in float64
  }
  return loss_sum;
}

std::pair<double, double> read_loss_and_norm(const at::Tensor& loss_sum, const at::Tensor& norm) {
  const std::vector<double> read = compat::ReadToHost(at::cat({loss_sum, norm.reshape({1}).to(loss_sum.device())}));
  return {read[0], read[1]};
}

StepStats train_step(Model& model, AdamW& optimizer, const std::vector<const Sequence*>& batch,
                     const TrainOptions& o, double lr) {
  StepStats stats;
  stats.lr = lr;
  optimizer.zero_grad();
  const int64_t seq_len = static_cast<int64_t>(batch[0]->mask.size());
  const at::Tensor loss_sum = backward_micro_batches(
      [&](const at::Tensor& tokens) { return train_forward(model, tokens, o.checkpoint_every); }, nullptr, batch,
      o.grad_accum, std::max(counted_targets(batch), 1.0), seq_len, model.embed.device());
  const at::Tensor norm = grad_clip_norm(optimizer.params(), o.grad_clip);
  optimizer.step(lr);
  std::tie(stats.loss, stats.grad_norm) = read_loss_and_norm(loss_sum, norm);
  stats.tokens = static_cast<int64_t>(batch.size()) * seq_len;
  return stats;
}

std::optional<double> eval_loss(const Model& model, const std::vector<Sequence>& seqs, int64_t batch_size) {
  // No grad mode, not InferenceMode: the held-out curve evaluates between
  // training steps, and a tensor a layer made and kept under InferenceMode
  // could not take part in autograd afterwards.
  c10::NoGradGuard no_grad;
  double counted = 0;
  for (const Sequence& s : seqs)
    for (uint8_t m : s.mask) counted += m;
  if (counted == 0) return std::nullopt;
  at::Tensor sum;  // on the device: read once at the end
  const size_t bs = static_cast<size_t>(std::max<int64_t>(1, batch_size));
  for (size_t start = 0; start < seqs.size(); start += bs) {
    std::vector<const Sequence*> part;
    for (size_t i = start; i < std::min(seqs.size(), start + bs); ++i) part.push_back(&seqs[i]);
    at::Tensor loss = loss_forward(model, part, counted).to(at::kDouble);
    sum = sum.defined() ? sum + loss : loss;
  }
  return compat::ReadToHost(sum)[0];
}

}  // namespace native
}  // namespace protocol
