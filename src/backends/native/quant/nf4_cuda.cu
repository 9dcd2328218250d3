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

}  // namespace

int nf4_dequantize_cuda(const uint8_t* codes, const float* absmax, int64_t blocks, const float levels[16],
                        Nf4CudaOutput dtype, void* out, int device, void* stream, const char** error) {
  if (blocks <= 0) return 0;
  Levels l;
  for (int i = 0; i < 16; ++i) l.v[i] = levels[i];
  int previous = 0;
  cudaError_t e = cudaGetDevice(&previous);
  if (e == cudaSuccess && previous != device) e = cudaSetDevice(device);
  if (e == cudaSuccess) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (dtype) {
      case Nf4CudaOutput::kFloat32: e = Launch<float>(codes, absmax, blocks, l, out, s); break;
      case Nf4CudaOutput::kBFloat16: e = Launch<__nv_bfloat16>(codes, absmax, blocks, l, out, s); break;
      case Nf4CudaOutput::kFloat16: e = Launch<__half>(codes, absmax, blocks, l, out, s); break;
    }
    if (previous != device) cudaSetDevice(previous);
  }
  if (e != cudaSuccess && error != nullptr) *error = cudaGetErrorString(e);
  return static_cast<int>(e);
}

}  // namespace native
}  // namespace protocol
