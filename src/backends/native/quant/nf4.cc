#include "backends/native/quant/nf4.h"

#include <ATen/Parallel.h>

#include "backends/native/platform/torch_compat.h"
#if PROTOCOL_CUDA_KERNELS
#include "backends/native/quant/nf4_cuda.h"
#endif

#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace protocol {
namespace native {
namespace {

// NF4 levels from QLoRA appendix E / bitsandbytes (create_normal_map): the
// quantiles of N(0,1) normalised to [-1, 1], with an exact zero.
const float kLevels[16] = {
    -1.0f,                -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f,  0.7229568362236023f,  1.0f};

// bitsandbytes create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
// for exponent i = 0..6, the 2^i midpoints of linspace(0.1, 1, 2^i + 1) times
// ±10^(i−6); then 0 and 1. 2·127 + 2 = 256 distinct values, sorted.
std::vector<float> DynamicLevels() {
  std::vector<double> data;
  for (int i = 0; i < 7; ++i) {
    const int n = (1 << i) + 1;  // boundaries
    const double scale = std::pow(10.0, i - 6);
    for (int j = 0; j + 1 < n; ++j) {
      const double lo = 0.1 + 0.9 * j / (n - 1), hi = 0.1 + 0.9 * (j + 1) / (n - 1);
      data.push_back(scale * (lo + hi) / 2);
      data.push_back(-scale * (lo + hi) / 2);
    }
  }
  data.push_back(0.0);
  data.push_back(1.0);
  std::sort(data.begin(), data.end());
  return std::vector<float>(data.begin(), data.end());
}

// Index of the nearest of `levels` (ascending) for each value: the number of
// midpoints between adjacent levels below the value.
at::Tensor NearestLevel(const at::Tensor& values, const at::Tensor& levels) {
  const int64_t n = levels.size(0);
  at::Tensor midpoints = (levels.narrow(0, 0, n - 1) + levels.narrow(0, 1, n - 1)) / 2;
  return at::bucketize(values, midpoints).to(at::kByte);
}

// (blocks) float32 absmax → codes (blocks), scales (groups), mean (1).
void DoubleQuantize(const at::Tensor& absmax, Nf4Tensor& q) {
  const int64_t blocks = absmax.size(0);
  const int64_t groups = (blocks + kNf4DqGroupSize - 1) / kNf4DqGroupSize;
  q.absmax_mean = absmax.mean().reshape({1});
  at::Tensor centred = at::constant_pad_nd(absmax - q.absmax_mean, {0, groups * kNf4DqGroupSize - blocks}, 0)
                           .view({groups, kNf4DqGroupSize});
  q.absmax_scales = centred.abs().amax({1});  // (groups)
  at::Tensor normalized = centred / q.absmax_scales.clamp_min(1e-30).unsqueeze(1);
  q.absmax_codes = NearestLevel(normalized, nf4_dq_level_table(absmax.device())).view({-1}).narrow(0, 0, blocks).contiguous();
}

}  // namespace

at::Tensor nf4_levels() { return at::tensor(std::vector<float>(kLevels, kLevels + 16), at::kFloat); }

at::Tensor nf4_dq_levels() {
  static const std::vector<float> levels = DynamicLevels();
  return at::tensor(levels, at::kFloat);
}

double nf4_dq_max_error() {
  static const double e8 = [] {
    const std::vector<float> l = DynamicLevels();
    double e = std::max(1.0 + l.front(), 1.0 - l.back());
    for (size_t i = 1; i < l.size(); ++i) e = std::max(e, (static_cast<double>(l[i]) - l[i - 1]) / 2);
    return e;
  }();
  return e8;
}

Nf4Tensor nf4_quantize(const at::Tensor& w, bool double_quant) {
  c10::NoGradGuard no_grad;
  Nf4Tensor q;
  q.shape = w.sizes().vec();
  q.numel = w.numel();
  const int64_t blocks = q.blocks();
  const at::Tensor source = w.detach().reshape({-1});
  const at::Tensor levels = nf4_levels().to(w.device());
  at::Tensor absmax = at::empty({blocks}, w.options().dtype(at::kFloat));
  // Every step is per block of 64, so quantizing kNf4QuantizeChunkBlocks
  // blocks at a time gives the codes and absmax of the whole tensor at once;
  // the workspace (float32 weights, normalized, bucket indices) is one chunk's.
  for (int64_t first = 0; first < blocks; first += kNf4QuantizeChunkBlocks) {
    const int64_t count = std::min(kNf4QuantizeChunkBlocks, blocks - first);
    const int64_t start = first * kNf4BlockSize, length = std::min(count * kNf4BlockSize, q.numel - start);
    // (count, 64) float32, the last block zero-padded.
    at::Tensor chunk = source.narrow(0, start, length).to(at::kFloat);
    chunk = at::constant_pad_nd(chunk, {0, count * kNf4BlockSize - length}, 0).view({count, kNf4BlockSize});
    at::Tensor chunk_absmax = chunk.abs().amax({1});                              // (count)
    at::Tensor normalized = chunk / chunk_absmax.clamp_min(1e-30).unsqueeze(1);  // in [-1, 1]
    chunk = at::Tensor();
    at::Tensor codes = NearestLevel(normalized, levels).view({count, kNf4BlockSize / 2, 2});
    normalized = at::Tensor();
    at::Tensor packed = (codes.select(2, 0).__lshift__(4)).bitwise_or(codes.select(2, 1)).reshape({-1});
    if (!q.packed.defined()) q.packed = at::empty({blocks * kNf4BlockSize / 2}, packed.options());
    q.packed.narrow(0, first * kNf4BlockSize / 2, count * kNf4BlockSize / 2).copy_(packed);
    absmax.narrow(0, first, count).copy_(chunk_absmax);
  }
  if (double_quant) {
    DoubleQuantize(absmax, q);
  } else {
    q.absmax = absmax;
  }
  return q;
}

namespace {

// (256, 2) float32 on the CPU: the two levels a packed byte holds, high nibble first.
at::Tensor MakePairTable() {
  at::Tensor t = at::empty({256, 2}, at::kFloat);
  float* p = t.data_ptr<float>();
  for (int b = 0; b < 256; ++b) {
    p[2 * b] = kLevels[b >> 4];
    p[2 * b + 1] = kLevels[b & 0x0f];
  }
  return t;
}

// One table per device, made on first use from `make` (a CPU tensor), copied
// to the device once. Made outside InferenceMode even when the first caller
// is in it (generation), so that it is an ordinary tensor for every later
// caller. The maps are never destroyed: a CUDA tensor must not be freed by a
// static destructor after the CUDA runtime has shut down.
at::Tensor CachedOnDevice(std::unordered_map<c10::Device, at::Tensor>& cache, std::mutex& mutex,
                          const at::Device& device, at::Tensor (*make)()) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  c10::InferenceMode not_inference(false);
  c10::NoGradGuard no_grad;
  at::Tensor t = make().to(device);
  cache.emplace(device, t);
  return t;
}

}  // namespace

