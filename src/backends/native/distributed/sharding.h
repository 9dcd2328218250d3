#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_SHARDING_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_SHARDING_H_

// The sharding strategies (training.sharding), one row each: how the K ranks
// of one FSDP group hold the model, as FSDP2's two-dimensional device mesh
// (replicate, shard). A unit's parameters are cut into S slices, one per rank
// of a shard group; R such groups hold R copies, and a gradient slice is
// all-reduced across the R ranks that hold it (HSDP). S·R = K.
//
//   strategy  S                            R                 layout it needs
//   full      K                            1                 any
//   hybrid    the group's ranks on a node  the group's nodes the same number on each node, consecutive
//
// The process groups (process_group.h), the checks and the memory, traffic
// and time estimates read a strategy's mesh from here. Adding a strategy is a
// row here, its value in plan.cc's vocabulary, and whatever new collectives
// its mesh needs. No libtorch.

#include <string>
#include <vector>

#include "runner/plan/plan.h"

namespace protocol {
namespace native {

struct Mesh {
  int shard = 1;     // S: the ranks a unit is sharded over
  int replicas = 1;  // R: the copies, each over its own S ranks
};

struct ShardingStrategy {
  Sharding sharding;
  const char* name;  // the plan's value (plan.cc)
  // The mesh of a group whose ranks run on `group_nodes` (rank order).
  // REQUIRES: layout_problem(group_nodes) is empty.
  Mesh (*mesh)(const std::vector<std::string>& group_nodes);
  // Why a group on `group_nodes` cannot take this strategy; "" when it can.
  std::string (*layout_problem)(const std::vector<std::string>& group_nodes);
};

// Every strategy, one row each, in the vocabulary's order.
const std::vector<ShardingStrategy>& ShardingStrategies();
const ShardingStrategy& StrategyOf(Sharding sharding);

// The mesh of one group under `sharding` (a shorthand for the row's).
Mesh MeshFor(Sharding sharding, const std::vector<std::string>& group_nodes);

// The first problem ("group G: ...") of laying `groups` groups of `group_size`
// ranks on `rank_nodes` (every rank's node, rank order) out under `sharding`;
// "" when every group fits.
std::string ShardingLayoutProblem(Sharding sharding, int groups, int group_size,
                                  const std::vector<std::string>& rank_nodes);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_SHARDING_H_
