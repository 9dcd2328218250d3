// What the build can do (build_capabilities.h), as the library, `protocol
// --version` and `protocol backends` say it. This CPU build: libtorch without
// CUDA, no NF4 kernel, cuDNN off once the program has started.

#include "native_test_support.h"  // first: libtorch's glog CHECK must not replace doctest's

#include <map>
#include <string>

#include "backends/build_capabilities.h"
#include "backends/native/platform/torch_compat.h"
#include "cli_support.h"

namespace protocol {
namespace {

std::map<std::string, std::string> Rows() {
  std::map<std::string, std::string> rows;
  for (const BuildCapability& row : BuildCapabilities()) rows[row.name] = row.value;
  return rows;
}

TEST_CASE("build capabilities: one row each, cuDNN off after TurnOffCudnn, the line from the rows") {
  native::compat::TurnOffCudnn();
  CHECK(native::compat::CudnnTurnedOff());
  const auto rows = Rows();
  CHECK(rows.size() == 6);
  CHECK(rows.at("libtorch") == native::compat::TorchVersion());
  CHECK(rows.at("cudnn") == "off");
  const std::string line = BuildCapabilitiesLine();
  CHECK(line.rfind("libtorch " + native::compat::TorchVersion(), 0) == 0);
  CHECK(line.find("cuDNN off") != std::string::npos);
  if (rows.at("cuda") == "none") {  // this CPU build
    CHECK(rows.at("nccl") == "none");
    CHECK(rows.at("gpu_architectures") == "none");
    CHECK(rows.at("nf4_kernel") == "absent");
    CHECK(line.find("CPU only") != std::string::npos);
    CHECK(line.find("NF4 kernel absent") != std::string::npos);
    CHECK(line.find("NCCL") == std::string::npos);
  } else {  // a CUDA build: the kernel must be there (the image build fails without it)
    CHECK(rows.at("nf4_kernel").rfind("sm_", 0) == 0);
    CHECK(line.find("CUDA " + rows.at("cuda")) != std::string::npos);
  }
}

TEST_CASE("build capabilities: --version and `backends` say the same as the rows") {
  testing::TempDir dir;
  const testing::Output version = testing::Protocol({"--version"}, dir.path);
  REQUIRE(version.exit_code == 0);
  CHECK(version.out.find(BuildCapabilitiesLine()) != std::string::npos);
  const testing::Output backends = testing::Protocol({"backends"}, dir.path);
  REQUIRE(backends.exit_code == 0);
  for (const auto& [name, value] : Rows()) {
    CAPTURE(name);
    CHECK(backends.out.find(name) != std::string::npos);
    CHECK(backends.out.find(value) != std::string::npos);
  }
}

TEST_CASE("build capabilities: SDPA's kernel for CPU tensors is named") {
  const auto options = at::TensorOptions().dtype(at::kFloat);
  at::Tensor q = at::randn({1, 2, 8, 16}, options), k = at::randn({1, 2, 8, 16}, options),
             v = at::randn({1, 2, 8, 16}, options);
  const std::string backend = native::compat::SdpaBackendFor(q, k, v, true);
  // 1.13 writes attention out ("math"); 2.x on a CPU picks its flash kernel or math.
  CHECK((backend == "math" || backend == "flash"));
}

}  // namespace
}  // namespace protocol
