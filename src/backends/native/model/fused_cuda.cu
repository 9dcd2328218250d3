// CUDA kernels of the fused decode ops (fused_cuda.h). Each is one launch
// that reads its inputs once and writes its outputs once. Rounding follows
// the composite ops (fused_cuda.h): __fmul_rn/__fadd_rn where a composite op
// rounds, so that the compiler contracts nothing into an FMA there.
//
// Work split:
//   rms_norm, add_rms_norm  one thread block per row, a block-wide float sum;
//   silu_mul, rope_cache    one thread per output element (grid-stride);
//   decode_attention        one thread block per (batch, query head); each
//                           warp takes every 8th cached position with an
//                           online softmax (Milakov & Gimelshein 2018), each
//                           lane HD/32 of the head's columns; the 8 warps'
//                           partial sums are merged in shared memory.
#include "backends/native/model/fused_cuda.h"
#include "backends/native/platform/cuda_convert.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace protocol {
namespace native {
namespace fused_cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLaneValues = static_cast<int>(kMaxHeadDim / 32);

using cuda_convert::RoundTo;
using cuda_convert::ToFloat;

// x rounded to T and back: the value a composite op's T-typed output holds.
template <typename T>
__device__ __forceinline__ float Rounded(float x) {
  return ToFloat<T>(RoundTo<T>(x));
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the thread block (kThreads threads), in every thread.
__device__ float BlockSum(float v) {
  __shared__ float partial[kWarps];
  v = WarpSum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += partial[w];
  __syncthreads();  // partial may be written again by a later call
  return total;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) RmsNormRows(const T* __restrict__ x, const T* __restrict__ w,
                                                        T* __restrict__ y, int64_t C, float eps) {
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * C;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * C;
  float squares = 0;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) {
    const float v = ToFloat(xr[c]);
    squares = __fadd_rn(squares, __fmul_rn(v, v));
  }
  const float inv_rms = rsqrtf(__fadd_rn(BlockSum(squares) / static_cast<float>(C), eps));
  for (int64_t c = threadIdx.x; c < C; c += kThreads)
    yr[c] = RoundTo<T>(__fmul_rn(ToFloat(w[c]), Rounded<T>(__fmul_rn(ToFloat(xr[c]), inv_rms))));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) AddRmsNormRows(const T* __restrict__ x, const T* __restrict__ r,
                                                           const T* __restrict__ w, T* __restrict__ h,
                                                           T* __restrict__ y, int64_t C, float eps) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * C;
  float squares = 0;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) {
    const float v = Rounded<T>(__fadd_rn(ToFloat(x[o + c]), ToFloat(r[o + c])));
    h[o + c] = RoundTo<T>(v);
    squares = __fadd_rn(squares, __fmul_rn(v, v));
  }
  const float inv_rms = rsqrtf(__fadd_rn(BlockSum(squares) / static_cast<float>(C), eps));
  // Each thread reads back only the elements it wrote above.
  for (int64_t c = threadIdx.x; c < C; c += kThreads)
    y[o + c] = RoundTo<T>(__fmul_rn(ToFloat(w[c]), Rounded<T>(__fmul_rn(ToFloat(h[o + c]), inv_rms))));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) SiluMulElements(const T* __restrict__ gate_up, T* __restrict__ y,
                                                            int64_t rows, int64_t F) {
  const int64_t n = rows * F, stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const int64_t row = i / F, f = i - row * F;
    const float g = ToFloat(gate_up[row * 2 * F + f]), u = ToFloat(gate_up[row * 2 * F + F + f]);
    const float silu = Rounded<T>(g / __fadd_rn(1.0f, expf(-g)));
    y[i] = RoundTo<T>(__fmul_rn(silu, u));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    RopeCacheElements(const T* __restrict__ qkv, const T* __restrict__ cos, const T* __restrict__ sin,
                      T* __restrict__ q_out, T* __restrict__ k_cache, T* __restrict__ v_cache, int64_t B, int64_t T_,
                      int64_t NH, int64_t NKV, int64_t HD, int64_t capacity, int64_t host_pos,
                      const int64_t* __restrict__ device_pos) {
  const int64_t heads = NH + 2 * NKV, half = HD / 2;
  const int64_t pos = device_pos != nullptr ? *device_pos : host_pos;
  const int64_t n = B * T_ * heads * HD, stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const int64_t d = i % HD, head = (i / HD) % heads, t = (i / (HD * heads)) % T_, b = i / (HD * heads * T_);
    const T* x = qkv + (i - d);  // this head's HD values
    if (head >= NH && (pos < 0 || pos + t >= capacity)) continue;  // a device position outside the cache
    if (head >= NH + NKV) {  // v: into the cache as it is
      v_cache[((b * NKV + (head - NH - NKV)) * capacity + pos + t) * HD + d] = x[d];
      continue;
    }
    // x·cos + rotate_half(x)·sin, rotate_half(x) = (−x2, x1): three rounded ops, as the composite.
    const float c = ToFloat(cos[t * HD + d]), s = ToFloat(sin[t * HD + d]);
    const float partner = d < half ? -ToFloat(x[d + half]) : ToFloat(x[d - half]);
    const T out = RoundTo<T>(__fadd_rn(Rounded<T>(__fmul_rn(ToFloat(x[d]), c)), Rounded<T>(__fmul_rn(partner, s))));
    if (head < NH)
      q_out[((b * T_ + t) * NH + head) * HD + d] = out;
    else
      k_cache[((b * NKV + (head - NH)) * capacity + pos + t) * HD + d] = out;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    DecodeAttentionHeads(const T* __restrict__ q, const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                         T* __restrict__ y, int64_t NH, int64_t NKV, int64_t HD, int64_t capacity,
                         int64_t host_length, const int64_t* __restrict__ device_pos, float scale) {
  const int64_t length =
      device_pos != nullptr ? (*device_pos + 1 < 1 ? 1 : (*device_pos + 1 > capacity ? capacity : *device_pos + 1))
                            : host_length;
  __shared__ float warp_max[kWarps], warp_total[kWarps];
  __shared__ float warp_acc[kWarps][kMaxHeadDim];
  const int64_t bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int64_t kv = h / (NH / NKV);
  const T* K = k_cache + (b * NKV + kv) * capacity * HD;
  const T* V = v_cache + (b * NKV + kv) * capacity * HD;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float qv[kLaneValues], acc[kLaneValues];
#pragma unroll
  for (int j = 0; j < kLaneValues; ++j) {
    const int64_t d = lane + 32 * j;
    qv[j] = d < HD ? ToFloat(q[bh * HD + d]) : 0.0f;
    acc[j] = 0.0f;
  }
  float top = -INFINITY, total = 0.0f;
  for (int64_t s = warp; s < length; s += kWarps) {
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kLaneValues; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < HD) dot += qv[j] * ToFloat(K[s * HD + d]);
    }
    const float score = WarpSum(dot) * scale;
    const float new_top = fmaxf(top, score);
    const float rescale = expf(top - new_top), p = expf(score - new_top);
    total = total * rescale + p;
#pragma unroll
    for (int j = 0; j < kLaneValues; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < HD) acc[j] = acc[j] * rescale + p * ToFloat(V[s * HD + d]);
    }
    top = new_top;
  }
