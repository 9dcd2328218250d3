#include "backends/gpu_probe.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "runner/base/text.h"

namespace protocol {

std::optional<GpuFacts> ParseNvidiaSmiCsv(const std::vector<std::string>& lines) {
  GpuFacts facts;
  for (const auto& raw : lines) {
    std::string line = Trim(raw);
    // The driver version is the last field; a name could in principle hold a comma.
    size_t comma = line.rfind(',');
    if (comma == std::string::npos) continue;
    std::string name = Trim(line.substr(0, comma));
    std::string driver = Trim(line.substr(comma + 1));
    if (name.empty() || driver.empty()) continue;
    facts.names.push_back(name);
    if (facts.driver.empty()) facts.driver = driver;
  }
  if (facts.names.empty()) return std::nullopt;
  return facts;
}

std::optional<GpuFacts> ProbeGpus(ProcessRunner& processes, const std::string& nvidia_smi) {
  ProcessSpec spec;
  spec.argv = {nvidia_smi, "--query-gpu=name,driver_version", "--format=csv,noheader"};
  spec.timeout_seconds = 10;
  spec.kill_grace_seconds = 1;
  StopFlag never;
  std::vector<std::string> lines;
  ProcessResult result =
      processes.Run(spec, never, [&](std::string_view line) { lines.emplace_back(line); });
  if (result.ending != ProcessResult::Ending::kExited || result.exit_code != 0) return std::nullopt;
  return ParseNvidiaSmiCsv(lines);
}

std::string FindProgram(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  for (const auto& dir : Split(path, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

namespace {

// Calls `symbol(int*)` from `library`; returns the int, or nullopt when the
// library, the symbol or the call fails. The library is unloaded again
// (dlclose only drops our reference when it was already loaded).
std::optional<int> CallVersionFunction(const char* library, const char* symbol) {
  void* handle = ::dlopen(library, RTLD_LAZY | RTLD_LOCAL);
  if (!handle) return std::nullopt;
  std::optional<int> version;
  using Fn = int (*)(int*);
  if (auto fn = reinterpret_cast<Fn>(::dlsym(handle, symbol))) {
    int v = 0;
    if (fn(&v) == 0 && v > 0) version = v;  // CUDA_SUCCESS == ncclSuccess == 0
  }
  ::dlclose(handle);
  return version;
}

}  // namespace

std::string CudaDriverVersion() {
  std::optional<int> v = CallVersionFunction("libcuda.so.1", "cuDriverGetVersion");
  if (!v) return "";
  return fmt::format("{}.{}", *v / 1000, (*v % 1000) / 10);  // 12020 → "12.2"
}

std::string NcclVersion() {
  std::optional<int> v = CallVersionFunction("libnccl.so.2", "ncclGetVersion");
  if (!v) return "";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older ones *1000 + *100.
  if (*v >= 10000) return fmt::format("{}.{}.{}", *v / 10000, (*v % 10000) / 100, *v % 100);
  return fmt::format("{}.{}.{}", *v / 1000, (*v % 1000) / 100, *v % 100);
}

}  // namespace protocol
