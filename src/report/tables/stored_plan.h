#ifndef PROTOCOL_REPORT_TABLES_STORED_PLAN_H_
#define PROTOCOL_REPORT_TABLES_STORED_PLAN_H_

// What the report reads from the resolved plan a run stored, per case: the
// work it did (work_settings.h: a ratio compares only the same work) and the
// hosts its nodes ran on (a scaling row whose "nodes" are one host says so).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/tables/work_settings.h"
#include "runner/plan/plan.h"

namespace protocol {

struct StoredCase {
  WorkSettings work;
  // The host of each node of a case the runner places (not one that runs its
  // own launch command), in node order: the nodes of its topology, else the
  // first `nodes` of the cluster. Launcher local runs every rank on the runner's host:
  // "localhost" for each node. Loopback names (127.0.0.1, ::1) read
  // "localhost". Empty when not known (a command case).
  std::vector<std::string> hosts;
  // The case's quality_target.loss (time_to_target.h); nullopt when not set.
  std::optional<double> quality_target_loss;
};

// The hosts of one case's nodes (StoredCase::hosts).
std::vector<std::string> CaseHosts(const Plan& plan, const CaseSpec& spec);

// The one host every node of a case ran on, when it has 2 or more nodes
// and they are all the same host; "" otherwise (one node, several hosts,
// not known).
std::string OneHostOfNodes(const StoredCase& c);

// Case id → what the stored plan says of it; empty when the text is not a
// plan this build can read (an import's file, a plan of an older format):
// nothing is then known.
std::map<std::string, StoredCase> ReadStoredPlan(const std::string& plan_text);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_STORED_PLAN_H_
