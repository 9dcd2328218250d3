// The environment probe: facts of this machine, and the GPU probe through a
// fake ProcessRunner (this CI machine has no GPU).

#include <doctest/doctest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/environment.h"
#include "backends/gpu_probe.h"
#include "fake_process_runner.h"
#include "runner/base/build_info.h"
#include "runner/base/text.h"

using namespace protocol;
using protocol::testing::FakeProcessRunner;

namespace {

std::map<std::string, std::string> AsMap(const std::vector<std::pair<std::string, std::string>>& v) {
  return std::map<std::string, std::string>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("Environment: this machine's facts are present once each in the documented order") {
  auto facts = CollectEnvironment();
  auto env = AsMap(facts);
  CHECK(env.size() == facts.size());  // no key twice

  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  CHECK(env["hostname"] == host);
  CHECK(env["cpu_cores"] == std::to_string(sysconf(_SC_NPROCESSORS_ONLN)));
  CHECK(std::stoll(env["cpu_cores"]) > 0);
  CHECK(std::stoll(env["memory_bytes"]) > 0);
  CHECK(std::stod(env["load_average_1m"]) >= 0);
  struct utsname u;
  REQUIRE(::uname(&u) == 0);
  const std::string kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  CHECK((env["os"] == kernel || EndsWith(env["os"], "; " + kernel)));  // "<PRETTY_NAME>; Linux 6.1.0 x86_64"
  REQUIRE(!env["libtorch_version"].empty());
  CHECK(std::isdigit(static_cast<unsigned char>(env["libtorch_version"][0])));
  CHECK(env["protocol_version"] == BuildInfo().version);
  CHECK(env["build_type"] == BuildInfo().build_type);
  CHECK(env["compiler"] == BuildInfo().compiler);
  CHECK(env["git_revision"] == BuildInfo().git_revision);
  for (const auto& [key, value] : facts) CHECK_MESSAGE(!value.empty(), key);

  std::vector<std::string> order;
  for (const EnvironmentKey& k : EnvironmentKeys()) order.push_back(k.key);
  size_t last = 0;
  for (const auto& [key, value] : facts) {
    auto at = std::find(order.begin(), order.end(), key);
    REQUIRE_MESSAGE(at != order.end(), "undocumented key " << key);
    size_t index = static_cast<size_t>(at - order.begin());
    CHECK_MESSAGE(index >= last, "key out of order: " << key);
    last = index;
  }
}

TEST_CASE("Environment: docs/database.md lists exactly the context keys the code stores, with their sources") {
  // The rows of the table under "Context keys" in docs/database.md: | `key` | source |.
  std::ifstream in(std::string(PROTOCOL_SOURCE_DIR) + "/docs/database.md");
  std::string line;
  bool inside = false;
  std::vector<std::pair<std::string, std::string>> documented;
  while (std::getline(in, line)) {
    if (line.rfind("#### Context keys", 0) == 0) inside = true;
    else if (inside && line.rfind("#", 0) == 0) break;
    else if (inside && line.rfind("| `", 0) == 0) {
      const size_t key_end = line.find("` | ");
      REQUIRE(key_end != std::string::npos);
      documented.emplace_back(line.substr(3, key_end - 3), line.substr(key_end + 4, line.size() - key_end - 6));
    }
  }
  std::vector<std::pair<std::string, std::string>> code;
  for (const EnvironmentKey& k : EnvironmentKeys()) code.emplace_back(k.key, k.source);
  CHECK(documented == code);
}

TEST_CASE("Environment: GPU keys are present exactly when nvidia-smi lists GPUs, and name them") {
  auto env = AsMap(CollectEnvironment());
  const std::string smi = FindProgram("nvidia-smi");
  std::optional<GpuFacts> gpus;
  if (!smi.empty()) gpus = ProbeGpus(*MakeSystemProcessRunner(), smi);
  const std::vector<const char*> keys = {"cuda_available", "cuda_version", "nccl_version",
                                         "gpu_count",      "gpu_names",    "gpu_driver"};
  if (!gpus) {  // no nvidia-smi, or it lists no GPU (this CI machine)
    for (const char* key : keys) CHECK_MESSAGE(env.count(key) == 0, key);
    return;
  }
  for (const char* key : keys) CHECK_MESSAGE(env.count(key) == 1, key);
  CHECK(env["gpu_count"] == std::to_string(gpus->names.size()));
  CHECK(env["gpu_names"] == Join(gpus->names, "; "));
  CHECK(env["gpu_driver"] == gpus->driver);
  CHECK((env["cuda_available"] == "true" || env["cuda_available"] == "false"));
}

TEST_CASE("Environment: FindProgram searches PATH for executables") {
  CHECK(FindProgram("sh").size() > 3);
  CHECK(EndsWith(FindProgram("sh"), "/sh"));
  CHECK(FindProgram("protocol-surely-not-a-program") == "");
}

TEST_CASE("GpuProbe: nvidia-smi CSV lines become names and the driver") {
  auto facts = ParseNvidiaSmiCsv({"NVIDIA H100 80GB HBM3, 550.54.15", "NVIDIA H100 80GB HBM3, 550.54.15",
                                  ""});
  REQUIRE(facts.has_value());
  CHECK(facts->names == std::vector<std::string>{"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"});
  CHECK(facts->driver == "550.54.15");

  CHECK_FALSE(ParseNvidiaSmiCsv({"No devices were found"}).has_value());
  CHECK_FALSE(ParseNvidiaSmiCsv({}).has_value());
}

TEST_CASE("GpuProbe: runs the query with a 10 s timeout and trusts only a clean exit") {
  FakeProcessRunner runner;
  runner.lines = {"NVIDIA H200, 560.35.03"};
  runner.result.ending = ProcessResult::Ending::kExited;
  runner.result.exit_code = 0;
  auto facts = ProbeGpus(runner, "/usr/bin/nvidia-smi");
  REQUIRE(facts.has_value());
  CHECK(facts->names == std::vector<std::string>{"NVIDIA H200"});
  CHECK(facts->driver == "560.35.03");
  CHECK(runner.seen.argv == std::vector<std::string>{"/usr/bin/nvidia-smi",
                                                     "--query-gpu=name,driver_version",
                                                     "--format=csv,noheader"});
  CHECK(runner.seen.timeout_seconds == 10);

  runner.result.exit_code = 9;  // e.g. "NVIDIA-SMI has failed because it couldn't communicate"
  CHECK_FALSE(ProbeGpus(runner, "/usr/bin/nvidia-smi").has_value());
  runner.result.ending = ProcessResult::Ending::kTimedOut;
  runner.result.exit_code = -1;
  CHECK_FALSE(ProbeGpus(runner, "/usr/bin/nvidia-smi").has_value());
}
