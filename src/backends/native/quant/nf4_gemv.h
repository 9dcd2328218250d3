#ifndef PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_GEMV_H_
#define PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_GEMV_H_

// The 4-bit matrix-vector product of single-token decoding, y = x·Wᵀ for one
// row x, read straight from W's NF4 codes and scales (nf4.h): per weight half
// a byte crosses device memory, against the ~4.6 bytes of dequantizing W to
// bf16 and reading it back (bitsandbytes serves batch-1 NF4 the same way,
// kgemm_4bit_inference). Prefill and training keep dequantize + GEMM
// (nf4_linear.h).
//
// Values: each weight is the value nf4_dequantize writes in x's dtype; the
// products are summed in float32 in the kernel's order (nf4_cuda.h:
// nf4_gemv_cuda) and the sum rounded once to x's dtype. So y differs from
// at::linear(x, nf4_dequantize(W, x.dtype)) only by the order of a float32
// sum (cuBLAS and OpenBLAS pick their own), and the CPU twin below gives the
// kernel's bits exactly.

#include <ATen/ATen.h>

#include "backends/native/quant/nf4.h"

namespace protocol {
namespace native {

// Whether nf4_gemv serves x and w: a CUDA build with the project's kernels
// turned on (fused::SetCudaKernels), under InferenceMode (fused::
// InferenceOnly), x on the GPU of w's codes, one row (x.numel() == in),
// float32/bfloat16/float16, in a multiple of 64 (whole blocks per row),
// codes and x 16-byte aligned. Elsewhere the caller dequantizes.
bool nf4_gemv_available(const at::Tensor& x, const Nf4Tensor& w);
// x (..., in) with one row → (..., out) in x's dtype, on the GPU kernel.
// REQUIRES: nf4_gemv_available(x, w).
at::Tensor nf4_gemv(const at::Tensor& x, const Nf4Tensor& w);
// The kernel's arithmetic on a CPU, for tests: the same weights, the same
// float32 fused multiply-adds in the same order (each of 32 lanes summing
// its chunks of 32 weights, then the xor-pairwise sum of the lanes), the
// same rounding. x: float32/bfloat16/float16 on the CPU, one row; w on the
// CPU, in_features a multiple of 64.
at::Tensor nf4_gemv_reference(const at::Tensor& x, const Nf4Tensor& w);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_GEMV_H_
