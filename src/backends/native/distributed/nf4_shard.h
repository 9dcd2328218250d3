#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_NF4_SHARD_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_NF4_SHARD_H_

// NF4 weights sharded as bytes across the W ranks of a group: the unit's
// tensors are laid end to end in one flat uint8 buffer and rank r holds a
// contiguous range of it (the FlatParameter layout of PyTorch FSDP, with which
// Answer.AI's fsdp_qlora shards the packed NF4 codes), so that an all-gather of the equal
// uint8 shards returns the flat buffer, in which every tensor's codes and
// scales are contiguous ranges: the gathered tensors are views of it, not
// copies (nf4_unit_unflatten).
//
// A unit (what FSDP gathers at once: a decoder layer's seven projections in
// Projection order, nf4_layer_layout) is counted in fixed-size records, and
// each tensor takes records · record_bytes bytes of the flat buffer, its parts
// one after the other:
//
//   single quantization, one record per block of 64 weights (36 bytes):
//     [32·blocks bytes: packed codes][4·blocks bytes: float32 absmax]
//   double quantization, one record per group of 256 blocks (8456 bytes):
//     [8192·groups: packed codes, padded with 0x77 (level 0)]
//     [256·groups: 8-bit absmax codes, zero-padded]
//     [4·groups: float32 group scales]
//     [4·groups: float32 mean of the tensor's absmax, then zero bytes]
//     (the padding keeps the bytes those of one record per group: the last
//     group's empty blocks and 4 bytes per group beside the mean)
// Every part starts at a multiple of 4 bytes (36 and 8456 are), so the
// float32 parts are views of the uint8 buffer. A shard is a byte range: it no
// longer holds whole blocks with their absmax and does not decode alone (the
// gathered buffer does).
//
// The unit's tensors follow each other; rank r of W holds bytes
// [r·S·b, (r+1)·S·b) of the flat buffer, S = ceil(records/W), b = record_bytes,
// the last ranks padded with zero bytes.
// Per-rank bytes of a unit (nf4_shard_bytes):
//   single:  ceil(blocks/W) · 36,        blocks = Σ_tensors ceil(numel/64)
//   double:  ceil(groups/W) · 8456,      groups = Σ_tensors ceil(ceil(numel/64)/256)
// e.g. a Llama-2-70B decoder layer (13,369,344 blocks, 52,224 groups) at W = 8:
// 60,162,048 bytes single, 55,200,768 bytes double (bf16 would be 213,909,504).
// The same bytes as when each record held a block's codes beside its absmax
// (and a group's codes, absmax codes, scale and mean together): only their
// order in the flat buffer changed, so the all-gather moves as many bytes.
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
//                              (views of `gathered`: no copy)
//                            (use them through nf4_linear; drop them after use,
//                            or free and refill `gathered`'s storage in place)
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
// bytes): bit-identical to the tensors flattened, and every tensor of them
// (codes, absmax, or absmax codes, scales and mean) a contiguous view of
// `gathered`'s storage, no byte copied: they keep it alive and read what it
// holds. kInvalidArgument when `gathered` is not one-dimensional contiguous
// uint8 starting at a storage offset that is a multiple of 4, holds fewer than
// total_records records, or is not a whole number of records.
Result<std::vector<Nf4Tensor>> nf4_unit_unflatten(const at::Tensor& gathered, const Nf4UnitLayout& layout);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_NF4_SHARD_H_
