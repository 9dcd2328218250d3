#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_PROCESS_GROUP_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_PROCESS_GROUP_H_

// The process groups of one worker rank: rendezvous through a TCPStore on
// MASTER_ADDR:MASTER_PORT (rank 0 serves it; MASTER_PORT=0: on a port the
// kernel picks, which rank 0 announces and the others are told, see
// PortExchange and launch/rendezvous.h), then
//   world    all ranks                                    (barriers)
//   group    the K ranks of this rank's group             (the loss, the evaluation)
//   cross    the ranks with this local rank in every group (share merges)
//   shard    the ranks a unit is sharded over: the group (full sharding), or
//            with hybrid sharding the group's ranks on this rank's node
//   replica  hybrid sharding over R > 1 nodes: the group's ranks that hold the
//            same shard, one per node (gradient shards are all-reduced there);
//            absent otherwise
// each a Gloo (CPU) or NCCL (CUDA) group over a PrefixStore of the one store.
// Each is a Communicator (communicator.h), which counts the bytes this rank
// sends through it: bytes within groups are those of group, shard and replica,
// bytes between groups the cross one's (the world group only meets at
// barriers); bytes between nodes are counted apart from the ranks' placement.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/distributed/communicator.h"
#include "backends/native/distributed/sharding.h"
#include "runner/base/status.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

// What the launcher gives every rank in its environment.
struct DistEnv {
  int rank = 0;        // RANK
  int world = 1;       // WORLD_SIZE
  int local_rank = 0;  // LOCAL_RANK: index among the ranks of this node (the CUDA device)
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR
  int master_port = 0;                    // MASTER_PORT; 0: announced by rank 0 (PortExchange)
  std::string node;                       // PROTOCOL_NODE: the node's name in the plan
};
// Reads the variables above; an error names the missing or malformed one.
Result<DistEnv> DistEnvFromEnvironment();

// How the ranks are laid out: what ConnectGroups needs beyond the environment.
struct GroupsRequest {
  int groups = 1, group_size = 1;
  std::vector<std::string> rank_nodes;  // node of every rank, rank order (groups·group_size of them)
  Sharding sharding = Sharding::kFull;  // each group's mesh (sharding.h): hybrid shards within nodes
  bool cuda = false;                    // NCCL, else Gloo
  double timeout_seconds = 300;
};

struct ProcessGroups {
  int rank = 0, world = 1;
  int groups = 1, group_size = 1;
  int group = 0;       // rank / group_size
  int group_rank = 0;  // rank % group_size
  int replicas = 1;    // R: hybrid sharding's nodes of the group; 1 otherwise
  std::shared_ptr<Communicator> world_comm, group_comm, cross_comm;
  std::shared_ptr<Communicator> shard_comm;    // == group_comm unless hybrid
  std::shared_ptr<Communicator> replica_comm;  // hybrid over R > 1 nodes; else null
  int64_t bytes_within() const;   // bytes this rank sent in its group's collectives (group, shard, replica)
  int64_t bytes_between() const;  // bytes this rank sent in cross-group collectives
  int64_t bytes_between_nodes() const;  // of all its bytes, those sent to a rank on another node
  // Seconds this rank was stalled in its groups' collectives, and seconds
  // those collectives were in flight (communicator.h), over every group.
  double ExposedSeconds() const;
  double InFlightSeconds() const;
  // Every distinct communicator (shard is group's when not hybrid), world first.
  std::vector<Communicator*> All() const;
};

// How the ranks agree on the store's port when MASTER_PORT is 0: rank 0
// calls `announce` with the port its store listens on; every other rank calls
// `await`, which returns that port or why it did not come within the timeout.
struct PortExchange {
  std::function<void(int port)> announce;
  std::function<Result<int>(double timeout_seconds)> await;
};

// One process: every group is the same solo communicator (communicator.h),
// rank 0 of a world of 1; no store, no socket.
ProcessGroups SoloGroups();

// Connects every group. REQUIRES: env.world == groups·group_size and
// rank_nodes of that size; ShardingLayoutProblem (sharding.h) of the request empty;
// `exchange` set when env.master_port is 0.
// Throws c10::Error when the rendezvous or a group fails (timeout_seconds),
// std::runtime_error when the announced port does not come.
ProcessGroups ConnectGroups(const DistEnv& env, const GroupsRequest& request, const PortExchange& exchange = {});

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_PROCESS_GROUP_H_
