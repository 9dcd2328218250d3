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

// Reinterprets a float32 tensor's bytes as uint8: (n) -> (4n).
at::Tensor FloatBytes(const at::Tensor& f) { return f.contiguous().view(at::kByte).view({-1}); }
// The float32 values of bytes [offset, offset + 4n) of a contiguous uint8
// tensor: a view of the same storage (offset and the tensor's storage offset
// multiples of 4).
at::Tensor FloatView(const at::Tensor& bytes, int64_t offset, int64_t n) {
  return bytes.narrow(0, offset, 4 * n).view(at::kFloat);
}

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
    if (!layout.double_quant) {
      parts.push_back(q.packed.reshape({-1}));   // 32·blocks
      parts.push_back(FloatBytes(q.absmax));     // 4·blocks
      continue;
    }
    const int64_t groups = Groups(q.blocks());
    parts.push_back(PadBytes(q.packed.reshape({-1}), groups * kDqCodeBytes, kZeroCodes));     // 8192·groups
    parts.push_back(PadBytes(q.absmax_codes.reshape({-1}), groups * kNf4DqGroupSize, 0));  // 256·groups
    parts.push_back(FloatBytes(q.absmax_scales));                                          // 4·groups
    parts.push_back(PadBytes(FloatBytes(q.absmax_mean), 4 * groups, 0));                   // 4·groups
  }
  return at::cat(parts, 0);
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
  if (gathered.scalar_type() != at::kByte || gathered.dim() != 1 || !gathered.is_contiguous() ||
      gathered.storage_offset() % 4 != 0 || gathered.numel() < need || gathered.numel() % layout.record_bytes != 0)
    return Status::InvalidArgument(fmt::format(
        "gathered NF4 shards must be a whole number of {}-byte records, at least {} bytes of contiguous uint8 "
        "starting at a multiple of 4; got {} bytes",
        layout.record_bytes, need, gathered.numel()));
  c10::NoGradGuard no_grad;
  std::vector<Nf4Tensor> unit;
  int64_t at = 0;  // the tensor's first byte
  for (size_t i = 0; i < layout.shapes.size(); ++i) {
    Nf4Tensor q;
    q.shape = layout.shapes[i];
    q.numel = Numel(q.shape);
    const int64_t blocks = q.blocks();
    if (!layout.double_quant) {
      q.packed = gathered.narrow(0, at, blocks * kCodeBytes);
      q.absmax = FloatView(gathered, at + blocks * kCodeBytes, blocks);
    } else {
      const int64_t groups = layout.records[i];
      q.packed = gathered.narrow(0, at, blocks * kCodeBytes);
      q.absmax_codes = gathered.narrow(0, at + groups * kDqCodeBytes, blocks);
      q.absmax_scales = FloatView(gathered, at + groups * (kDqCodeBytes + kNf4DqGroupSize), groups);
      q.absmax_mean = FloatView(gathered, at + groups * (kDqCodeBytes + kNf4DqGroupSize + 4), 1);
    }
    at += layout.records[i] * layout.record_bytes;
    unit.push_back(std::move(q));
  }
  return unit;
}

}  // namespace native
}  // namespace protocol
