#include "backends/native/model/fused_ops.h"

#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <tuple>
#include <vector>

#if PROTOCOL_CUDA_KERNELS
#include "backends/native/model/fused_cuda.h"
#include "backends/native/platform/torch_compat.h"
#endif

namespace protocol {
namespace native {
namespace fused {
namespace {

// Rows of at least this many elements a thread (at::parallel_for's grain).
int64_t GrainRows(int64_t row_elements) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_elements)); }

// w ⊙ x / √(mean(x²) + ε) for one row of C; x and y may be the same memory.
void RmsRow(const float* x, const float* w, float* y, int64_t C, double eps) {
  double squares = 0;
  for (int64_t c = 0; c < C; ++c) squares += static_cast<double>(x[c]) * x[c];
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(C) + eps));
  for (int64_t c = 0; c < C; ++c) y[c] = w[c] * (x[c] * inv_rms);
}

at::Tensor RmsNormCpu(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  const at::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
  at::Tensor y = at::empty_like(x);
  const int64_t C = x.size(-1), rows = x.numel() / std::max<int64_t>(1, C);
  const float *xp = x.data_ptr<float>(), *wp = weight.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, rows, GrainRows(C), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) RmsRow(xp + r * C, wp, yp + r * C, C, eps);
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> AddRmsNormCpu(const at::Tensor& x_in, const at::Tensor& r_in,
                                                 const at::Tensor& weight_in, double eps) {
  const at::Tensor x = x_in.contiguous(), r = r_in.contiguous(), weight = weight_in.contiguous();
  at::Tensor h = at::empty_like(x), y = at::empty_like(x);
  const int64_t C = x.size(-1), rows = x.numel() / std::max<int64_t>(1, C);
  const float *xp = x.data_ptr<float>(), *rp = r.data_ptr<float>(), *wp = weight.data_ptr<float>();
  float *hp = h.data_ptr<float>(), *yp = y.data_ptr<float>();
  at::parallel_for(0, rows, GrainRows(C), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t o = row * C;
      for (int64_t c = 0; c < C; ++c) hp[o + c] = xp[o + c] + rp[o + c];
      RmsRow(hp + o, wp, yp + o, C, eps);
    }
  });
  return {h, y};
}

at::Tensor SiluMulCpu(const at::Tensor& gate_up_in) {
  const at::Tensor gate_up = gate_up_in.contiguous();
  const int64_t F = gate_up.size(-1) / 2, rows = gate_up.numel() / std::max<int64_t>(1, 2 * F);
  std::vector<int64_t> sizes = gate_up.sizes().vec();
  sizes.back() = F;
  at::Tensor y = at::empty(sizes, gate_up.options());
  const float* in = gate_up.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, rows, GrainRows(2 * F), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *g = in + r * 2 * F, *u = g + F;
      float* o = out + r * F;
      for (int64_t f = 0; f < F; ++f) o[f] = g[f] / (1.0f + std::exp(-g[f])) * u[f];
    }
  });
  return y;
}

// x·cos + rotate_half(x)·sin for one head of HD, rotate_half(x) = (−x2, x1):
// the composite's multiplications and addition, in its order.
void RopeHead(const float* x, const float* cos, const float* sin, float* y, int64_t HD) {
  const int64_t half = HD / 2;
  for (int64_t i = 0; i < half; ++i) y[i] = x[i] * cos[i] + (-x[i + half]) * sin[i];
  for (int64_t i = half; i < HD; ++i) y[i] = x[i] * cos[i] + x[i - half] * sin[i];
}

