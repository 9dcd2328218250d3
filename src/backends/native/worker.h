#ifndef PROTOCOL_BACKENDS_NATIVE_WORKER_H_
#define PROTOCOL_BACKENDS_NATIVE_WORKER_H_

// One rank of a distributed native case: the body of `protocol worker --case FILE`.
//
// Reads the case file (worker_case.h) and its rank from the environment
// (process_group.h: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
// connects the process groups, and runs its role:
//   training   every group an FSDP replica (fsdp_sharded.h) over its own data
//              (the fsdp baseline: one group of all ranks); share: merges by
//              parameter averaging every sync_every steps and at the end
//   inference  group leaders serve the schedule's requests round-robin
// It prints events (events.h) on stdout, one per line, and plain log lines.
// Returns the process exit code: 0 done, 1 failed (an "error" event says why),
// 2 bad case file or environment.

#include <string>

namespace protocol {
namespace native {

int RunWorker(const std::string& case_path);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_WORKER_H_
