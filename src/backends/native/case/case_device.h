#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_CASE_DEVICE_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_CASE_DEVICE_H_

// Where a native case runs, the same for the one-process backend and for each
// rank of a distributed case: the device and compute dtype, and the case
// facts (records.h, namespace fact) that say so.

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "backends/native/model/generate.h"
#include "runner/base/status.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

struct CaseDevice {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;  // the compute dtype: float32 on the CPU, bfloat16 on CUDA
};

// training.device: "cpu" → the CPU in float32; "cuda", or "auto" where CUDA is
// available → CUDA device local_rank mod the GPUs (more ranks than GPUs on a
// node share them), made the current device, in bfloat16. One process passes
// local_rank 0 (cuda:0). Error (kInvalidArgument): "cuda" without a CUDA device.
Result<CaseDevice> ResolveCaseDevice(DeviceChoice choice, int local_rank);

// training.reduce_dtype: `auto` is the compute dtype (accelerate's bf16
// policy reduces in bf16 on a GPU; float32 on a CPU).
at::ScalarType ResolveReduceDtype(ReduceDtype choice, at::ScalarType compute);

// The facts a case reports about where it ran: threads per rank (process),
// `device_text`, the dtype, and for inference the decoding (DecodingText of
// `device`, the first device its model is on, the dtype and the plan's
// inference.decode_step).
std::vector<std::pair<std::string, std::string>> CaseFacts(int threads_per_rank, const std::string& device_text,
                                                           const at::Device& device, at::ScalarType dtype,
                                                           Workload workload, DecodeStepChoice decode_step);

// inference.decode_step as generate.h runs it.
DecodeStep DecodeStepOf(DecodeStepChoice choice);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_CASE_DEVICE_H_
