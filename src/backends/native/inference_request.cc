#include "backends/native/inference_request.h"

#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {

std::vector<int> PromptTokens(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int> prompt = tokenizer.Encode(text);
  if (tokenizer.bos_id() >= 0) prompt.insert(prompt.begin(), tokenizer.bos_id());
  return prompt;
}

Result<ServedRequest> ServeRequest(const Model& model, const Tokenizer& tokenizer, const std::vector<int>& prompt,
                                   int index, int64_t max_new_tokens, bool ignore_eos, const at::Device& device,
                                   const std::function<double()>& now, const StopFlag* stop) {
  GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.ignore_eos = ignore_eos;
  const double t0 = now();
  auto generation = generate_greedy(model, prompt, o, stop);
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

}  // namespace native
}  // namespace protocol
