#include "backends/native/distributed/sharding.h"

#include <algorithm>
#include <utility>

#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

Mesh FullMesh(const std::vector<std::string>& group_nodes) {
  return Mesh{static_cast<int>(group_nodes.size()), 1};
}

std::string NoProblem(const std::vector<std::string>&) { return ""; }

// S: the ranks on the group's first node; R = K / S.
Mesh HybridMesh(const std::vector<std::string>& group_nodes) {
  if (group_nodes.empty()) return Mesh{};
  const int K = static_cast<int>(group_nodes.size());
  const int S = static_cast<int>(std::count(group_nodes.begin(), group_nodes.end(), group_nodes.front()));
  return Mesh{S, K / S};
}

// Every node holds a run of consecutive ranks, and every run is as long.
std::string HybridLayoutProblem(const std::vector<std::string>& group_nodes) {
  std::vector<std::pair<std::string, int>> runs;  // (node, ranks)
  for (const std::string& node : group_nodes) {
    if (runs.empty() || runs.back().first != node) runs.push_back({node, 0});
    ++runs.back().second;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (runs[j].first == runs[i].first) return fmt::format("the ranks of node {} are not consecutive", runs[i].first);
    if (runs[i].second != runs[0].second)
      return fmt::format("node {} holds {} of its ranks and node {} holds {} (hybrid sharding needs the same number "
                         "on each)",
                         runs[0].first, runs[0].second, runs[i].first, runs[i].second);
  }
  return "";
}

}  // namespace

const std::vector<ShardingStrategy>& ShardingStrategies() {
  static const std::vector<ShardingStrategy> rows = {
      {Sharding::kFull, "full", FullMesh, NoProblem},
      {Sharding::kHybrid, "hybrid", HybridMesh, HybridLayoutProblem},
  };
  return rows;
}

const ShardingStrategy& StrategyOf(Sharding sharding) {
  for (const ShardingStrategy& row : ShardingStrategies())
    if (row.sharding == sharding) return row;
  return ShardingStrategies().front();  // unreachable: sharding_test checks every value has its row
}

Mesh MeshFor(Sharding sharding, const std::vector<std::string>& group_nodes) {
  return StrategyOf(sharding).mesh(group_nodes);
}

std::string ShardingLayoutProblem(Sharding sharding, int groups, int group_size,
                                  const std::vector<std::string>& rank_nodes) {
  if (rank_nodes.size() != static_cast<size_t>(groups) * static_cast<size_t>(group_size))
    return fmt::format("{} rank nodes for {} group(s) of {}", rank_nodes.size(), groups, group_size);
  for (int g = 0; g < groups; ++g) {
    const auto first = rank_nodes.begin() + static_cast<std::ptrdiff_t>(g) * group_size;
    if (std::string problem = StrategyOf(sharding).layout_problem({first, first + group_size}); !problem.empty())
      return fmt::format("group {}: {}", g, problem);
  }
  return "";
}

}  // namespace native
}  // namespace protocol
