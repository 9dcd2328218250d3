// Stragglers (src/backends/native/launch/stragglers.h): a rank is judged by its own
// work per step against the median of its group.
#include <doctest/doctest.h>

#include "backends/native/launch/stragglers.h"

namespace protocol {
namespace native {

TEST_CASE("stragglers: a rank working more than 25% above its group's median is flagged, in rank order") {
  // One group of 4 (FSDP): median of 0.10, 0.11, 0.12, 0.30 = 0.115; 0.30 > 1.25·0.115.
  std::vector<RankStepTimes> ranks = {
      {0, "n0", 0.5, 0.01, 0.10}, {1, "n0", 0.5, 0.01, 0.11}, {2, "n1", 0.5, 0.01, 0.12}, {3, "n1", 0.5, 0.01, 0.30}};
  std::vector<Straggler> s = FindStragglers(ranks, 4);
  REQUIRE(s.size() == 1);
  CHECK(s[0].rank == 3);
  CHECK(s[0].group_median == doctest::Approx(0.115));
  CHECK(DescribeStraggler(s[0]) == "rank 3 (node n1): 0.300 s of own work per step, 2.61× its group's median 0.115 s");
  // Exactly at the threshold is not a straggler; just above is (median 1.0).
  for (RankStepTimes& r : ranks) r.work_mean = 1.0;
  ranks[3].work_mean = 1.25;
  CHECK(FindStragglers(ranks, 4).empty());
  ranks[3].work_mean = 1.25 + 1e-6;
  CHECK(FindStragglers(ranks, 4).size() == 1);
}

TEST_CASE("stragglers: groups are judged apart (share), a group of one has none") {
  // Two groups of 2: group 0 even, group 1 with rank 3 slow. The slow group 1
  // as a whole is not a straggler of group 0.
  std::vector<RankStepTimes> ranks = {
      {0, "n0", 1, 0, 0.10}, {1, "n0", 1, 0, 0.11}, {2, "n1", 1, 0, 0.50}, {3, "n1", 1, 0, 1.50}};
  std::vector<Straggler> s = FindStragglers(ranks, 2);
  REQUIRE(s.size() == 1);
  CHECK(s[0].rank == 3);
  CHECK(s[0].group_median == doctest::Approx(1.0));
  CHECK(FindStragglers({{0, "n0", 1, 0, 0.1}, {1, "n1", 1, 0, 9.0}}, 1).empty());
  CHECK(FindStragglers({}, 2).empty());
}

}  // namespace native
}  // namespace protocol
