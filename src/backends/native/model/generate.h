#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_GENERATE_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_GENERATE_H_

// Greedy decoding: at each step the next token is argmax of the last logits.
// With a KV cache the prompt is run once (prefill) and each new token costs one
// single-position forward; without it the whole sequence is re-run each step
// (the reference the cache is tested against).

#include <cstdint>
#include <vector>

#include "backends/native/model/model.h"
#include "runner/base/status.h"
#include "runner/base/stop_flag.h"

namespace protocol {
namespace native {

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  // true: generate exactly max_new_tokens, even past end-of-sequence (the
  // methodology's answer lengths); false: stop after emitting eos_id.
  bool ignore_eos = true;
  bool use_kv_cache = true;
};

struct Generation {
  std::vector<int> tokens;     // generated tokens only (prompt excluded)
  bool ended_at_eos = false;   // stopped early because eos was produced
  bool interrupted = false;    // the stop flag was raised; tokens holds what was done
};

// How every native inference case decodes (stored as its `decoding` fact).
inline constexpr const char* kDecodingText = "greedy (argmax), KV cache";

// REQUIRES: model weights initialised. Errors (kInvalidArgument): empty prompt,
// a token id outside [0, V), prompt + max_new_tokens > config.max_seq_len.
// `stop` (may be null) is checked between tokens.
Result<Generation> generate_greedy(const Model& model, const std::vector<int>& prompt,
                                   const GenerateOptions& options, const StopFlag* stop = nullptr);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_GENERATE_H_