#pragma unroll
  for (int j = 0; j < kLaneValues; ++j) {
    const int64_t d = lane + 32 * j;
    if (d < HD) warp_acc[warp][d] = acc[j];
  }
  if (lane == 0) warp_max[warp] = top, warp_total[warp] = total;
  __syncthreads();
  // Merge: a warp that saw no position (length < kWarps) has top −∞ and weighs 0.
  float overall = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) overall = fmaxf(overall, warp_max[w]);
  for (int64_t d = threadIdx.x; d < HD; d += kThreads) {
    float numerator = 0.0f, denominator = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (warp_max[w] == -INFINITY) continue;
      const float weight = expf(warp_max[w] - overall);
      numerator += warp_acc[w][d] * weight;
      denominator += warp_total[w] * weight;
    }
    y[bh * HD + d] = RoundTo<T>(numerator / denominator);
  }
}

int64_t GridFor(int64_t elements) {
  return std::max<int64_t>(1, std::min<int64_t>((elements + kThreads - 1) / kThreads, int64_t{1} << 20));
}

int Finish(const char** error) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess && error != nullptr) *error = cudaGetErrorString(e);
  return static_cast<int>(e);
}

// Calls f with a null pointer of the element type of `dtype` (its type picks the kernel).
template <typename F>
void WithType(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::kFloat32: f(static_cast<float*>(nullptr)); break;
    case Dtype::kBFloat16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
    case Dtype::kFloat16: f(static_cast<__half*>(nullptr)); break;
  }
}

}  // namespace

