#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_PROCESS_GROUP_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_PROCESS_GROUP_H_

// The process groups of one worker rank: rendezvous through a TCPStore on
// MASTER_ADDR:MASTER_PORT (rank 0 serves it), then
//   world  all ranks                                    (barriers)
//   group  the K ranks of this rank's group             (FSDP collectives)
//   cross  the ranks with this local rank in every group (share merges)
// each a Gloo (CPU) or NCCL (CUDA) group over a PrefixStore of the one store.
// Each is a Communicator (communicator.h), which counts the bytes this rank
// sends through it: bytes within groups are the group one's, bytes between
// groups the cross one's (the world group only meets at barriers).

#include <cstdint>
#include <memory>
#include <string>

#include "backends/native/distributed/communicator.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

// What the launcher gives every rank in its environment.
struct DistEnv {
  int rank = 0;        // RANK
  int world = 1;       // WORLD_SIZE
  int local_rank = 0;  // LOCAL_RANK: index among the ranks of this node (the CUDA device)
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR
  int master_port = 0;                    // MASTER_PORT
  std::string node;                       // PROTOCOL_NODE: the node's name in the plan
};
// Reads the variables above; an error names the missing or malformed one.
Result<DistEnv> DistEnvFromEnvironment();

struct ProcessGroups {
  int rank = 0, world = 1;
  int groups = 1, group_size = 1;
  int group = 0;       // rank / group_size
  int group_rank = 0;  // rank % group_size
  std::shared_ptr<Communicator> world_comm, group_comm, cross_comm;
  int64_t bytes_within() const;   // bytes this rank sent in group collectives
  int64_t bytes_between() const;  // bytes this rank sent in cross-group collectives
  // Seconds this rank has spent in the collectives of its three groups (compat::CommWaitSeconds).
  double WaitSeconds() const;
};

// Connects every group. REQUIRES: env.world == groups·group_size.
// Throws c10::Error when the rendezvous or a group fails (timeout_seconds).
ProcessGroups ConnectGroups(const DistEnv& env, int groups, int group_size, bool cuda, double timeout_seconds);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_PROCESS_GROUP_H_
