// The NF4 dequantization kernel (nf4_cuda.h). Memory-bound: per weight it
// reads half a byte of codes and 4/64 of a byte of absmax, and writes one
// value of the output dtype; nothing else touches device memory (the 16
// levels travel as a kernel argument and sit in shared memory).
//
// Work split: one thread per 32-bit word of codes, i.e. 8 weights of one
// 64-weight block (a block is 32 bytes = 8 words), so each thread reads one
// absmax and writes its 8 values with 16-byte stores. Codes that are not
// 4-byte aligned (a view into a gathered buffer at an odd offset) take a
// per-byte kernel instead; the values are the same.
//
// The batch-1 GEMV (nf4_gemv_cuda): one warp per output row, each lane
// reading 16 bytes of codes (32 weights, half a block) at a time, so a warp
// reads 512 consecutive bytes per step; x is read through the cache; per row
// 0.5 byte per weight of codes and 4/64 (1/64 double-quantized) of absmax
// cross device memory, and one value is written.
#include "backends/native/quant/nf4_cuda.h"
#include "backends/native/platform/cuda_convert.cuh"

#include <cuda_runtime.h>

#include <algorithm>

namespace protocol {
namespace native {
namespace {

struct Levels {
  float v[16];
};

using cuda_convert::RoundTo;

constexpr int kThreads = 256;
constexpr int64_t kWordsPerBlock = 8;  // 32 bytes of codes per 64-weight block

// Eight values of T as whole 16-byte stores (one for 2-byte T, two for float).
template <typename T>
struct alignas(16) Eight {
  T v[8];
};

template <typename T>
__global__ void __launch_bounds__(kThreads) DequantizeWords(const uint32_t* __restrict__ codes,
                                                            const float* __restrict__ absmax, int64_t words,
                                                            Levels levels, T* __restrict__ out) {
  __shared__ float level[16];
  if (threadIdx.x < 16) level[threadIdx.x] = levels.v[threadIdx.x];
  __syncthreads();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    const uint32_t c = __ldg(codes + w);
    const float s = __ldg(absmax + w / kWordsPerBlock);
    Eight<T> o;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // little-endian: byte i of the word is code byte 4w+i
      const uint32_t byte = (c >> (8 * i)) & 0xffu;
      o.v[2 * i] = RoundTo<T>(level[byte >> 4] * s);
      o.v[2 * i + 1] = RoundTo<T>(level[byte & 0x0fu] * s);
    }
    reinterpret_cast<Eight<T>*>(out)[w] = o;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) DequantizeBytes(const uint8_t* __restrict__ codes,
                                                            const float* __restrict__ absmax, int64_t bytes,
                                                            Levels levels, T* __restrict__ out) {
  __shared__ float level[16];
  if (threadIdx.x < 16) level[threadIdx.x] = levels.v[threadIdx.x];
  __syncthreads();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < bytes; b += stride) {
    const uint32_t byte = codes[b];
    const float s = absmax[b / 32];
    out[2 * b] = RoundTo<T>(level[byte >> 4] * s);
    out[2 * b + 1] = RoundTo<T>(level[byte & 0x0fu] * s);
  }
}

template <typename T>
cudaError_t Launch(const uint8_t* codes, const float* absmax, int64_t blocks, const Levels& levels, void* out,
                   cudaStream_t stream) {
  const bool aligned = reinterpret_cast<uintptr_t>(codes) % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int64_t items = aligned ? blocks * kWordsPerBlock : blocks * 32;
  // A grid-stride loop over at most 2^20 thread blocks (enough to fill any GPU many times over).
  const int64_t grid = std::max<int64_t>(1, std::min<int64_t>((items + kThreads - 1) / kThreads, int64_t{1} << 20));
  if (aligned) {
    DequantizeWords<T><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
        reinterpret_cast<const uint32_t*>(codes), absmax, items, levels, static_cast<T*>(out));
  } else {
    DequantizeBytes<T><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(codes, absmax, items, levels,
                                                                            static_cast<T*>(out));
  }
  return cudaGetLastError();
}

// ---- the batch-1 GEMV ---------------------------------------------------------

using cuda_convert::ToFloat;

struct DqLevels {
  float v[256];
};

constexpr int kGemvWarps = 4;              // rows per thread block
constexpr int64_t kChunkWeights = 32;      // one lane's step: 16 bytes of codes
constexpr int64_t kChunksPerBlock = 2;     // of a 64-weight block

// The weight a code stands for, as nf4_dequantize writes it in T, widened back.
template <typename T>
__device__ __forceinline__ float Weight(float level, float absmax) {
  return ToFloat<T>(RoundTo<T>(__fmul_rn(level, absmax)));
}

