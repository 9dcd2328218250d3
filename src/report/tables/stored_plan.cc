#include "report/tables/stored_plan.h"

#include <algorithm>
#include <set>

#include "runner/plan/plan_parser.h"

namespace protocol {

namespace {

std::string HostName(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return "localhost";
  return host;
}

}  // namespace

std::vector<std::string> CaseHosts(const Plan& plan, const CaseSpec& spec) {
  // A case that runs its own launch command places its processes itself: not known here.
  if (!spec.command.argv.empty()) return {};
  std::vector<std::string> nodes;  // node names, in order
  for (const TopologyPart& p : spec.topology.parts)
    if (std::find(nodes.begin(), nodes.end(), p.node) == nodes.end()) nodes.push_back(p.node);
  if (spec.topology.empty()) {
    // As the fsdp layout places them: the first `nodes` of the cluster, or
    // this host for each when the plan lists none.
    if (plan.cluster.nodes.empty()) return std::vector<std::string>(static_cast<size_t>(spec.nodes), "localhost");
    for (int n = 0; n < spec.nodes && static_cast<size_t>(n) < plan.cluster.nodes.size(); ++n)
      nodes.push_back(plan.cluster.nodes[static_cast<size_t>(n)].name);
  }
  std::vector<std::string> hosts;
  for (const std::string& name : nodes) {
    if (plan.cluster.launcher == "local") {
      hosts.push_back("localhost");
      continue;
    }
    std::string host;
    for (const NodeSpec& n : plan.cluster.nodes)
      if (n.name == name) host = n.host.empty() ? n.name : n.host;
    if (host.empty()) return {};  // a node the cluster does not list: not known
    hosts.push_back(HostName(host));
  }
  return hosts;
}

std::string OneHostOfNodes(const StoredCase& c) {
  if (c.hosts.size() < 2) return "";
  std::set<std::string> distinct(c.hosts.begin(), c.hosts.end());
  return distinct.size() == 1 ? *distinct.begin() : "";
}

std::map<std::string, StoredCase> ReadStoredPlan(const std::string& plan_text) {
  std::map<std::string, StoredCase> out;
  if (plan_text.empty()) return out;
  PlanParseResult parsed = ParsePlanString(plan_text, "<stored plan>");
  if (!parsed.ok()) return out;
  for (const StageSpec& stage : parsed.plan->stages) {
    for (const CaseSpec& spec : stage.cases) {
      StoredCase& c = out[spec.id];
      c.work = CaseWorkSettings(*parsed.plan, spec);
      c.hosts = CaseHosts(*parsed.plan, spec);
      c.quality_target_loss = spec.quality_target_loss;
    }
  }
  return out;
}

}  // namespace protocol
