// GPU-only checks of the native backend. Without a CUDA device (every CI
// machine, and a CPU-only libtorch) every case declares a skip, so ctest
// reports this file as SKIPPED, never as passed. scripts/gpu-check.sh runs it
// on a GPU machine with the PyTorch wheel's libtorch.
//
//   bf16 forward      logits of a bf16 copy of a model against the fp32 model
//                     on the same device: relative L2 error ‖Δ‖/‖ref‖ < 2e-2
//                     (bf16 keeps 8 mantissa bits, ~4e-3 per rounding; four
//                     layers of matmuls, norms and softmax compound it)
//   KV cache          greedy generation with the cache equals generation
//                     without it, token for token (fp32 on the device)
//   NCCL              the c10d collectives over NCCL on one GPU: results and
//                     the byte counts torch_compat reports
//   peak memory       a one-process fsdp case on CUDA stores the caching
//                     allocator's peak, > 0 and below the device's memory
//   NF4 kernel        nf4_dequantize on CUDA (the one-pass kernel where the
//                     build has it) equals the CPU kernel and the ATen path
//                     bit for bit: float32, bfloat16, float16; sizes with a
//                     cut last block; double-quantized absmax; codes at an
//                     odd offset (the per-byte kernel); output over a
//                     NaN-poisoned allocation, so an unwritten value shows
#include "native_test_support.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "backends/native/fsdp_backend.h"
#include "backends/native/model/generate.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/nf4.h"
#include "fake_process_runner.h"
#include "runner/exec/backend.h"
#include "skip.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;
using protocol::testing::FakeProcessRunner;

const char* const kNoCuda = "no CUDA device (CPU-only libtorch or no GPU): GPU-only check";

ModelConfig SmallConfig() {
  ModelConfig c;
  c.name = "gpu-test";
  c.dim = 256;
  c.n_layers = 4;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.hidden_dim = 688;
  c.vocab_size = 1024;
  c.max_seq_len = 256;
  return c;
}

// Same weights in `dtype` on CUDA (model_init_random draws on the CPU from the seed).
Model CudaModel(const ModelConfig& c, at::ScalarType dtype) {
  Model m = model_create(c, at::TensorOptions().dtype(dtype).device(at::Device(at::kCUDA, 0)));
  model_init_random(m, 42);
  return m;
}

TEST_CASE("gpu: a bf16 forward equals the fp32 forward within bf16 rounding") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  c10::InferenceMode guard;
  const ModelConfig c = SmallConfig();
  Model fp32 = CudaModel(c, at::kFloat);
  Model bf16 = CudaModel(c, at::kBFloat16);
  at::Tensor tokens = at::randint(3, c.vocab_size, {2, 64}, at::TensorOptions().dtype(at::kLong)).to(at::kCUDA);
  at::Tensor ref = model_forward(fp32, tokens).to(at::kDouble);
  at::Tensor got = model_forward(bf16, tokens).to(at::kDouble);
  CHECK(at::isfinite(got).all().item<bool>());
  const double rel = ((got - ref).norm() / ref.norm()).item<double>();
  MESSAGE("bf16 vs fp32 logits: relative L2 error " << rel);
  CHECK(rel < 2e-2);
  CHECK(rel > 0);  // the bf16 path really ran in bf16
}

TEST_CASE("gpu: with cuDNN turned off, attention runs on flash or memory-efficient kernels") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  compat::TurnOffCudnn();  // as each program does at its start
  CHECK(compat::CudnnTurnedOff());
  // The shapes of a llama-7b layer's attention (B=1, NH=32, T=256, HD=128), in
  // bfloat16: the image's libcudnn.so.9 is a stub that aborts on any call.
  const auto options = at::TensorOptions().dtype(at::kBFloat16).device(at::Device(at::kCUDA, 0));
  at::Tensor q = at::randn({1, 32, 256, 128}, options), k = at::randn({1, 32, 256, 128}, options),
             v = at::randn({1, 32, 256, 128}, options);
  for (bool causal : {true, false}) {
    const std::string backend = compat::SdpaBackendFor(q, k, v, causal);
    MESSAGE("SDPA backend, causal " << causal << ": " << backend);
    CHECK((backend == "flash" || backend == "efficient"));
  }
  at::Tensor out = compat::ScaledDotProductAttention(q, k, v, /*is_causal=*/true, std::nullopt);
  compat::DeviceSynchronize(out.device());
  CHECK(at::isfinite(out).all().item<bool>());
}

TEST_CASE("gpu: KV-cache generation equals generation without the cache") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  c10::InferenceMode guard;
  const ModelConfig c = SmallConfig();
  Model m = CudaModel(c, at::kFloat);
  // Wider logit gaps than the 0.02-std initialisation gives, so that the
  // argmax does not hinge on the last bit of a reduction order.
  m.lm_head.mul_(20.0);
  std::vector<int> prompt = {1, 17, 230, 5, 999, 42, 7};
  GenerateOptions with, without;
  with.max_new_tokens = without.max_new_tokens = 48;
  without.use_kv_cache = false;
  auto a = generate_greedy(m, prompt, with);
  auto b = generate_greedy(m, prompt, without);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->tokens.size() == 48);
  CHECK(a->tokens == b->tokens);
}

