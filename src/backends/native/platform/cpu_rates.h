#ifndef PROTOCOL_BACKENDS_NATIVE_PLATFORM_CPU_RATES_H_
#define PROTOCOL_BACKENDS_NATIVE_PLATFORM_CPU_RATES_H_

// What this host's CPU achieves, measured in a few seconds for `protocol
// calibrate` (the time estimate's CPU entry, docs/estimates.md):
//   matmul     fp32 (n x n) @ (n x n) with every intra-op thread, FLOPs 2·n³
//              per product, repeated for about `seconds_each`; the best of
//              three rounds (the others share the machine)
//   memory     a copy of a 64 MiB float32 tensor into another: 2 x 64 MiB
//              moved per copy (read + write), best of three rounds
// The cost of one op is calibrate.h's, measured on the real decode path.

#include <functional>

namespace protocol {
namespace native {

struct CpuRates {
  double matmul_flops = 0;
  double memory_bytes_per_second = 0;
  double op_seconds = 0;  // calibrate.h's MeasureDecodeOpSeconds; 0: not measured
  int threads = 0;  // intra-op threads of the matmul
};

// `now` returns seconds on a monotonic clock (tests pass their own).
CpuRates MeasureCpuRates(double seconds_each, int matmul_n = 512,
                         const std::function<double()>& now = nullptr);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PLATFORM_CPU_RATES_H_
