#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_CASE_WEIGHTS_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_CASE_WEIGHTS_H_

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
#include "backends/native/case/weights_source.h"
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

// The same weights as a ParameterFill (model.h): the path's tensors read one
// at a time (its files opened here), or a seeded initialisation continuing
// one generator from `seed`, so that any grouping of the parameters into runs
// gives LoadOrInitWeights' weights. Errors: the path's weights cannot be
// opened (WeightsReader::Open's).
Result<ParameterFill> CaseWeightsFill(const CaseWeights& weights, const std::string& path, int64_t seed);

// How a case's model is created (model_create, model_create_placed): a 4-bit
// model without its projections, which LoadOrInitNf4Weights fills.
ProjectionTensors CaseProjectionTensors(bool nf4);

// LoadOrInitWeights and model_quantize_nf4 in one pass, one tensor at a time
// (model_fill_nf4): the same codes and scales, and the load never holds more
// than one projection in full precision.
// REQUIRES: `model` created with ProjectionTensors::kLeaveUndefined.
// Errors: those of CaseWeightsFill and of the fill (a missing tensor, a shape).
Status LoadOrInitNf4Weights(Model& model, const CaseWeights& weights, const std::string& path, int64_t seed,
                            bool double_quant);

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

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_CASE_WEIGHTS_H_
