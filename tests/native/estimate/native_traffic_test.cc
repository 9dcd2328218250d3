// traffic.h: the bytes a step and a merge send between nodes, by formula.
// The fsdp figures are also checked against the byte counters of real runs
// (tests/native/distributed/dist_fsdp_test.cc, dist_qlora_test.cc); here, the
// arithmetic on its own and the ratios it implies at the rigs' sizes.
#include "native_test_support.h"

#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/model/model_config.h"
#include "backends/native/estimate/traffic.h"

namespace protocol {
namespace native {
namespace {

ModelConfig Preset(const char* name) {
  auto c = PresetConfig(name);
  REQUIRE(c.ok());
  return *c;
}

// The native tests' tiny model with a vocabulary of 10 and 2 layers: units of
// 320 (embedding), 9280 (each layer: q, o 32·32, k, v 32·16, gate, up, down
// 32·64, two norms of 32) and 352 (final norm + lm_head) elements.
ModelConfig Small() { return protocol::testing::TinyTestConfig(10, 2); }

}  // namespace

TEST_CASE("traffic: full sharding over 2 nodes of 1 rank, every term by hand") {
  FsdpTrafficShape s;
  s.config = Small();
  s.nodes = 2;
  s.ranks_per_node = 1;
  REQUIRE(unit_parameter_counts(s.config) == std::vector<int64_t>{320, 9280, 9280, 352});
  // W' = 2, S_u = 160, 4640, 4640, 176 (Σ 9616): forward all-gather 4·9616,
  // backward all-gather of the layers 4·9280, reduce-scatter 4·19232/2, two
  // 8-byte all-reduces (norm, loss) of 8 bytes each over 2 ranks.
  const int64_t per_rank = 4 * 9616 + 4 * 9280 + 4 * 19232 / 2 + 8 + 8;
  StepTraffic t = fsdp_step_traffic(s);
  CHECK(t.per_rank == per_rank);
  CHECK(t.between_nodes == 2 * per_rank);  // both ranks' next rank is on the other node
  // On Gloo, whose reduce-scatter is an all-reduce, the gradients count twice.
  s.reduce_scatter_is_all_reduce = true;
  CHECK(fsdp_step_traffic(s).per_rank == per_rank + 4 * 19232 / 2);
  // Hybrid over 1 rank per node is pure replication: the gradients all-reduced
  // across the 2 replicas, 2·(1/2)·4·n_u per unit, and the loss.
  s.reduce_scatter_is_all_reduce = false;
  s.shard = 1;  // hybrid's mesh over 2 nodes of 1 rank (sharding.h): S = 1, R = 2
  s.replicas = 2;
  t = fsdp_step_traffic(s);
  CHECK(t.per_rank == 4 * 19232 + 8);
  CHECK(t.between_nodes == 2 * (4 * 19232) + 2 * 8);
  // On one node there is nothing between nodes (hybrid's mesh there is full sharding's).
  s.nodes = 1;
  s.ranks_per_node = 2;
  s.shard = 2;
  s.replicas = 1;
  CHECK(fsdp_step_traffic(s).between_nodes == 0);
}

TEST_CASE("traffic: hybrid sharding sends 2(R-1)/R of the gradients' bytes between nodes; full sharding about 6(W-1)/W") {
  // Llama-2-7B in bf16 on 2 nodes: hybrid sends 2·b·P between them in all,
  // full sharding about 2·3(W−1)/W·b·P (two all-gathers and a reduce-scatter,
  // at two ranks of the ring): 1/(3·(W−1)/W) = 0.44 at 2×2 and 0.36 at 2×8.
  // Full sharding here skips the backward gathers of the embedding and the
  // head (FSDP keeps the head; the embedding's backward reads no weight), so
  // its bytes are a little lower and the ratio a little higher.
  FsdpTrafficShape s;
  s.config = Preset("llama2-7b");
  s.nodes = 2;
  s.dtype_bytes = 2;
  s.reduce_bytes = 2;
  for (auto [ranks, ideal] : {std::pair<int64_t, double>{2, 1 / (3 * 3.0 / 4)}, {8, 1 / (3 * 15.0 / 16)}}) {
    CAPTURE(ranks);
    s.ranks_per_node = ranks;
    s.shard = 0;  // full: one copy over every rank
    s.replicas = 1;
    const double full = static_cast<double>(fsdp_step_traffic(s).between_nodes);
    s.shard = ranks;  // hybrid: a copy per node
    s.replicas = 2;
    const double hybrid = static_cast<double>(fsdp_step_traffic(s).between_nodes);
    CHECK(hybrid / full >= ideal);
    CHECK(hybrid / full < ideal * 1.03);
  }
}

TEST_CASE("traffic: the 4-bit base never crosses with hybrid sharding: only the adapters' gradients do") {
  FsdpTrafficShape s;
  s.config = Preset("llama2-70b");
  s.nodes = 2;
  s.ranks_per_node = 8;
  s.dtype_bytes = 2;
  s.reduce_bytes = 2;
  s.nf4 = true;
  s.shard = 8;  // hybrid: a copy per node
  s.replicas = 2;
  const StepTraffic t = fsdp_step_traffic(s);
  // Each of the 16 ranks all-reduces its slice of every layer's adapter
  // gradients with its replica: 2·(1/2)·2 bytes · P̂_l/8 each, over the 80 layers,
  // plus the 8-byte loss at the ring's two crossings.
  const int64_t P = adapter_parameter_count(s.config, 8), P_l = P / 80, padded = (P_l + 7) / 8 * 8;
  CHECK(t.between_nodes == 16 * 80 * (2 * padded / 8) + 2 * (2 * 15 * 8 / 16));
  s.shard = 0;  // full
  s.replicas = 1;
  CHECK(fsdp_step_traffic(s).between_nodes > 100 * t.between_nodes);  // the base, gathered twice a step
}

TEST_CASE("traffic: a share merge all-reduces every rank's shard over the groups, crossing at each node") {
  ShareTrafficShape s;
  s.config = Small();
  s.nodes = 2;
  s.groups = 2;
  s.ranks_per_group = 1;
  // One group per node, K = 1: each unit all-reduced whole, 2·(1/2)·4·n_u, at both ranks.
  CHECK(share_merge_between_nodes(s) == 2 * 4 * 19232);
  s.ranks_per_group = 2;  // K = 2 rings of shards, each crossing twice
  CHECK(share_merge_between_nodes(s) == 2 * 2 * 4 * 9616);
  s.merge_bytes = 2;  // training.merge_dtype: bfloat16 halves it
  CHECK(share_merge_between_nodes(s) == 2 * 2 * 2 * 9616);
  s.groups = 4;  // one flat all-reduce over 4 groups: 2·(3/4)·m·P_m per rank, 2 nodes × 2 ranks crossing
  CHECK(share_merge_between_nodes(s) == 2 * 2 * (2 * 3 * 2 * 9616 / 4));
  s.groups = 2;
  s.merge_bytes = 4;
  s.nodes = 1;
  CHECK(share_merge_between_nodes(s) == 0);
}

}  // namespace native
}  // namespace protocol
