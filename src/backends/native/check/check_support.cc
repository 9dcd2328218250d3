#include "backends/native/check/check_support.h"

#include <algorithm>

#include "backends/native/case/case_device.h"
#include "backends/native/distributed/sharding.h"
#include "backends/native/model/model_resolve.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

// The model's dimensions as the backends resolve them (model_resolve.h).
std::optional<ModelConfig> Dimensions(const Plan& plan, const ModelSpec& ms, std::string* problem) {
  return ModelDimensions(ms.name, ms.preset, plan.ResolvePath(ms.path), problem);
}

// The nodes a case runs on, in the order of its layout.
std::vector<const NodeSpec*> CaseNodes(const Plan& plan, const CaseSpec& spec, const DistLayout& layout) {
  std::vector<const NodeSpec*> nodes;
  std::vector<std::string> seen;
  for (const std::string& n : layout.rank_nodes) {
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    nodes.push_back(plan.cluster.FindNode(n));  // null: a node the plan does not list (fsdp's "node0" on localhost)
  }
  return nodes;
}

// Does the case compute on GPUs? training.device, or `auto` with a GPU on its nodes.
bool OnGpu(const CaseSpec& spec, const std::vector<const NodeSpec*>& nodes) {
  if (spec.training.device == DeviceChoice::kCuda) return true;
  if (spec.training.device != DeviceChoice::kAuto) return false;
  for (const NodeSpec* n : nodes)
    if (n && n->gpus > 0) return true;
  return false;
}

std::string Plural(int64_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

std::map<std::string, int> RanksPerHost(const DistLayout& layout) {
  std::map<std::string, int> hosts;
  for (const std::string& node : layout.rank_nodes) {
    auto h = layout.node_hosts.find(node);
    ++hosts[h != layout.node_hosts.end() ? h->second : node];
  }
  return hosts;
}


GpuLimit SmallestGpuMemory(const std::vector<const NodeSpec*>& nodes) {
  GpuLimit limit;
  for (const NodeSpec* n : nodes) {
    if (!n || n->gpu_memory_gb <= 0) return GpuLimit{};
    if (limit.gb == 0 || n->gpu_memory_gb < limit.gb) {
      limit.gb = n->gpu_memory_gb;
      limit.node = n->name;
    }
  }
  return limit;
}

// Bytes per element of a collective in `dtype` (reduce_dtype, merge_dtype):
// `auto` is the compute dtype (case_device.h ResolveReduceDtype): bf16 on a GPU.
int64_t CommunicationBytes(ReduceDtype dtype, bool gpu) {
  return static_cast<int64_t>(c10::elementSize(ResolveReduceDtype(dtype, gpu ? at::kBFloat16 : at::kFloat)));
}

// The ranks a unit is sharded over: the group (fsdp: every rank of the case;
// share: one group), or with hybrid sharding the group's ranks on one node.
int ShardWorld(const CaseSpec& spec, NativeRole role, const DistLayout& layout) {
  if (role != NativeRole::kFsdp || layout.rank_nodes.empty()) return layout.group_size;
  const auto first = layout.rank_nodes.begin();
  return MeshFor(spec.training.sharding, {first, first + layout.group_size}).shard;
}

// fsdp on one node is one process over the node's GPUs; otherwise (fsdp over
// nodes, share) each replica's leader places the model over its group's ranks
// on its node. Replicas share devices when a node has fewer GPUs than ranks.
ReplicaPlacement PlaceReplica(const Plan& plan, const CaseSpec& spec, NativeRole role, const DistLayout& layout,
                              bool gpu) {
  ReplicaPlacement r;
  if (!gpu) return r;
  if (role == NativeRole::kFsdp) {
    const std::string first = layout.rank_nodes.front();
    r.devices = static_cast<int>(std::count(layout.rank_nodes.begin(), layout.rank_nodes.end(), first));
    return r;
  }
  r.devices = layout.group_size;
  for (const TopologyPart& p : spec.topology.parts) {
    const NodeSpec* node = plan.cluster.FindNode(p.node);
    const int ranks = p.groups * p.ranks_per_group;
    if (node && node->gpus > 0 && ranks > node->gpus)
      r.replicas_per_device = std::max(r.replicas_per_device, (ranks + node->gpus - 1) / node->gpus);
  }
  return r;
}

// The shape of a training step of `spec` for traffic.h.
FsdpTrafficShape FsdpTraffic(const CaseSpec& spec, const ModelSpec& ms, const ModelConfig& config,
                             const DistLayout& layout, bool gpu) {
  FsdpTrafficShape t;
  t.config = config;
  t.nodes = layout.nodes();
  t.ranks_per_node = layout.world() / std::max<int64_t>(1, t.nodes);
  const Mesh mesh = MeshFor(spec.training.sharding, {layout.rank_nodes.begin(),
                                                     layout.rank_nodes.begin() + layout.group_size});
  t.shard = mesh.shard;
  t.replicas = mesh.replicas;
  t.grad_accum = spec.training.grad_accum;
  t.dtype_bytes = gpu ? 2 : 4;
  t.reduce_bytes = CommunicationBytes(spec.training.reduce_dtype, gpu);
  t.reduce_scatter_is_all_reduce = !gpu;  // Gloo's (torch_compat.h)
  t.nf4 = IsNf4(ms);
  t.double_quant = ms.double_quant;
  t.lora_rank = spec.training.LoraRank();
  t.lora_freeze_a = spec.training.lora_freeze_a;
  return t;
}

// The merges of a share case of `steps` steps: every sync_every steps before
// the last, and the last.
int64_t ShareMerges(const CaseSpec& spec) {
  if (!spec.length || spec.length->unit != Length::Unit::kSteps) return 0;
  const int64_t steps = spec.length->count, every = spec.training.sync_every;
  return (every > 0 ? (steps - 1) / every : 0) + 1;
}

}  // namespace native
}  // namespace protocol
