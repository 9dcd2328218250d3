#include "backends/native/nf4.h"

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

}  // namespace

at::Tensor nf4_levels() { return at::tensor(std::vector<float>(kLevels, kLevels + 16), at::kFloat); }

Nf4Tensor nf4_quantize(const at::Tensor& w) {
  at::NoGradGuard no_grad;
  Nf4Tensor q;
  q.shape = w.sizes().vec();
  q.numel = w.numel();
  const int64_t blocks = (q.numel + kNf4BlockSize - 1) / kNf4BlockSize;
  // (blocks, 64) float32, zero-padded at the end.
  at::Tensor flat = w.detach().to(at::kFloat).reshape({-1});
  flat = at::constant_pad_nd(flat, {0, blocks * kNf4BlockSize - q.numel}, 0).view({blocks, kNf4BlockSize});
  q.absmax = flat.abs().amax({1});                                   // (blocks)
  at::Tensor scale = q.absmax.clamp_min(1e-30).unsqueeze(1);
  at::Tensor normalized = flat / scale;                              // in [-1, 1]
  // Nearest level: the number of midpoints between adjacent levels below the value.
  at::Tensor levels = nf4_levels().to(w.device());
  at::Tensor midpoints = (levels.narrow(0, 0, 15) + levels.narrow(0, 1, 15)) / 2;
  at::Tensor codes = at::bucketize(normalized, midpoints).to(at::kByte).view({blocks, kNf4BlockSize / 2, 2});
  q.packed = (codes.select(2, 0).__lshift__(4)).bitwise_or(codes.select(2, 1)).contiguous().view({-1});
  return q;
}

at::Tensor nf4_dequantize(const Nf4Tensor& q) {
  at::NoGradGuard no_grad;
  const int64_t blocks = q.absmax.size(0);
  at::Tensor high = q.packed.__rshift__(4);
  at::Tensor low = q.packed.bitwise_and(0x0f);
  at::Tensor codes = at::stack({high, low}, 1).view({blocks, kNf4BlockSize}).to(at::kLong);
  at::Tensor levels = nf4_levels().to(q.packed.device());
  at::Tensor values = levels.index_select(0, codes.view({-1})).view({blocks, kNf4BlockSize}) * q.absmax.unsqueeze(1);
  return values.view({-1}).narrow(0, 0, q.numel).view(q.shape);
}

}  // namespace native
}  // namespace protocol
