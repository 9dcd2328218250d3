#ifndef PROTOCOL_BACKENDS_GPU_PROBE_H_
#define PROTOCOL_BACKENDS_GPU_PROBE_H_

// GPU facts for the environment probe (environment.h), split out so tests can
// feed nvidia-smi output through a fake ProcessRunner. Nothing here guesses:
// a fact that cannot be read is absent.

#include <optional>
#include <string>
#include <vector>

#include "runner/exec/process.h"

namespace protocol {

struct GpuFacts {
  std::vector<std::string> names;  // one per GPU, in nvidia-smi's order
  std::string driver;              // driver version of the first GPU, e.g. "550.54.15"
};

// Parses the output of `nvidia-smi --query-gpu=name,driver_version
// --format=csv,noheader`: one "name, driver" line per GPU. Returns nullopt
// when no line has that shape (e.g. "No devices were found").
std::optional<GpuFacts> ParseNvidiaSmiCsv(const std::vector<std::string>& lines);

// Runs `nvidia_smi` (a path) with the query above through `processes`, with a
// 10 s timeout. nullopt when it does not exit 0 or prints no GPU.
std::optional<GpuFacts> ProbeGpus(ProcessRunner& processes, const std::string& nvidia_smi);

// The full path of `program` found in $PATH (an executable regular file);
// empty when absent.
std::string FindProgram(const std::string& program);

// "12.2": the highest CUDA version the installed driver supports
// (cuDriverGetVersion from libcuda.so.1); empty when there is no driver.
std::string CudaDriverVersion();

// "2.18.5": ncclGetVersion of the libnccl.so.2 the dynamic loader finds
// (the one already loaded, if any); empty when there is none.
std::string NcclVersion();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_GPU_PROBE_H_
