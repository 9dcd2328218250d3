#include "backends/build_capabilities.h"

#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/nf4.h"

namespace protocol {

namespace {

std::string SmList(const std::string& architectures) {  // "80,90a" → "sm_80,sm_90a"
  std::string out;
  size_t start = 0;
  while (start <= architectures.size()) {
    size_t comma = architectures.find(',', start);
    if (comma == std::string::npos) comma = architectures.size();
    const std::string arch = architectures.substr(start, comma - start);
    const bool number = !arch.empty() && arch[0] >= '0' && arch[0] <= '9';  // else a word ("nvcc-default")
    if (!arch.empty()) out += (out.empty() ? "" : ",") + (number ? "sm_" + arch : arch);
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<BuildCapability> BuildCapabilities() {
  namespace compat = native::compat;
  const std::string cuda = compat::CudaRuntimeVersion();
  const std::string nccl = compat::NcclVersion();
  const std::string gpu = cuda.empty() ? "" : compat::TorchCudaArchitectures();
  const std::string nf4 = SmList(native::nf4_cuda_kernel_architectures());
  const std::string cudnn = compat::CudnnTurnedOff() ? "off" : "on";
  return {
      {"libtorch", compat::TorchVersion(), "libtorch " + compat::TorchVersion()},
      {"cuda", cuda.empty() ? "none" : cuda, cuda.empty() ? "CPU only" : "CUDA " + cuda},
      {"nccl", nccl.empty() ? "none" : nccl, nccl.empty() ? "" : "NCCL " + nccl},
      {"gpu_architectures", gpu.empty() ? "none" : gpu, gpu.empty() ? "" : "GPU kernels " + gpu},
      {"nf4_kernel", nf4.empty() ? "absent" : nf4, "NF4 kernel " + (nf4.empty() ? std::string("absent") : nf4)},
      {"cudnn", cudnn, "cuDNN " + cudnn},
  };
}

std::string BuildCapabilitiesLine() {
  std::string out;
  for (const BuildCapability& row : BuildCapabilities())
    if (!row.phrase.empty()) out += (out.empty() ? "" : ", ") + row.phrase;
  return out;
}

}  // namespace protocol
