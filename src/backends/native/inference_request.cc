#include "backends/native/inference_request.h"

#include <algorithm>
#include <string>

#include "backends/native/case/case_device.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

std::vector<int> PromptTokens(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int> prompt = tokenizer.Encode(text);
  if (tokenizer.bos_id() >= 0) prompt.insert(prompt.begin(), tokenizer.bos_id());
  return prompt;
}

RequestDecoding RequestDecodingOf(const InferenceSchedule& inference, DecodeBuckets* buckets) {
  RequestDecoding d;
  d.ignore_eos = inference.ignore_eos;
  d.step = DecodeStepOf(inference.decode_step);
  if (d.step != DecodeStep::kHostPosition) d.buckets = buckets;
  return d;
}

Result<ServedRequest> ServeRequest(const Model& model, const Tokenizer& tokenizer, const std::vector<int>& prompt,
                                   int index, int64_t max_new_tokens, const RequestDecoding& decoding,
                                   const at::Device& device, const std::function<double()>& now,
                                   const StopFlag* stop) {
  GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.ignore_eos = decoding.ignore_eos;
  o.decode_step = decoding.step;
  const double t0 = now();
  auto generation = generate_greedy(model, prompt, o, stop, decoding.buckets);
  compat::DeviceSynchronize(device);
  const double seconds = now() - t0;
  if (!generation.ok()) return generation.status();
  ServedRequest served;
  served.interrupted = generation->interrupted;
  RequestSample& r = served.sample;
  r.index = index;
  r.max_new_tokens = static_cast<int>(max_new_tokens);
  r.prompt_tokens = static_cast<int>(prompt.size());
  r.generated_tokens = static_cast<int>(generation->tokens.size());
  r.seconds = seconds;
  r.answer = tokenizer.Decode(generation->tokens);
  r.token_ids = generation->tokens;
  return served;
}

Result<DecodeCheck> CheckDecodeStep(const Model& model, const std::vector<int>& prompt, DecodeStep step) {
  const int64_t room = model.config.max_seq_len - static_cast<int64_t>(prompt.size());
  if (room < 1)
    return Status::InvalidArgument(fmt::format("decode check: the prompt ({} tokens) leaves no room in the model's "
                                               "context of {} positions",
                                               prompt.size(), model.config.max_seq_len));
  GenerateOptions host, checked;
  host.max_new_tokens = checked.max_new_tokens = std::min(kDecodeCheckTokens, room);
  checked.decode_step = step;
  auto a = generate_greedy(model, prompt, host);
  if (!a.ok()) return a.status();
  auto b = generate_greedy(model, prompt, checked);
  if (!b.ok()) return b.status();
  return CompareDecodes(a->tokens, b->tokens);
}

DecodeCheck CompareDecodes(const std::vector<int>& host, const std::vector<int>& checked) {
  for (size_t i = 0; i < host.size(); ++i)
    if (i >= checked.size() || checked[i] != host[i])
      return {false, fmt::format("token {} of the first {} parts from the host position's ({} against {}); the "
                                 "tokens before it are equal",
                                 i + 1, host.size(), i < checked.size() ? std::to_string(checked[i]) : "none",
                                 host[i])};
  return {true, fmt::format("the first {} tokens equal the host position's", host.size())};
}

}  // namespace native
}  // namespace protocol
