#include "backends/native/case/case_device.h"

#include <algorithm>

#include "backends/native/model/generate.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/store/records.h"

namespace protocol {
namespace native {

Result<CaseDevice> ResolveCaseDevice(DeviceChoice choice, int local_rank) {
  CaseDevice d;
  if (choice == DeviceChoice::kCuda && !compat::CudaAvailable())
    return Status::InvalidArgument("device 'cuda' was asked for but this build/machine has no CUDA device");
  if (choice == DeviceChoice::kCuda || (choice == DeviceChoice::kAuto && compat::CudaAvailable())) {
    const int gpus = std::max(1, static_cast<int>(at::getNumGPUs()));
    d.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
    compat::CudaSetDevice(d.device.index());
    d.dtype = at::kBFloat16;
  }
  return d;
}

at::ScalarType ResolveReduceDtype(ReduceDtype choice, at::ScalarType compute) {
  switch (choice) {
    case ReduceDtype::kFloat32: return at::kFloat;
    case ReduceDtype::kBfloat16: return at::kBFloat16;
    case ReduceDtype::kAuto: break;
  }
  return compute;
}

std::vector<std::pair<std::string, std::string>> CaseFacts(int threads_per_rank, const std::string& device_text,
                                                           const at::Device& device, at::ScalarType dtype,
                                                           Workload workload, DecodeStepChoice decode_step) {
  std::vector<std::pair<std::string, std::string>> facts = {{fact::kThreadsPerRank, std::to_string(threads_per_rank)},
                                                            {fact::kDevice, device_text},
                                                            {fact::kDtype, compat::DtypeName(dtype)}};
  if (workload == Workload::kInference)
    facts.push_back({fact::kDecoding, DecodingText(device, dtype, DecodeStepOf(decode_step))});
  return facts;
}

DecodeStep DecodeStepOf(DecodeStepChoice choice) {
  switch (choice) {
    case DecodeStepChoice::kDevice: return DecodeStep::kDevicePosition;
    case DecodeStepChoice::kGraph: return DecodeStep::kCudaGraph;
    case DecodeStepChoice::kHost: break;
  }
  return DecodeStep::kHostPosition;
}

}  // namespace native
}  // namespace protocol
