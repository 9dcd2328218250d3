#ifndef PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_LINEAR_H_
#define PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_LINEAR_H_

// The 4-bit linear layer of a QLoRA model: y = x·dequant(W)ᵀ for a frozen NF4
// weight W (nf4.h), as an autograd function that keeps the 4-bit storage, not
// the dequantized weight, for the backward pass (what bitsandbytes'
// MatMul4Bit does: QLoRA section 3, "the weights are dequantized ... in the
// forward and backward pass").
//
//   forward:   w = dequant(W) in x's dtype (a temporary, freed at once)
//              y = x·wᵀ
//   saved:     references to W's packed codes and (double-quantized) absmax
//              tensors: no new bytes, and neither x nor w
//   backward:  w = dequant(W) again;  ∂L/∂x = ∂L/∂y · w
//              no gradient for W (the base is frozen)
//
// Memory: autograd holds 0 extra bytes per 4-bit projection between forward
// and backward, instead of the out·in·sizeof(dtype) of a dequantize-then-
// at::linear graph (2 bytes per weight in bf16: ~137 GB for Llama-2-70B's
// decoder projections). The cost is a second dequantization per projection
// in the backward.
// LoRA adapters (lora.h) stay ordinary autograd ops added to y.

#include <ATen/ATen.h>

#include "backends/native/quant/nf4.h"

namespace protocol {
namespace native {

// x (..., in) → (..., out) in x's dtype, on x's device (W on the same device).
// Differentiable in x only. One row under InferenceMode on a GPU (a decode
// step) goes to the batch-1 GEMV instead where nf4_gemv_available says so. REQUIRES: W.shape == {out, in}; W must not be
// modified in place before the backward (autograd checks the version).
at::Tensor nf4_linear(const at::Tensor& x, const Nf4Tensor& w);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_LINEAR_H_
