#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_FUSED_CUDA_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_FUSED_CUDA_H_

// CUDA kernels of the five fused decode ops (fused_ops.h), built where a CUDA
// compiler and a CUDA libtorch are (CMakeLists.txt: PROTOCOL_CUDA_KERNELS);
// fused_ops.cc registers them as the ops' CUDA kernels. Plain types only: the
// .cu file includes no libtorch header.
//
// Every tensor is contiguous, on the current device, of one dtype (`dtype`);
// each launcher queues its kernel on `stream` (a cudaStream_t), copies
// nothing between host and device, and returns 0 or the cudaError_t of the
// launch (its text in *error when `error` is not null).
//
// Arithmetic, so that a result equals model.cc's composite ops on the same
// device within the order of a float32 sum: each elementwise step is done in
// float32 and rounded to `dtype` where the composite op writes a tensor of
// that dtype (x·cos, rotate_half(x)·sin and their sum, for RoPE: the same
// bits as the composite); sums of squares, dot products and the softmax
// accumulate in float32, where the CPU kernels accumulate in float64.

#include <cstdint>

namespace protocol {
namespace native {
namespace fused_cuda {

enum class Dtype { kFloat32, kBFloat16, kFloat16 };

// The largest head dimension decode_attention serves (8 values per lane of a warp).
constexpr int64_t kMaxHeadDim = 256;

// y = w ⊙ round(x · rsqrt(mean(x²) + eps)), rows × C.
int RmsNorm(const void* x, const void* weight, void* y, int64_t rows, int64_t C, double eps, Dtype dtype,
            void* stream, const char** error);
// h = round(x + r); y = RmsNorm(h).
int AddRmsNorm(const void* x, const void* r, const void* weight, void* h, void* y, int64_t rows, int64_t C,
               double eps, Dtype dtype, void* stream, const char** error);
// gate_up rows × 2F (the gate's F first) -> y rows × F: round(round(silu(g)) · u).
int SiluMul(const void* gate_up, void* y, int64_t rows, int64_t F, Dtype dtype, void* stream, const char** error);
// qkv (B,T,(NH+2·NKV)·HD); cos, sin (T,HD); q_out (B,T,NH,HD); the caches
// (B,NKV,capacity,HD), written at positions pos..pos+T-1. `device_pos`, when
// not null, is one int64 on the device that the kernel reads for `pos` (a
// decode step whose position lives there, replayable from a CUDA graph); a
// position it reads outside the cache writes nothing to the cache.
int RopeCache(const void* qkv, const void* cos, const void* sin, void* q_out, void* k_cache, void* v_cache,
              int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HD, int64_t capacity, int64_t pos,
              const int64_t* device_pos, Dtype dtype, void* stream, const char** error);
// q (B,NH,HD) against positions 0..length-1 of the caches (B,NKV,capacity,HD);
// y (B,NH,HD). `device_pos`, when not null, is one int64 on the device that
// the kernel reads: length = that position + 1, clamped to 1..capacity.
// REQUIRES: HD <= kMaxHeadDim, NH a multiple of NKV.
int DecodeAttention(const void* q, const void* k_cache, const void* v_cache, void* y, int64_t B, int64_t NH,
                    int64_t NKV, int64_t HD, int64_t capacity, int64_t length, const int64_t* device_pos,
                    Dtype dtype, void* stream, const char** error);

}  // namespace fused_cuda
}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_FUSED_CUDA_H_
