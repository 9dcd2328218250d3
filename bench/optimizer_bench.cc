// The optimizer step of a model's LoRA adapter set (by default Llama-2-70B's at
// rank 8: 80 layers × 7 projections, A and B each: 1,120 tensors), before and after the
// multi-tensor path: clipping and AdamW one tensor at a time with a host read
// per tensor (tests/support/reference_optimizer.h), against train.h's
// clip_gradients + AdamW (multi-tensor, nothing read back), and AdamW's fused
// path where the device has it (one pass a tensor). Prints the time
// per step and the device values read back per step. Asserts nothing.
//
//   build/protocol_optimizer_bench                          # llama2-70b, rank 8, 5 steps
//   build/protocol_optimizer_bench --preset llama2-7b --rank 16 --steps 10
//   build/protocol_optimizer_bench --device cuda           # where the build has CUDA
//
// Method: the adapters are allocated as lora.h makes them (float32), given
// seeded gradients once, then each variant runs 1 warm-up step and `steps`
// timed steps (clip to norm 1, then AdamW), the device synchronised before each
// clock read. The reference's host reads are its per-tensor .item() calls
// (counted as the number of tensors with a gradient, which is what it does);
// the multi-tensor path's are counted by compat::HostReads().

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "backends/native/model/model_config.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/lora.h"
#include "backends/native/training/train.h"
#include "reference_optimizer.h"

using namespace protocol;
using namespace protocol::native;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SetGradients(const std::vector<at::Tensor>& params) {
  at::Generator gen = init_generator(7);
  for (const at::Tensor& p : params)
    const_cast<at::Tensor&>(p).mutable_grad() = at::randn(p.sizes(), gen).to(p.device()) * 1e-3;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "llama2-70b", device_name = "cpu";
  int64_t rank = 8, steps = 5;
  for (BenchArgs args(argc, argv, 1); args.Next();) {
    const std::string& a = args.flag();
    if (a == "--preset") preset = args.Value();
    else if (a == "--rank") rank = std::stoll(args.Value());
    else if (a == "--steps") steps = std::stoll(args.Value());
    else if (a == "--device") device_name = args.Value();
    else {
      std::fprintf(stderr, "usage: %s [--preset NAME] [--rank R] [--steps N] [--device cpu|cuda]\n", argv[0]);
      return 2;
    }
  }
  auto config = PresetConfig(preset);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 2;
  }
  const at::Device device(device_name == "cuda" ? at::kCUDA : at::kCPU);
  LoraAdapters lora = lora_create(*config, rank, 2.0 * static_cast<double>(rank), 1, device);
  std::vector<at::Tensor> params = lora_trainable(lora, /*freeze_a=*/false);
  int64_t elements = 0;
  for (const at::Tensor& p : params) elements += p.numel();
  std::printf("%s LoRA rank %lld on %s, %d threads: %zu tensors, %.1f M parameters (%.2f GB float32)\n",
              preset.c_str(), static_cast<long long>(rank), device.str().c_str(), at::get_num_threads(),
              params.size(), static_cast<double>(elements) / 1e6, 4.0 * static_cast<double>(elements) / 1e9);
  TrainOptions o;
  o.grad_clip = 1.0;
  SetGradients(params);

  auto timed = [&](const char* name, const std::function<void()>& step, int64_t reads_per_step_if_counted) {
    step();  // warm-up: allocates the moments' pages
    compat::DeviceSynchronize(device);
    const int64_t reads0 = compat::HostReads();
    const double t0 = Now();
    for (int64_t s = 0; s < steps; ++s) step();
    compat::DeviceSynchronize(device);
    const double seconds = (Now() - t0) / static_cast<double>(steps);
    const double reads = reads_per_step_if_counted >= 0
                             ? static_cast<double>(reads_per_step_if_counted)
                             : static_cast<double>(compat::HostReads() - reads0) / static_cast<double>(steps);
    std::printf("  %-44s %8.1f ms per step, %6.0f host reads per step\n", name, 1e3 * seconds, reads);
    return seconds;
  };
  double before = 0, after = 0;
  {
    testing::ReferenceAdamW reference(params, o);
    before = timed("per tensor (clip with .item(), AdamW loop)", [&] {
      testing::ReferenceClip(params, o.grad_clip);
      reference.step(1e-4);
    }, static_cast<int64_t>(params.size()));
  }
  {
    TrainOptions foreach_options = o;
    foreach_options.fused_adamw = false;
    AdamW optimizer(params, foreach_options);
    after = timed("multi-tensor (clip_gradients, foreach AdamW)", [&] {
      grad_clip_norm(params, o.grad_clip);
      optimizer.step(1e-4);
    }, -1);
  }
  std::printf("  after / before: %.3f\n", after / before);
  if (compat::FusedAdamWAvailable(device)) {
    AdamW optimizer(params, o);
    const double fused = timed("fused (clip_gradients, one-pass AdamW)", [&] {
      grad_clip_norm(params, o.grad_clip);
      optimizer.step(1e-4);
    }, -1);
    std::printf("  fused / multi-tensor: %.3f\n", fused / after);
  } else {
    std::printf("  fused AdamW: not available on %s with this libtorch\n", device.str().c_str());
  }
  return 0;
}
