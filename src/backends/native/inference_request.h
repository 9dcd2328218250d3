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
#include "runner/store/records.h"

namespace protocol {
namespace native {

// The prompt as the model sees it: BOS (when the tokenizer has one), then `text`'s tokens.
std::vector<int> PromptTokens(const Tokenizer& tokenizer, const std::string& text);

struct ServedRequest {
  RequestSample sample;      // index, budget, prompt and generated tokens, seconds, answer, token ids
  bool interrupted = false;  // `stop` was raised during the generation (sample holds what was done)
};

// Request `index` of the schedule: up to `max_new_tokens` greedy tokens after
// `prompt` (exactly that many when `ignore_eos`). `now` is the clock in seconds;
// the time is taken after compat::DeviceSynchronize(device). Errors: the
// generation's (an empty prompt, a prompt longer than the model's context).
Result<ServedRequest> ServeRequest(const Model& model, const Tokenizer& tokenizer, const std::vector<int>& prompt,
                                   int index, int64_t max_new_tokens, bool ignore_eos, const at::Device& device,
                                   const std::function<double()>& now, const StopFlag* stop);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_INFERENCE_REQUEST_H_
