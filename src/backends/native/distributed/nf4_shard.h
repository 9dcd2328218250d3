#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_NF4_SHARD_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_NF4_SHARD_H_

// NF4 weights sharded by whole blocks across the W ranks of a group, as bytes
// (the layout of torchao's NF4Tensor under FSDP2 and of Answer.AI's
// fsdp_qlora: a shard is whole quantization blocks, so each rank's bytes
// dequantize on their own and an all-gather of equal uint8 shards rebuilds
// the unit).
//
// A unit (what FSDP gathers at once: a decoder layer's seven projections in
// Projection order, nf4_layer_layout) is flattened into fixed-size records:
//
//   single quantization, one record per block of 64 weights (36 bytes):
//     [32 bytes: the block's packed codes][4 bytes: its float32 absmax]
//   double quantization, one record per group of 256 blocks (8456 bytes):
//     [256·32 bytes: codes][256 bytes: 8-bit absmax codes]
//     [4 bytes: float32 group scale][4 bytes: float32 mean of the tensor's absmax]
//     (a tensor's last group, when it has fewer than 256 blocks, is padded
//     with zero bytes; the mean is repeated in each of the tensor's records
//     so that a record decodes alone: +4 bytes per 16384 weights)
//
// Records of the unit's tensors follow each other; rank r of W holds records
// [r·S, (r+1)·S), S = ceil(records/W), the last ranks padded with zero records.
// Per-rank bytes of a unit (nf4_shard_bytes):
//   single:  ceil(blocks/W) · 36,        blocks = Σ_tensors ceil(numel/64)
//   double:  ceil(groups/W) · 8456,      groups = Σ_tensors ceil(ceil(numel/64)/256)
// e.g. a Llama-2-70B decoder layer (13,369,344 blocks, 52,224 groups) at W = 8:
// 60,162,048 bytes single, 55,200,768 bytes double (bf16 would be 213,909,504).
//
// Contract for the distributed wiring (one FSDP unit):
//   at load, on every rank:  layout = nf4_layer_layout(config, double_quant);
//                            flat = nf4_unit_flatten(unit tensors, layout);
//                            shard = nf4_unit_shard(flat, layout, rank, W);
//                            (keep `shard`, drop `flat` and the tensors)
//   before the unit's forward and backward:
//                            gathered = all-gather of the W uint8 shards, each
//                              nf4_shard_bytes(layout, W) bytes, concatenated in
//                              rank order (W · that many bytes)
//                            tensors = nf4_unit_unflatten(gathered, layout)
//                            (use them through nf4_linear; drop them after use)
// All functions are pure (no communication) and run on the tensors' device.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "backends/native/model/model_config.h"
#include "backends/native/quant/nf4.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct Nf4UnitLayout {
  std::vector<std::vector<int64_t>> shapes;  // the unit's tensors, in order
  bool double_quant = false;
  int64_t record_bytes = 0;                  // 36 (single) or 8456 (double)
  int64_t record_blocks = 0;                 // blocks per record: 1 or 256
  std::vector<int64_t> records;              // per tensor
  int64_t total_records = 0;
};

inline constexpr int64_t kNf4RecordBytes = kNf4BlockSize / 2 + 4;                           // 36
inline constexpr int64_t kNf4DqRecordBytes = kNf4DqGroupSize * (kNf4BlockSize / 2 + 1) + 8;  // 8456

// The layout of tensors of `shapes`, quantized with or without double quantization.
Nf4UnitLayout nf4_unit_layout(std::vector<std::vector<int64_t>> shapes, bool double_quant);
// A decoder layer of `config`: q, k, v, o, gate, up, down with their (out, in) shapes.
Nf4UnitLayout nf4_layer_layout(const ModelConfig& config, bool double_quant);
// S = ceil(total_records / world): the records each rank holds.
int64_t nf4_shard_records(const Nf4UnitLayout& layout, int world);
// S · record_bytes: the bytes each rank holds (and contributes to the all-gather).
int64_t nf4_shard_bytes(const Nf4UnitLayout& layout, int world);

// (total_records · record_bytes) uint8: the unit's tensors as records.
// kInvalidArgument when `unit` does not match the layout (count, shape, form).
Result<at::Tensor> nf4_unit_flatten(const std::vector<Nf4Tensor>& unit, const Nf4UnitLayout& layout);
// Rank `rank`'s shard of a flattened unit: nf4_shard_bytes(layout, world)
// bytes (a copy: `flat` may be dropped). REQUIRES 0 <= rank < world.
Result<at::Tensor> nf4_unit_shard(const at::Tensor& flat, const Nf4UnitLayout& layout, int rank, int world);
// The unit's tensors from the concatenation of all W shards (or from the flat
// bytes): bit-identical to the tensors flattened. kInvalidArgument when
// `gathered` is not uint8, holds fewer than total_records records, or is not
// a whole number of records.
Result<std::vector<Nf4Tensor>> nf4_unit_unflatten(const at::Tensor& gathered, const Nf4UnitLayout& layout);
// The float32 weights of a shard's records, decoded from its bytes alone:
// (records · record_blocks · 64) values in layout order, each tensor's padding
// (the last block's tail, a last group's empty blocks, padding records) zero.
at::Tensor nf4_shard_values(const at::Tensor& shard, const Nf4UnitLayout& layout);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_NF4_SHARD_H_
