#include "backends/native/distributed/nf4_shard.h"

#include <c10/core/GradMode.h>

#include "backends/native/quant/lora.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

constexpr int64_t kCodeBytes = kNf4BlockSize / 2;                // 32 per block
constexpr int64_t kDqCodeBytes = kNf4DqGroupSize * kCodeBytes;   // 8192 per group
constexpr uint8_t kZeroCodes = 0x77;  // two NF4 codes of level 0.0: a padding block dequantizes to 0

int64_t Blocks(int64_t numel) { return (numel + kNf4BlockSize - 1) / kNf4BlockSize; }
int64_t Groups(int64_t blocks) { return (blocks + kNf4DqGroupSize - 1) / kNf4DqGroupSize; }

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Reinterprets a float32 tensor's bytes as uint8 (n) -> (n, 4).
at::Tensor FloatBytes(const at::Tensor& f) { return f.contiguous().view(at::kByte).view({-1, 4}); }
// A contiguous copy that owns its memory (never a view of the gathered bytes).
at::Tensor Own(const at::Tensor& t) { return t.clone(at::MemoryFormat::Contiguous); }
// (n, 4) uint8 -> (n) float32, the same bytes, copied.
at::Tensor BytesFloat(const at::Tensor& b) { return Own(b).view(at::kFloat).view({-1}); }

// Pads a 1-D uint8 tensor with `value` up to n bytes.
at::Tensor PadBytes(const at::Tensor& t, int64_t n, uint8_t value) {
  return at::constant_pad_nd(t, {0, n - t.numel()}, value);
}

}  // namespace

Nf4UnitLayout nf4_unit_layout(std::vector<std::vector<int64_t>> shapes, bool double_quant) {
  Nf4UnitLayout l;
  l.shapes = std::move(shapes);
  l.double_quant = double_quant;
  l.record_bytes = double_quant ? kNf4DqRecordBytes : kNf4RecordBytes;
  l.record_blocks = double_quant ? kNf4DqGroupSize : 1;
  for (const auto& shape : l.shapes) {
    const int64_t blocks = Blocks(Numel(shape));
    l.records.push_back(double_quant ? Groups(blocks) : blocks);
    l.total_records += l.records.back();
  }
  return l;
}

Nf4UnitLayout nf4_layer_layout(const ModelConfig& config, bool double_quant) {
  std::vector<std::vector<int64_t>> shapes;
  for (int p = 0; p < kProjectionCount; ++p) {
    const auto s = projection_shape(config, static_cast<Projection>(p));
    shapes.push_back({s[0], s[1]});
  }
  return nf4_unit_layout(std::move(shapes), double_quant);
}

int64_t nf4_shard_records(const Nf4UnitLayout& layout, int world) {
  return (layout.total_records + world - 1) / world;
}

int64_t nf4_shard_bytes(const Nf4UnitLayout& layout, int world) {
  return nf4_shard_records(layout, world) * layout.record_bytes;
}

Result<at::Tensor> nf4_unit_flatten(const std::vector<Nf4Tensor>& unit, const Nf4UnitLayout& layout) {
  if (unit.size() != layout.shapes.size())
    return Status::InvalidArgument(
        fmt::format("a unit of {} NF4 tensors does not match a layout of {}", unit.size(), layout.shapes.size()));
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < unit.size(); ++i) {
    const Nf4Tensor& q = unit[i];
    if (q.shape != layout.shapes[i] || q.double_quant() != layout.double_quant)
      return Status::InvalidArgument(fmt::format(
          "NF4 tensor {} has shape {}{}, the layout expects {}{}", i, ShapeText(q.shape),
          q.double_quant() ? " (double-quantized)" : "", ShapeText(layout.shapes[i]),
          layout.double_quant ? " (double-quantized)" : ""));
    const int64_t blocks = q.blocks();
    if (!layout.double_quant) {
      parts.push_back(at::cat({q.packed.view({blocks, kCodeBytes}), FloatBytes(q.absmax)}, 1));  // (blocks, 36)
      continue;
    }
    const int64_t groups = Groups(blocks);
    at::Tensor codes = PadBytes(q.packed, groups * kDqCodeBytes, kZeroCodes).view({groups, kDqCodeBytes});
    at::Tensor absmax_codes = PadBytes(q.absmax_codes, groups * kNf4DqGroupSize, 0).view({groups, kNf4DqGroupSize});
    at::Tensor mean = FloatBytes(q.absmax_mean).expand({groups, 4});
    parts.push_back(at::cat({codes, absmax_codes, FloatBytes(q.absmax_scales), mean}, 1));  // (groups, 8456)
  }
  return at::cat(parts, 0).view({-1});
}

