#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_DIST_LAYOUT_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_DIST_LAYOUT_H_

// Where the ranks of a native case run: which node each rank is on, in
// groups (fsdp: one group of nodes × ranks_per_node ranks; share: the
// topology's G×K per node), and the CPU threads each rank takes. Read by the
// launch (dist_backend.h), the plan checks and estimates (native_check.h)
// and the ranks' figures (rank_events.h). No libtorch.

#include <map>
#include <string>
#include <vector>

#include "runner/base/status.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

struct DistLayout {
  int groups = 1;
  int group_size = 1;
  std::vector<std::string> rank_nodes;  // node of each rank
  std::map<std::string, std::string> node_hosts;
  int world() const { return groups * group_size; }
  int nodes() const;  // distinct nodes among rank_nodes
};

// CPU threads for each of `ranks_on_host` ranks of a case on one host
// (training.threads, docs/plan-format.md): threads / ranks_on_host when the
// plan sets threads; else OMP_NUM_THREADS / ranks_on_host when the environment
// sets it; else hardware threads / ranks_on_host; at least 1. A one-process
// case is ranks_on_host = 1.
int ThreadsPerRank(const TrainingSettings& training, int ranks_on_host);

// fsdp: `nodes` nodes (the cluster's first ones; "node0".. on "localhost" when
// the plan lists none), ranks_per_node each (0: max(1, the node's gpus)).
Result<DistLayout> FsdpLayout(const Plan& plan, const CaseSpec& spec);
// share: the topology; every part must have the same K.
Result<DistLayout> ShareLayout(const Plan& plan, const CaseSpec& spec);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_DIST_LAYOUT_H_
