#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_CHUNKED_LOSS_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_CHUNKED_LOSS_H_

// Weighted cross-entropy over the vocabulary, taken a chunk of rows at a time
// so that no float32 tensor of the logits' full size ever exists:
//
//   loss = Σ_i w_i · (lse_i − z_{i,t_i}),   lse_i = log Σ_j exp z_{i,j}
//   ∂loss/∂z_{i,j} = g · w_i · (softmax(z_i)_j − [j = t_i])
//
// z (N,V) are the logits in the model's dtype (bf16 on CUDA). Forward: each
// chunk of rows is widened to float32 for its log-sum-exp, and only lse (N
// floats) is kept beside z. Backward: the gradient is written chunk by chunk
// into one tensor of z's dtype. Held at most: z, its gradient, and two float32
// chunks of kLossChunkElements (memory_estimate.h "logits and cross-entropy").
// The unchunked path (log_softmax over float32 logits) holds the float32
// logits, the saved log-softmax and their gradients: 12 bytes per logit more.

#include <ATen/ATen.h>

#include <cstdint>

namespace protocol {
namespace native {

// Float32 elements of one chunk (rows = max(1, kLossChunkElements / V)).
inline constexpr int64_t kLossChunkElements = int64_t{1} << 22;

// Σ_i weights_i · (−log softmax(logits_i)[targets_i]), a float32 scalar
// (float64 when the logits are float64), differentiable in `logits`.
// logits (N,V) any floating dtype; targets (N) int64 in [0,V); weights (N)
// float32 (a mask over a denominator; not differentiated). chunk_elements:
// the chunk's size (tests take several chunks of a small vocabulary).
at::Tensor chunked_cross_entropy(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& weights,
                                 int64_t chunk_elements = kLossChunkElements);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_CHUNKED_LOSS_H_
