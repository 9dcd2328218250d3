#include "runner/store/run_spec.h"

#include <cstdlib>
#include <algorithm>
#include <vector>

#include "runner/base/text.h"

namespace protocol {
namespace {

Status Unknown(const std::string& spec, const std::string& why) {
  return Status::NotFound(fmt::format("unknown run '{}': {}", spec, why));
}

// "the database has runs 1 to 3" (ids are assigned in order and never
// reused); "run 1" alone; "no runs yet".
std::string Holdings(const std::vector<RunRecord>& runs) {
  if (runs.empty()) return "the database has no runs yet";
  if (runs.size() == 1) return fmt::format("the database has run {} only", runs.front().id);
  bool contiguous = runs.back().id - runs.front().id + 1 == static_cast<int64_t>(runs.size());
  if (contiguous) return fmt::format("the database has runs {} to {}", runs.front().id, runs.back().id);
  std::vector<std::string> ids;
  for (const RunRecord& r : runs) ids.push_back(std::to_string(r.id));
  return "the database has runs " + Join(ids, ", ");
}

}  // namespace

Result<int64_t> ResolveRunSpec(Store& store, const std::string& spec) {
  const bool latest = spec == "latest" || StartsWith(spec, "latest:");
  int64_t id = 0;
  if (!latest) {
    char* end = nullptr;
    long long n = std::strtoll(spec.c_str(), &end, 10);
    if (spec.empty() || *end != '\0' || n <= 0 || spec[0] == '+' || spec[0] == ' ')
      return Status::InvalidArgument(
          fmt::format("'{}' is not a run: write an id, 'latest' or 'latest:PLAN'", spec));
    id = static_cast<int64_t>(n);
  }
  auto runs = store.ListRunHeaders();
  if (!runs.ok()) return runs.status();
  if (!latest) {
    for (const RunRecord& r : *runs)
      if (r.id == id) return id;
    return Unknown(spec, Holdings(*runs));
  }
  const std::string plan = spec == "latest" ? "" : spec.substr(7);
  if (spec != "latest" && plan.empty())
    return Status::InvalidArgument(
        fmt::format("'{}' is not a run: write an id, 'latest' or 'latest:PLAN'", spec));
  std::vector<std::string> plans;  // plans run, in first-run order
  for (auto it = runs->rbegin(); it != runs->rend(); ++it) {
    if (it->kind != "run") continue;
    if (plan.empty() || it->plan_name == plan) return it->id;
  }
  for (const RunRecord& r : *runs)
    if (r.kind == "run" && std::find(plans.begin(), plans.end(), r.plan_name) == plans.end())
      plans.push_back(r.plan_name);
  if (plans.empty())
    return Unknown(spec, "the database has no runs of a plan yet (run one first: protocol run PLAN)");
  return Unknown(spec, fmt::format("no run of plan '{}' (plans run: {})", plan, Join(plans, ", ")));
}

}  // namespace protocol
