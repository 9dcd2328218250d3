#include "backends/native/model/generate.h"

#include "runner/base/text.h"

namespace protocol {
namespace native {

Result<Generation> generate_greedy(const Model& model, const std::vector<int>& prompt,
                                   const GenerateOptions& options, const StopFlag* stop) {
  const ModelConfig& c = model.config;
  if (prompt.empty()) return Status::InvalidArgument("generate: the prompt has no tokens");
  for (int id : prompt)
    if (id < 0 || id >= c.vocab_size)
      return Status::InvalidArgument(
          fmt::format("generate: prompt token {} is outside the model's vocabulary [0, {})", id, c.vocab_size));
  const int64_t total = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  if (total > c.max_seq_len)
    return Status::InvalidArgument(fmt::format(
        "generate: prompt ({} tokens) + max_new_tokens ({}) = {} exceeds the model's max_position_embeddings {}",
        prompt.size(), options.max_new_tokens, total, c.max_seq_len));

  c10::InferenceMode inference;
  const at::TensorOptions ids = at::TensorOptions().dtype(at::kLong).device(model.embed.device());
  std::vector<int64_t> seq(prompt.begin(), prompt.end());
  Generation out;
  KvCache cache;
  if (options.use_kv_cache) cache = kv_cache_create(model, 1, total);

  // Step 0 feeds the whole prompt; later steps feed only the newest token
  // (cache) or everything so far (no cache).
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    if (stop && stop->requested()) {
      out.interrupted = true;
      break;
    }
    at::Tensor input;
    if (options.use_kv_cache && i > 0) {
      input = at::tensor(std::vector<int64_t>{seq.back()}, ids).view({1, 1});
    } else {
      input = at::tensor(seq, ids).view({1, static_cast<int64_t>(seq.size())});
    }
    at::Tensor logits = model_forward(model, input, options.use_kv_cache ? &cache : nullptr);  // (1,T,V)
    const int next = static_cast<int>(logits.select(1, logits.size(1) - 1).argmax(-1).item<int64_t>());
    seq.push_back(next);
    out.tokens.push_back(next);
    if (!options.ignore_eos && next == c.eos_id) {
      out.ended_at_eos = true;
      break;
    }
  }
  return out;
}

}  // namespace native
}  // namespace protocol
