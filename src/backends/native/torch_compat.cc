#include "backends/native/torch_compat.h"

#include <torch/csrc/api/include/torch/version.h>

#include <cmath>
#include <limits>

// CUDA facilities exist only where the CUDA runtime headers do (the CUDA wheel);
// Debian's CPU libtorch ships ATen/cuda headers but not cuda_runtime_api.h.
#if __has_include(<cuda_runtime_api.h>) && __has_include(<c10/cuda/CUDACachingAllocator.h>)
#define PROTOCOL_WITH_CUDA 1
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#else
#define PROTOCOL_WITH_CUDA 0
#endif

#define PROTOCOL_TORCH_2 (TORCH_VERSION_MAJOR >= 2)

namespace protocol {
namespace native {
namespace compat {

at::Tensor ScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     bool is_causal, const std::optional<at::Tensor>& mask) {
#if PROTOCOL_TORCH_2
  c10::optional<at::Tensor> attn_mask;
  if (!is_causal && mask) attn_mask = *mask;
  return at::scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal);
#else
  // scores (B,NH,T,S) = q·kᵀ / √HD, accumulated in float32 for a stable softmax.
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).to(at::kFloat) * scale;
  if (is_causal) {
    const int64_t t = q.size(-2), s = k.size(-2);
    at::Tensor future = at::ones({t, s}, q.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  } else if (mask) {
    scores = scores.masked_fill(mask->logical_not(), -std::numeric_limits<float>::infinity());
  }
  at::Tensor probs = at::softmax(scores, -1).to(v.scalar_type());
  return at::matmul(probs, v);  // (B,NH,T,HD)
#endif
}

std::string TorchVersion() { return TORCH_VERSION; }

bool CudaAvailable() { return at::hasCUDA(); }

std::string CudaDeviceName() {
#if PROTOCOL_WITH_CUDA
  if (!at::hasCUDA()) return "";
  return at::cuda::getCurrentDeviceProperties()->name;
#else
  return "";
#endif
}

std::optional<int64_t> CudaPeakMemoryBytes() {
#if PROTOCOL_WITH_CUDA
  if (!at::hasCUDA()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  return stats.allocated_bytes[0].peak;  // StatType::AGGREGATE
#else
  return std::nullopt;
#endif
}

void CudaResetPeakMemory() {
#if PROTOCOL_WITH_CUDA
  if (at::hasCUDA()) c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
#endif
}

void DeviceSynchronize(const at::Device& device) {
#if PROTOCOL_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

}  // namespace compat
}  // namespace native
}  // namespace protocol
