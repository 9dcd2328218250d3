#ifndef PROTOCOL_BACKENDS_NATIVE_SHARE_BACKEND_H_
#define PROTOCOL_BACKENDS_NATIVE_SHARE_BACKEND_H_

// The native `share` backend: the share protocol over c10d (docs/distributed.md).
// Topology node:GxK: G groups of K ranks per node; every group an FSDP replica
// over its own subgroup, trained on its own shard of the data; groups merged by
// parameter averaging at the end, or every training.sync_every steps (DiLoCo,
// optional outer Nesterov momentum). Inference: the groups are independent
// replicas serving the schedule's requests round-robin.

#include <memory>

#include "backends/native/dist_backend.h"
#include "runner/exec/backend.h"

namespace protocol {

std::unique_ptr<Backend> MakeNativeShareBackend();
std::unique_ptr<Backend> MakeNativeShareBackend(const native::DistOptions& options);

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_SHARE_BACKEND_H_
