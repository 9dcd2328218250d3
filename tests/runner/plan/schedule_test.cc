#include <doctest/doctest.h>

#include "runner/base/text.h"
#include "runner/plan/schedule.h"

using namespace protocol;

namespace {

CaseSpec Case(const std::string& id, int repeats) {
  CaseSpec c;
  c.id = id;
  c.repeats = repeats;
  return c;
}

// Stage "s1" holds `first`, stage "s2" holds `second`: a baseline stage and
// a share stage, as in the methodology.
Plan MakePlan(std::vector<CaseSpec> first, std::vector<CaseSpec> second,
              std::vector<std::vector<std::string>> interleave = {}) {
  Plan plan;
  plan.name = "t";
  StageSpec s1, s2;
  s1.name = "s1";
  s1.cases = std::move(first);
  s2.name = "s2";
  s2.cases = std::move(second);
  plan.stages = {s1, s2};
  plan.interleave = std::move(interleave);
  return plan;
}

// "A0 B0 B1 A1": case id and 0-based repeat, in execution order.
std::string Order(const Plan& plan, const std::set<std::string>& only = {}) {
  std::vector<std::string> out;
  for (const ScheduledRun& run : ScheduleRuns(plan, only))
    out.push_back(run.spec->id + std::to_string(run.repeat));
  return Join(out, " ");
}

}  // namespace

TEST_CASE("schedule: without interleave, plan order with repeats consecutive") {
  Plan plan = MakePlan({Case("A", 3), Case("B", 1)}, {Case("C", 2)});
  CHECK(Order(plan) == "A0 A1 A2 B0 C0 C1");
  CHECK(Order(plan, {"C", "A"}) == "A0 A1 A2 C0 C1");
  // repeats 0 (a hand-built plan) still runs once, as the runner always did
  CHECK(Order(MakePlan({Case("A", 0)}, {})) == "A0");
}

TEST_CASE("schedule: a pair runs in ABBA rounds for 1 to 4 repeats") {
  for (int k = 1; k <= 4; ++k) {
    CAPTURE(k);
    Plan plan = MakePlan({Case("A", k)}, {Case("B", k)}, {{"A", "B"}});
    const char* expected[] = {"", "A0 B0", "A0 B0 B1 A1", "A0 B0 B1 A1 A2 B2",
                              "A0 B0 B1 A1 A2 B2 B3 A3"};
    CHECK(Order(plan) == expected[k]);
  }
}

TEST_CASE("schedule: odd repeat counts end on a forward round") {
  Plan plan = MakePlan({Case("A", 5)}, {Case("B", 5)}, {{"A", "B"}});
  CHECK(Order(plan) == "A0 B0 B1 A1 A2 B2 B3 A3 A4 B4");
}

TEST_CASE("schedule: the group order is as written, not plan order") {
  Plan plan = MakePlan({Case("A", 2)}, {Case("B", 2)}, {{"B", "A"}});
  CHECK(Order(plan) == "B0 A0 A1 B1");
}

TEST_CASE("schedule: a three-way group mirrors each round") {
  Plan plan = MakePlan({Case("A", 3), Case("B", 3)}, {Case("C", 3)}, {{"A", "B", "C"}});
  CHECK(Order(plan) == "A0 B0 C0 C1 B1 A1 A2 B2 C2");
}

TEST_CASE("schedule: a group runs where its first member would; other cases keep their place") {
  // s1: X A Y, s2: B Z; group [A, B] is pulled forward to A's place.
  Plan plan = MakePlan({Case("X", 1), Case("A", 2), Case("Y", 2)}, {Case("B", 2), Case("Z", 1)},
                       {{"A", "B"}});
  CHECK(Order(plan) == "X0 A0 B0 B1 A1 Y0 Y1 Z0");
  // Written [B, A]: still placed at A (first in plan order), B leads each forward round.
  plan.interleave = {{"B", "A"}};
  CHECK(Order(plan) == "X0 B0 A0 A1 B1 Y0 Y1 Z0");
}

TEST_CASE("schedule: two groups, each in its own place") {
  Plan plan = MakePlan({Case("A1", 2), Case("A2", 2)}, {Case("B1", 2), Case("B2", 2)},
                       {{"A1", "B1"}, {"A2", "B2"}});
  CHECK(Order(plan) == "A10 B10 B11 A11 A20 B20 B21 A21");
}

TEST_CASE("schedule: --only keeps the chosen members interleaved and drops the rest") {
  Plan plan = MakePlan({Case("A", 2), Case("B", 2)}, {Case("C", 2)}, {{"A", "B", "C"}});
  CHECK(Order(plan, {"A", "C"}) == "A0 C0 C1 A1");
  CHECK(Order(plan, {"C"}) == "C0 C1");
}

TEST_CASE("schedule: a member with fewer repeats sits out the later rounds") {
  Plan plan = MakePlan({Case("A", 3)}, {Case("B", 1)}, {{"A", "B"}});
  CHECK(Order(plan) == "A0 B0 A1 A2");
}

TEST_CASE("schedule: unknown and repeated ids in a hand-built group are ignored") {
  Plan plan = MakePlan({Case("A", 2)}, {Case("B", 2)}, {{"A", "nope", "B", "A"}});
  CHECK(Order(plan) == "A0 B0 B1 A1");
}
