#ifndef PROTOCOL_BACKENDS_NATIVE_CALIBRATE_H_
#define PROTOCOL_BACKENDS_NATIVE_CALIBRATE_H_

// What `protocol calibrate` measures of this host for the time estimate's CPU
// entry (docs/estimates.md): the rates of cpu_rates.h, and the cost of one op
// of a decode step, measured on the real decode path — the `tiny` preset
// (random weights, float32) generating 64 tokens after an 8-token prompt,
// the seconds per token divided by the ops a token dispatches
// (time_estimate.h: DecodeOpsPerToken of the fused ops, float32 on a CPU).

#include "backends/native/platform/cpu_rates.h"

namespace protocol {
namespace native {

// `seconds_each`: for each of the matmul and the memory copy.
CpuRates MeasureHostForEstimate(double seconds_each);
// Seconds per op of the tiny preset's decode on this host (the median of three
// rounds of 64 tokens).
double MeasureDecodeOpSeconds();

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CALIBRATE_H_
