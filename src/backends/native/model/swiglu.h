#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_SWIGLU_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_SWIGLU_H_

// SwiGLU's gating (Shazeer 2020) as the model trains it:
//   y = silu(gate) ⊙ up,   silu(g) = g·σ(g)
// With gradients required it is one autograd function that saves gate and up
// and nothing else, recomputing silu(gate) in its backward (ĝ = ∂L/∂y):
//   ∂L/∂up   = ĝ ⊙ silu(gate)
//   ∂L/∂gate = silu_backward(ĝ ⊙ up, gate) = (ĝ ⊙ up) ⊙ σ·(1 + gate·(1 − σ))
// Autograd through the composite ops (silu, then ⊙) also kept silu(gate):
// e·F bytes more per token and layer, a quarter of the feed-forward's saved
// activations (memory_estimate.h counts 3·e·F, where it was 4·e·F).
//
// The ops are ATen's, the composite autograd's own expressions, so the
// forward and both gradients are its bits on every device and dtype; the
// price is one elementwise op more in the backward (silu again: silu, mul_,
// mul, silu_backward against mul, mul, silu_backward). The backward writes
// each gradient over its temporary: at its peak it holds gate, up, ∂L/∂y
// and two tensors of gate's size, one fewer than the composite's backward. The forward is the
// same with or without a graph, so a checkpointed layer's first pass and its
// recomputation agree bit for bit.

#include <ATen/ATen.h>

namespace protocol {
namespace native {

// gate, up (..., F) of one dtype and device -> silu(gate) ⊙ up (..., F).
// Differentiable in gate and up (as they require); without grad mode, the
// two forward ops and no graph.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_SWIGLU_H_
