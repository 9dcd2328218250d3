#ifndef PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_CUDA_H_
#define PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_CUDA_H_

// The NF4 dequantization kernel for CUDA devices (nf4_cuda.cu), built where
// a CUDA compiler and a CUDA libtorch are (CMakeLists.txt:
// PROTOCOL_CUDA_KERNELS); nf4_dequantize (nf4.h) is its only caller. Plain
// types only: the .cu file includes no libtorch header.

#include <cstdint>

namespace protocol {
namespace native {

enum class Nf4CudaOutput { kFloat32, kBFloat16, kFloat16 };

// One pass: each packed byte is read once, each output element written once
// in its dtype as the float32 product levels[code] · absmax[block] rounded
// to nearest even (the rounding of at::mul_out into that dtype, and of the
// CPU kernel), high nibble first. `codes` holds blocks·32 bytes, `absmax`
// blocks floats, `out` room for blocks·64 values, all on `device`; the
// kernel is queued on `stream` (a cudaStream_t) and nothing is copied
// between host and device. `levels` are the 16 NF4 levels (nf4.h), passed by
// value. Returns 0 or the cudaError_t of the launch, with its text in
// *error when `error` is not null.
int nf4_dequantize_cuda(const uint8_t* codes, const float* absmax, int64_t blocks, const float levels[16],
                        Nf4CudaOutput dtype, void* out, int device, void* stream, const char** error);

// One 4-bit matrix of `out_features` rows of `in_features` weights (a
// multiple of 64: whole blocks per row), as nf4.h stores it, on the device.
struct Nf4GemvWeights {
  const uint8_t* codes = nullptr;          // out·in/2 bytes, row after row (16-byte aligned)
  const float* absmax = nullptr;           // out·in/64 floats; null when double-quantized
  const uint8_t* absmax_codes = nullptr;   // out·in/64 bytes, double quantization
  const float* absmax_scales = nullptr;    // one float per 256 blocks, double quantization
  const float* absmax_mean = nullptr;      // one float, double quantization
  int64_t out_features = 0;
  int64_t in_features = 0;
};

// The batch-1 GEMV of single-token decoding: y[o] = Σ_i w[o,i]·x[i] read
// straight from the codes, never writing a dequantized weight. Per weight:
// w = level[code]·absmax (float32 product, with absmax = dq_level[code8]·
// scale + mean, float32 multiply then add, when double-quantized) rounded to
// nearest even in x's dtype, as nf4_dequantize writes it; the sum in float32.
// Order of the sum (nf4_gemv_reference in nf4_gemv.h computes the same bits
// on a CPU): one warp per row; lane l takes the row's 32-weight chunks
// l, l+32, l+64, ... in turn, each chunk's weights in order, accumulating
// acc = fma(w, x, acc); the 32 lane sums are then added pairwise with the lane
// 16, 8, 4, 2, 1 away (xor); y[o] = that sum rounded to the dtype. x holds
// in_features values of `dtype` (16-byte aligned), y out_features; queued on
// `stream`, nothing copied to or from the host. Returns 0 or the
// cudaError_t of the launch, with its text in *error.
int nf4_gemv_cuda(const Nf4GemvWeights& w, const float levels[16], const float dq_levels[256], const void* x,
                  Nf4CudaOutput dtype, void* y, int device, void* stream, const char** error);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_CUDA_H_
