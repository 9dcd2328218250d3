#ifndef PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_H_
#define PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_H_

// 4-bit NormalFloat (NF4) weight quantization, as in QLoRA (Dettmers et al.
// 2023, section 3): the weight is cut into blocks of 64 values; each block is
// scaled by its absolute maximum into [-1, 1] and every value replaced by the
// index of the nearest of 16 levels placed at quantiles of a standard normal
// distribution (the table in nf4.cc, from the paper / bitsandbytes). Two
// indices are packed per byte (first value in the high nibble).
//
// Double quantization (QLoRA section 3, "Double Quantization"; bitsandbytes
// quantize_4bit(compress_statistics=True)): the float32 absmax constants of the
// blocks are quantized once more. Their mean over the tensor is subtracted,
// the centred values are cut into groups of 256 consecutive blocks, each group
// is scaled by its own absolute maximum (one float32 per group) and every value
// replaced by the index of the nearest of the 256 levels of bitsandbytes'
// 8-bit dynamic data type (create_dynamic_map(signed=True): a sign, a
// decimal exponent 10^-6 .. 10^0 and a linear fraction; nf4_dq_levels()).
// The 4-bit codes themselves are computed with the exact absmax; dequantizing
// uses the reconstructed absmax' = level8[code]·group_scale + mean.
//
// Storage of a tensor of n weights, blocks = ceil(n/64), groups = ceil(blocks/256):
//   single:  32·blocks (codes) + 4·blocks (float32 absmax)
//            = 36 bytes per 64 weights = 4 + 32/64 = 4.5 bits/weight
//   double:  32·blocks + 1·blocks (8-bit absmax codes) + 4·groups (float32
//            group scales) + 4 (float32 mean)
//            → 4 + 8/64 + 32/(64·256) = 4.127 bits/weight for large n
//   (nf4_storage_bytes; QLoRA: "from 32/64 = 0.5 bits to 8/64 + 32/(64·256) =
//   0.127 bits per parameter").
// Dequantization error per weight, with |level| ≤ 1:
//   single:  ≤ ½·g4·absmax_b                          (g4: widest NF4 gap, 0.3038)
//   double:  ≤ ½·g4·absmax_b + e8·scale_group          (e8: nf4_dq_max_error(), 0.00703)
// because |level·absmax' − w| ≤ |level·absmax − w| + |absmax' − absmax|.
// Models on NF4 weights: quantized_model.h; the 4-bit linear: nf4_linear.h;
// sharding the bytes across ranks: nf4_shard.h.

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace protocol {
namespace native {

inline constexpr int64_t kNf4BlockSize = 64;     // weights per block (one absmax each)
inline constexpr int64_t kNf4DqGroupSize = 256;  // blocks per group of double quantization
inline constexpr int64_t kNf4DequantizeGrain = 256;  // blocks per task of the CPU kernel (at::parallel_for grain)

struct Nf4Tensor {
  at::Tensor packed;             // uint8 (blocks·32): two 4-bit codes per byte
  at::Tensor absmax;             // float32 (blocks): the scale of each block; undefined when double-quantized
  // Double quantization (defined together, absmax undefined):
  at::Tensor absmax_codes;       // uint8 (blocks): 8-bit dynamic code of (absmax − mean)/group scale
  at::Tensor absmax_scales;      // float32 (groups): max |absmax − mean| over each group of 256 blocks
  at::Tensor absmax_mean;        // float32 (1): mean of the tensor's absmax values
  std::vector<int64_t> shape;    // the original shape
  int64_t numel = 0;

  int64_t blocks() const { return (numel + kNf4BlockSize - 1) / kNf4BlockSize; }
  bool double_quant() const { return absmax_codes.defined(); }
};

// REQUIRES: w is a floating-point tensor (any device). Zero blocks stay zero.
// double_quant: compress the absmax as described above.
// Works kNf4QuantizeChunkBlocks blocks at a time: beyond its result it holds
// about 17 bytes per weight of one chunk (float32 weights, normalized values,
// their bucket indices), never of the whole tensor (memory_estimate.h).
Nf4Tensor nf4_quantize(const at::Tensor& w, bool double_quant = false);
inline constexpr int64_t kNf4QuantizeChunkBlocks = 16384;  // 1 Mi weights
// The weight the codes stand for, in `dtype`, on q's device: the float32
// product level[code] · absmax of its block (the reconstructed absmax when
// double-quantized), rounded once to `dtype` — bit-identical to the float32
// result followed by .to(dtype). Written in one pass where it can be:
//   CPU   float32, bfloat16, float16: one pass over the packed bytes, blocks in
//         parallel (at::parallel_for); per block the 16 levels are scaled and
//         rounded once, then each byte writes its two weights. Nothing but
//         the output is allocated. Another dtype: float32, then converted.
//   CUDA  float32, bfloat16, float16, in a build with PROTOCOL_CUDA_KERNELS
//         (a CUDA libtorch and compiler): the kernel of nf4_cuda.h, one pass
//         (half a byte of codes and an absmax per 64 weights read, each
//         output written once), on the current stream, no host copy.
//   else  nf4_dequantize_aten below.
at::Tensor nf4_dequantize(const Nf4Tensor& q, at::ScalarType dtype = at::kFloat);
// The CUDA architectures the one-pass kernel above was compiled for ("90",
// "80,90"); empty where this build has no CUDA kernels.
std::string nf4_cuda_kernel_architectures();
// The same values through ATen ops only, as on CUDA, on any device (tests run
// it on CPU): the bytes widened to an int32 index into the cached pair table
// (nf4_pair_table: no host-to-device copy per call), the float32 levels looked
// up, then scaled by the absmax straight into the `dtype` output (at::mul_out
// computes in float32 and rounds once). Three passes over the weights:
//   uint8 → int32 index   0.5 + 2 bytes per weight read + written
//   index_select          2 + 4
//   mul_out into dtype    4 + e      (e = 2 for bf16; float32: in place, 4 + 4)
// ~14.5 bytes per weight for bf16 (22.5 when the table was copied per call
// and the float32 result converted after), against ~2.5 for a fused kernel
// (bitsandbytes' dequantize_4bit). Workspace beside the output: the int32
// index (2 bytes per weight) and the float32 levels (4), at most 6 bytes per
// weight live at once.
at::Tensor nf4_dequantize_aten(const Nf4Tensor& q, at::ScalarType dtype);
// float32 (blocks): the absmax the dequantization uses (stored, or reconstructed
// as level8[code]·group scale + mean, float32 multiply then add).
at::Tensor nf4_absmax(const Nf4Tensor& q);
// (256, 2) float32 on `device`: the two levels a packed byte holds, high
// nibble first. Made once per device and cached for the life of the process
// (the same tensor is returned on every call): read it, never write to it.
at::Tensor nf4_pair_table(const at::Device& device);
// nf4_dq_levels() on `device`, cached the same way.
at::Tensor nf4_dq_level_table(const at::Device& device);
// The 16 NF4 levels, ascending, -1 .. 1 (float32, CPU).
at::Tensor nf4_levels();
// The 256 levels of the 8-bit dynamic data type, ascending (float32, CPU):
// ±10^(i−6)·m for exponent i = 0..6 and 2^i fraction midpoints m of
// linspace(0.1, 1, 2^i + 1), plus 0 and 1.
at::Tensor nf4_dq_levels();
// e8: the largest |x − nearest level| for x in [−1, 1] (half the widest gap
// between levels, or the distance from −1 to the lowest level).
double nf4_dq_max_error();
// The storage formula above for a tensor of `numel` weights.
int64_t nf4_storage_bytes(int64_t numel, bool double_quant);
// Bytes q holds (its tensors' nbytes); equals nf4_storage_bytes(q.numel, q.double_quant()).
int64_t nf4_tensor_bytes(const Nf4Tensor& q);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_QUANT_NF4_H_
