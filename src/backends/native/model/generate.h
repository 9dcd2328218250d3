#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_GENERATE_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_GENERATE_H_

// Greedy decoding: at each step the next token is argmax of the last logits.
// With a KV cache the prompt is run once (prefill) and each new token costs one
// single-position forward; the token stays on the device as the next input and
// the host reads the answer back once (no wait for the device per token: on a
// GPU the host queues the next steps while the device runs). Without the cache
// the whole sequence is re-run each step (the reference the cache is tested
// against).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/model/decode_bucket_capacity.h"
#include "backends/native/model/model.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/status.h"
#include "runner/base/stop_flag.h"

namespace protocol {
namespace native {

// How each token after the prompt's forward is decoded, with the KV cache.
enum class DecodeStep {
  // model_forward at the cache's host position, attending over the filled
  // positions only (the fused decode ops where they serve). The default.
  kHostPosition,
  // model_decode_step: the position on the device, where the fused decode
  // ops read it (attending over the positions filled so far, the same bits
  // as kHostPosition), or the cache's whole capacity attended by the
  // composite ops with the later positions masked: every step has the same
  // shapes and kernel arguments; it is the step a CUDA graph records.
  kDevicePosition,
  // kDevicePosition recorded once as a CUDA graph (compat::CudaGraph; the
  // first step is its warm-up) and replayed for every later token: one host
  // call per token. CUDA only.
  kCudaGraph,
};

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  // true: generate exactly max_new_tokens, even past end-of-sequence (the
  // methodology's answer lengths); false: stop after emitting eos_id.
  bool ignore_eos = true;
  bool use_kv_cache = true;
  DecodeStep decode_step = DecodeStep::kHostPosition;  // with the cache
};

struct Generation {
  std::vector<int> tokens;     // generated tokens only (prompt excluded)
  bool ended_at_eos = false;   // stopped early because eos was produced
  bool interrupted = false;    // the stop flag was raised; tokens holds what was done
  // Device values read back on the host (compat::ReadToHost): each a wait for
  // the device. With the cache: 1 for the whole answer (ignore_eos), or one
  // per kEosCheckTokens tokens; without it, one per token.
  int64_t host_reads = 0;
};

// With the KV cache and !ignore_eos, how many tokens are decoded between two
// reads of the tokens for end-of-sequence.
inline constexpr int64_t kEosCheckTokens = 8;

// What a generation with the KV cache and `step` runs on `device` in `dtype`,
// as every native inference case stores it (its `decoding` fact):
//   "greedy (argmax), KV cache, each step at the host's position; fused
//   decode kernels (...)"   kHostPosition, where fused_ops.h serves such
//                            tensors (a CPU in float32; CUDA once its
//                            kernels are turned on)
//   "...; ATen ops (...)"   elsewhere (CUDA with the kernels off, bfloat16 on
//                            a CPU, float64)
//   "..., each step at a position on the device, a cache bucket ... [,
//   replayed from a CUDA graph ...]; fused decode kernels reading the
//   position on the device (...)" or "; ATen ops (...)"
//                            kDevicePosition and kCudaGraph
std::string DecodingText(const at::Device& device, at::ScalarType dtype,
                         DecodeStep step = DecodeStep::kHostPosition);

// What a generation with the KV cache decodes into: the cache, and the
// buffers of the steps with their position on the device, which read and
// write them in place (a CUDA graph records their addresses).
struct DecodeBucket {
  int64_t capacity = 0;  // positions: the cache's, and `tokens`'
  KvCache cache;
  at::Tensor input;      // (1,1) int64: the token at `pos`, the next step's input
  at::Tensor pos;        // (1) int64: its position
  at::Tensor tokens;     // (capacity) int64: the token generated at each position
  compat::CudaGraph graph;  // kCudaGraph: one step, recorded on these buffers
  int64_t captures = 0;     // graphs recorded into `graph` (1 at most: later generations replay it)
};

// Decode buckets kept from one generation to the next of one model: per
// capacity (prompt + new tokens rounded up to a multiple of
// kDecodeBucketPositions, at most the model's context) a DecodeBucket. With
// kCudaGraph the first generation of a bucket records its step and every
// later generation in it replays that graph: a schedule of requests records
// one graph per bucket, not one per request. The cost: a device-position step
// attends over the bucket's whole capacity, up to kDecodeBucketPositions − 1
// positions more than the generation's own, and the buckets' caches stay
// allocated while the object lives. A recorded graph replays the kernels it
// recorded (fused::CudaKernels as it was then). REQUIRES: one model per
// object (its buffers are that model's shapes, devices and dtype).
class DecodeBuckets {
 public:
  // The bucket for a generation of `total` positions (prompt + new tokens),
  // made on first use. REQUIRES: 0 < total <= model.config.max_seq_len.
  DecodeBucket& For(const Model& model, int64_t total);
  size_t size() const { return buckets_.size(); }

 private:
  std::map<int64_t, std::unique_ptr<DecodeBucket>> buckets_;  // by capacity
};

// REQUIRES: model weights initialised. Errors (kInvalidArgument): empty prompt,
// a token id outside [0, V), prompt + max_new_tokens > config.max_seq_len;
// kDevicePosition or kCudaGraph for a model placed over several devices, and
// kCudaGraph off CUDA.
// `stop` (may be null) is checked between tokens. `buckets` (may be null):
// with the cache, decode into its bucket for this generation's length instead
// of a cache made for this generation alone (its capacity exactly prompt +
// max_new_tokens).
Result<Generation> generate_greedy(const Model& model, const std::vector<int>& prompt,
                                   const GenerateOptions& options, const StopFlag* stop = nullptr,
                                   DecodeBuckets* buckets = nullptr);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_GENERATE_H_