at::Tensor RopeCacheCpu(const at::Tensor& qkv_in, const at::Tensor& cos_in, const at::Tensor& sin_in,
                        at::Tensor& k_cache, at::Tensor& v_cache, int64_t pos, int64_t NH, int64_t NKV) {
  const at::Tensor qkv = qkv_in.contiguous(), cos = cos_in.contiguous(), sin = sin_in.contiguous();
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "rope_cache: the KV cache must be contiguous");
  const int64_t B = qkv.size(0), T = qkv.size(1), HD = k_cache.size(3), capacity = k_cache.size(2);
  TORCH_CHECK(qkv.size(2) == (NH + 2 * NKV) * HD, "rope_cache: qkv has ", qkv.size(2), " columns, not (",
              NH, " + 2·", NKV, ")·", HD);
  TORCH_CHECK(pos >= 0 && pos + T <= capacity, "rope_cache: positions ", pos, "..", pos + T - 1,
              " outside the cache's ", capacity);
  at::Tensor q = at::empty({B, T, NH, HD}, qkv.options());
  const float *in = qkv.data_ptr<float>(), *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  float *qp = q.data_ptr<float>(), *kp = k_cache.data_ptr<float>(), *vp = v_cache.data_ptr<float>();
  const int64_t heads = NH + 2 * NKV;
  at::parallel_for(0, B * T * heads, GrainRows(HD), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t h = i % heads, t = (i / heads) % T, b = i / (heads * T);
      const float* x = in + i * HD;
      const float *c = cp + t * HD, *s = sp + t * HD;
      if (h < NH) {
        RopeHead(x, c, s, qp + ((b * T + t) * NH + h) * HD, HD);
      } else if (h < NH + NKV) {
        RopeHead(x, c, s, kp + ((b * NKV + (h - NH)) * capacity + pos + t) * HD, HD);
      } else {
        std::copy(x, x + HD, vp + ((b * NKV + (h - NH - NKV)) * capacity + pos + t) * HD);
      }
    }
  });
  return q;
}

at::Tensor DecodeAttentionCpu(const at::Tensor& q_in, const at::Tensor& k_cache, const at::Tensor& v_cache,
                              int64_t length) {
  const at::Tensor q = q_in.contiguous();
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "decode_attention: the KV cache must be contiguous");
  const int64_t B = q.size(0), NH = q.size(2), HD = q.size(3), NKV = k_cache.size(1), capacity = k_cache.size(2);
  TORCH_CHECK(q.size(1) == 1, "decode_attention: one query position, not ", q.size(1));
  TORCH_CHECK(length >= 1 && length <= capacity, "decode_attention: ", length, " positions in a cache of ", capacity);
  const int64_t rep = NH / NKV;
  at::Tensor y = at::empty({B, 1, NH * HD}, q.options());
  const float *qp = q.data_ptr<float>(), *kp = k_cache.data_ptr<float>(), *vp = v_cache.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(HD));
  at::parallel_for(0, B * NH, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> p(static_cast<size_t>(length)), acc(static_cast<size_t>(HD));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / NH, h = i % NH;
      const float* qh = qp + i * HD;
      const float* K = kp + (b * NKV + h / rep) * capacity * HD;
      const float* V = vp + (b * NKV + h / rep) * capacity * HD;
      double top = -INFINITY;
      for (int64_t s = 0; s < length; ++s) {
        double dot = 0;
        for (int64_t d = 0; d < HD; ++d) dot += static_cast<double>(qh[d]) * K[s * HD + d];
        p[s] = dot * scale;
        top = std::max(top, p[s]);
      }
      double total = 0;
      for (int64_t s = 0; s < length; ++s) total += (p[s] = std::exp(p[s] - top));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t s = 0; s < length; ++s) {
        const double weight = p[s] / total;
        for (int64_t d = 0; d < HD; ++d) acc[d] += weight * V[s * HD + d];
      }
      for (int64_t d = 0; d < HD; ++d) yp[i * HD + d] = static_cast<float>(acc[d]);
    }
  });
  return y;
}

// The position of a decode step kept on the device (the _at ops): one int64
// in `pos`, on the tensors' device; on the CPU the kernel reads it from its
// memory (no op, no copy).
void CheckPosition(const at::Tensor& pos, const at::Tensor& like, const char* op) {
  TORCH_CHECK(pos.scalar_type() == at::kLong && pos.numel() == 1 && pos.device() == like.device(), op,
              ": the position is one int64 on the tensors' device (", like.device(), "), not ", pos.scalar_type(), " x ",
              pos.numel(), " on ", pos.device());
}

at::Tensor RopeCacheAtCpu(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                          at::Tensor& v_cache, const at::Tensor& pos, int64_t NH, int64_t NKV) {
  CheckPosition(pos, qkv, "rope_cache_at");
  TORCH_CHECK(qkv.size(1) == 1, "rope_cache_at: one position, not ", qkv.size(1));
  return RopeCacheCpu(qkv, cos, sin, k_cache, v_cache, *pos.data_ptr<int64_t>(), NH, NKV);
}

at::Tensor DecodeAttentionAtCpu(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                const at::Tensor& pos) {
  CheckPosition(pos, q, "decode_attention_at");
  return DecodeAttentionCpu(q, k_cache, v_cache, *pos.data_ptr<int64_t>() + 1);
}

