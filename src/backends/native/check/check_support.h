#ifndef PROTOCOL_BACKENDS_NATIVE_CHECK_CHECK_SUPPORT_H_
#define PROTOCOL_BACKENDS_NATIVE_CHECK_CHECK_SUPPORT_H_

// What the native checks (native_check.h) share: the model's dimensions as
// the backends resolve them, the nodes a case runs on and whether it computes
// on GPUs, the smallest GPU memory among them, the bytes of a collective's
// dtype, and the ranks a unit is sharded over.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/native/launch/dist_layout.h"
#include "backends/native/launch/native_role.h"
#include "backends/native/estimate/traffic.h"
#include "backends/native/model/model_config.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

inline bool IsNf4(const ModelSpec& ms) { return ms.quantization == Quantization::kNf4; }

// The model's dimensions as the backends resolve them (model_resolve.h).
std::optional<ModelConfig> Dimensions(const Plan& plan, const ModelSpec& ms, std::string* problem = nullptr);

// The nodes a case runs on, in the order of its layout.
std::vector<const NodeSpec*> CaseNodes(const Plan& plan, const CaseSpec& spec, const DistLayout& layout);

// Does the case compute on GPUs? training.device, or `auto` with a GPU on its nodes.
bool OnGpu(const CaseSpec& spec, const std::vector<const NodeSpec*>& nodes);

// "1 node", "2 nodes".
std::string Plural(int64_t n, const char* word);

// The hosts of a case's ranks and how many ranks each runs.
std::map<std::string, int> RanksPerHost(const DistLayout& layout);

// The device memory to compare a GPU case's peak with: the smallest stated
// among the case's nodes; none (0) when one of them states none.
struct GpuLimit {
  double gb = 0;     // 0: not stated
  std::string node;  // the node with the smallest
};
GpuLimit SmallestGpuMemory(const std::vector<const NodeSpec*>& nodes);

// Bytes per element of a collective in `dtype` (reduce_dtype, merge_dtype):
// `auto` is the compute dtype (case_device.h ResolveReduceDtype): bf16 on a GPU.
int64_t CommunicationBytes(ReduceDtype dtype, bool gpu);

// The ranks a unit is sharded over: the S of the first group's mesh
// (sharding.h) for fsdp; a share group (share shards each group fully).
int ShardWorld(const CaseSpec& spec, NativeRole role, const DistLayout& layout);

// How one inference replica is placed: over `devices`, up to
// `replicas_per_device` replicas sharing a GPU. fsdp on one node is one
// process over the node's GPUs; otherwise (fsdp over nodes, share) each
// replica's leader places the model over its group's ranks on its node.
// Replicas share devices when a node has fewer GPUs than ranks.
struct ReplicaPlacement {
  int devices = 1;
  int replicas_per_device = 1;
};
ReplicaPlacement PlaceReplica(const Plan& plan, const CaseSpec& spec, NativeRole role, const DistLayout& layout,
                              bool gpu);

// The shape of a training step of `spec` for traffic.h.
FsdpTrafficShape FsdpTraffic(const CaseSpec& spec, const ModelSpec& ms, const ModelConfig& config,
                             const DistLayout& layout, bool gpu);

// The merges of a share case of `steps` steps: every sync_every steps before
// the last, and the last.
int64_t ShareMerges(const CaseSpec& spec);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CHECK_CHECK_SUPPORT_H_
