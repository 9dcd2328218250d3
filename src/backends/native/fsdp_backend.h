#ifndef PROTOCOL_BACKENDS_NATIVE_FSDP_BACKEND_H_
#define PROTOCOL_BACKENDS_NATIVE_FSDP_BACKEND_H_

// The native `fsdp` backend, one rank in-process (issue 3). Distributed
// execution (several ranks, two nodes) is issue 4: such cases fail with a reason.
//
// What it runs, per workload (see docs/native.md):
//   pretrain   a blank model (seeded random init from the config) trained for
//              the case's steps or epochs on the dataset;
//   finetune   the weights in the model's path when it has them, else seeded
//              random weights (said in each measurement's method text);
//   inference  the schedule's requests, one greedy generation per max_new_tokens.
// The model's config comes from <path>/config.json, else from its preset; the
// tokenizer from <path>/tokenizer.model (required).

#include <memory>

#include "backends/backend.h"

namespace protocol {

std::unique_ptr<Backend> MakeNativeFsdpBackend();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_FSDP_BACKEND_H_
