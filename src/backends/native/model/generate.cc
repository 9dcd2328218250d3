#include "backends/native/model/generate.h"

#include <algorithm>

#include "backends/native/platform/torch_compat.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

namespace {

// The reference: the whole sequence re-run for each token, each token read
// back at once (the cache is tested against it).
Generation generate_without_cache(const Model& model, const std::vector<int>& prompt, const GenerateOptions& options,
                                  const StopFlag* stop) {
  const at::TensorOptions ids = at::TensorOptions().dtype(at::kLong).device(model.embed.device());
  std::vector<int64_t> seq(prompt.begin(), prompt.end());
  Generation out;
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    if (stop && stop->requested()) {
      out.interrupted = true;
      break;
    }
    at::Tensor input = at::tensor(seq, ids).view({1, static_cast<int64_t>(seq.size())});
    at::Tensor logits = model_forward(model, input, nullptr);  // (1,T,V)
    const int next = static_cast<int>(compat::ReadToHost(logits.select(1, logits.size(1) - 1).argmax(-1))[0]);
    seq.push_back(next);
    out.tokens.push_back(next);
    if (!options.ignore_eos && next == model.config.eos_id) {
      out.ended_at_eos = true;
      break;
    }
  }
  return out;
}

// With the KV cache, the host out of the way: each token's argmax stays on
// the device and is the next step's input; the tokens are written to a device
// buffer and read back in one copy at the end, or every kEosCheckTokens when
// the decode must stop at end-of-sequence (the tokens after it, at most
// kEosCheckTokens − 1 of them, are computed and dropped).
//
// With a position on the device (DecodeStep::kDevicePosition, kCudaGraph),
// the prompt's forward is the same; each later step reads the token in
// `input` at the position in `pos`, writes the next token to `input` and to
// generated[pos − P + 1], and advances `pos`, all on the device: the step
// below, run as it is or replayed from its CUDA graph.
Generation generate_with_cache(const Model& model, const std::vector<int>& prompt, const GenerateOptions& options,
                               const StopFlag* stop, int64_t capacity) {
  const at::TensorOptions ids = at::TensorOptions().dtype(at::kLong).device(model.embed.device());
  const int64_t P = static_cast<int64_t>(prompt.size());
  KvCache cache = kv_cache_create(model, 1, capacity);
  at::Tensor generated = at::empty({std::max<int64_t>(options.max_new_tokens, 1)}, ids);
  at::Tensor input = at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), ids).view({1, P});
  at::Tensor pos = at::full({1}, P, ids);  // the device-position steps' position of `input`
  auto device_step = [&]() {
    at::Tensor logits = model_decode_step(model, input, pos, cache);  // (1,1,V)
    at::Tensor next = logits.select(1, 0).argmax(-1, /*keepdim=*/true).to(ids.device());
    generated.index_copy_(0, pos - (P - 1), next.view({1}));
    input.copy_(next);
    pos.add_(1);
  };
  compat::CudaGraph graph;
  bool captured = false;
  Generation out;
  int64_t done = 0;  // tokens computed
  // Reads generated[out.tokens.size(), done) back; true when it held end-of-sequence (the tokens cut after it).
  auto read_back = [&]() {
    const int64_t from = static_cast<int64_t>(out.tokens.size());
    if (done == from) return false;
    for (double id : compat::ReadToHost(generated.narrow(0, from, done - from))) {
      out.tokens.push_back(static_cast<int>(id));
      if (!options.ignore_eos && out.tokens.back() == model.config.eos_id) {
        out.ended_at_eos = true;
        return true;
      }
    }
    return false;
  };
  for (; done < options.max_new_tokens;) {
    if (stop && stop->requested()) {
      out.interrupted = true;
      break;
    }
    if (done == 0 || options.decode_step == DecodeStep::kHostPosition) {
      at::Tensor logits = model_forward(model, input, &cache);  // (1,T,V)
      input = logits.select(1, logits.size(1) - 1).argmax(-1, /*keepdim=*/true).to(ids.device());  // (1,1), on the device
      generated.narrow(0, done, 1).copy_(input.view({1}));
    } else if (options.decode_step == DecodeStep::kDevicePosition) {
      device_step();
    } else if (!captured) {
      captured = graph.Capture(device_step, ids.device());  // runs the step once, then records it
      TORCH_CHECK(captured, "generate: a CUDA graph needs a CUDA device");
    } else {
      graph.Replay();
    }
    ++done;
    if (!options.ignore_eos && done % kEosCheckTokens == 0 && read_back()) return out;
  }
  read_back();
  return out;
}

}  // namespace

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

  if (options.use_kv_cache && options.decode_step != DecodeStep::kHostPosition) {
    for (const LayerWeights& w : model.layers)
      if (w.input_norm.device() != model.embed.device())
        return Status::InvalidArgument("generate: a decode step with its position on the device needs the model on one "
                                       "device (this one is placed over several)");
    if (options.decode_step == DecodeStep::kCudaGraph && !model.embed.is_cuda())
      return Status::InvalidArgument(fmt::format("generate: a CUDA graph needs a model on a CUDA device, not {}",
                                                 model.embed.device().str()));
  }
  c10::InferenceMode inference;
  const int64_t reads_before = compat::HostReads();
  Generation out;
  if (!options.use_kv_cache) {
    out = generate_without_cache(model, prompt, options, stop);
  } else {
    out = generate_with_cache(model, prompt, options, stop, total);
  }
  out.host_reads = compat::HostReads() - reads_before;
  return out;
}

}  // namespace native
}  // namespace protocol
