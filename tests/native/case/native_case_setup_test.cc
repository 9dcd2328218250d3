// Where a native case runs and what weights it starts from, decided by one
// function each for the one-process backend and the ranks (case_device.h,
// case_weights.h).
#include "native_test_support.h"

#include <string>

#include "backends/native/case/case_device.h"
#include "backends/native/case/case_weights.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/store/records.h"

namespace protocol {
namespace native {
namespace {

ModelConfig Tiny() {
  ModelConfig c;
  c.name = "tiny";
  c.dim = 16;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.hidden_dim = 32;
  c.vocab_size = 20;
  c.max_seq_len = 16;
  return c;
}

}  // namespace

TEST_CASE("case device: cpu in float32; cuda without a device is an error") {
  auto cpu = ResolveCaseDevice(DeviceChoice::kCpu, 3);
  REQUIRE(cpu.ok());
  CHECK(cpu->device.is_cpu());
  CHECK((cpu->dtype == at::kFloat));
  auto automatic = ResolveCaseDevice(DeviceChoice::kAuto, 0);
  REQUIRE(automatic.ok());
  CHECK(automatic->device.is_cuda() == compat::CudaAvailable());
  if (!compat::CudaAvailable()) {
    auto cuda = ResolveCaseDevice(DeviceChoice::kCuda, 0);
    REQUIRE_FALSE(cuda.ok());
    CHECK(cuda.status().message() == "device 'cuda' was asked for but this build/machine has no CUDA device");
  } else {
    CHECK((automatic->dtype == at::kBFloat16));
  }
}

TEST_CASE("case facts: threads, device, dtype, and the decoding for inference") {
  using Facts = std::vector<std::pair<std::string, std::string>>;
  const at::Device cpu(at::kCPU);
  CHECK(CaseFacts(4, "cpu", cpu, at::kFloat, Workload::kPretrain, DecodeStepChoice::kHost) ==
        Facts{{fact::kThreadsPerRank, "4"}, {fact::kDevice, "cpu"}, {fact::kDtype, compat::DtypeName(at::kFloat)}});
  // The decoding says which kernels a generation runs: the fused decode kernels serve float32 on a CPU only.
  const Facts inference = CaseFacts(1, "cpu", cpu, at::kFloat, Workload::kInference, DecodeStepChoice::kHost);
  REQUIRE(inference.size() == 4);
  CHECK(inference[3] == std::pair<std::string, std::string>{fact::kDecoding,
                                                            "greedy (argmax), KV cache, each step at the host's "
                                                            "position; fused decode kernels (RMSNorm, RoPE with the "
                                                            "cache write, SiLU·up, attention)"});
  const Facts bf16 = CaseFacts(1, "cpu", cpu, at::kBFloat16, Workload::kInference, DecodeStepChoice::kHost);
  REQUIRE(bf16.size() == 4);
  CHECK(bf16[3].second ==
        "greedy (argmax), KV cache, each step at the host's position; ATen ops (no fused decode kernels for this "
        "device and dtype)");
  // inference.decode_step: the position on the device, and that step replayed as a CUDA graph.
  const Facts device = CaseFacts(1, "cpu", cpu, at::kFloat, Workload::kInference, DecodeStepChoice::kDevice);
  REQUIRE(device.size() == 4);
  CHECK(device[3].second ==
        "greedy (argmax), KV cache, each step at a position on the device, a cache bucket of positions rounded up to "
        "a multiple of 256 attended up to the position; fused decode kernels reading the position on the device "
        "(RMSNorm, RoPE with the cache write, SiLU·up, attention)");
  const Facts graph = CaseFacts(1, "cpu", cpu, at::kBFloat16, Workload::kInference, DecodeStepChoice::kGraph);
  CHECK(graph[3].second ==
        "greedy (argmax), KV cache, each step at a position on the device, a cache bucket of positions rounded up to "
        "a multiple of 256 attended whole, later positions masked, replayed from a CUDA graph recorded once per "
        "bucket; ATen ops (no fused decode kernels for this device and dtype)");
  CHECK(DecodeStepOf(DecodeStepChoice::kHost) == DecodeStep::kHostPosition);
  CHECK(DecodeStepOf(DecodeStepChoice::kDevice) == DecodeStep::kDevicePosition);
  CHECK(DecodeStepOf(DecodeStepChoice::kGraph) == DecodeStep::kCudaGraph);
}

TEST_CASE("case weights: the source, the note of declared random weights, and none to load") {
  auto scratch = DecideWeights(Workload::kPretrain, false, false, "", 7, "m");
  REQUIRE(scratch.ok());
  CHECK(scratch->source == WeightsSource::kRandomFromScratch);
  CHECK(scratch->note.empty());  // a pretrain trains its random start: no note
  auto declared = DecideWeights(Workload::kFinetune, false, true, "", 7, "m");
  REQUIRE(declared.ok());
  CHECK(declared->source == WeightsSource::kRandomDeclared);
  CHECK(declared->note == "weights: " + native_weights_note(WeightsSource::kRandomDeclared, 7));
  auto missing = DecideWeights(Workload::kFinetune, false, false, "/nonexistent-model-dir", 7, "m");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "model 'm' has no weights in its path and does not say `init: random`");

  // A random start is model_init_random's with the case's seed.
  Model a = model_create(Tiny(), at::TensorOptions().dtype(at::kFloat));
  Model b = model_create(Tiny(), at::TensorOptions().dtype(at::kFloat));
  REQUIRE(LoadOrInitWeights(a, *declared, "", 7).ok());
  model_init_random(b, 7);
  std::vector<NamedParameter> pa = model_parameters(a), pb = model_parameters(b);
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(at::equal(*pa[i].tensor, *pb[i].tensor));
}

}  // namespace native
}  // namespace protocol
