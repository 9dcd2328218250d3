#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_THROUGHPUT_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_THROUGHPUT_H_

// A training case's speed, measured one way for the one-process backend and
// for the ranks (rank 0's step times): the steps after the warm-up are timed
// (every step when the case has no more steps than warm-up ones), and
//   train_tokens_per_second = timed tokens / timed seconds   (all ranks' tokens)
//   tgs                     = that / ranks                   (per device, or per process on CPU)
//   tflops (CUDA)           = FLOPs/token × tgs / 1e12        (device_peak.h)
//   mfu (CUDA, known GPU)   = tflops / the GPU's dense bf16 peak
// with FLOPs/token = 6(N−N_emb) + 12·L·H·Q·T (PaLM, appendix B), or
// 4(N−N_emb) + 12·L·H·Q·T for a frozen 4-bit base (no weight gradients; the
// LoRA adapters' FLOPs are not counted). No libtorch.

#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/model/model_config.h"
#include "runner/store/records.h"

namespace protocol {
namespace native {

class TimedSteps {
 public:
  TimedSteps(int64_t warmup_steps, int64_t steps) : warmup_steps_(warmup_steps), steps_(steps) {}
  // Records step `step` (0-based) of `seconds` and `tokens`; returns whether it is timed.
  bool Add(int64_t step, double seconds, int64_t tokens);
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t count() const { return count_; }
  double seconds() const { return seconds_; }
  int64_t tokens() const { return tokens_; }

 private:
  int64_t warmup_steps_, steps_;
  int64_t count_ = 0, tokens_ = 0;
  double seconds_ = 0;
};

// Who ran the steps, for the figures and their method texts.
struct ThroughputScope {
  bool one_process = true;  // false: ranks, timed by rank 0's steps
  int ranks = 1;
  // One process: the device ("cpu", "cuda:0"); ranks: "cpu" or "cuda".
  std::string device_text;
  bool cuda = false;
  ModelConfig config;
  int64_t seq_len = 0;
  bool frozen_base = false;  // a 4-bit base under LoRA adapters
  std::string device_name;   // the CUDA device's name (the MFU's peak)
};

// The figures above; none when no timed step took time.
std::vector<Measurement> ThroughputFigures(const TimedSteps& timed, const ThroughputScope& scope);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_THROUGHPUT_H_