int RmsNorm(const void* x, const void* weight, void* y, int64_t rows, int64_t C, double eps, Dtype dtype,
            void* stream, const char** error) {
  if (rows <= 0 || C <= 0) return 0;
  WithType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    RmsNormRows<T><<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<T*>(y), C, static_cast<float>(eps));
  });
  return Finish(error);
}

int AddRmsNorm(const void* x, const void* r, const void* weight, void* h, void* y, int64_t rows, int64_t C,
               double eps, Dtype dtype, void* stream, const char** error) {
  if (rows <= 0 || C <= 0) return 0;
  WithType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    AddRmsNormRows<T><<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(r), static_cast<const T*>(weight), static_cast<T*>(h),
        static_cast<T*>(y), C, static_cast<float>(eps));
  });
  return Finish(error);
}

int SiluMul(const void* gate_up, void* y, int64_t rows, int64_t F, Dtype dtype, void* stream, const char** error) {
  if (rows <= 0 || F <= 0) return 0;
  WithType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SiluMulElements<T><<<static_cast<unsigned>(GridFor(rows * F)), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(gate_up), static_cast<T*>(y), rows, F);
  });
  return Finish(error);
}

int RopeCache(const void* qkv, const void* cos, const void* sin, void* q_out, void* k_cache, void* v_cache,
              int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HD, int64_t capacity, int64_t pos,
              const int64_t* device_pos, Dtype dtype, void* stream, const char** error) {
  const int64_t n = B * T * (NH + 2 * NKV) * HD;
  if (n <= 0) return 0;
  WithType(dtype, [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    RopeCacheElements<E><<<static_cast<unsigned>(GridFor(n)), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const E*>(qkv), static_cast<const E*>(cos), static_cast<const E*>(sin), static_cast<E*>(q_out),
        static_cast<E*>(k_cache), static_cast<E*>(v_cache), B, T, NH, NKV, HD, capacity, pos, device_pos);
  });
  return Finish(error);
}

int DecodeAttention(const void* q, const void* k_cache, const void* v_cache, void* y, int64_t B, int64_t NH,
                    int64_t NKV, int64_t HD, int64_t capacity, int64_t length, const int64_t* device_pos,
                    Dtype dtype, void* stream, const char** error) {
  if (B * NH <= 0) return 0;
  if (HD > kMaxHeadDim || NKV <= 0 || NH % NKV != 0 || capacity < 1 ||
      (device_pos == nullptr && (length < 1 || length > capacity))) {
    if (error != nullptr) *error = "decode_attention: unsupported shape";
    return static_cast<int>(cudaErrorInvalidValue);
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  WithType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DecodeAttentionHeads<T><<<static_cast<unsigned>(B * NH), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(q), static_cast<const T*>(k_cache), static_cast<const T*>(v_cache), static_cast<T*>(y),
        NH, NKV, HD, capacity, length, device_pos, scale);
  });
  return Finish(error);
}

}  // namespace fused_cuda
}  // namespace native
}  // namespace protocol