TEST_CASE("gpu: c10d collectives over NCCL on one GPU") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  // A world of one: the results are the inputs, and a ring of one sends nothing.
  auto store = compat::CommStoreListen("127.0.0.1", 0, 1, 30000);
  auto group = compat::CommGroupCreate(store, 0, 1, /*cuda=*/true, 30000);
  CHECK(compat::CommBackendName(*group) == "nccl");
  at::Tensor shard = at::arange(8, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  at::Tensor full = at::empty({8}, shard.options());
  CHECK(compat::AllGatherFlat(*group, full, shard) == 0);
  CHECK(at::equal(full, shard));
  at::Tensor out = at::empty({8}, shard.options());
  at::Tensor in = shard.clone();
  CHECK(compat::ReduceScatterSum(*group, out, in) == 0);
  CHECK(at::equal(out, shard));
  at::Tensor sum = shard.clone();
  CHECK(compat::AllReduceSum(*group, sum) == 0);
  CHECK(at::equal(sum, shard));
}

struct Events : CaseEvents {
  void OnStep(const StepSample&) override {}
  void OnRequest(const RequestSample&) override {}
  void OnStatusLine(const std::string&) override {}
};
struct Clock1 : Clock {
  double now = 0;
  double NowSeconds() override { return now += 1.0; }
  std::string NowIso8601() override { return "2026-01-01T00:00:00Z"; }
};

TEST_CASE("gpu: a one-process fsdp case on CUDA stores its peak device memory") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  const fs::path root = fs::temp_directory_path() / ("protocol_gpu_" + std::to_string(getpid()));
  fs::create_directories(root / "model");
  const fs::path data = fs::path(PROTOCOL_SOURCE_DIR) / "data/quickstart";
  fs::copy_file(data / "tokenizer.model", root / "model/tokenizer.model", fs::copy_options::overwrite_existing);
  std::ofstream(root / "model/config.json") << SmallConfig().ToHfJson();
  Plan plan;
  plan.name = "gpu";
  ModelSpec m;
  m.name = "small";
  m.path = (root / "model").string();
  plan.models["small"] = m;
  plan.datasets["corpus"] = DatasetSpec{"corpus", "text", (data / "corpus.txt").string(), "", {}};
  CaseSpec spec;
  spec.id = "g.1";
  spec.workload = Workload::kPretrain;
  spec.backend = "fsdp";
  spec.model = "small";
  spec.dataset = "corpus";
  spec.length = Length{Length::Unit::kSteps, 3};
  spec.training.batch_size = 4;
  spec.training.seq_len = 64;
  spec.training.device = DeviceChoice::kCuda;
  StopFlag stop;
  FakeProcessRunner processes;  // no process is started
  Clock1 clock;
  Events events;
  auto backend = MakeNativeFsdpBackend();
  BackendContext ctx{plan, spec, 0, "", "", stop, processes, clock, events};
  BackendOutcome out = backend->Run(ctx);
  fs::remove_all(root);
  REQUIRE_MESSAGE(out.status == CaseStatus::kOk, out.reason);
  const Measurement* peak = nullptr;
  for (const Measurement& x : out.measurements)
    if (x.name == metric::kPeakDeviceMemory) peak = &x;
  REQUIRE(peak != nullptr);
  REQUIRE(peak->value.has_value());
  CHECK(*peak->value > 0);
  CHECK(*peak->value < 200e9);  // below any single device's memory
}

// Bit-for-bit equality (NaN and -0 included): the values as integers of their width.
bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::ScalarType bits = a.element_size() == 4 ? at::kInt : at::kShort;
  return at::equal(a.contiguous().view(bits), b.contiguous().view(bits));
}

Nf4Tensor ToDevice(const Nf4Tensor& q, const at::Device& device) {
  Nf4Tensor d = q;
  for (at::Tensor* t : {&d.packed, &d.absmax, &d.absmax_codes, &d.absmax_scales, &d.absmax_mean})
    if (t->defined()) *t = t->to(device);
  return d;
}

TEST_CASE("gpu: NF4 dequantization on CUDA equals the CPU kernel bit for bit") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  const at::Device cuda(at::kCUDA, 0);
  const std::vector<std::vector<int64_t>> shapes = {{64, 64}, {1000, 7}, {3, 4096}, {1, 33}, {4096, 4096}};
  for (const std::vector<int64_t>& shape : shapes) {
    for (bool double_quant : {false, true}) {
      at::Tensor w = at::randn(shape, at::kFloat) * 0.02;
      if (w.numel() >= 128) w.view({-1}).narrow(0, 64, 64).zero_();  // a zero block (absmax 0: -0 levels)
      const Nf4Tensor q = nf4_quantize(w, double_quant);
      Nf4Tensor on_gpu = ToDevice(q, cuda);
      // The same codes at an odd byte offset of a larger buffer: the per-byte kernel.
      Nf4Tensor odd = on_gpu;
      odd.packed = at::empty({q.packed.numel() + 1}, on_gpu.packed.options()).narrow(0, 1, q.packed.numel());
      odd.packed.copy_(on_gpu.packed);
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        CAPTURE(w.sizes());
        CAPTURE(double_quant);
        CAPTURE(std::string(c10::toString(dtype)));
        const at::Tensor want = nf4_dequantize(q, dtype);  // the CPU kernel
        // Poison: a freed NaN buffer of the output's size, likely handed back by the caching allocator.
        { at::Tensor poison = at::full({q.blocks() * kNf4BlockSize}, NAN, at::TensorOptions().dtype(dtype).device(cuda)); }
        const at::Tensor got = nf4_dequantize(on_gpu, dtype).cpu();
        CHECK(SameBits(got, want));
        CHECK(SameBits(nf4_dequantize(odd, dtype).cpu(), want));
        CHECK(SameBits(nf4_dequantize_aten(on_gpu, dtype).cpu(), want));
      }
    }
  }
}

}  // namespace
}  // namespace native
}  // namespace protocol
