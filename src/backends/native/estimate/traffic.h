#ifndef PROTOCOL_BACKENDS_NATIVE_ESTIMATE_TRAFFIC_H_
#define PROTOCOL_BACKENDS_NATIVE_ESTIMATE_TRAFFIC_H_

// The bytes a distributed training step sends, from the model's dimensions
// alone: pure arithmetic, no libtorch, so that `protocol validate` says for a
// two-node case what crosses the link before anything runs. The formulas are
// those the byte counters follow (communicator.h: ring volumes, and a rank's
// bytes cross between nodes when the next rank of its ring runs on another
// node; tests/native/distributed/dist_fsdp_test.cc and dist_qlora_test.cc
// check the counters of real runs against them), each collective rounded as
// torch_compat counts it.
//
// Letters as memory_estimate.h: N nodes, S ranks per node, W = N·S ranks of
// the FSDP group; W' the ranks a unit is sharded over (full: W; hybrid: S);
// R replicas (hybrid: N; full: 1); S_u = ⌈n_u/W'⌉ the elements a rank keeps of
// unit u; e the gather dtype's bytes, r the reduce dtype's; a the
// micro-batches of a step.
//
// Full precision, per rank and step:
//   a · [ (W'−1)·e·Σ_u S_u                  forward all-gather of every unit
//       + (W'−1)·e·Σ_layers S_u             backward all-gather (not the
//                                           embedding, not the head)
//       + (W'−1)·r·S_u per unit             reduce-scatter (2× on Gloo, where
//                                           it is an all-reduce) ]
//   + Σ_u 2(R−1)/R·r·S_u                    hybrid: gradient slices across replicas
//   + 2(W'−1)/W'·8 + 2(W−1)/W·8             squared norm (shard group), loss (group)
// 4-bit base + LoRA (fsdp_qlora.h), B_l a layer's NF4 shard bytes, P_l a
// layer's trainable adapter elements (P̂_l padded to a multiple of W'):
//   a · (W'−1)·(e·S_e + 2·L·B_l + e·S_h)
//   + full:   L · 2(W−1)/W·r·P_l
//     hybrid: L · [(W'−1)/W'·r·P̂_l (2× as above) + 2(R−1)/R·r·P̂_l/W' + (W'−1)·r·P̂_l/W']
//   + 2(W−1)/W·8                            loss
// Between nodes (ranks laid out node by node): full sharding is one ring of
// W ranks crossing at N of them, each sending its whole per-rank bytes;
// hybrid keeps gathers and reduce-scatters within nodes: every rank sends its
// replica all-reduce across, and N ranks the group's 8-byte loss.
//
// The share protocol's groups each sit on one node: a step sends nothing
// between nodes; a merge all-reduces every rank's merged elements P_m (its
// shard, or its trainable adapters) as one flat buffer of the merge dtype (m
// bytes) over the G groups' cross rings, one ring per rank of a group, each
// crossing at N of its G ranks: N·K·⌊2(G−1)·m·P_m/G⌋ bytes.

#include <cstdint>
#include <string>

#include "backends/native/model/model_config.h"

namespace protocol {
namespace native {

struct FsdpTrafficShape {
  ModelConfig config;
  int64_t nodes = 1;           // N
  int64_t ranks_per_node = 1;  // S
  // The group's mesh (distributed/sharding.h MeshFor): W' = shard ranks a
  // unit is sharded over (0: all W), R = replicas copies. R > 1: the copies
  // lie one per node (hybrid sharding), so gathers and reduce-scatters stay
  // within a node and the replicas' all-reduce crosses.
  int64_t shard = 0;
  int64_t replicas = 1;
  int64_t grad_accum = 1;      // a
  int64_t dtype_bytes = 4;     // e
  int64_t reduce_bytes = 4;    // r
  bool reduce_scatter_is_all_reduce = false;  // Gloo (CPU ranks): an all-reduce + slice
  bool nf4 = false;            // 4-bit base + LoRA adapters
  bool double_quant = false;
  int64_t lora_rank = 8;
  bool lora_freeze_a = false;
};

struct StepTraffic {
  int64_t per_rank = 0;       // bytes each rank sends per step (every rank sends the same)
  int64_t between_nodes = 0;  // bytes per step sent from one node to another, all ranks together
};

// One optimizer step of an fsdp case (see above).
StepTraffic fsdp_step_traffic(const FsdpTrafficShape& shape);

struct ShareTrafficShape {
  ModelConfig config;
  int64_t nodes = 1;            // N
  int64_t groups = 1;           // G, over all nodes
  int64_t ranks_per_group = 1;  // K
  bool nf4 = false;             // merges average (or stack) the trainable adapters
  int64_t lora_rank = 8;
  bool lora_freeze_a = false;
  int64_t merge_bytes = 4;      // m: training.merge_dtype's bytes
};
// Bytes one merge of the share protocol sends between nodes (an averaging
// merge: the all-reduce above; the last merge of 4-bit groups with A trained
// stacks the adapters with an all-gather, (G−1)·4·P per rank, instead).
int64_t share_merge_between_nodes(const ShareTrafficShape& shape);
// What one rank sends in one averaging merge: ⌊2(G−1)·m·P_m/G⌋ (nodes play
// no part; 0 with one group).
int64_t share_merge_per_rank(const ShareTrafficShape& shape);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_ESTIMATE_TRAFFIC_H_
