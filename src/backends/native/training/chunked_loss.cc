#include "backends/native/training/chunked_loss.h"

// Beside unit_function.cc, the other custom autograd function (libtorch 1.13
// and 2.x have these headers alike).
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace protocol {
namespace native {
namespace {

// The widened dtype of the arithmetic: float64 logits stay float64 (the
// reference tests), anything else is taken in float32.
at::ScalarType WideType(const at::Tensor& logits) {
  return logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

int64_t ChunkRows(int64_t V, int64_t chunk_elements) {
  return std::max<int64_t>(1, chunk_elements / std::max<int64_t>(1, V));
}

struct ChunkedCrossEntropy : torch::autograd::Function<ChunkedCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, const at::Tensor& weights, int64_t chunk_elements) {
    const at::ScalarType wide = WideType(logits);
    const int64_t N = logits.size(0), V = logits.size(1), rows = ChunkRows(V, chunk_elements);
    ctx->saved_data["rows"] = rows;
    at::Tensor lse = at::empty({N}, logits.options().dtype(wide));
    for (int64_t r = 0; r < N; r += rows) {
      const int64_t n = std::min(rows, N - r);
      at::Tensor rows_lse = lse.narrow(0, r, n);
      at::logsumexp_out(rows_lse, logits.narrow(0, r, n).to(wide), {1});
    }
    const at::Tensor target_logit = logits.gather(1, targets.unsqueeze(1)).squeeze(1).to(wide);
    ctx->save_for_backward({logits, targets, weights, lse});
    return ((lse - target_logit) * weights.to(wide)).sum();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1], &weights = saved[2], &lse = saved[3];
    const at::ScalarType wide = WideType(logits);
    const int64_t N = logits.size(0), rows = ctx->saved_data["rows"].toInt();
    // g·w_i per row, on the device: nothing is read back.
    const at::Tensor scale = (weights.to(wide) * grad_output[0].to(wide)).unsqueeze(1);
    at::Tensor grad = at::empty_like(logits, at::MemoryFormat::Contiguous);
    for (int64_t r = 0; r < N; r += rows) {
      const int64_t n = std::min(rows, N - r);
      // softmax = exp(z − lse); minus 1 at the target; times g·w_i, written straight into z's dtype.
      at::Tensor p = (logits.narrow(0, r, n).to(wide) - lse.narrow(0, r, n).unsqueeze(1)).exp_();
      p.scatter_add_(1, targets.narrow(0, r, n).unsqueeze(1), at::full({n, 1}, -1.0, p.options()));
      at::Tensor grad_rows = grad.narrow(0, r, n);
      at::mul_out(grad_rows, p, scale.narrow(0, r, n));
    }
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_cross_entropy(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& weights,
                                 int64_t chunk_elements) {
  return ChunkedCrossEntropy::apply(logits, targets, weights, chunk_elements);
}

}  // namespace native
}  // namespace protocol