at::Tensor nf4_pair_table(const at::Device& device) {
  static auto* cache = new std::unordered_map<c10::Device, at::Tensor>();
  static auto* mutex = new std::mutex();
  return CachedOnDevice(*cache, *mutex, device, &MakePairTable);
}

at::Tensor nf4_dq_level_table(const at::Device& device) {
  static auto* cache = new std::unordered_map<c10::Device, at::Tensor>();
  static auto* mutex = new std::mutex();
  return CachedOnDevice(*cache, *mutex, device, &nf4_dq_levels);
}

at::Tensor nf4_absmax(const Nf4Tensor& q) {
  if (!q.double_quant()) return q.absmax;
  c10::NoGradGuard no_grad;
  const int64_t blocks = q.absmax_codes.size(0);
  const int64_t groups = q.absmax_scales.size(0);
  at::Tensor levels = nf4_dq_level_table(q.absmax_codes.device());
  at::Tensor values = levels.index_select(0, q.absmax_codes.to(at::kLong));  // (blocks)
  // Each group's scale beside its blocks (an expanded view: no host-side repeat count).
  at::Tensor scales = q.absmax_scales.unsqueeze(1).expand({groups, kNf4DqGroupSize}).reshape({-1}).narrow(0, 0, blocks);
  return values * scales + q.absmax_mean;
}

namespace {

// The CPU kernel: one pass over the packed bytes, blocks in parallel. Per
// block the 16 levels are scaled in float32 and rounded once to T (the
// conversion .to(dtype) does: round to nearest even), then each byte writes
// its two weights from that table. `out` holds blocks·64 values of T.
template <typename T>
void DequantizeBlocks(const uint8_t* codes, const float* scale, int64_t blocks, T* out) {
  at::parallel_for(0, blocks, kNf4DequantizeGrain, [&](int64_t begin, int64_t end) {
    T level[16];
    for (int64_t b = begin; b < end; ++b) {
      const float s = scale[b];
      for (int i = 0; i < 16; ++i) level[i] = static_cast<T>(kLevels[i] * s);
      const uint8_t* c = codes + b * (kNf4BlockSize / 2);
      T* o = out + b * kNf4BlockSize;
      for (int64_t i = 0; i < kNf4BlockSize / 2; ++i) {
        o[2 * i] = level[c[i] >> 4];
        o[2 * i + 1] = level[c[i] & 0x0f];
      }
    }
  });
}

// blocks·64 values → the tensor's shape (the last block's padding cut off).
at::Tensor ToShape(const at::Tensor& out, const Nf4Tensor& q) { return out.view({-1}).narrow(0, 0, q.numel).view(q.shape); }

}  // namespace

