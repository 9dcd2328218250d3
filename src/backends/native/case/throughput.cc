#include "backends/native/case/throughput.h"

#include "backends/native/platform/device_peak.h"
#include "runner/base/text.h"
#include "runner/exec/backend.h"

namespace protocol {
namespace native {

bool TimedSteps::Add(int64_t step, double seconds, int64_t tokens) {
  if (step < warmup_steps_ && steps_ > warmup_steps_) return false;
  seconds_ += seconds;
  tokens_ += tokens;
  ++count_;
  return true;
}

std::vector<Measurement> ThroughputFigures(const TimedSteps& timed, const ThroughputScope& scope) {
  std::vector<Measurement> out;
  if (timed.seconds() <= 0) return out;
  const double tps = static_cast<double>(timed.tokens()) / timed.seconds();
  const std::string how =
      scope.one_process
          ? fmt::format("{} tokens over {} steps after {} warm-up step(s), one process on {}", timed.tokens(),
                        timed.count(), timed.warmup_steps(), scope.device_text)
          : fmt::format("{} tokens over {} steps after {} warm-up step(s), rank 0's step times, {} ranks on {}",
                        timed.tokens(), timed.count(), timed.warmup_steps(), scope.ranks, scope.device_text);
  const double per_device = tps / scope.ranks;
  out.push_back(MeasuredFigure(metric::kTrainTokensPerSecond, tps, "tokens/s", how));
  const std::string tgs_how =
      scope.one_process ? how + (scope.cuda ? " (one device)" : " (per process: CPU)")
                        : how + (scope.cuda ? " / ranks (one device each)" : " / ranks (per process: CPU)");
  out.push_back(MeasuredFigure(metric::kTgs, per_device, "tokens/s", tgs_how));
  if (!scope.cuda) return out;
  const double flops = scope.frozen_base ? scope.config.FrozenBaseTrainingFlopsPerToken(scope.seq_len)
                                         : scope.config.TrainingFlopsPerToken(scope.seq_len);
  const std::string formula = scope.frozen_base ? "4(N-N_emb)+12·L·H·Q·T FLOPs/token (PaLM, frozen base: no weight "
                                                  "gradients; LoRA FLOPs not counted)"
                                                : "6(N-N_emb)+12·L·H·Q·T FLOPs/token (PaLM)";
  const double tflops = AchievedTflops(flops, per_device);
  out.push_back(MeasuredFigure(metric::kTflops, tflops, "TFLOP/s",
                               scope.one_process ? formula + " × tokens/s"
                                                 : formula + " × tokens/s per device (" + how + " / ranks)"));
  if (auto peak = PeakBf16Tflops(scope.device_name))
    out.push_back(MeasuredFigure(metric::kMfu, tflops / *peak, "",
                                 fmt::format("{} / {} TFLOP/s dense bf16 peak of '{}'",
                                             scope.one_process ? "tflops" : "tflops per device", *peak,
                                             scope.device_name)));
  return out;
}

}  // namespace native
}  // namespace protocol
