#ifndef PROTOCOL_BACKENDS_NATIVE_NF4_H_
#define PROTOCOL_BACKENDS_NATIVE_NF4_H_

// 4-bit NormalFloat (NF4) weight quantization, as in QLoRA (Dettmers et al.
// 2023, section 3): the weight is cut into blocks of 64 values; each block is
// scaled by its absolute maximum into [-1, 1] and every value replaced by the
// index of the nearest of 16 levels placed at quantiles of a standard normal
// distribution (the table in nf4.cc, from the paper / bitsandbytes). Two
// indices are packed per byte (first value in the high nibble).
// Storage: numel/2 bytes + one float32 absmax per 64 values (~4.5 bits/weight).
//
// Not built: the second-level quantization of the absmax values ("double
// quantization"). Models on NF4 weights: quantized_model.h.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace protocol {
namespace native {

struct Nf4Tensor {
  at::Tensor packed;             // uint8 (ceil(numel/64)·32): two 4-bit codes per byte
  at::Tensor absmax;             // float32 (ceil(numel/64)): the scale of each block
  std::vector<int64_t> shape;    // the original shape
  int64_t numel = 0;
};

inline constexpr int64_t kNf4BlockSize = 64;

// REQUIRES: w is a floating-point tensor (any device). Zero blocks stay zero.
Nf4Tensor nf4_quantize(const at::Tensor& w);
// The float32 weight the codes stand for: level[code] · absmax of its block.
at::Tensor nf4_dequantize(const Nf4Tensor& q);
// The 16 NF4 levels, ascending, -1 .. 1 (float32, CPU).
at::Tensor nf4_levels();

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_NF4_H_
