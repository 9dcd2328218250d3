#ifndef PROTOCOL_BACKENDS_NATIVE_DIST_BACKEND_H_
#define PROTOCOL_BACKENDS_NATIVE_DIST_BACKEND_H_

// The runner's side of a distributed native case, shared by the `fsdp`
// backend (more than one rank) and the `share` backend:
//   1. the layout (launch/dist_layout.h): which node each rank runs on, in groups (fsdp: one group of
//      nodes × ranks_per_node ranks; share: the topology's G×K per node);
//   2. the case file (worker_case.h) beside the case log;
//   3. one `protocol worker --case FILE` per rank, with RANK, WORLD_SIZE,
//      LOCAL_RANK, MASTER_ADDR, MASTER_PORT=0 (rank 0 announces the port its
//      store bound: launch/rendezvous.h), PROTOCOL_NODE;
//   4. the plan's launcher (launcher.h), then DistOptions::wrap, then the
//      supervisor (supervisor.h): all ranks to their common end;
//   5. the ranks' events (events.h) become CaseEvents and measurements.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/native/launch/launcher.h"
#include "backends/native/launch/worker_case.h"
#include "backends/native/launch/dist_layout.h"
#include "backends/native/launch/native_role.h"
#include "runner/exec/backend.h"

namespace protocol {
namespace native {

struct DistOptions {
  // The program that has the `worker` subcommand; empty: this program (/proc/self/exe).
  std::string worker_program;
  // Called with the prepared launches before they start (the network
  // emulation's `ip netns exec` seam); an error fails the case.
  std::function<Status(std::vector<RankLaunch>&)> wrap;
  double kill_grace_seconds = 3;
};

// Problems of running `spec` over `layout` (batch divisibility, launcher name, ...).
std::vector<std::string> CheckDistributed(const Plan& plan, const CaseSpec& spec, const DistLayout& layout);

// The case file's contents for `layout` (worker_case.h): the plan's inputs
// resolved to absolute paths. The one-process backend runs the same.
WorkerCase WorkerCaseOf(const BackendContext& ctx, NativeRole role, const DistLayout& layout);

BackendOutcome RunDistributed(BackendContext& ctx, NativeRole role, const DistLayout& layout,
                              const DistOptions& options);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DIST_BACKEND_H_
