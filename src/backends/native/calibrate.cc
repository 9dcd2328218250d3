#include "backends/native/calibrate.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backends/native/model/generate.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/estimate/time_estimate.h"

namespace protocol {
namespace native {

double MeasureDecodeOpSeconds() {
  auto config = PresetConfig("tiny");
  if (!config.ok()) return 0;
  Model model = model_create(*config, at::TensorOptions().dtype(at::kFloat));
  model_init_random(model, 1234);
  const std::vector<int> prompt = {1, 5, 9, 13, 17, 21, 25, 29};
  GenerateOptions options;
  options.max_new_tokens = 64;
  std::vector<double> per_token;
  for (int round = 0; round < 4; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = generate_greedy(model, prompt, options);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!g.ok()) return 0;
    if (round > 0) per_token.push_back(s / static_cast<double>(options.max_new_tokens));  // round 0 warms up
  }
  std::sort(per_token.begin(), per_token.end());
  // The tiny preset in float32 on this CPU: the fused decode ops.
  return per_token[1] / static_cast<double>(DecodeOpsPerToken(*config, /*fused=*/true));
}

CpuRates MeasureHostForEstimate(double seconds_each) {
  CpuRates r = MeasureCpuRates(seconds_each);
  r.op_seconds = MeasureDecodeOpSeconds();  // 0 when it cannot run: the estimate then assumes one
  return r;
}

}  // namespace native
}  // namespace protocol