#if PROTOCOL_CUDA_KERNELS
// The CUDA kernels (fused_cuda.cu): the same contracts as the CPU kernels
// above, on the tensors' device and its current stream, in float32,
// bfloat16 or float16.

fused_cuda::Dtype CudaDtype(const at::Tensor& x) {
  switch (x.scalar_type()) {
    case at::kFloat: return fused_cuda::Dtype::kFloat32;
    case at::kBFloat16: return fused_cuda::Dtype::kBFloat16;
    case at::kHalf: return fused_cuda::Dtype::kFloat16;
    default: TORCH_CHECK(false, "protocol fused ops on CUDA: float32, bfloat16 or float16, not ", x.scalar_type());
  }
}

void CheckLaunch(int rc, const char* op, const char* error) {
  TORCH_CHECK(rc == 0, "protocol::", op, " on CUDA: ", error != nullptr ? error : "CUDA error");
}

at::Tensor RmsNormCuda(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  const c10::DeviceGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous(), weight = weight_in.to(x_in.scalar_type()).contiguous();
  at::Tensor y = at::empty_like(x);
  const int64_t C = x.size(-1);
  const char* error = nullptr;
  CheckLaunch(fused_cuda::RmsNorm(x.data_ptr(), weight.data_ptr(), y.data_ptr(), x.numel() / std::max<int64_t>(1, C),
                                  C, eps, CudaDtype(x), compat::CudaCurrentStream(x.device()), &error),
              "rms_norm", error);
  return y;
}

std::tuple<at::Tensor, at::Tensor> AddRmsNormCuda(const at::Tensor& x_in, const at::Tensor& r_in,
                                                  const at::Tensor& weight_in, double eps) {
  const c10::DeviceGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous(), r = r_in.contiguous(), weight = weight_in.to(x_in.scalar_type()).contiguous();
  at::Tensor h = at::empty_like(x), y = at::empty_like(x);
  const int64_t C = x.size(-1);
  const char* error = nullptr;
  CheckLaunch(fused_cuda::AddRmsNorm(x.data_ptr(), r.data_ptr(), weight.data_ptr(), h.data_ptr(), y.data_ptr(),
                                     x.numel() / std::max<int64_t>(1, C), C, eps, CudaDtype(x),
                                     compat::CudaCurrentStream(x.device()), &error),
              "add_rms_norm", error);
  return {h, y};
}

at::Tensor SiluMulCuda(const at::Tensor& gate_up_in) {
  const c10::DeviceGuard guard(gate_up_in.device());
  const at::Tensor gate_up = gate_up_in.contiguous();
  const int64_t F = gate_up.size(-1) / 2;
  std::vector<int64_t> sizes = gate_up.sizes().vec();
  sizes.back() = F;
  at::Tensor y = at::empty(sizes, gate_up.options());
  const char* error = nullptr;
  CheckLaunch(fused_cuda::SiluMul(gate_up.data_ptr(), y.data_ptr(), gate_up.numel() / std::max<int64_t>(1, 2 * F), F,
                                  CudaDtype(gate_up), compat::CudaCurrentStream(gate_up.device()), &error),
              "silu_mul", error);
  return y;
}

// `device_pos` null: the position `pos` from the host; else the one int64 the
// kernel reads on the device (T == 1; the host cannot check it: the kernel
// writes no cache position outside the cache).
at::Tensor RopeCacheCudaFrom(const at::Tensor& qkv_in, const at::Tensor& cos_in, const at::Tensor& sin_in,
                             at::Tensor& k_cache, at::Tensor& v_cache, int64_t pos, const int64_t* device_pos,
                             int64_t NH, int64_t NKV) {
  const c10::DeviceGuard guard(qkv_in.device());
  const at::ScalarType dtype = qkv_in.scalar_type();
  const at::Tensor qkv = qkv_in.contiguous(), cos = cos_in.to(dtype).contiguous(), sin = sin_in.to(dtype).contiguous();
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "rope_cache: the KV cache must be contiguous");
  TORCH_CHECK(k_cache.scalar_type() == dtype && v_cache.scalar_type() == dtype, "rope_cache: the KV cache is ",
              k_cache.scalar_type(), ", qkv ", dtype);
  const int64_t B = qkv.size(0), T = qkv.size(1), HD = k_cache.size(3), capacity = k_cache.size(2);
  TORCH_CHECK(qkv.size(2) == (NH + 2 * NKV) * HD, "rope_cache: qkv has ", qkv.size(2), " columns, not (", NH,
              " + 2·", NKV, ")·", HD);
  if (device_pos == nullptr) {
    TORCH_CHECK(pos >= 0 && pos + T <= capacity, "rope_cache: positions ", pos, "..", pos + T - 1,
                " outside the cache's ", capacity);
  } else {
    TORCH_CHECK(T == 1, "rope_cache_at: one position, not ", T);
  }
  at::Tensor q = at::empty({B, T, NH, HD}, qkv.options());
  const char* error = nullptr;
  CheckLaunch(fused_cuda::RopeCache(qkv.data_ptr(), cos.data_ptr(), sin.data_ptr(), q.data_ptr(), k_cache.data_ptr(),
                                    v_cache.data_ptr(), B, T, NH, NKV, HD, capacity, pos, device_pos, CudaDtype(qkv),
                                    compat::CudaCurrentStream(qkv.device()), &error),
              "rope_cache", error);
  return q;
}

