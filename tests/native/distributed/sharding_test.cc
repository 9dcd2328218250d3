// The sharding strategies as one table (sharding.h): every value of the
// plan's vocabulary has its row, each row's mesh and layout rule, and the
// process groups' shard world as the checks compute it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backends/native/distributed/sharding.h"

namespace protocol {
namespace native {

TEST_CASE("sharding: every value of training.sharding has one row, named as the plan names it") {
  std::vector<std::string> names;
  for (const auto& entry : Vocabulary<Sharding>()) {
    CAPTURE(entry.name);
    int rows = 0;
    for (const ShardingStrategy& row : ShardingStrategies()) rows += row.sharding == entry.value;
    CHECK(rows == 1);
    CHECK(std::string(StrategyOf(entry.value).name) == entry.name);
    names.push_back(entry.name);
  }
  CHECK(names.size() == ShardingStrategies().size());
}

TEST_CASE("sharding: full shards over the group; hybrid within each node, one copy per node") {
  const std::vector<std::string> two_by_four = {"a", "a", "a", "a", "b", "b", "b", "b"};
  CHECK(MeshFor(Sharding::kFull, two_by_four).shard == 8);
  CHECK(MeshFor(Sharding::kFull, two_by_four).replicas == 1);
  CHECK(MeshFor(Sharding::kHybrid, two_by_four).shard == 4);
  CHECK(MeshFor(Sharding::kHybrid, two_by_four).replicas == 2);
  // Hybrid on one node is full sharding.
  const std::vector<std::string> one_node = {"a", "a", "a"};
  CHECK(MeshFor(Sharding::kHybrid, one_node).shard == 3);
  CHECK(MeshFor(Sharding::kHybrid, one_node).replicas == 1);
  // One rank per node: every rank a copy of its own.
  CHECK(MeshFor(Sharding::kHybrid, {"a", "b"}).shard == 1);
  CHECK(MeshFor(Sharding::kHybrid, {"a", "b"}).replicas == 2);
}

TEST_CASE("sharding: the layout each strategy needs, group by group") {
  CHECK(ShardingLayoutProblem(Sharding::kFull, 1, 3, {"a", "b", "b"}) == "");
  CHECK(ShardingLayoutProblem(Sharding::kHybrid, 1, 4, {"a", "a", "b", "b"}) == "");
  CHECK(ShardingLayoutProblem(Sharding::kHybrid, 1, 3, {"a", "b", "b"}) ==
        "group 0: node a holds 1 of its ranks and node b holds 2 (hybrid sharding needs the same number on each)");
  // Each group is laid out on its own: {a, a} and {a, b} both fit.
  CHECK(ShardingLayoutProblem(Sharding::kHybrid, 2, 2, {"a", "a", "a", "b"}) == "");
  CHECK(ShardingLayoutProblem(Sharding::kHybrid, 1, 4, {"a", "b", "a", "b"}) ==
        "group 0: the ranks of node a are not consecutive");
  CHECK(ShardingLayoutProblem(Sharding::kFull, 2, 2, {"a"}) == "1 rank nodes for 2 group(s) of 2");
}

}  // namespace native
}  // namespace protocol
