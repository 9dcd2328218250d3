#include "backends/native/platform/cpu_rates.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "runner/base/clock.h"

namespace protocol {
namespace native {
namespace {

// Runs `work` (which does `units` of something per call) for about `seconds`;
// returns units per second.
double Rate(const std::function<void()>& work, double units, double seconds, const std::function<double()>& now) {
  work();  // warm-up: first-touch pages, thread pool start
  const double t0 = now();
  int64_t calls = 0;
  double t = t0;
  do {
    work();
    ++calls;
    t = now();
  } while (t - t0 < seconds);
  return units * static_cast<double>(calls) / std::max(t - t0, 1e-9);
}

}  // namespace

CpuRates MeasureCpuRates(double seconds_each, int matmul_n, const std::function<double()>& now_in) {
  const std::function<double()> now = now_in ? now_in : SteadySeconds;
  CpuRates r;
  r.threads = at::get_num_threads();
  const double round = seconds_each / 3;
  {
    at::Tensor a = at::randn({matmul_n, matmul_n}), b = at::randn({matmul_n, matmul_n});
    at::Tensor c = at::empty({matmul_n, matmul_n});
    const double flops = 2.0 * matmul_n * static_cast<double>(matmul_n) * matmul_n;
    for (int i = 0; i < 3; ++i)
      r.matmul_flops = std::max(r.matmul_flops, Rate([&] { at::mm_out(c, a, b); }, flops, round, now));
  }
  {
    const int64_t n = 16 * 1024 * 1024;  // 64 MiB of float32
    at::Tensor src = at::ones({n}), dst = at::empty({n});
    const double bytes = 2.0 * 4.0 * static_cast<double>(n);
    for (int i = 0; i < 3; ++i)
      r.memory_bytes_per_second =
          std::max(r.memory_bytes_per_second, Rate([&] { dst.copy_(src); }, bytes, round, now));
  }
  return r;
}

}  // namespace native
}  // namespace protocol
