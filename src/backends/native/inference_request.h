#ifndef PROTOCOL_BACKENDS_NATIVE_INFERENCE_REQUEST_H_
#define PROTOCOL_BACKENDS_NATIVE_INFERENCE_REQUEST_H_

// One request of an inference schedule, the step the one-process backend and
// a replica leader (worker.cc) share: the prompt's tokens, then a greedy
// generation timed from before it starts until the device has finished it.

#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "backends/native/model/generate.h"
#include "backends/native/model/tokenizer.h"
#include "runner/base/status.h"
#include "runner/base/stop_flag.h"
#include "runner/plan/plan.h"
#include "runner/store/records.h"

namespace protocol {
namespace native {

// The prompt as the model sees it: BOS (when the tokenizer has one), then `text`'s tokens.
std::vector<int> PromptTokens(const Tokenizer& tokenizer, const std::string& text);

struct ServedRequest {
  RequestSample sample;      // index, budget, prompt and generated tokens, seconds, answer, token ids
  bool interrupted = false;  // `stop` was raised during the generation (sample holds what was done)
};

// How every request of a schedule is decoded: the plan's inference settings
// as generate.h takes them, and the decode buckets the schedule's requests
// share where the step's position is on the device (a CUDA graph is recorded
// once per bucket, by the first request that decodes into it; its time is
// that request's). Null buckets: each generation makes its own cache.
struct RequestDecoding {
  bool ignore_eos = true;
  DecodeStep step = DecodeStep::kHostPosition;
  DecodeBuckets* buckets = nullptr;
};

// A case's inference settings as its requests decode them; `buckets` (kept
// by the caller for the whole schedule) serves a step off the host's position.
RequestDecoding RequestDecodingOf(const InferenceSchedule& inference, DecodeBuckets* buckets);

// Request `index` of the schedule: up to `max_new_tokens` greedy tokens after
// `prompt` (exactly that many when `decoding.ignore_eos`). `now` is the clock
// in seconds; the time is taken after compat::DeviceSynchronize(device).
// Errors: the generation's (an empty prompt, a prompt longer than the model's
// context, a step the model's placement or device cannot take).
Result<ServedRequest> ServeRequest(const Model& model, const Tokenizer& tokenizer, const std::vector<int>& prompt,
                                   int index, int64_t max_new_tokens, const RequestDecoding& decoding,
                                   const at::Device& device, const std::function<double()>& now,
                                   const StopFlag* stop);

// The check a schedule whose step is not at the host's position runs before
// its first request, untimed: the first kDecodeCheckTokens tokens after
// `prompt` (fewer where the context ends sooner) decoded with `step`, in a
// bucket of its own, and at the host's position, compared. Both are correct
// greedy decodes of the model, but their attention sums in different orders,
// so a token whose two best logits lie within a rounding of each other may
// part them; tokens that part from the first ones suggest a fault in the
// step. Errors: the generation's (kCudaGraph off CUDA, a model placed over
// several devices, a prompt that fills the context).
inline constexpr int64_t kDecodeCheckTokens = 16;
struct DecodeCheck {
  bool equal = false;
  // The case's decode_check fact: "the first 16 tokens equal the host
  // position's", or the first token where they part and both tokens.
  std::string text;
};
Result<DecodeCheck> CheckDecodeStep(const Model& model, const std::vector<int>& prompt, DecodeStep step);
// The comparison CheckDecodeStep makes of the tokens `checked` decoded with
// the step against `host`'s (as many or fewer).
DecodeCheck CompareDecodes(const std::vector<int>& host, const std::vector<int>& checked);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_INFERENCE_REQUEST_H_
