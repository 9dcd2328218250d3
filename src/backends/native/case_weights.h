#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_WEIGHTS_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_WEIGHTS_H_

// The weights of a native case, the same for the one-process backend and for
// every rank: where they start from (native_weights_source, the rule validate
// and Check apply: the path's weights, or a seeded random start, with the note
// every figure of a case on declared random weights carries), and how a
// trained case saves them.

#include <cstdint>
#include <functional>
#include <string>

#include "backends/native/quant/lora.h"
#include "backends/native/model/model.h"
#include "backends/native/native_check.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct CaseWeights {
  WeightsSource source = WeightsSource::kRandomFromScratch;
  // "weights: random weights (init: random, seed 1234)" for declared random
  // weights (native_weights_note); "" otherwise.
  std::string note;
};

// Error (kInvalidArgument) where there are none to load (kMissing): "model
// 'NAME' has no weights in its path and does not say `init: random`".
// `path`: the model's path as resolved.
Result<CaseWeights> DecideWeights(Workload workload, bool nf4, bool init_random, const std::string& path,
                                  int64_t seed, const std::string& model_name);

// kPath: loads the path's weights into `model` (model_load_weights' errors);
// a random source: model_init_random with `seed`.
Status LoadOrInitWeights(Model& model, const CaseWeights& weights, const std::string& path, int64_t seed);

// What a trained case saves: its LoRA adapters (lora_save, naming `base_path`
// as their base) when set, else the model through `save_model(dir)` (for
// sharded parameters a collective every rank of the group calls).
struct TrainedWeights {
  LoraAdapters* adapters = nullptr;
  std::string base_path;
  std::function<Status(const std::string& dir)> save_model;
};

// Saves `what` to `dir`; the process with `writer` (the one process, or rank 0)
// writes the adapters and then copies the tokenizer beside them as
// tokenizer.model (a tokenizer that cannot be copied is not an error: the
// weights are the result). Errors: those of the save.
Status SaveTrainedWeights(const std::string& dir, const TrainedWeights& what, const std::string& tokenizer_path,
                          bool writer);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_WEIGHTS_H_