// x[32·c .. 32·c+31] as floats, read in 16-byte loads (x is 16-byte aligned).
template <typename T>
__device__ __forceinline__ void LoadChunkOfX(const T* __restrict__ x, int64_t c, float (&v)[kChunkWeights]) {
  constexpr int kPerLoad = 16 / sizeof(T);
  const uint4* p = reinterpret_cast<const uint4*>(x + c * kChunkWeights);
#pragma unroll
  for (int i = 0; i < kChunkWeights / kPerLoad; ++i) {
    const uint4 u = __ldg(p + i);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int j = 0; j < kPerLoad; ++j) v[i * kPerLoad + j] = ToFloat<T>(e[j]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kGemvWarps * 32) Nf4Gemv(Nf4GemvWeights w, Levels levels, DqLevels dq,
                                                          const T* __restrict__ x, T* __restrict__ y) {
  __shared__ float level[16];
  __shared__ float dq_level[256];
  const bool double_quant = w.absmax == nullptr;
  for (int i = threadIdx.x; i < 16; i += blockDim.x) level[i] = levels.v[i];
  if (double_quant)
    for (int i = threadIdx.x; i < 256; i += blockDim.x) dq_level[i] = dq.v[i];
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (row >= w.out_features) return;
  const int64_t chunks = w.in_features / kChunkWeights;
  const uint4* codes = reinterpret_cast<const uint4*>(w.codes + row * (w.in_features / 2));
  const int64_t first_block = row * (w.in_features / 64);
  const float mean = double_quant ? __ldg(w.absmax_mean) : 0.0f;
  float acc = 0.0f;
  for (int64_t c = lane; c < chunks; c += 32) {
    const uint4 packed = __ldg(codes + c);
    const int64_t block = first_block + c / kChunksPerBlock;
    const float absmax =
        double_quant ? __fadd_rn(__fmul_rn(dq_level[__ldg(w.absmax_codes + block)], __ldg(w.absmax_scales + block / 256)),
                                 mean)
                     : __ldg(w.absmax + block);
    float xv[kChunkWeights];
    LoadChunkOfX(x, c, xv);
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
    for (int j = 0; j < 16; ++j) {  // little-endian: byte j of the chunk, high nibble first
      const uint32_t byte = (words[j / 4] >> (8 * (j % 4))) & 0xffu;
      acc = fmaf(Weight<T>(level[byte >> 4], absmax), xv[2 * j], acc);
      acc = fmaf(Weight<T>(level[byte & 0x0fu], absmax), xv[2 * j + 1], acc);
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
  if (lane == 0) y[row] = RoundTo<T>(acc);
}

template <typename T>
cudaError_t LaunchGemv(const Nf4GemvWeights& w, const Levels& levels, const DqLevels& dq, const void* x, void* y,
                       cudaStream_t stream) {
  const int64_t grid = (w.out_features + kGemvWarps - 1) / kGemvWarps;
  Nf4Gemv<T><<<static_cast<unsigned>(grid), kGemvWarps * 32, 0, stream>>>(w, levels, dq, static_cast<const T*>(x),
                                                                          static_cast<T*>(y));
  return cudaGetLastError();
}

// Runs `launch` with `device` current, restoring the previous device; the
// error's text in *error.
template <typename F>
int OnDevice(int device, const char** error, F launch) {
  int previous = 0;
  cudaError_t e = cudaGetDevice(&previous);
  if (e == cudaSuccess && previous != device) e = cudaSetDevice(device);
  if (e == cudaSuccess) {
    e = launch();
    if (previous != device) cudaSetDevice(previous);
  }
  if (e != cudaSuccess && error != nullptr) *error = cudaGetErrorString(e);
  return static_cast<int>(e);
}

}  // namespace

int nf4_gemv_cuda(const Nf4GemvWeights& w, const float levels[16], const float dq_levels[256], const void* x,
                  Nf4CudaOutput dtype, void* y, int device, void* stream, const char** error) {
  if (w.out_features <= 0) return 0;
  if (w.in_features % 64 != 0 || reinterpret_cast<uintptr_t>(w.codes) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    if (error != nullptr) *error = "nf4 GEMV: in_features must be a multiple of 64, codes and x 16-byte aligned";
    return static_cast<int>(cudaErrorInvalidValue);
  }
  Levels l;
  for (int i = 0; i < 16; ++i) l.v[i] = levels[i];
  DqLevels dq;
  for (int i = 0; i < 256; ++i) dq.v[i] = w.absmax == nullptr ? dq_levels[i] : 0.0f;
  return OnDevice(device, error, [&]() {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (dtype) {
      case Nf4CudaOutput::kFloat32: return LaunchGemv<float>(w, l, dq, x, y, s);
      case Nf4CudaOutput::kBFloat16: return LaunchGemv<__nv_bfloat16>(w, l, dq, x, y, s);
      case Nf4CudaOutput::kFloat16: break;
    }
    return LaunchGemv<__half>(w, l, dq, x, y, s);
  });
}

int nf4_dequantize_cuda(const uint8_t* codes, const float* absmax, int64_t blocks, const float levels[16],
                        Nf4CudaOutput dtype, void* out, int device, void* stream, const char** error) {
  if (blocks <= 0) return 0;
  Levels l;
  for (int i = 0; i < 16; ++i) l.v[i] = levels[i];
  return OnDevice(device, error, [&]() {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (dtype) {
      case Nf4CudaOutput::kFloat32: return Launch<float>(codes, absmax, blocks, l, out, s);
      case Nf4CudaOutput::kBFloat16: return Launch<__nv_bfloat16>(codes, absmax, blocks, l, out, s);
      case Nf4CudaOutput::kFloat16: break;
    }
    return Launch<__half>(codes, absmax, blocks, l, out, s);
  });
}

}  // namespace native
}  // namespace protocol
