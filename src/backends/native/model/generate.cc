#include "backends/native/model/generate.h"

#include <algorithm>

#include "backends/native/model/fused_ops.h"
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

// A bucket of exactly `capacity` positions for `model`: zeroed cache and buffers on its device.
std::unique_ptr<DecodeBucket> decode_bucket_create(const Model& model, int64_t capacity) {
  const at::TensorOptions ids = at::TensorOptions().dtype(at::kLong).device(model.embed.device());
  auto b = std::make_unique<DecodeBucket>();
  b->capacity = capacity;
  b->cache = kv_cache_create(model, 1, capacity);
  b->input = at::zeros({1, 1}, ids);
  b->pos = at::zeros({1}, ids);
  b->tokens = at::zeros({capacity}, ids);
  return b;
}

// With the KV cache, the host out of the way: each token's argmax stays on
// the device and is the next step's input; the tokens are written to the
// bucket's device buffer at their positions and read back in one copy at the
// end, or every kEosCheckTokens when the decode must stop at end-of-sequence
// (the tokens after it, at most kEosCheckTokens − 1 of them, are computed and
// dropped).
//
// With a position on the device (DecodeStep::kDevicePosition, kCudaGraph),
// the prompt's forward is the same; each later step reads the token in
// b.input at the position in b.pos, writes the next token to b.input and to
// b.tokens[pos + 1], and advances b.pos, all on the device: the step below,
// run as it is or replayed from the bucket's CUDA graph (recorded by the
// first generation that needs it).
Generation generate_with_cache(const Model& model, const std::vector<int>& prompt, const GenerateOptions& options,
                               const StopFlag* stop, DecodeBucket& b) {
  const at::TensorOptions ids = at::TensorOptions().dtype(at::kLong).device(model.embed.device());
  const int64_t P = static_cast<int64_t>(prompt.size());
  b.cache.length = 0;  // positions past the prompt's hold an earlier generation's keys: written before they are seen
  at::Tensor input = at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), ids).view({1, P});
  auto device_step = [&model, &b]() {
    at::Tensor logits = model_decode_step(model, b.input, b.pos, b.cache);  // (1,1,V)
    at::Tensor next = logits.select(1, 0).argmax(-1, /*keepdim=*/true).to(b.input.device());
    b.tokens.index_copy_(0, b.pos + 1, next.view({1}));
    b.input.copy_(next);
    b.pos.add_(1);
  };
  Generation out;
  int64_t done = 0;  // tokens computed
  // Reads the tokens [out.tokens.size(), done) back; true when they held end-of-sequence (the tokens cut after it).
  auto read_back = [&]() {
    const int64_t from = static_cast<int64_t>(out.tokens.size());
    if (done == from) return false;
    for (double id : compat::ReadToHost(b.tokens.narrow(0, P + from, done - from))) {
      out.tokens.push_back(static_cast<int>(id));
      if (!options.ignore_eos && out.tokens.back() == model.config.eos_id) {
        out.ended_at_eos = true;
        return true;
      }
    }
    return false;
  };
  const bool host_position = options.decode_step == DecodeStep::kHostPosition;
  for (; done < options.max_new_tokens;) {
    if (stop && stop->requested()) {
      out.interrupted = true;
      break;
    }
    if (done == 0 || host_position) {
      at::Tensor logits = model_forward(model, input, &b.cache);  // (1,T,V)
      input = logits.select(1, logits.size(1) - 1).argmax(-1, /*keepdim=*/true).to(ids.device());  // (1,1), on the device
      b.tokens.narrow(0, P + done, 1).copy_(input.view({1}));
      if (done == 0 && !host_position) {
        b.input.copy_(input);
        b.pos.fill_(P);
      }
    } else if (options.decode_step == DecodeStep::kDevicePosition) {
      device_step();
    } else if (b.captures > 0) {
      b.graph.Replay();
    } else {
      // Runs the step once, then records it.
      TORCH_CHECK(b.graph.Capture(device_step, ids.device()), "generate: a CUDA graph needs a CUDA device");
      ++b.captures;
    }
    ++done;
    if (!options.ignore_eos && done % kEosCheckTokens == 0 && read_back()) return out;
  }
  read_back();
  return out;
}

}  // namespace

std::string DecodingText(const at::Device& device, at::ScalarType dtype, DecodeStep step) {
  bool fused_kernels = false;
  {
    c10::InferenceMode inference;  // where a generation runs, and the only place the fused ops serve
    fused_kernels = fused::Available(at::empty({0}, at::TensorOptions().dtype(dtype).device(device)));
  }
  const char* unfused = "ATen ops (no fused decode kernels for this device and dtype)";
  if (step == DecodeStep::kHostPosition)
    return std::string("greedy (argmax), KV cache, each step at the host's position; ") +
           (fused_kernels ? "fused decode kernels (RMSNorm, RoPE with the cache write, SiLU·up, attention)" : unfused);
  const std::string bucket = "a cache bucket of positions rounded up to a multiple of " +
                             std::to_string(kDecodeBucketPositions);
  return "greedy (argmax), KV cache, each step at a position on the device, " +
         (fused_kernels ? bucket + " attended up to the position"
                        : bucket + " attended whole, later positions masked") +
         (step == DecodeStep::kCudaGraph ? ", replayed from a CUDA graph recorded once per bucket" : "") + "; " +
         (fused_kernels ? "fused decode kernels reading the position on the device (RMSNorm, RoPE with the cache "
                          "write, SiLU·up, attention)"
                        : unfused);
}

DecodeBucket& DecodeBuckets::For(const Model& model, int64_t total) {
  const int64_t capacity = DecodeBucketCapacity(total, model.config.max_seq_len);
  std::unique_ptr<DecodeBucket>& b = buckets_[capacity];
  if (!b) b = decode_bucket_create(model, capacity);
  return *b;
}

Result<Generation> generate_greedy(const Model& model, const std::vector<int>& prompt,
                                   const GenerateOptions& options, const StopFlag* stop, DecodeBuckets* buckets) {
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
    std::unique_ptr<DecodeBucket> own;
    DecodeBucket& bucket = buckets != nullptr ? buckets->For(model, total) : *(own = decode_bucket_create(model, total));
    out = generate_with_cache(model, prompt, options, stop, bucket);
  }
  out.host_reads = compat::HostReads() - reads_before;
  return out;
}

}  // namespace native
}  // namespace protocol
