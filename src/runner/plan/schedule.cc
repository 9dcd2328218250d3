// Execution order of a run; schedule.h is the contract.

#include "runner/plan/schedule.h"

#include <algorithm>
#include <map>

namespace protocol {

std::vector<ScheduledRun> ScheduleRuns(const Plan& plan, const std::set<std::string>& only) {
  auto wanted = [&](const CaseSpec* c) { return only.empty() || only.count(c->id) > 0; };
  auto repeats = [](const CaseSpec* c) { return std::max(1, c->repeats); };

  // case id → its group's index; the members of each group, as written.
  std::map<std::string, size_t> group_of;
  std::vector<std::vector<const CaseSpec*>> groups(plan.interleave.size());
  for (size_t g = 0; g < plan.interleave.size(); ++g) {
    for (const std::string& id : plan.interleave[g]) {
      const CaseSpec* c = plan.FindCase(id);
      if (c == nullptr || !wanted(c) || group_of.count(id)) continue;
      group_of[id] = g;
      groups[g].push_back(c);
    }
  }

  std::vector<ScheduledRun> out;
  std::vector<bool> group_done(groups.size(), false);
  for (const CaseSpec* c : plan.Cases()) {
    if (!wanted(c)) continue;
    auto it = group_of.find(c->id);
    if (it == group_of.end()) {
      for (int k = 0; k < repeats(c); ++k) out.push_back({c, k});
      continue;
    }
    if (group_done[it->second]) continue;  // already placed with its group
    group_done[it->second] = true;
    const std::vector<const CaseSpec*>& members = groups[it->second];
    int rounds = 0;
    for (const CaseSpec* m : members) rounds = std::max(rounds, repeats(m));
    for (int r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < members.size(); ++i) {
        const CaseSpec* m = members[r % 2 == 0 ? i : members.size() - 1 - i];
        if (r < repeats(m)) out.push_back({m, r});
      }
    }
  }
  return out;
}

}  // namespace protocol
