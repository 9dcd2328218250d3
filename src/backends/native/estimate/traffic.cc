#include "backends/native/estimate/traffic.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backends/native/estimate/memory_estimate.h"

namespace protocol {
namespace native {
namespace {

// torch_compat's ring volumes, rounded as it rounds them, for `n` ranks.
int64_t AllGatherBytes(int64_t n, int64_t shard_bytes) { return n <= 1 ? 0 : (n - 1) * shard_bytes; }
int64_t AllReduceBytes(int64_t n, int64_t bytes) { return n <= 1 ? 0 : 2 * (n - 1) * bytes / n; }
int64_t ReduceScatterBytes(int64_t n, int64_t full_bytes, bool as_all_reduce) {
  if (n <= 1) return 0;
  return as_all_reduce ? AllReduceBytes(n, full_bytes) : (n - 1) * full_bytes / n;
}

// (out, in) of the seven projections, in Projection order (q, k, v, o, gate, up, down).
std::array<std::pair<int64_t, int64_t>, 7> ProjectionDims(const ModelConfig& c) {
  const int64_t C = c.dim, F = c.hidden_dim, Q = c.n_heads * c.HeadDim(), KV = c.n_kv_heads * c.HeadDim();
  return {{{Q, C}, {KV, C}, {KV, C}, {C, Q}, {F, C}, {F, C}, {C, F}}};
}

// Element counts of one layer's trainable adapter tensors (A: r·in, B: out·r), in order.
std::vector<int64_t> LayerAdapterTensors(const ModelConfig& c, int64_t rank, bool freeze_a) {
  std::vector<int64_t> out;
  for (const auto& [o, i] : ProjectionDims(c)) {
    if (!freeze_a) out.push_back(rank * i);
    out.push_back(o * rank);
  }
  return out;
}

StepTraffic FullPrecision(const FsdpTrafficShape& s, int64_t W, int64_t Ws, int64_t R) {
  const std::vector<int64_t> units = unit_parameter_counts(s.config);
  int64_t per_micro = 0, replica = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    const int64_t S = shard_elements(units[u], Ws);
    const bool backward_gather = u != 0 && u + 1 != units.size();
    per_micro += AllGatherBytes(Ws, s.dtype_bytes * S) * (backward_gather ? 2 : 1);
    per_micro += ReduceScatterBytes(Ws, s.reduce_bytes * S * Ws, s.reduce_scatter_is_all_reduce);
    replica += AllReduceBytes(R, s.reduce_bytes * S);
  }
  const int64_t small_shard = AllReduceBytes(Ws, 8), small_group = AllReduceBytes(W, 8);
  StepTraffic t;
  t.per_rank = s.grad_accum * per_micro + replica + small_shard + small_group;
  if (s.nodes > 1) t.between_nodes = R > 1 ? W * replica + s.nodes * small_group : s.nodes * t.per_rank;
  return t;
}

StepTraffic FourBit(const FsdpTrafficShape& s, int64_t W, int64_t Ws, int64_t R) {
  const ModelConfig& c = s.config;
  const int64_t L = c.n_layers, e = s.dtype_bytes, r = s.reduce_bytes;
  const int64_t S_e = shard_elements(c.vocab_size * c.dim, Ws), S_h = shard_elements(c.dim + c.vocab_size * c.dim, Ws);
  const int64_t B_l = nf4_layer_shard_bytes(c, s.double_quant, Ws);
  const int64_t per_micro = AllGatherBytes(Ws, e * S_e) + L * 2 * AllGatherBytes(Ws, B_l) + AllGatherBytes(Ws, e * S_h);
  int64_t P_l = 0;
  for (int64_t n : LayerAdapterTensors(c, s.lora_rank, s.lora_freeze_a)) P_l += n;
  int64_t adapters = 0, replica = 0;
  if (R == 1) {
    adapters = L * AllReduceBytes(W, r * P_l);
  } else {
    const int64_t padded = (P_l + Ws - 1) / Ws * Ws;
    replica = L * AllReduceBytes(R, r * padded / Ws);
    adapters = L * (ReduceScatterBytes(Ws, r * padded, s.reduce_scatter_is_all_reduce) +
                    AllGatherBytes(Ws, r * padded / Ws)) +
               replica;
  }
  const int64_t small_group = AllReduceBytes(W, 8);
  StepTraffic t;
  t.per_rank = s.grad_accum * per_micro + adapters + small_group;
  if (s.nodes > 1) t.between_nodes = R > 1 ? W * replica + s.nodes * small_group : s.nodes * t.per_rank;
  return t;
}

}  // namespace

StepTraffic fsdp_step_traffic(const FsdpTrafficShape& s) {
  const int64_t W = std::max<int64_t>(1, s.nodes * s.ranks_per_node);
  const int64_t Ws = s.shard > 0 ? s.shard : W, R = std::max<int64_t>(1, s.replicas);
  return s.nf4 ? FourBit(s, W, Ws, R) : FullPrecision(s, W, Ws, R);
}

int64_t share_merge_between_nodes(const ShareTrafficShape& s) {
  if (s.nodes <= 1 || s.groups <= 1) return 0;
  return s.nodes * std::max<int64_t>(1, s.ranks_per_group) * share_merge_per_rank(s);
}

int64_t share_merge_per_rank(const ShareTrafficShape& s) {
  if (s.groups <= 1) return 0;
  const int64_t G = s.groups, K = std::max<int64_t>(1, s.ranks_per_group);
  int64_t merged = 0;  // the elements a rank merges
  if (s.nf4) {
    for (int64_t n : LayerAdapterTensors(s.config, s.lora_rank, s.lora_freeze_a)) merged += s.config.n_layers * n;
  } else {
    for (int64_t n : unit_parameter_counts(s.config)) merged += shard_elements(n, K);
  }
  // One merge: one flat all-reduce over the G groups per rank (outer_step.h).
  return AllReduceBytes(G, s.merge_bytes * merged);
}

}  // namespace native
}  // namespace protocol
