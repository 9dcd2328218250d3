#include "backends/native/quant/nf4.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <c10/core/GradMode.h>

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
  q.absmax_codes = NearestLevel(normalized, nf4_dq_levels().to(absmax.device())).view({-1}).narrow(0, 0, blocks).contiguous();
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
  // (blocks, 64) float32, zero-padded at the end.
  at::Tensor flat = w.detach().to(at::kFloat).reshape({-1});
  flat = at::constant_pad_nd(flat, {0, blocks * kNf4BlockSize - q.numel}, 0).view({blocks, kNf4BlockSize});
  at::Tensor absmax = flat.abs().amax({1});                          // (blocks)
  at::Tensor normalized = flat / absmax.clamp_min(1e-30).unsqueeze(1);  // in [-1, 1]
  at::Tensor codes = NearestLevel(normalized, nf4_levels().to(w.device())).view({blocks, kNf4BlockSize / 2, 2});
  q.packed = (codes.select(2, 0).__lshift__(4)).bitwise_or(codes.select(2, 1)).contiguous().view({-1});
  if (double_quant) {
    DoubleQuantize(absmax, q);
  } else {
    q.absmax = absmax;
  }
  return q;
}

at::Tensor nf4_absmax(const Nf4Tensor& q) {
  if (!q.double_quant()) return q.absmax;
  c10::NoGradGuard no_grad;
  const int64_t blocks = q.absmax_codes.size(0);
  at::Tensor levels = nf4_dq_levels().to(q.absmax_codes.device());
  at::Tensor values = levels.index_select(0, q.absmax_codes.to(at::kLong));                        // (blocks)
  at::Tensor scales = q.absmax_scales.repeat_interleave(kNf4DqGroupSize).narrow(0, 0, blocks);  // (blocks)
  return values * scales + q.absmax_mean;
}

namespace {

// (256, 2) float32: the two levels a packed byte holds, high nibble first.
at::Tensor Nf4PairTable() {
  static const at::Tensor table = [] {
    at::Tensor t = at::empty({256, 2}, at::kFloat);
    float* p = t.data_ptr<float>();
    for (int b = 0; b < 256; ++b) {
      p[2 * b] = kLevels[b >> 4];
      p[2 * b + 1] = kLevels[b & 0x0f];
    }
    return t;
  }();
  return table;
}

}  // namespace

// levels[code]·absmax per weight, the same float32 products either way:
//   CPU   one pass over the packed bytes (two weights per byte through a
//         256-entry table), blocks in parallel: no transient beyond the output.
//   else  the table indexed by the bytes (an int32 index: 2 bytes per weight),
//         then scaled in place.
at::Tensor nf4_dequantize(const Nf4Tensor& q) {
  c10::NoGradGuard no_grad;
  const int64_t blocks = q.blocks();
  at::Tensor absmax = nf4_absmax(q).contiguous();
  at::Tensor out;
  if (q.packed.device().is_cpu()) {
    out = at::empty({blocks * kNf4BlockSize}, at::TensorOptions().dtype(at::kFloat));
    at::Tensor packed = q.packed.contiguous();
    const uint8_t* codes = packed.data_ptr<uint8_t>();
    const float* scale = absmax.data_ptr<float>();
    const float* table = Nf4PairTable().data_ptr<float>();
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, blocks, 256, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float s = scale[b];
        const uint8_t* c = codes + b * (kNf4BlockSize / 2);
        float* o = dst + b * kNf4BlockSize;
        for (int64_t i = 0; i < kNf4BlockSize / 2; ++i) {
          const float* pair = table + 2 * c[i];
          o[2 * i] = pair[0] * s;
          o[2 * i + 1] = pair[1] * s;
        }
      }
    });
  } else {
    at::Tensor table = Nf4PairTable().to(q.packed.device());
    out = table.index_select(0, q.packed.to(at::kInt)).view({blocks, kNf4BlockSize});
    out.mul_(absmax.unsqueeze(1));
  }
  return out.view({-1}).narrow(0, 0, q.numel).view(q.shape);
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
