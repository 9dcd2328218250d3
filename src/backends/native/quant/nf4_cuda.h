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

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_CUDA_H_