at::Tensor RopeCacheCuda(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                         at::Tensor& v_cache, int64_t pos, int64_t NH, int64_t NKV) {
  return RopeCacheCudaFrom(qkv, cos, sin, k_cache, v_cache, pos, nullptr, NH, NKV);
}

at::Tensor RopeCacheAtCuda(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                           at::Tensor& v_cache, const at::Tensor& pos, int64_t NH, int64_t NKV) {
  CheckPosition(pos, qkv, "rope_cache_at");
  return RopeCacheCudaFrom(qkv, cos, sin, k_cache, v_cache, 0, pos.data_ptr<int64_t>(), NH, NKV);
}

// `device_pos` as above: the length is the position read on the device + 1.
at::Tensor DecodeAttentionCudaFrom(const at::Tensor& q_in, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                   int64_t length, const int64_t* device_pos) {
  const c10::DeviceGuard guard(q_in.device());
  const at::Tensor q = q_in.contiguous();
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "decode_attention: the KV cache must be contiguous");
  const int64_t B = q.size(0), NH = q.size(2), HD = q.size(3), NKV = k_cache.size(1), capacity = k_cache.size(2);
  TORCH_CHECK(q.size(1) == 1, "decode_attention: one query position, not ", q.size(1));
  if (device_pos == nullptr) {
    TORCH_CHECK(length >= 1 && length <= capacity, "decode_attention: ", length, " positions in a cache of ", capacity);
  }
  TORCH_CHECK(HD <= fused_cuda::kMaxHeadDim, "decode_attention on CUDA: head dimension ", HD, " above ",
              fused_cuda::kMaxHeadDim);
  at::Tensor y = at::empty({B, 1, NH * HD}, q.options());
  const char* error = nullptr;
  CheckLaunch(fused_cuda::DecodeAttention(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), y.data_ptr(), B, NH,
                                          NKV, HD, capacity, length, device_pos, CudaDtype(q),
                                          compat::CudaCurrentStream(q.device()), &error),
              "decode_attention", error);
  return y;
}

at::Tensor DecodeAttentionCuda(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                               int64_t length) {
  return DecodeAttentionCudaFrom(q, k_cache, v_cache, length, nullptr);
}

at::Tensor DecodeAttentionAtCuda(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                 const at::Tensor& pos) {
  CheckPosition(pos, q, "decode_attention_at");
  return DecodeAttentionCudaFrom(q, k_cache, v_cache, 0, pos.data_ptr<int64_t>());
}
#endif  // PROTOCOL_CUDA_KERNELS

// Off until a caller turns it on (SetCudaKernels).
std::atomic<bool> cuda_kernels_on{false};

}  // namespace

