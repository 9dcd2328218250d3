// The environment probe (environment.h). Each fact comes from one named
// source (kEnvironmentKeys); a fact whose source is missing is left out.

#include "backends/environment.h"

#include <link.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "backends/build_capabilities.h"
#include "backends/gpu_probe.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/build_info.h"
#include "runner/base/text.h"
#include "runner/exec/process.h"

namespace protocol {

// Every key CollectEnvironment may store, with its source. docs/database.md
// lists the same table (tests/backends/environment_test.cc checks both ways).
const std::vector<EnvironmentKey>& EnvironmentKeys() {
  static const std::vector<EnvironmentKey> keys = {
      {"hostname", "gethostname()"},
      {"runner_pid", "getpid() of the `protocol run` process (appended again by each --resume, which refuses a run whose runner still lives on this host)"},
      {"os", "/etc/os-release PRETTY_NAME + uname (sysname release machine)"},
      {"cpu_model", "first \"model name\" of /proc/cpuinfo"},
      {"cpu_cores", "online logical CPUs, sysconf(_SC_NPROCESSORS_ONLN)"},
      {"load_average_1m", "getloadavg() when the run starts (a hint only: each case's own `contention` measurement says whether it ran beside other work)"},
      {"memory_bytes", "physical memory, sysconf(_SC_PHYS_PAGES) × sysconf(_SC_PAGESIZE)"},
      {"protocol_version", "the version of the protocol binary"},
      {"git_revision", "the git revision it was built from (-dirty with local changes)"},
      {"build_type", "its CMake build type"},
      {"compiler", "its compiler"},
      {"libtorch_version", "TORCH_VERSION of the libtorch headers it was built with"},
      {"build_capabilities", "what the native build can do, as `protocol --version` says it: libtorch, CUDA runtime, NCCL, the GPU architectures of libtorch's kernels, the NF4 kernel's, cuDNN off"},
      {"cuda_available", "only where nvidia-smi lists GPUs: whether libtorch can use them"},
      {"cuda_version", "only with GPUs: the CUDA version the driver supports (libcuda)"},
      {"nccl_version", "only with GPUs: the libnccl.so.2 the loader finds"},
      {"gpu_count", "only with GPUs: nvidia-smi --query-gpu"},
      {"gpu_names", "only with GPUs: their names, \"; \"-joined (nvidia-smi)"},
      {"gpu_driver", "only with GPUs: the driver version (nvidia-smi)"},
      {"blas_library", "the BLAS loaded in this process, else the system libblas.so.3"},
  };
  return keys;
}

namespace {

// The value of `key` in a "key: value" (cpuinfo) or key=value (os-release)
// file: the first line whose key matches; empty when none.
std::string ReadKey(const std::string& path, const std::string& key, char separator) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find(separator);
    if (at == std::string::npos || Trim(line.substr(0, at)) != key) continue;
    std::string value = Trim(line.substr(at + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    return value;
  }
  return "";
}

std::string OsDescription() {
  std::string pretty = ReadKey("/etc/os-release", "PRETTY_NAME", '=');
  struct utsname u;
  std::string kernel;
  if (::uname(&u) == 0) kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  if (pretty.empty()) return kernel;
  if (kernel.empty()) return pretty;
  return pretty + "; " + kernel;
}

// The first loaded shared object whose file name says it is a BLAS.
int FindLoadedBlas(struct dl_phdr_info* info, size_t, void* data) {
  std::string path = info->dlpi_name ? info->dlpi_name : "";
  std::string file = std::filesystem::path(path).filename().string();
  bool blas = file.find("blas") != std::string::npos || StartsWith(file, "libmkl_rt");
  bool gpu = StartsWith(file, "libcublas") || StartsWith(file, "libnvblas");
  if (!blas || gpu) return 0;
  *static_cast<std::string*>(data) = path;
  return 1;  // stop
}

std::string BlasLibrary() {
  std::string loaded;
  dl_iterate_phdr(&FindLoadedBlas, &loaded);
  std::error_code ec;
  if (!loaded.empty()) {
    std::filesystem::path real = std::filesystem::canonical(loaded, ec);
    return ec ? loaded : real.string();
  }
  // Not loaded (e.g. libtorch links its BLAS statically): the system default.
  const char* system_blas = "/usr/lib/x86_64-linux-gnu/libblas.so.3";
  std::filesystem::path real = std::filesystem::canonical(system_blas, ec);
  if (ec) return "";
  return real.string() + " (system libblas.so.3; not loaded by this process)";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> CollectEnvironment() {
  std::vector<std::pair<std::string, std::string>> facts;
  auto add = [&](const char* key, std::string value) {
    if (!value.empty()) facts.emplace_back(key, std::move(value));
  };

  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) add("hostname", host);
  add("runner_pid", std::to_string(::getpid()));
  add("os", OsDescription());
  add("cpu_model", ReadKey("/proc/cpuinfo", "model name", ':'));
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 0) add("cpu_cores", std::to_string(cpus));
  double load[1] = {0};
  if (::getloadavg(load, 1) == 1) add("load_average_1m", fmt::format("{:.2f}", load[0]));
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0)
    add("memory_bytes", std::to_string(static_cast<long long>(pages) * page_size));

  const BuildInfoData& build = BuildInfo();
  add("protocol_version", build.version ? build.version : "");
  add("git_revision", build.git_revision ? build.git_revision : "");
  add("build_type", build.build_type ? build.build_type : "");
  add("compiler", build.compiler ? build.compiler : "");
  add("libtorch_version", native::compat::TorchVersion());
  add("build_capabilities", BuildCapabilitiesLine());

  std::string nvidia_smi = FindProgram("nvidia-smi");
  std::optional<GpuFacts> gpus;
  if (!nvidia_smi.empty()) {
    auto processes = MakeSystemProcessRunner();
    gpus = ProbeGpus(*processes, nvidia_smi);
  }
  if (gpus) {
    add("cuda_available", native::compat::CudaAvailable() ? "true" : "false");
    add("cuda_version", CudaDriverVersion());
    add("nccl_version", NcclVersion());
    add("gpu_count", std::to_string(gpus->names.size()));
    add("gpu_names", Join(gpus->names, "; "));
    add("gpu_driver", gpus->driver);
  }
  add("blas_library", BlasLibrary());
  return facts;
}

}  // namespace protocol
