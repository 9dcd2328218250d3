#ifndef PROTOCOL_BACKENDS_NATIVE_TORCH_COMPAT_H_
#define PROTOCOL_BACKENDS_NATIVE_TORCH_COMPAT_H_

// Every difference between libtorch 1.13 (Debian, CPU) and libtorch 2.x (the
// CUDA wheel) lives behind these functions; no other file tests a version.
// The native code uses ATen (<ATen/ATen.h>) rather than <torch/torch.h>: it
// needs tensors and autograd, not torch::nn, and compiles in a quarter of the time.

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>

namespace protocol {
namespace native {
namespace compat {

// softmax(q·kᵀ/√HD + mask)·v.  q: (B,NH,T,HD); k, v: (B,NH,S,HD) (key/value
// heads already repeated to NH).  is_causal: query i sees keys 0..i (REQUIRES
// T == S).  mask: optional bool (T,S), true = may attend; used when not causal.
// libtorch 2.x: at::scaled_dot_product_attention (flash / memory-efficient
// kernels on CUDA); 1.13: the same math written out, softmax in float32.
at::Tensor ScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     bool is_causal, const std::optional<at::Tensor>& mask);

std::string TorchVersion();  // "1.13.0"
bool CudaAvailable();
// The current CUDA device's name, e.g. "NVIDIA H100 80GB HBM3"; empty without CUDA.
std::string CudaDeviceName();
// Peak bytes allocated by the caching allocator since the last reset; nullopt without CUDA.
std::optional<int64_t> CudaPeakMemoryBytes();
void CudaResetPeakMemory();
// Waits for queued device work, so that a clock read after it is meaningful. No-op on CPU.
void DeviceSynchronize(const at::Device& device);

}  // namespace compat
}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TORCH_COMPAT_H_
