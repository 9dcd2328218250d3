#ifndef PROTOCOL_RUNNER_PLAN_SCHEDULE_H_
#define PROTOCOL_RUNNER_PLAN_SCHEDULE_H_

// The order in which a run executes (case, repeat) pairs. Pure: reads the
// plan, touches nothing. The runner drops the pairs a resumed run already has
// (so a resume keeps the order of what is missing) and numbers progress
// [i/N] along this order.
//
// Without `plan.interleave` the order is plan order (stage order, then case
// order) with each case's repeats consecutive: a0 a1 a2 b0 b1 b2.
//
// An interleave group (docs/plan-format.md, `interleave:`) runs where its
// first member in plan order would run, in rounds: round r holds repeat r of
// every member, in the order the group is written when r is even and in the
// reverse order when r is odd (ABBA blocks):
//   [A, B],    2 repeats each: A0 B0 B1 A1
//   [A, B],    4 repeats each: A0 B0 B1 A1 A2 B2 B3 A3
//   [A, B, C], 2 repeats each: A0 B0 C0 C1 B1 A1
// So for any even repeat count each member has the same mean position and
// linear drift of the machine (heat, other load) biases no side. A member
// with fewer repeats than the others simply sits out the rounds beyond its
// count (the parser requires equal repeats; this keeps the function total).

#include <set>
#include <string>
#include <vector>

#include "runner/plan/plan.h"

namespace protocol {

// One (case, repeat) to run.
struct ScheduledRun {
  const CaseSpec* spec = nullptr;  // points into the plan
  int repeat = 0;                  // 0-based
};

// Every (case, repeat) of `plan` in execution order. `only` non-empty: just
// those case ids (the others of a group stay interleaved among themselves).
// Group members that are not cases of the plan are ignored.
std::vector<ScheduledRun> ScheduleRuns(const Plan& plan, const std::set<std::string>& only = {});

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_SCHEDULE_H_