at::Tensor nf4_dequantize_aten(const Nf4Tensor& q, at::ScalarType dtype) {
  c10::NoGradGuard no_grad;
  const int64_t blocks = q.blocks();
  at::Tensor absmax = nf4_absmax(q).unsqueeze(1);  // (blocks, 1)
  at::Tensor table = nf4_pair_table(q.packed.device());
  at::Tensor levels = table.index_select(0, q.packed.to(at::kInt)).view({blocks, kNf4BlockSize});  // float32
  if (dtype == at::kFloat) return ToShape(levels.mul_(absmax), q);
  at::Tensor out = at::empty({blocks, kNf4BlockSize}, levels.options().dtype(dtype));
  at::mul_out(out, levels, absmax);  // float32 product, rounded once into dtype
  return ToShape(out, q);
}

std::string nf4_cuda_kernel_architectures() {
#if PROTOCOL_CUDA_KERNELS
  return PROTOCOL_CUDA_KERNEL_ARCHITECTURES;
#else
  return "";
#endif
}

namespace {

// CUDA, float32/bfloat16/float16: the one-pass kernel of nf4_cuda.cu, on the
// current stream; nullopt where this build has no CUDA kernels (the only
// place that asks: PROTOCOL_CUDA_KERNELS, set by CMakeLists.txt).
std::optional<at::Tensor> DequantizeWithCudaKernel(const Nf4Tensor& q, at::ScalarType dtype) {
#if PROTOCOL_CUDA_KERNELS
  if (!q.packed.is_cuda() || (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf)) return std::nullopt;
  c10::NoGradGuard no_grad;
  const at::Device device = q.packed.device();
  const int64_t blocks = q.blocks();
  at::Tensor absmax = nf4_absmax(q).to(at::kFloat).contiguous();
  at::Tensor packed = q.packed.contiguous();
  at::Tensor out = at::empty({blocks * kNf4BlockSize}, packed.options().dtype(dtype));
  const Nf4CudaOutput kind = dtype == at::kFloat      ? Nf4CudaOutput::kFloat32
                             : dtype == at::kBFloat16 ? Nf4CudaOutput::kBFloat16
                                                      : Nf4CudaOutput::kFloat16;
  const char* error = nullptr;
  const int rc = nf4_dequantize_cuda(packed.data_ptr<uint8_t>(), absmax.data_ptr<float>(), blocks, kLevels, kind,
                                     out.data_ptr(), device.index(), compat::CudaCurrentStream(device), &error);
  TORCH_CHECK(rc == 0, "nf4 dequantization kernel on ", device.str(), ": ", error ? error : "CUDA error");
  return ToShape(out, q);
#else
  (void)q;
  (void)dtype;
  return std::nullopt;
#endif
}

}  // namespace

at::Tensor nf4_dequantize(const Nf4Tensor& q, at::ScalarType dtype) {
  if (std::optional<at::Tensor> out = DequantizeWithCudaKernel(q, dtype)) return *out;
  if (!q.packed.device().is_cpu()) return nf4_dequantize_aten(q, dtype);
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) return nf4_dequantize(q, at::kFloat).to(dtype);
  c10::NoGradGuard no_grad;
  const int64_t blocks = q.blocks();
  at::Tensor absmax = nf4_absmax(q).contiguous();
  at::Tensor packed = q.packed.contiguous();
  at::Tensor out = at::empty({blocks * kNf4BlockSize}, at::TensorOptions().dtype(dtype));
  const uint8_t* codes = packed.data_ptr<uint8_t>();
  const float* scale = absmax.data_ptr<float>();
  switch (dtype) {
    case at::kFloat: DequantizeBlocks(codes, scale, blocks, out.data_ptr<float>()); break;
    case at::kBFloat16: DequantizeBlocks(codes, scale, blocks, out.data_ptr<at::BFloat16>()); break;
    default: DequantizeBlocks(codes, scale, blocks, out.data_ptr<at::Half>()); break;
  }
  return ToShape(out, q);
}

int64_t nf4_storage_bytes(int64_t numel, bool double_quant) {
  const int64_t blocks = (numel + kNf4BlockSize - 1) / kNf4BlockSize;
  const int64_t codes = blocks * kNf4BlockSize / 2;
  if (!double_quant) return codes + 4 * blocks;
  const int64_t groups = (blocks + kNf4DqGroupSize - 1) / kNf4DqGroupSize;
  return codes + blocks + 4 * groups + 4;
}

int64_t nf4_tensor_bytes(const Nf4Tensor& q) {
  int64_t bytes = 0;
  for (const at::Tensor* t : {&q.packed, &q.absmax, &q.absmax_codes, &q.absmax_scales, &q.absmax_mean})
    if (t->defined()) bytes += static_cast<int64_t>(t->nbytes());
  return bytes;
}

}  // namespace native
}  // namespace protocol
