#include "backends/native/launch/stragglers.h"

#include "runner/base/text.h"

#include <algorithm>
#include <map>

namespace protocol {
namespace native {

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<Straggler> FindStragglers(const std::vector<RankStepTimes>& ranks, int group_size, double fraction) {
  std::map<int, std::vector<const RankStepTimes*>> groups;
  for (const RankStepTimes& r : ranks) groups[r.rank / std::max(1, group_size)].push_back(&r);
  std::vector<Straggler> out;
  for (const auto& [group, members] : groups) {
    if (members.size() < 2) continue;
    std::vector<double> work;
    for (const RankStepTimes* r : members) work.push_back(r->work_mean);
    const double median = Median(work);
    for (const RankStepTimes* r : members)
      if (r->work_mean > (1 + fraction) * median) out.push_back({r->rank, r->node, r->work_mean, median});
  }
  std::sort(out.begin(), out.end(), [](const Straggler& a, const Straggler& b) { return a.rank < b.rank; });
  return out;
}

std::string DescribeStraggler(const Straggler& s) {
  return fmt::format("rank {} (node {}): {:.3f} s of own work per step, {:.2f}× its group's median {:.3f} s", s.rank,
                     s.node, s.work_mean, s.group_median > 0 ? s.work_mean / s.group_median : 0.0, s.group_median);
}

}  // namespace native
}  // namespace protocol
