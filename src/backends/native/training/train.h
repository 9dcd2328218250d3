#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_TRAIN_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_TRAIN_H_

// Training pieces, each a function the backend calls in a straight line:
// the learning-rate schedule, the masked cross-entropy loss, gradient clipping,
// AdamW, and one optimizer step over a global batch (with accumulation).

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "backends/native/training/data.h"
#include "backends/native/model/model.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

struct TrainOptions {
  int64_t batch_size = 8;     // sequences per optimizer step (global)
  int64_t grad_accum = 1;     // micro-batches per step; batch_size % grad_accum == 0
  double learning_rate = 3e-4;  // peak
  double min_lr_ratio = 0.1;  // cosine decays to learning_rate · min_lr_ratio
  int64_t warmup_steps = 0;   // linear warm-up length
  double weight_decay = 0.1;  // decoupled, matrices only (not the RMSNorm gains)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;     // max global L2 norm; <= 0 disables
  // Activation checkpointing (plan key training.checkpoint_every): decoder
  // layer l is recomputed in the backward pass instead of keeping its
  // activations when checkpoint_every > 0 and l % checkpoint_every == 0
  // (1 = every layer, 0 = none). Only the layer's input is kept for it.
  int64_t checkpoint_every = 1;
  // AdamW in one pass per tensor (compat::FusedAdamW) where the device has it;
  // false: always the multi-tensor ops (the tests' comparison).
  bool fused_adamw = true;
};

// The options of a training case of `steps` optimizer steps from its plan
// settings: batch, accumulation, learning rate, checkpointing; warm-up
// min(100, steps/10) steps; the rest TrainOptions' defaults.
TrainOptions train_options(const TrainingSettings& settings, int64_t steps);

// True when decoder layer `layer` is recomputed in backward (see TrainOptions).
bool layer_checkpointed(int64_t layer, int64_t checkpoint_every);

// Learning rate at 0-based `step` of `total`: linear warm-up from lr/warmup to
// lr over `warmup` steps, then cosine decay to lr·min_ratio at the last step:
//   lr_t = lr_min + ½(lr − lr_min)(1 + cos(π · (t − warmup) / (total − warmup − 1)))
double lr_at_step(int64_t step, int64_t total, const TrainOptions& options);

// A batch of sequences as tensors on `device`: inputs and targets (B,T)
// int64 (targets = inputs shifted by one), mask (B,T) float32 (1 = counted).
// An empty batch gives (0,T) tensors; T = seq_len.
struct BatchTensors {
  at::Tensor inputs, targets, mask;
};
BatchTensors batch_tensors(const std::vector<const Sequence*>& batch, int64_t seq_len, const at::Device& device);

// Σ over counted targets of −log softmax(logits)[target], divided by
// `denominator`; logits (B,T,V) in any dtype, the loss in float32, taken in
// chunks of rows (chunked_loss.h: no float32 tensor of the logits' size).
at::Tensor masked_loss(const at::Tensor& logits, const BatchTensors& batch, double denominator);

// Logits for training: model_forward's straight line (no KV cache), with the
// decoder layers that layer_checkpointed() names run through unit_apply
// (unit_function.h) so that their activations are recomputed in backward.
at::Tensor train_forward(const Model& model, const at::Tensor& tokens, int64_t checkpoint_every);

// Mean cross-entropy over the counted targets of a batch of sequences.
// Returns the sum of per-token losses divided by `denominator` (the number of
// counted targets of the whole global batch, so micro-batch losses add up).
at::Tensor loss_forward(const Model& model, const std::vector<const Sequence*>& batch, double denominator,
                        int64_t checkpoint_every = 0);

// Scales the gradients so that their global L2 norm is at most max_norm, as
// torch.nn.utils.clip_grad_norm_ does: one multi-tensor norm over every
// gradient (each tensor's norm in float32, √Σ norm² in float64) and a
// clipping coefficient min(1, max_norm / (norm + 1e-6)) applied on the device,
// so nothing is read back. Returns the norm before clipping, a float64 scalar
// tensor on the gradients' device (ReadToHost it with the step's loss).
at::Tensor grad_clip_norm(const std::vector<at::Tensor>& params, double max_norm);
// The same over gradient tensors given directly (undefined ones are skipped).
at::Tensor clip_gradients(const std::vector<at::Tensor>& grads, double max_norm);
// Σ over `grads` of their squared L2 norms, a float64 scalar on their device:
// each norm taken in float32 (the float32 gradients in one multi-tensor
// kernel; no g² temporary, no float32 copy of a bf16 one), float64 gradients
// in float64. clip_gradients takes its square root; FSDP's step sums it over
// the ranks first. REQUIRES: grads non-empty, every tensor defined.
at::Tensor gradient_square_sum(const std::vector<at::Tensor>& grads);
// The clipping step alone, for a norm found elsewhere (FSDP's, summed over the
// ranks): every gradient times min(1, max_norm / (norm + 1e-6)), on the
// device. max_norm <= 0: nothing. REQUIRES: every tensor of grads defined.
void scale_to_max_norm(const std::vector<at::Tensor>& grads, const at::Tensor& norm, double max_norm);

