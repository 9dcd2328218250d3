#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_WEIGHTS_SOURCE_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_WEIGHTS_SOURCE_H_

// Where a native case's weights come from: one rule for the plan checks
// (native_check.h) and for the run (case_weights.h). No libtorch.

#include <cstdint>
#include <string>

#include "runner/plan/plan.h"

namespace protocol {
namespace native {

// Where a native case's weights come from, decided once for Check and Run:
//   kRandomFromScratch  a full-precision pretrain: trained from a seeded
//                       random start (the methodology's pretraining), whatever
//                       `init` says
//   kRandomDeclared     otherwise, the model says `init: random`: seeded random
//                       weights, whatever its path holds
//   kPath               the path's model.safetensors (or its index)
//   kMissing            none of these: the case is refused (validate: an error)
enum class WeightsSource { kPath, kRandomDeclared, kRandomFromScratch, kMissing };
// `path`: the model's path as resolved (plan.ResolvePath); read for the weights files.
WeightsSource native_weights_source(Workload workload, bool nf4, bool init_random, const std::string& path);
// What every measurement of a case measured on declared random weights says,
// after "weights: ": "random weights (init: random, seed 1234)"; "" for the
// other sources (a pretrain from scratch trains its random start: that is
// what pretraining is, not a model measured on random weights).
std::string native_weights_note(WeightsSource source, int64_t seed);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_WEIGHTS_SOURCE_H_
