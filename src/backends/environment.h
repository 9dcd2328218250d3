#ifndef PROTOCOL_BACKENDS_ENVIRONMENT_H_
#define PROTOCOL_BACKENDS_ENVIRONMENT_H_

// The run context: facts about this machine and its software, stored with
// every run so a result says where it was obtained. Missing facts are left
// out, never guessed.

#include <string>
#include <utility>
#include <vector>

namespace protocol {

// Keys: hostname, os, cpu_model, cpu_cores, load_average_1m, memory_bytes, protocol_version,
// git_revision, build_type, compiler, libtorch_version, cuda_available,
// cuda_version, nccl_version, gpu_count, gpu_names, gpu_driver, blas_library.
std::vector<std::pair<std::string, std::string>> CollectEnvironment();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_ENVIRONMENT_H_
