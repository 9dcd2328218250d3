#ifndef PROTOCOL_BACKENDS_NATIVE_FSDP_BACKEND_H_
#define PROTOCOL_BACKENDS_NATIVE_FSDP_BACKEND_H_

// The native `fsdp` backend. One rank (one node, ranks_per_node 1 or a node
// with at most one GPU) runs in-process; more ranks run as `protocol worker`
// processes over c10d (dist_backend.h, fsdp_sharded.h; docs/distributed.md).
//
// What it runs, per workload (see docs/native.md):
//   pretrain   a blank model (seeded random init from the config) trained for
//              the case's steps or epochs on the dataset; a 4-bit model
//              (quantization: nf4): QLoRA continued pretraining of the weights
//              in its path (none there: a failed case saying so);
//   finetune   the weights in the model's path when it has them, else seeded
//              random weights (said in each measurement's method text); a
//              4-bit model: QLoRA;
//   inference  the schedule's requests, one greedy generation per max_new_tokens.
// The model's config comes from <path>/config.json, else from its preset; the
// tokenizer from <path>/tokenizer.model (required).

#include <memory>

#include "backends/native/dist_backend.h"
#include "runner/exec/backend.h"

namespace protocol {

std::unique_ptr<Backend> MakeNativeFsdpBackend();
std::unique_ptr<Backend> MakeNativeFsdpBackend(const native::DistOptions& options);

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_FSDP_BACKEND_H_
