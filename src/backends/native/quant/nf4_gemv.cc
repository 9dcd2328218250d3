#include "backends/native/quant/nf4_gemv.h"

#include <c10/core/GradMode.h>

#include <array>
#include <cmath>
#include <cstdint>

#include "backends/native/model/fused_ops.h"
#include "backends/native/platform/torch_compat.h"
#if PROTOCOL_CUDA_KERNELS
#include "backends/native/quant/nf4_cuda.h"
#endif

namespace protocol {
namespace native {
namespace {

constexpr int64_t kLanes = 32;         // a warp
constexpr int64_t kChunkWeights = 32;  // one lane's step: 16 bytes of codes

bool GemvDtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

#if PROTOCOL_CUDA_KERNELS
// The CUDA kernel reads 16-byte vectors.
bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
#endif

int64_t InFeatures(const Nf4Tensor& w) { return w.shape.size() == 2 ? w.shape[1] : 0; }

// The CPU twin's rows, with the weight rounded through T (float, c10::BFloat16,
// c10::Half: each conversion from float rounds to nearest even, as the
// kernel's __float2bfloat16_rn / __float2half_rn).
template <typename T>
void ReferenceRows(const uint8_t* codes, const float* absmax, const float* x, int64_t rows, int64_t in, float* y) {
  const at::Tensor levels_tensor = nf4_levels();
  const float* level = levels_tensor.data_ptr<float>();
  const int64_t chunks = in / kChunkWeights;
  for (int64_t r = 0; r < rows; ++r) {
    std::array<float, kLanes> lane{};
    for (int64_t c = 0; c < chunks; ++c) {  // chunk c belongs to lane c % 32, taken in increasing c
      const uint8_t* bytes = codes + r * (in / 2) + c * (kChunkWeights / 2);
      const float s = absmax[r * (in / kNf4BlockSize) + c / 2];
      float& acc = lane[static_cast<size_t>(c % kLanes)];
      for (int64_t j = 0; j < kChunkWeights / 2; ++j) {
        const float hi = static_cast<float>(static_cast<T>(level[bytes[j] >> 4] * s));
        const float lo = static_cast<float>(static_cast<T>(level[bytes[j] & 0x0f] * s));
        acc = std::fma(hi, x[c * kChunkWeights + 2 * j], acc);
        acc = std::fma(lo, x[c * kChunkWeights + 2 * j + 1], acc);
      }
    }
    for (int64_t offset = kLanes / 2; offset > 0; offset /= 2) {  // __shfl_xor_sync: lane l adds lane l ^ offset
      std::array<float, kLanes> next{};
      for (int64_t l = 0; l < kLanes; ++l)
        next[static_cast<size_t>(l)] = lane[static_cast<size_t>(l)] + lane[static_cast<size_t>(l ^ offset)];
      lane = next;
    }
    y[r] = lane[0];
  }
}

// x's shape with its last dimension out.
std::vector<int64_t> OutputShape(const at::Tensor& x, int64_t out) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  return shape;
}

}  // namespace

bool nf4_gemv_available(const at::Tensor& x, const Nf4Tensor& w) {
#if PROTOCOL_CUDA_KERNELS
  const int64_t in = InFeatures(w);
  return fused::CudaKernels() && fused::InferenceOnly() && x.is_cuda() && w.packed.device() == x.device() &&
         GemvDtype(x.scalar_type()) && in > 0 && in % kNf4BlockSize == 0 && x.numel() == in &&
         x.size(-1) == in && x.is_contiguous() && w.packed.is_contiguous() && Aligned16(x.data_ptr()) &&
         Aligned16(w.packed.data_ptr());
#else
  (void)x, (void)w;
  return false;
#endif
}

at::Tensor nf4_gemv(const at::Tensor& x, const Nf4Tensor& w) {
#if PROTOCOL_CUDA_KERNELS
  TORCH_CHECK(nf4_gemv_available(x, w), "nf4_gemv: not served for these inputs (nf4_gemv_available)");
  static const std::array<float, 16> levels = [] {
    std::array<float, 16> a{};
    const at::Tensor t = nf4_levels();
    for (size_t i = 0; i < a.size(); ++i) a[i] = t[static_cast<int64_t>(i)].item<float>();
    return a;
  }();
  static const std::array<float, 256> dq_levels = [] {
    std::array<float, 256> a{};
    const at::Tensor t = nf4_dq_levels();
    for (size_t i = 0; i < a.size(); ++i) a[i] = t[static_cast<int64_t>(i)].item<float>();
    return a;
  }();
  const int64_t out = w.shape[0];
  at::Tensor y = at::empty(OutputShape(x, out), x.options());
  Nf4GemvWeights weights;
  weights.codes = w.packed.data_ptr<uint8_t>();
  if (w.double_quant()) {
    weights.absmax_codes = w.absmax_codes.data_ptr<uint8_t>();
    weights.absmax_scales = w.absmax_scales.data_ptr<float>();
    weights.absmax_mean = w.absmax_mean.data_ptr<float>();
  } else {
    weights.absmax = w.absmax.data_ptr<float>();
  }
  weights.out_features = out;
  weights.in_features = InFeatures(w);
  const Nf4CudaOutput kind = x.scalar_type() == at::kFloat      ? Nf4CudaOutput::kFloat32
                             : x.scalar_type() == at::kBFloat16 ? Nf4CudaOutput::kBFloat16
                                                                : Nf4CudaOutput::kFloat16;
  const char* error = nullptr;
  const int rc = nf4_gemv_cuda(weights, levels.data(), dq_levels.data(), x.data_ptr(), kind, y.data_ptr(),
                               x.device().index(), compat::CudaCurrentStream(x.device()), &error);
  TORCH_CHECK(rc == 0, "nf4 GEMV kernel on ", x.device().str(), ": ", error ? error : "CUDA error");
  return y;
#else
  (void)w;
  TORCH_CHECK(false, "nf4_gemv: this build has no CUDA kernels");
  return x;
#endif
}

at::Tensor nf4_gemv_reference(const at::Tensor& x, const Nf4Tensor& w) {
  const int64_t in = InFeatures(w), out = w.shape.empty() ? 0 : w.shape[0];
  TORCH_CHECK(in > 0 && in % kNf4BlockSize == 0, "nf4_gemv_reference: in_features must be a multiple of 64");
  TORCH_CHECK(x.device().is_cpu() && w.packed.device().is_cpu() && GemvDtype(x.scalar_type()) && x.numel() == in,
              "nf4_gemv_reference: one float32/bfloat16/float16 row on the CPU");
  c10::NoGradGuard no_grad;
  const at::Tensor xf = x.to(at::kFloat).contiguous();  // exact: every bf16/fp16 value is a float
  const at::Tensor absmax = nf4_absmax(w).contiguous();  // the kernel's reconstruction: multiply, then add
  const at::Tensor codes = w.packed.contiguous();
  at::Tensor y = at::empty({out}, at::kFloat);
  const uint8_t* c = codes.data_ptr<uint8_t>();
  const float* s = absmax.data_ptr<float>();
  switch (x.scalar_type()) {
    case at::kFloat: ReferenceRows<float>(c, s, xf.data_ptr<float>(), out, in, y.data_ptr<float>()); break;
    case at::kBFloat16: ReferenceRows<c10::BFloat16>(c, s, xf.data_ptr<float>(), out, in, y.data_ptr<float>()); break;
    default: ReferenceRows<c10::Half>(c, s, xf.data_ptr<float>(), out, in, y.data_ptr<float>()); break;
  }
  return y.to(x.scalar_type()).view(OutputShape(x, out));
}

}  // namespace native
}  // namespace protocol