// AdamW (Loshchilov & Hutter 2019). For each parameter θ with gradient g:
//   m = β1·m + (1−β1)·g          first moment
//   v = β2·v + (1−β2)·g²         second moment
//   m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ)  bias correction
//   θ = θ − lr·(m̂/(√v̂ + ε) + λ·θ)   decoupled weight decay (λ only on matrices)
// Moments, and a master copy of any non-float32 parameter (bf16 on CUDA), are
// kept in float32; the parameter is refreshed from its master after each step.
// Two ways, over runs of at most kAdamwChunkElements elements (or one larger
// tensor; a non-float32 gradient's float32 copy exists for one run,
// memory_estimate.h "AdamW temporaries"):
//   fused     (options.fused_adamw and compat::FusedAdamWAvailable) one pass
//             per tensor, torch.optim.AdamW(fused=True)'s kernel and
//             arithmetic (√v/√(1−β2ᵗ) + ε); nothing else is allocated
//   foreach   libtorch's multi-tensor ops, as torch.optim.AdamW's default
//             does: a handful of kernels per run, not per tensor (the 70B
//             LoRA adapters, ~1,100 tensors, are a few runs); √v̂ + ε of a run
//             is formed in a float32 workspace of the largest run, allocated
//             at the first step and kept ("AdamW workspace"). Same arithmetic,
//             in the same order, as a loop over the tensors.
inline constexpr int64_t kAdamwChunkElements = int64_t{1} << 24;

// The fused path, shared with FSDP's step on its slices (fsdp_sharded.h).
// Whether AdamW steps tensors on `device` in one pass a tensor:
// options.fused_adamw and compat::FusedAdamWAvailable.
bool adamw_fused(const TrainOptions& options, const at::Device& device);
// The float32 tensors of one fused call, in order: parameters (or their
// masters), gradients, first and second moments.
struct AdamWRun {
  std::vector<at::Tensor> params, grads, m, v;
  void Add(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& first, const at::Tensor& second);
};
// AdamW step t at learning rate lr in one pass a tensor: `decayed` with
// options.weight_decay, `kept` without. REQUIRES: adamw_fused for their device.
void fused_adamw_step(const AdamWRun& decayed, const AdamWRun& kept, const TrainOptions& options, double lr,
                      int64_t t);

class AdamW {
 public:
  AdamW(std::vector<at::Tensor> params, const TrainOptions& options);
  void step(double lr);
  void zero_grad();
  int64_t steps_taken() const { return t_; }
  // The tensors it updates (all of a model's, or only LoRA adapters).
  const std::vector<at::Tensor>& params() const { return params_; }

 private:
  std::vector<at::Tensor> params_, master_, m_, v_;
  at::Tensor workspace_;  // float32, the largest run's elements: √v̂ + ε
  TrainOptions options_;
  int64_t t_ = 0;
};

// The trainable tensors of a model (all of them), with requires_grad set.
std::vector<at::Tensor> model_trainable(Model& model);

struct StepStats {
  double loss = 0;        // mean loss over the counted targets of the batch
  double grad_norm = 0;   // before clipping (read back with the loss: one host read per step)
  double lr = 0;
  int64_t tokens = 0;     // input tokens processed (batch · seq_len)
};

// The counted targets of `batch` (Σ of its masks): a step's loss denominator.
double counted_targets(const std::vector<const Sequence*>& batch);

// The backward passes of one step over `mine` (this process's sequences of
// the step), in micro-batches of max(1, |mine| / grad_accum) sequences: each
// micro-batch's loss is masked_loss(forward(inputs)) / `denominator` (the
// counted targets of the whole batch the step's processes share, so the
// losses add up to the batch's mean), and backward() runs on it;
// `last_micro_batch(true)` is called before the step's last one (FSDP
// reduces the gradients there), `(false)` before the others. Returns Σ of
// the losses in float64 on the device, nothing read back. The one training
// loop (case_training.h) and train_step both step with it.
at::Tensor backward_micro_batches(const std::function<at::Tensor(const at::Tensor& tokens)>& forward,
                                  const std::function<void(bool last)>& last_micro_batch,
                                  const std::vector<const Sequence*>& mine, int64_t grad_accum, double denominator,
                                  int64_t seq_len, const at::Device& device);

// The step's one read back from the device: its loss (float64, shape {1})
// and gradient norm (a scalar) together, as {loss, norm}.
std::pair<double, double> read_loss_and_norm(const at::Tensor& loss_sum, const at::Tensor& norm);

// One optimizer step of a whole model over `batch` (batch_size sequences,
// split into grad_accum micro-batches): backward_micro_batches, clip (over
// the optimizer's tensors), AdamW, one read back. A unit of the loop, for
// tests and benchmarks; cases train through case_training.h.
StepStats train_step(Model& model, AdamW& optimizer, const std::vector<const Sequence*>& batch,
                     const TrainOptions& options, double lr);

// Mean loss over sequences, no gradients; nullopt when `seqs` has no counted target.
std::optional<double> eval_loss(const Model& model, const std::vector<Sequence>& seqs, int64_t batch_size);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_TRAIN_H_
