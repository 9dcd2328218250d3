#ifndef PROTOCOL_BACKENDS_NATIVE_PLATFORM_CUDA_CONVERT_CUH_
#define PROTOCOL_BACKENDS_NATIVE_PLATFORM_CUDA_CONVERT_CUH_

// Element conversions for the project's CUDA kernels (quant/nf4_cuda.cu,
// model/fused_cuda.cu), included by .cu files only: float32 arithmetic on
// float32, bfloat16 and float16 elements.
//   ToFloat<T>(x)   the element's value as a float (exact);
//   RoundTo<T>(x)   x rounded to nearest even in T (the rounding of ATen's
//                   casts and of a composite op writing a T tensor).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace protocol {
namespace native {
namespace cuda_convert {

template <typename T>
__device__ __forceinline__ float ToFloat(T x);
template <>
__device__ __forceinline__ float ToFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half x) {
  return __half2float(x);
}

template <typename T>
__device__ __forceinline__ T RoundTo(float x);
template <>
__device__ __forceinline__ float RoundTo<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 RoundTo<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half RoundTo<__half>(float x) {
  return __float2half_rn(x);
}

}  // namespace cuda_convert
}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PLATFORM_CUDA_CONVERT_CUH_