// The schemas, the CPU kernels and, in a build with CUDA kernels, the CUDA
// ones; the ops are called only where Available() says so.
TORCH_LIBRARY(protocol, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("add_rms_norm(Tensor x, Tensor r, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("silu_mul(Tensor gate_up) -> Tensor");
  m.def("rope_cache(Tensor qkv, Tensor cos, Tensor sin, Tensor(a!) k_cache, Tensor(b!) v_cache, int pos, "
        "int n_heads, int n_kv_heads) -> Tensor");
  m.def("decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, int length) -> Tensor");
  m.def("rope_cache_at(Tensor qkv, Tensor cos, Tensor sin, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor pos, "
        "int n_heads, int n_kv_heads) -> Tensor");
  m.def("decode_attention_at(Tensor q, Tensor k_cache, Tensor v_cache, Tensor pos) -> Tensor");
}

TORCH_LIBRARY_IMPL(protocol, CPU, m) {
  m.impl("rms_norm", &RmsNormCpu);
  m.impl("add_rms_norm", &AddRmsNormCpu);
  m.impl("silu_mul", &SiluMulCpu);
  m.impl("rope_cache", &RopeCacheCpu);
  m.impl("decode_attention", &DecodeAttentionCpu);
  m.impl("rope_cache_at", &RopeCacheAtCpu);
  m.impl("decode_attention_at", &DecodeAttentionAtCpu);
}

#if PROTOCOL_CUDA_KERNELS
TORCH_LIBRARY_IMPL(protocol, CUDA, m) {
  m.impl("rms_norm", &RmsNormCuda);
  m.impl("add_rms_norm", &AddRmsNormCuda);
  m.impl("silu_mul", &SiluMulCuda);
  m.impl("rope_cache", &RopeCacheCuda);
  m.impl("decode_attention", &DecodeAttentionCuda);
  m.impl("rope_cache_at", &RopeCacheAtCuda);
  m.impl("decode_attention_at", &DecodeAttentionAtCuda);
}
#endif

// Each op is found once (its handle is static) and called through the
// dispatcher, so that it is recorded as one op.
#define PROTOCOL_FUSED_OP(name, ...) \
  c10::Dispatcher::singleton().findSchemaOrThrow("protocol::" name, "").typed<__VA_ARGS__>()

bool InferenceOnly() { return c10::InferenceMode::is_enabled(); }

bool CudaKernelsBuilt() {
#if PROTOCOL_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool SetCudaKernels(bool on) {
  cuda_kernels_on = on && CudaKernelsBuilt();
  return cuda_kernels_on;
}

bool CudaKernels() { return cuda_kernels_on; }

bool Available(const at::Tensor& x) {
  if (!InferenceOnly()) return false;
  if (x.device().is_cpu()) return x.scalar_type() == at::kFloat;
  return x.is_cuda() && cuda_kernels_on &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf);
}

bool AttentionAvailable(const at::Tensor& x, int64_t head_dim) {
  return Available(x) && (x.device().is_cpu() || head_dim <= kMaxCudaHeadDim);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  static auto op = PROTOCOL_FUSED_OP("rms_norm", at::Tensor(const at::Tensor&, const at::Tensor&, double));
  return op.call(x, weight, eps);
}

std::pair<at::Tensor, at::Tensor> AddRmsNorm(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight,
                                             double eps) {
  static auto op = PROTOCOL_FUSED_OP("add_rms_norm", std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                         double));
  std::tuple<at::Tensor, at::Tensor> out = op.call(x, r, weight, eps);
  return {std::get<0>(out), std::get<1>(out)};
}

at::Tensor SiluMul(const at::Tensor& gate_up) {
  static auto op = PROTOCOL_FUSED_OP("silu_mul", at::Tensor(const at::Tensor&));
  return op.call(gate_up);
}

at::Tensor RopeCache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                     at::Tensor& v_cache, int64_t pos, int64_t n_heads, int64_t n_kv_heads) {
  static auto op = PROTOCOL_FUSED_OP("rope_cache", at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&,
                                 int64_t, int64_t, int64_t));
  return op.call(qkv, cos, sin, k_cache, v_cache, pos, n_heads, n_kv_heads);
}

at::Tensor DecodeAttention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                           int64_t length) {
  static auto op =
      PROTOCOL_FUSED_OP("decode_attention", at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t));
  return op.call(q, k_cache, v_cache, length);
}

at::Tensor RopeCacheAt(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                       at::Tensor& v_cache, const at::Tensor& pos, int64_t n_heads, int64_t n_kv_heads) {
  static auto op = PROTOCOL_FUSED_OP("rope_cache_at", at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                                 at::Tensor&, at::Tensor&, const at::Tensor&, int64_t,
                                                                 int64_t));
  return op.call(qkv, cos, sin, k_cache, v_cache, pos, n_heads, n_kv_heads);
}

at::Tensor DecodeAttentionAt(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                             const at::Tensor& pos) {
  static auto op = PROTOCOL_FUSED_OP("decode_attention_at", at::Tensor(const at::Tensor&, const at::Tensor&,
                                                                       const at::Tensor&, const at::Tensor&));
  return op.call(q, k_cache, v_cache, pos);
}

#undef PROTOCOL_FUSED_OP

}  // namespace fused
}  // namespace native
}  // namespace protocol
