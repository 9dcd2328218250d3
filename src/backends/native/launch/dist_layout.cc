#include "backends/native/launch/dist_layout.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <thread>

#include "runner/base/text.h"

namespace protocol {
namespace native {

int ThreadsPerRank(const TrainingSettings& training, int ranks_on_host) {
  int64_t total = training.threads;
  if (total <= 0) {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    total = omp && std::atoi(omp) > 0 ? std::atoi(omp) : static_cast<int64_t>(std::thread::hardware_concurrency());
  }
  return static_cast<int>(std::max<int64_t>(1, total / std::max(1, ranks_on_host)));
}

int DistLayout::nodes() const {
  return static_cast<int>(std::set<std::string>(rank_nodes.begin(), rank_nodes.end()).size());
}

Result<DistLayout> FsdpLayout(const Plan& plan, const CaseSpec& spec) {
  DistLayout l;
  for (int n = 0; n < spec.nodes; ++n) {
    std::string name = fmt::format("node{}", n), host = "localhost";
    int gpus = 0;
    if (static_cast<size_t>(n) < plan.cluster.nodes.size()) {
      const NodeSpec& node = plan.cluster.nodes[static_cast<size_t>(n)];
      name = node.name;
      host = node.host.empty() ? "localhost" : node.host;
      gpus = node.gpus;
    } else if (!plan.cluster.nodes.empty()) {
      return Status::InvalidArgument(fmt::format("the case needs {} nodes but the cluster lists {}", spec.nodes,
                                                 plan.cluster.nodes.size()));
    }
    const int ranks = spec.training.ranks_per_node > 0 ? spec.training.ranks_per_node : std::max(1, gpus);
    for (int r = 0; r < ranks; ++r) l.rank_nodes.push_back(name);
    l.node_hosts[name] = host;
  }
  l.groups = 1;
  l.group_size = static_cast<int>(l.rank_nodes.size());
  return l;
}

Result<DistLayout> ShareLayout(const Plan& plan, const CaseSpec& spec) {
  if (spec.topology.empty()) return Status::InvalidArgument("the share backend needs a topology (node:GxK ...)");
  DistLayout l;
  l.group_size = spec.topology.parts[0].ranks_per_group;
  l.groups = 0;
  for (const TopologyPart& p : spec.topology.parts) {
    if (p.ranks_per_group != l.group_size)
      return Status::InvalidArgument(fmt::format(
          "topology '{}': every group must have the same number of ranks (K), got {} and {}", spec.topology.ToString(),
          l.group_size, p.ranks_per_group));
    for (int i = 0; i < p.groups * p.ranks_per_group; ++i) l.rank_nodes.push_back(p.node);
    l.groups += p.groups;
    const NodeSpec* node = plan.cluster.FindNode(p.node);
    l.node_hosts[p.node] = node && !node->host.empty() ? node->host : "localhost";
  }
  return l;
}

}  // namespace native
}  // namespace protocol
