#ifndef PROTOCOL_BACKENDS_BUILD_CAPABILITIES_H_
#define PROTOCOL_BACKENDS_BUILD_CAPABILITIES_H_

// What this build of the native backends can do, as `protocol --version`,
// `protocol backends` and a run's environment record (build_capabilities)
// say it. One row per capability; each is a fact of the build, not of the
// machine's devices (those are the environment's gpu_* facts).

#include <string>
#include <vector>

namespace protocol {

struct BuildCapability {
  const char* name;   // "libtorch", "cuda", "nccl", "gpu_architectures", "nf4_kernel", "cudnn"
  std::string value;  // "2.6.0", "12.4", "2.22.3", "sm_50,…,sm_90", "sm_90", "off"
  std::string phrase; // how the one-line form says it: "CUDA 12.4"; empty: left out of the line
};

std::vector<BuildCapability> BuildCapabilities();
// The rows as one line: "libtorch 2.6.0, CUDA 12.4, NCCL 2.22.3, GPU kernels
// sm_50,…,sm_90, NF4 kernel sm_90, cuDNN off" or "libtorch 1.13.0, CPU only,
// NF4 kernel absent, cuDNN off".
std::string BuildCapabilitiesLine();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_BUILD_CAPABILITIES_H_