Result<at::Tensor> nf4_unit_shard(const at::Tensor& flat, const Nf4UnitLayout& layout, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world)
    return Status::InvalidArgument(fmt::format("rank {} is not one of {} ranks", rank, world));
  if (flat.scalar_type() != at::kByte || flat.numel() != layout.total_records * layout.record_bytes)
    return Status::InvalidArgument(fmt::format("a flattened unit must be {} uint8 bytes, not {}",
                                               layout.total_records * layout.record_bytes, flat.numel()));
  const int64_t shard = nf4_shard_bytes(layout, world);
  const int64_t begin = std::min<int64_t>(rank * shard, flat.numel());
  const int64_t end = std::min<int64_t>(begin + shard, flat.numel());
  return PadBytes(flat.narrow(0, begin, end - begin), shard, 0).clone();
}

Result<std::vector<Nf4Tensor>> nf4_unit_unflatten(const at::Tensor& gathered, const Nf4UnitLayout& layout) {
  const int64_t need = layout.total_records * layout.record_bytes;
  if (gathered.scalar_type() != at::kByte || gathered.dim() != 1 || gathered.numel() < need ||
      gathered.numel() % layout.record_bytes != 0)
    return Status::InvalidArgument(fmt::format(
        "gathered NF4 shards must be a whole number of {}-byte records, at least {} bytes of uint8; got {} bytes",
        layout.record_bytes, need, gathered.numel()));
  c10::NoGradGuard no_grad;
  at::Tensor records = gathered.narrow(0, 0, need).view({layout.total_records, layout.record_bytes});
  std::vector<Nf4Tensor> unit;
  int64_t first = 0;
  for (size_t i = 0; i < layout.shapes.size(); ++i) {
    at::Tensor rec = records.narrow(0, first, layout.records[i]);
    first += layout.records[i];
    Nf4Tensor q;
    q.shape = layout.shapes[i];
    q.numel = Numel(q.shape);
    const int64_t blocks = q.blocks();
    if (!layout.double_quant) {
      q.packed = Own(rec.narrow(1, 0, kCodeBytes)).view({-1});
      q.absmax = BytesFloat(rec.narrow(1, kCodeBytes, 4));
    } else {
      q.packed = Own(Own(rec.narrow(1, 0, kDqCodeBytes)).view({-1}).narrow(0, 0, blocks * kCodeBytes));
      q.absmax_codes = Own(Own(rec.narrow(1, kDqCodeBytes, kNf4DqGroupSize)).view({-1}).narrow(0, 0, blocks));
      q.absmax_scales = BytesFloat(rec.narrow(1, kDqCodeBytes + kNf4DqGroupSize, 4));
      q.absmax_mean = BytesFloat(rec.narrow(0, 0, 1).narrow(1, kDqCodeBytes + kNf4DqGroupSize + 4, 4));
    }
    unit.push_back(std::move(q));
  }
  return unit;
}

at::Tensor nf4_shard_values(const at::Tensor& shard, const Nf4UnitLayout& layout) {
  c10::NoGradGuard no_grad;
  const int64_t n = shard.numel() / layout.record_bytes;
  at::Tensor rec = shard.view({n, layout.record_bytes});
  at::Tensor packed, absmax;  // (n·record_blocks·32), (n·record_blocks)
  if (!layout.double_quant) {
    packed = rec.narrow(1, 0, kCodeBytes).contiguous().view({-1});
    absmax = BytesFloat(rec.narrow(1, kCodeBytes, 4));
  } else {
    packed = rec.narrow(1, 0, kDqCodeBytes).contiguous().view({-1});
    at::Tensor codes = rec.narrow(1, kDqCodeBytes, kNf4DqGroupSize).to(at::kLong);               // (n, 256)
    at::Tensor scales = BytesFloat(rec.narrow(1, kDqCodeBytes + kNf4DqGroupSize, 4)).unsqueeze(1);  // (n, 1)
    at::Tensor means = BytesFloat(rec.narrow(1, kDqCodeBytes + kNf4DqGroupSize + 4, 4)).unsqueeze(1);
    at::Tensor levels = nf4_dq_levels().to(shard.device());
    absmax = (levels.index_select(0, codes.view({-1})).view({n, kNf4DqGroupSize}) * scales + means).view({-1});
  }
  // Every record's blocks as one NF4 tensor of whole blocks.
  Nf4Tensor q;
  q.packed = packed;
  q.absmax = absmax;
  q.numel = absmax.numel() * kNf4BlockSize;
  q.shape = {q.numel};
  return nf4_dequantize(q);
}

}  // namespace native
}  // namespace protocol
