// NF4 units sharded as byte ranges of one flat buffer (nf4_shard.h): what an
// all-gather of the W uint8 shards returns rebuilds the unit bit for bit, as
// views of the gathered bytes (no copy), and a rank holds ceil(blocks/W)·36
// bytes (double quantization: ceil(groups/W)·8456).
#include "native_test_support.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <utility>

#include "backends/native/quant/lora.h"
#include "backends/native/distributed/nf4_shard.h"

namespace protocol {
namespace native {
namespace {

// dim 40, 5 heads of 8 sharing 1 kv head, F 100: no projection is a whole
// number of blocks of 64 (q 1600 = 25 blocks, k/v 320 = 5, o 25, gate/up/down
// 4000 = 62.5 → 63), so last blocks are padded; 224 blocks in all.
ModelConfig OddConfig() {
  ModelConfig c;
  c.name = "odd";
  c.dim = 40;
  c.n_layers = 1;
  c.n_heads = 5;
  c.n_kv_heads = 1;
  c.hidden_dim = 100;
  c.vocab_size = 16;
  return c;
}

// One decoder layer's seven projections, quantized in one process.
std::vector<Nf4Tensor> QuantizedLayer(const ModelConfig& c, bool double_quant, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<Nf4Tensor> unit;
  for (int p = 0; p < kProjectionCount; ++p) {
    const auto s = projection_shape(c, static_cast<Projection>(p));
    unit.push_back(nf4_quantize(at::empty({s[0], s[1]}, at::kFloat).normal_(0.0, 0.02, gen), double_quant));
  }
  return unit;
}

void CheckIdentical(const Nf4Tensor& a, const Nf4Tensor& b) {
  CHECK(a.shape == b.shape);
  CHECK(a.numel == b.numel);
  CHECK(a.double_quant() == b.double_quant());
  CHECK(at::equal(a.packed, b.packed));
  if (!a.double_quant()) {
    CHECK(at::equal(a.absmax, b.absmax));
    return;
  }
  CHECK(at::equal(a.absmax_codes, b.absmax_codes));
  CHECK(at::equal(a.absmax_scales, b.absmax_scales));
  CHECK(at::equal(a.absmax_mean, b.absmax_mean));
}

// Whether t's bytes lie within [begin, begin + bytes) of the same storage.
bool Within(const at::Tensor& t, const at::Tensor& buffer) {
  const auto* lo = static_cast<const uint8_t*>(buffer.data_ptr());
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  return t.is_contiguous() && t.is_alias_of(buffer) && p >= lo &&
         p + t.nbytes() <= lo + buffer.nbytes();
}

// Every tensor of the unit is a contiguous view inside `buffer`, none overlapping another.
void CheckViewsOf(const std::vector<Nf4Tensor>& unit, const at::Tensor& buffer) {
  std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
  for (const Nf4Tensor& q : unit) {
    std::vector<at::Tensor> parts = {q.packed};
    if (q.double_quant()) {
      parts.insert(parts.end(), {q.absmax_codes, q.absmax_scales, q.absmax_mean});
    } else {
      parts.push_back(q.absmax);
    }
    for (const at::Tensor& t : parts) {
      CHECK(Within(t, buffer));
      const auto* p = static_cast<const uint8_t*>(t.data_ptr());
      ranges.emplace_back(p, p + t.nbytes());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) CHECK(ranges[i - 1].second <= ranges[i].first);
}

}  // namespace

TEST_CASE("native nf4 shard: gathered shards rebuild the unit bit-identically for W = 1, 2, 3, 4, 8") {
  const ModelConfig c = OddConfig();
  for (bool double_quant : {false, true}) {
    CAPTURE(double_quant);
    const std::vector<Nf4Tensor> unit = QuantizedLayer(c, double_quant, 5);
    const Nf4UnitLayout layout = nf4_layer_layout(c, double_quant);
    // Single: 25 + 5 + 5 + 25 + 3·63 = 249 records of one block; double: one group of ≤ 256 blocks per projection.
    CHECK(layout.total_records == (double_quant ? 7 : 249));
    CHECK(layout.record_bytes == (double_quant ? 8456 : 36));
    auto flat = nf4_unit_flatten(unit, layout);
    REQUIRE(flat.ok());
    CHECK(flat->numel() == layout.total_records * layout.record_bytes);
    for (int world : {1, 2, 3, 4, 8}) {
      CAPTURE(world);
      std::vector<at::Tensor> shards;
      for (int rank = 0; rank < world; ++rank) {
        auto shard = nf4_unit_shard(*flat, layout, rank, world);
        REQUIRE(shard.ok());
        CHECK((shard->scalar_type() == at::kByte));
        CHECK(shard->numel() == nf4_shard_bytes(layout, world));
        shards.push_back(*shard);
      }
      // What an all-gather of the equal-sized uint8 shards returns, in rank order.
      at::Tensor gathered = at::cat(shards);
      auto rebuilt = nf4_unit_unflatten(gathered, layout);
      REQUIRE(rebuilt.ok());
      REQUIRE(rebuilt->size() == 7);
      for (size_t i = 0; i < unit.size(); ++i) CheckIdentical((*rebuilt)[i], unit[i]);
      CHECK(at::equal(nf4_dequantize((*rebuilt)[6]), nf4_dequantize(unit[6])));
      // Views of the gathered bytes: codes and scales share its storage, nothing copied.
      CheckViewsOf(*rebuilt, gathered);
      // Writing the gathered bytes changes what the tensors read (the storage is the buffer's).
      const uint8_t first = (*rebuilt)[0].packed[0].item<uint8_t>();
      gathered[0] = static_cast<uint8_t>(first ^ 0xff);
      CHECK((*rebuilt)[0].packed[0].item<uint8_t>() == static_cast<uint8_t>(first ^ 0xff));
    }
  }
}

TEST_CASE("native nf4 shard: per-rank bytes are ceil(blocks/W)·36, double-quantized ceil(groups/W)·8456") {
  const ModelConfig c = OddConfig();
  const Nf4UnitLayout single = nf4_layer_layout(c, false);
  const Nf4UnitLayout dq = nf4_layer_layout(c, true);
  for (int world : {1, 2, 3, 4, 8}) {
    CAPTURE(world);
    CHECK(nf4_shard_bytes(single, world) == (249 + world - 1) / world * 36);
    CHECK(nf4_shard_bytes(dq, world) == (7 + world - 1) / world * 8456);
  }
  CHECK(nf4_shard_bytes(single, 3) == 83 * 36);
  CHECK(nf4_shard_bytes(dq, 3) == 3 * 8456);
  // W = 1 holds the whole unit: 36 bytes per block = nf4_storage_bytes of the seven projections.
  int64_t storage = 0;
  for (int p = 0; p < kProjectionCount; ++p) {
    const auto s = projection_shape(c, static_cast<Projection>(p));
    storage += nf4_storage_bytes(s[0] * s[1], false);
  }
  CHECK(nf4_shard_bytes(single, 1) == storage);

  // Llama-2-70B (C 8192, F 28672, 8 kv heads of 128): a decoder layer is 13,369,344 blocks,
  // 52,224 groups of 256; at W = 8: 60,162,048 bytes per rank, 55,200,768 double-quantized.
  ModelConfig big;
  big.dim = 8192;
  big.n_heads = 64;
  big.n_kv_heads = 8;
  big.hidden_dim = 28672;
  const Nf4UnitLayout l70 = nf4_layer_layout(big, false), l70dq = nf4_layer_layout(big, true);
  CHECK(l70.total_records == 13369344);
  CHECK(l70dq.total_records == 52224);
  CHECK(nf4_shard_bytes(l70, 8) == 60162048);
  CHECK(nf4_shard_bytes(l70dq, 8) == 55200768);
  CHECK(kNf4DqRecordBytes == 256 * 32 + 256 + 4 + 4);
}

TEST_CASE("native nf4 shard: mismatched units and gathered buffers are errors") {
  const ModelConfig c = OddConfig();
  const Nf4UnitLayout layout = nf4_layer_layout(c, false);
  std::vector<Nf4Tensor> unit = QuantizedLayer(c, false, 1);
  auto flat = nf4_unit_flatten(unit, layout);
  REQUIRE(flat.ok());
  CHECK(nf4_unit_flatten(QuantizedLayer(c, true, 1), layout).status().message() ==
        "NF4 tensor 0 has shape [40, 40] (double-quantized), the layout expects [40, 40]");
  unit.pop_back();
  CHECK(nf4_unit_flatten(unit, layout).status().message() == "a unit of 6 NF4 tensors does not match a layout of 7");
  CHECK(nf4_unit_shard(*flat, layout, 2, 2).status().message() == "rank 2 is not one of 2 ranks");
  CHECK(nf4_unit_unflatten(flat->narrow(0, 0, 36 * 10), layout).status().message() ==
        "gathered NF4 shards must be a whole number of 36-byte records, at least 8964 bytes of contiguous uint8 "
        "starting at a multiple of 4; got 360 bytes");
  // Float32 views need 4-byte alignment: a buffer starting at an odd byte is refused, not misread.
  at::Tensor odd = at::cat({at::zeros({1}, at::kByte), *flat, at::zeros({35}, at::kByte)}).narrow(0, 1, flat->numel());
  CHECK(!nf4_unit_unflatten(odd, layout).ok());
  CHECK(nf4_unit_unflatten(at::cat({*flat, *flat}).narrow(0, 0, flat->numel()), layout).ok());
}

}  // namespace native
}  // namespace protocol
