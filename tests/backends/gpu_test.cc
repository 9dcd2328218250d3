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
//   decode_step       an inference case with `decode_step: graph` gives the
//                     host step's tokens request by request, and its check
//                     before the first request says they matched
//   NF4 kernel        nf4_dequantize on CUDA (the one-pass kernel where the
//                     build has it) equals the CPU kernel and the ATen path
//                     bit for bit: float32, bfloat16, float16; sizes with a
//                     cut last block; double-quantized absmax; codes at an
//                     odd offset (the per-byte kernel); output over a
//                     NaN-poisoned allocation, so an unwritten value shows
//   fused decode ops  fused_ops.h's CUDA kernels (turned on for these cases
//                     only) against the composite ops on the same device,
//                     float32 and bfloat16: RoPE bit for bit; RMSNorm and
//                     SiLU·up within one rounding of their dtype; decode
//                     attention against float64; a model's decode tokens and
//                     logits with the kernels against without; ≤ 12 ops per
//                     decode layer
//   NF4 GEMV          the batch-1 4-bit GEMV (turned on with the fused
//                     kernels) equals its CPU twin bit for bit: float32,
//                     bfloat16, float16, single and double quantization,
//                     rows of 64 to 11008 weights; within a float32 sum's
//                     error of dequantize-then-cuBLAS; a 4-bit model decodes
//                     the same tokens with it as without
//   CUDA graph        generation with the decode step's position on the
//                     device, and replayed from a CUDA graph, equals the
//                     host position's token for token (float32, bfloat16;
//                     composite ops and the fused kernels), one host read
//   training ops      rms_norm's closed form and swiglu's autograd functions
//                     on CUDA against autograd through the composite ops,
//                     float32 and bfloat16: both forwards and swiglu's
//                     gradients bit for bit, rms_norm's gradients within one
//                     rounding of a reordered float32 sum; where libtorch has
//                     a fused RMSNorm kernel, rms_norm runs it (its backward
//                     node is the fused one) within one rounding of the
//                     composite, gradients included
#include "native_test_support.h"

#include <torch/csrc/autograd/function.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <utility>

#include "autograd_reference.h"
#include "backends/native/fsdp_backend.h"
#include "backends/native/model/fused_ops.h"
#include "backends/native/model/generate.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/rms_norm.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/model/swiglu.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/nf4.h"
#include "backends/native/quant/nf4_gemv.h"
#include "backends/native/quant/quantized_model.h"
#include "fake_process_runner.h"
#include "runner/exec/backend.h"
#include "skip.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;
using protocol::testing::AutogradOf;
using protocol::testing::AutogradResult;
using protocol::testing::CompositeRmsNorm;
using protocol::testing::CompositeSwiglu;
using protocol::testing::FakeProcessRunner;
using protocol::testing::RelativeMaxError;

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

// ---- the training step's autograd functions --------------------------------------

TEST_CASE("gpu: the training RMSNorm and SwiGLU gating equal the composite ops' autograd on CUDA") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  at::manual_seed(7);
  const at::Device cuda(at::kCUDA, 0);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const at::TensorOptions on = at::TensorOptions().dtype(dtype).device(cuda);
    // SwiGLU: the same ATen ops as the composite autograd, so the same bits.
    const at::Tensor gate = (at::randn({4, 128, 688}) * 4).to(on), up = at::randn({4, 128, 688}).to(on);
    const at::Tensor gy = at::randn({4, 128, 688}).to(on);
    const AutogradResult fused = AutogradOf(swiglu, gate, up, gy);
    const AutogradResult composite = AutogradOf(CompositeSwiglu, gate, up, gy);
    CHECK(at::equal(fused.y, composite.y));
    CHECK(at::equal(fused.grad_a, composite.grad_a));
    CHECK(at::equal(fused.grad_b, composite.grad_b));
    // RMSNorm: the forward's bits; the gradients within their dtype's rounding (rms_norm.h).
    const at::Tensor x = (at::randn({4, 128, 256}) * 2).to(on), w = (1 + at::randn({256}) * 0.1).to(on);
    const at::Tensor gx = at::randn({4, 128, 256}).to(on);
    auto fused_norm = [](const at::Tensor& a, const at::Tensor& b) { return rms_norm_closed_form(a, b, 1e-5); };
    auto composite_norm = [](const at::Tensor& a, const at::Tensor& b) { return CompositeRmsNorm(a, b, 1e-5); };
    const AutogradResult norm = AutogradOf(fused_norm, x, w, gx);
    const AutogradResult norm_composite = AutogradOf(composite_norm, x, w, gx);
    CHECK(at::equal(norm.y, norm_composite.y));
    const double tolerance = dtype == at::kFloat ? 1e-5 : 2e-2;  // as rms_norm_test.cc
    for (auto [got, want] : {std::pair{norm.grad_a, norm_composite.grad_a},  // x
                             std::pair{norm.grad_b, norm_composite.grad_b}}) {  // the weight
      REQUIRE((got.scalar_type() == dtype));
      CHECK(RelativeMaxError(got, want) < tolerance);
    }
  }
}

TEST_CASE("gpu: where libtorch has a fused RMSNorm kernel, the model's RMSNorm runs it, within one rounding") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  at::manual_seed(8);
  const at::Device cuda(at::kCUDA, 0);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const at::TensorOptions on = at::TensorOptions().dtype(dtype).device(cuda);
    // A llama-1b row (2048 columns) and a 7B one (4096).
    for (int64_t C : {2048, 4096}) {
      CAPTURE(C);
      const at::Tensor x = (at::randn({4, 64, C}) * 2).to(on), w = (1 + at::randn({C}) * 0.1).to(on);
      const at::Tensor gx = at::randn({4, 64, C}).to(on);
      const bool fused = compat::AtenFusedRmsNormAvailable(x, w);
      MESSAGE("libtorch " << compat::TorchVersion() << ": fused RMSNorm kernel " << (fused ? "used" : "absent"));
      auto model_norm = [](const at::Tensor& a, const at::Tensor& b) { return rms_norm(a, b, 1e-5); };
      auto composite_norm = [](const at::Tensor& a, const at::Tensor& b) { return CompositeRmsNorm(a, b, 1e-5); };
      const AutogradResult got = AutogradOf(model_norm, x, w, gx);
      const AutogradResult want = AutogradOf(composite_norm, x, w, gx);
      const at::Tensor xg = x.clone().requires_grad_(true);
      const at::Tensor y = rms_norm(xg, w, 1e-5);
      REQUIRE(y.grad_fn() != nullptr);
      MESSAGE("backward node: " << y.grad_fn()->name());
      CHECK((y.grad_fn()->name().find("FusedRmsNorm") != std::string::npos) == fused);
      // One rounding to the dtype: 2⁻²⁴ relative in float32, 2⁻⁸ in bfloat16, a little over.
      const double forward_tolerance = dtype == at::kFloat ? 2e-6 : 1e-2;
      CHECK(RelativeMaxError(got.y, want.y) < forward_tolerance);
      const double tolerance = dtype == at::kFloat ? 1e-5 : 2e-2;  // as the closed form's
      CHECK(RelativeMaxError(got.grad_a, want.grad_a) < tolerance);
      CHECK(RelativeMaxError(got.grad_b, want.grad_b) < tolerance);
    }
  }
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
  // Grouped key/value heads (llama-1b's 32 on 4, head dim 64, training's causal shape): still a
  // fused kernel, the heads taken as they are where libtorch can (2.5 on), else repeated first.
  at::Tensor gq = at::randn({2, 32, 512, 64}, options), gk = at::randn({2, 4, 512, 64}, options),
             gv = at::randn({2, 4, 512, 64}, options);
  const std::string grouped_backend = compat::SdpaBackendFor(gq, gk, gv, true);
  MESSAGE("SDPA on 32 query heads over 4 key/value heads: " << grouped_backend << ", heads taken grouped: "
                                                             << compat::SdpaTakesGroupedHeads(gq, gk, gv, true));
  CHECK((grouped_backend == "flash" || grouped_backend == "efficient"));
  at::Tensor grouped = compat::ScaledDotProductAttention(gq, gk, gv, /*is_causal=*/true, std::nullopt);
  at::Tensor repeated = compat::ScaledDotProductAttention(gq, gk.repeat_interleave(8, 1), gv.repeat_interleave(8, 1),
                                                          /*is_causal=*/true, std::nullopt);
  const double rel = ((grouped.to(at::kFloat) - repeated.to(at::kFloat)).norm() / repeated.to(at::kFloat).norm())
                         .item<double>();
  CHECK(rel < 1e-2);
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

// A plan with the small model ("small": SmallConfig, the quick start's
// tokenizer, and with `weights` its random weights of seed 42 with the head
// scaled by 20, so that no argmax hinges on a rounding) and the quick start's
// corpus ("corpus"), in a folder removed with the object.
struct SmallPlan {
  explicit SmallPlan(bool weights) {
    fs::create_directories(root / "model");
    const fs::path data = fs::path(PROTOCOL_SOURCE_DIR) / "data/quickstart";
    fs::copy_file(data / "tokenizer.model", root / "model/tokenizer.model", fs::copy_options::overwrite_existing);
    if (weights) {
      Model m = model_create(SmallConfig(), at::TensorOptions().dtype(at::kFloat));
      model_init_random(m, 42);
      m.lm_head.mul_(20.0);
      REQUIRE(model_save(m, (root / "model").string()).ok());
    } else {
      std::ofstream(root / "model/config.json") << SmallConfig().ToHfJson();
    }
    plan.name = "gpu";
    ModelSpec m;
    m.name = "small";
    m.path = (root / "model").string();
    plan.models["small"] = m;
    plan.datasets["corpus"] = DatasetSpec{"corpus", "text", (data / "corpus.txt").string(), "", {}};
  }
  ~SmallPlan() { fs::remove_all(root); }
  // `spec` run by the one-process fsdp backend; its requests in `requests`.
  BackendOutcome Run(const CaseSpec& spec, std::vector<RequestSample>* requests = nullptr) {
    struct Recording : Events {
      std::vector<RequestSample>* requests = nullptr;
      void OnRequest(const RequestSample& r) override {
        if (requests) requests->push_back(r);
      }
    } events;
    events.requests = requests;
    StopFlag stop;
    FakeProcessRunner processes;  // no process is started
    Clock1 clock;
    BackendContext ctx{plan, spec, 0, "", "", stop, processes, clock, events};
    return MakeNativeFsdpBackend()->Run(ctx);
  }
  const fs::path root = fs::temp_directory_path() / ("protocol_gpu_" + std::to_string(getpid()));
  Plan plan;
};

TEST_CASE("gpu: a one-process fsdp case on CUDA stores its peak device memory") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  SmallPlan small(/*weights=*/false);
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
  BackendOutcome out = small.Run(spec);
  REQUIRE_MESSAGE(out.status == CaseStatus::kOk, out.reason);
  const Measurement* peak = nullptr;
  for (const Measurement& x : out.measurements)
    if (x.name == metric::kPeakDeviceMemory) peak = &x;
  REQUIRE(peak != nullptr);
  REQUIRE(peak->value.has_value());
  CHECK(*peak->value > 0);
  CHECK(*peak->value < 200e9);  // below any single device's memory
}

TEST_CASE("gpu: an inference case with decode_step graph gives the host step's tokens, its check first") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  SmallPlan small(/*weights=*/true);
  CaseSpec spec;
  spec.id = "g.2";
  spec.workload = Workload::kInference;
  spec.backend = "fsdp";
  spec.model = "small";
  spec.inference.prompt = "Can there be life somewhere in the Solar System outside Earth?";
  spec.inference.max_new_tokens = {40, 100, 30};  // one bucket: the first records its graph, the others replay it
  spec.training.device = DeviceChoice::kCuda;
  std::vector<RequestSample> host, graph;
  BackendOutcome at_host = small.Run(spec, &host);
  REQUIRE_MESSAGE(at_host.status == CaseStatus::kOk, at_host.reason);
  spec.inference.decode_step = DecodeStepChoice::kGraph;
  BackendOutcome replayed = small.Run(spec, &graph);
  REQUIRE_MESSAGE(replayed.status == CaseStatus::kOk, replayed.reason);
  REQUIRE(graph.size() == host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    CAPTURE(i);
    CHECK(graph[i].token_ids == host[i].token_ids);
  }
  std::map<std::string, std::string> facts(replayed.facts.begin(), replayed.facts.end());
  CHECK(facts[fact::kDecodeCheck] == "the first 16 tokens equal the host position's");
  CHECK(facts[fact::kDecoding].find("replayed from a CUDA graph recorded once per bucket") != std::string::npos);
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

// ---- the fused decode ops' CUDA kernels -------------------------------------------

const char* const kNoFusedKernels = "this build has no CUDA kernels (no CUDA compiler at configure)";

// Turns the fused ops' CUDA kernels on while it lives (they are off by default).
struct FusedCudaKernelsOn {
  const bool on = fused::SetCudaKernels(true);
  ~FusedCudaKernelsOn() { fused::SetCudaKernels(false); }
};

// Runs `body` with the fused ops' CUDA kernels on, under InferenceMode, once
// for each dtype they serve (float32, bfloat16) with its options on GPU 0.
// Returns why it could not run ("" when it ran).
std::string WithFusedCudaKernels(const std::function<void(at::ScalarType, const at::TensorOptions&)>& body) {
  if (!compat::CudaAvailable()) return kNoCuda;
  if (!fused::CudaKernelsBuilt()) return kNoFusedKernels;
  FusedCudaKernelsOn kernels;
  REQUIRE(kernels.on);
  c10::InferenceMode inference;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const auto o = at::TensorOptions().dtype(dtype).device(at::Device(at::kCUDA, 0));
    REQUIRE(fused::Available(at::empty({1}, o)));
    body(dtype, o);
  }
  return "";
}

// The largest |got − want| over the dtype's unit in the last place at want's
// magnitude (2^-23 float32, 2^-7 bfloat16, relative), for values above `floor`
// in magnitude; below it the absolute difference over floor's ulp.
double UlpDistance(const at::Tensor& got, const at::Tensor& want, double floor) {
  const double unit = want.scalar_type() == at::kBFloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -23);
  at::Tensor g = got.to(at::kDouble).cpu(), w = want.to(at::kDouble).cpu();
  at::Tensor scale = at::clamp_min(w.abs(), floor) * unit;
  return ((g - w).abs() / scale).max().item<double>();
}

TEST_CASE("gpu: the fused decode ops' CUDA kernels equal the composite ops") {
  const std::string skipped = WithFusedCudaKernels([&](at::ScalarType dtype, const at::TensorOptions& o) {
    // Sums in another order, rsqrtf and expf against ATen's: a few float32 ulps; in bfloat16 one
    // rounding of an intermediate may flip, then the output's.
    const double ulps = dtype == at::kFloat ? 64 : 2;
    // RMSNorm over 4096 columns (a 7B row) and 2048; fresh random inputs, NaN-poisoned outputs before.
    for (int64_t C : {4096, 2048, 100}) {
      at::Tensor x = at::randn({3, C}, o) * 3, r = at::randn({3, C}, o), w = (at::rand({C}, o) + 0.5);
      { at::Tensor poison = at::full({3, C}, NAN, o); }
      CHECK(UlpDistance(fused::RmsNorm(x, w, 1e-5), CompositeRmsNorm(x, w, 1e-5), 1e-3) <= ulps);
      auto [h, y] = fused::AddRmsNorm(x, r, w, 1e-5);
      CHECK(at::equal(h, x + r));
      CHECK(UlpDistance(y, CompositeRmsNorm(x + r, w, 1e-5), 1e-3) <= ulps);
    }
    // SiLU(gate)·up over 2·11008 columns.
    at::Tensor gate_up = at::randn({2, 1, 2 * 11008}, o) * 3;
    at::Tensor silu = fused::SiluMul(gate_up);
    CHECK(UlpDistance(silu, at::silu(gate_up.narrow(-1, 0, 11008)) * gate_up.narrow(-1, 11008, 11008), 1e-3) <= ulps);
    // RoPE and the cache's write, bit for bit (7B's 32 heads of 128; grouped: 8 of 4).
    for (auto [NH, NKV] : {std::pair<int64_t, int64_t>{32, 32}, {8, 2}}) {
      const int64_t B = 2, T = 3, HD = 128, capacity = 40, pos = 17;
      at::Tensor qkv = at::randn({B, T, (NH + 2 * NKV) * HD}, o);
      at::Tensor angles = at::rand({T, HD}, o.dtype(at::kFloat)) * 6;
      at::Tensor cos = angles.cos().to(dtype), sin = angles.sin().to(dtype);
      at::Tensor k_cache = at::full({B, NKV, capacity, HD}, 7.0, o), v_cache = at::full({B, NKV, capacity, HD}, 7.0, o);
      at::Tensor q = fused::RopeCache(qkv, cos, sin, k_cache, v_cache, pos, NH, NKV);
      std::vector<at::Tensor> parts = qkv.split_with_sizes({NH * HD, NKV * HD, NKV * HD}, -1);
      auto rope = [&](const at::Tensor& x) {
        const int64_t half = HD / 2;
        return x * cos + at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1) * sin;
      };
      CHECK(SameBits(q.transpose(1, 2), rope(parts[0].view({B, T, NH, HD}).transpose(1, 2))));
      CHECK(SameBits(k_cache.narrow(2, pos, T), rope(parts[1].view({B, T, NKV, HD}).transpose(1, 2))));
      CHECK(SameBits(v_cache.narrow(2, pos, T), parts[2].view({B, T, NKV, HD}).transpose(1, 2)));
      CHECK(at::equal(k_cache.narrow(2, 0, pos), at::full({B, NKV, pos, HD}, 7.0, o)));
    }
    // Decode attention against float64: grouped heads, 7B's head, a length below the 8 warps'.
    for (auto [NKV, HD, length] : {std::tuple<int64_t, int64_t, int64_t>{4, 128, 257}, {32, 128, 3}, {2, 64, 1000}}) {
      const int64_t B = 2, NH = 32, capacity = 1100;
      CAPTURE(NKV);
      CAPTURE(length);
      at::Tensor q = at::randn({B, 1, NH, HD}, o);
      at::Tensor k_cache = at::randn({B, NKV, capacity, HD}, o), v_cache = at::randn({B, NKV, capacity, HD}, o);
      k_cache.narrow(2, length, capacity - length).fill_(1e4);  // never read
      at::Tensor y = fused::DecodeAttention(q, k_cache, v_cache, length).view({B, NH, HD});
      at::Tensor K = k_cache.narrow(2, 0, length).to(at::kDouble).cpu().repeat_interleave(NH / NKV, 1);
      at::Tensor V = v_cache.narrow(2, 0, length).to(at::kDouble).cpu().repeat_interleave(NH / NKV, 1);
      at::Tensor p = at::softmax(at::matmul(K, q.to(at::kDouble).cpu().view({B, NH, HD, 1})).squeeze(-1) /
                                     std::sqrt(static_cast<double>(HD)), -1);
      at::Tensor want = at::matmul(p.unsqueeze(2), V).squeeze(2);
      const double rel = ((y.to(at::kDouble).cpu() - want).norm() / want.norm()).item<double>();
      MESSAGE("decode attention, " << c10::toString(dtype) << ", NKV " << NKV << ", length " << length
                                   << ": relative L2 error " << rel);
      CHECK(rel < (dtype == at::kFloat ? 1e-5 : 1e-2));
    }
  });
  if (!skipped.empty()) SKIP_TEST(skipped);
}

TEST_CASE("gpu: the fused ops at a position on the device equal them at the host's, and replay from a CUDA graph") {
  const std::string skipped = WithFusedCudaKernels([&](at::ScalarType dtype, const at::TensorOptions& o) {
    const int64_t NH = 32, NKV = 8, HD = 128, capacity = 300;
    at::Tensor qkv = at::randn({1, 1, (NH + 2 * NKV) * HD}, o);
    at::Tensor angles = at::rand({1, HD}, o.dtype(at::kFloat)) * 6;
    at::Tensor cos = angles.cos().to(dtype), sin = angles.sin().to(dtype);
    at::Tensor k_host = at::randn({1, NKV, capacity, HD}, o), v_host = at::randn({1, NKV, capacity, HD}, o);
    for (int64_t pos : {0, 7, 255, 299}) {
      CAPTURE(pos);
      at::Tensor k_at = k_host.clone(), v_at = v_host.clone();
      const at::Tensor position = at::full({1}, pos, o.dtype(at::kLong));
      at::Tensor q_host = fused::RopeCache(qkv, cos, sin, k_host, v_host, pos, NH, NKV);
      at::Tensor q_at = fused::RopeCacheAt(qkv, cos, sin, k_at, v_at, position, NH, NKV);
      CHECK(SameBits(q_at, q_host));
      CHECK(SameBits(k_at, k_host));
      CHECK(SameBits(v_at, v_host));
      CHECK(SameBits(fused::DecodeAttentionAt(q_at, k_at, v_at, position),
                     fused::DecodeAttention(q_host, k_host, v_host, pos + 1)));
    }
    // A position outside the cache writes nothing to it (the host cannot check it).
    at::Tensor k_out = k_host.clone(), v_out = v_host.clone();
    (void)fused::RopeCacheAt(qkv, cos, sin, k_out, v_out, at::full({1}, capacity, o.dtype(at::kLong)), NH, NKV);
    CHECK(SameBits(k_out, k_host));
    CHECK(SameBits(v_out, v_host));
    // Recorded once as a CUDA graph, replayed at each position the graph's tensor holds.
    at::Tensor position = at::full({1}, 3, o.dtype(at::kLong));
    at::Tensor k_graph = k_host.clone(), v_graph = v_host.clone(), out;
    compat::CudaGraph graph;
    REQUIRE(graph.Capture(
        [&] {
          out = fused::DecodeAttentionAt(fused::RopeCacheAt(qkv, cos, sin, k_graph, v_graph, position, NH, NKV),
                                         k_graph, v_graph, position);
        },
        qkv.device()));
    for (int64_t pos : {4, 5, 150}) {
      CAPTURE(pos);
      position.fill_(pos);
      graph.Replay();
      at::Tensor k_eager = k_host.clone(), v_eager = v_host.clone();
      // The graph's cache holds every replayed position's keys; the eager one is given the same.
      k_eager.copy_(k_graph);
      v_eager.copy_(v_graph);
      at::Tensor q_eager = fused::RopeCache(qkv, cos, sin, k_eager, v_eager, pos, NH, NKV);
      CHECK(SameBits(out, fused::DecodeAttention(q_eager, k_eager, v_eager, pos + 1)));
    }
  });
  if (!skipped.empty()) SKIP_TEST(skipped);
}

TEST_CASE("gpu: a model decodes the same with the fused ops' CUDA kernels as without, in ≤ 12 ops a layer") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  if (!fused::CudaKernelsBuilt()) SKIP_TEST(kNoFusedKernels);
  const ModelConfig c = SmallConfig();
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    Model m = CudaModel(c, dtype);
    m.lm_head.mul_(20.0);  // wide logit gaps, as in the KV-cache case above
    const std::vector<int> prompt = {1, 17, 230, 5, 999, 42, 7};
    GenerateOptions options;
    options.max_new_tokens = 48;
    auto composite = generate_greedy(m, prompt, options);
    at::Tensor tokens = at::tensor(std::vector<int64_t>{1, 17, 230, 5, 999, 42, 7, 11, 400}, at::kLong)
                            .view({1, 9}).to(at::kCUDA);
    at::Tensor reference;
    {
      c10::InferenceMode inference;
      reference = model_forward(m, tokens).to(at::kDouble);
    }
    FusedCudaKernelsOn kernels;
    REQUIRE(kernels.on);
    auto fused_run = generate_greedy(m, prompt, options);
    REQUIRE(composite.ok());
    REQUIRE(fused_run.ok());
    CHECK(fused_run->tokens == composite->tokens);
    c10::InferenceMode inference;
    KvCache cache = kv_cache_create(m, 1, 16);
    std::vector<at::Tensor> steps = {model_forward(m, tokens.narrow(1, 0, 5), &cache)};
    for (int64_t t = 5; t < 9; ++t) steps.push_back(model_forward(m, tokens.narrow(1, t, 1), &cache));
    at::Tensor got = at::cat(steps, 1).to(at::kDouble);
    const double rel = ((got - reference).norm() / reference.norm()).item<double>();
    MESSAGE("fused CUDA kernels against the composite forward, " << c10::toString(dtype) << ": relative L2 error "
                                                                 << rel);
    CHECK(rel < (dtype == at::kFloat ? 1e-5 : 2e-2));
    // One decode position of layer 0, counted.
    at::Tensor x = embed_forward(m.embed, tokens.narrow(1, 0, 1));
    const RopeRows rope = rope_rows(m, cache.length, 1, x.scalar_type());
    compat::OpCounter counter;
    (void)decoder_layer_forward(m, 0, m.layers[0], x, rope, &cache, cache.length);
    MESSAGE("decode layer on CUDA with the fused kernels: " << counter.total() << " ops: " << counter.Describe());
    CHECK(counter.total() <= 12);
  }
}

// ---- the NF4 batch-1 GEMV ----------------------------------------------------------

TEST_CASE("gpu: the NF4 batch-1 GEMV equals its CPU twin bit for bit") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  if (!fused::CudaKernelsBuilt()) SKIP_TEST(kNoFusedKernels);
  FusedCudaKernelsOn kernels;
  REQUIRE(kernels.on);
  c10::InferenceMode inference;
  const at::Device cuda(at::kCUDA, 0);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{96, 4096}, {37, 11008}, {70, 64}, {4096, 4096}};
  for (const auto& [out, in] : shapes) {
    for (bool double_quant : {false, true}) {
      at::Tensor w = at::randn({out, in}, at::kFloat) * 0.02;
      w.mul_(at::linspace(0.1, 3.0, out, at::kFloat).unsqueeze(1));
      const Nf4Tensor q = nf4_quantize(w, double_quant);
      const Nf4Tensor on_gpu = ToDevice(q, cuda);
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        CAPTURE(out);
        CAPTURE(in);
        CAPTURE(double_quant);
        CAPTURE(std::string(c10::toString(dtype)));
        const at::Tensor x = at::randn({1, 1, in}, at::kFloat).to(dtype);
        const at::Tensor x_gpu = x.to(cuda);
        REQUIRE(nf4_gemv_available(x_gpu, on_gpu));
        const at::Tensor got = nf4_gemv(x_gpu, on_gpu).cpu();
        CHECK(SameBits(got, nf4_gemv_reference(x, q)));
        const at::Tensor library = at::linear(x_gpu, nf4_dequantize(on_gpu, dtype)).cpu().to(at::kDouble);
        const double rel = ((got.to(at::kDouble) - library).norm() / library.norm()).item<double>();
        CHECK(rel < (dtype == at::kFloat ? 1e-5 : 1e-2));
      }
    }
  }
}

TEST_CASE("gpu: a 4-bit model decodes the same tokens with the batch-1 GEMV as without, and from a CUDA graph") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  if (!fused::CudaKernelsBuilt()) SKIP_TEST(kNoFusedKernels);
  ModelConfig c = SmallConfig();
  c.hidden_dim = 704;  // whole blocks of 64 per row, as every Llama-2 shape has
  for (bool double_quant : {false, true}) {
    CAPTURE(double_quant);
    Model m = CudaModel(c, at::kBFloat16);
    m.lm_head.mul_(20.0);  // wide logit gaps, as in the KV-cache case above
    model_quantize_nf4(m, double_quant);
    const std::vector<int> prompt = {1, 17, 230, 5, 999, 42, 7};
    GenerateOptions options;
    options.max_new_tokens = 32;
    auto dequantized = generate_greedy(m, prompt, options);
    FusedCudaKernelsOn kernels;
    REQUIRE(kernels.on);
    auto gemv = generate_greedy(m, prompt, options);
    // The GEMV (on the current stream, its tables passed by value) inside a recorded step.
    GenerateOptions graph = options;
    graph.decode_step = DecodeStep::kCudaGraph;
    auto replayed = generate_greedy(m, prompt, graph);
    REQUIRE(dequantized.ok());
    REQUIRE(gemv.ok());
    REQUIRE(replayed.ok());
    CHECK(gemv->tokens == dequantized->tokens);
    CHECK(replayed->tokens == dequantized->tokens);
  }
}

// ---- the decode step on the device, and its CUDA graph ----------------------------

TEST_CASE("gpu: decoding from a CUDA graph gives the host position's tokens") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  const ModelConfig c = SmallConfig();
  for (bool fused_kernels : {false, true}) {
    if (fused_kernels && !fused::CudaKernelsBuilt()) continue;
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      CAPTURE(fused_kernels);
      CAPTURE(std::string(c10::toString(dtype)));
      Model m = CudaModel(c, dtype);
      m.lm_head.mul_(20.0);  // wide logit gaps, as in the KV-cache case above
      const bool on = fused::SetCudaKernels(fused_kernels);
      REQUIRE(on == fused_kernels);
      const std::vector<int> prompt = {1, 17, 230, 5, 999, 42, 7};
      GenerateOptions host, device, graph;
      host.max_new_tokens = device.max_new_tokens = graph.max_new_tokens = 48;
      device.decode_step = DecodeStep::kDevicePosition;
      graph.decode_step = DecodeStep::kCudaGraph;
      auto a = generate_greedy(m, prompt, host);
      auto b = generate_greedy(m, prompt, device);
      auto g = generate_greedy(m, prompt, graph);
      fused::SetCudaKernels(false);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(g.ok());
      CHECK(b->tokens == a->tokens);
      CHECK(g->tokens == a->tokens);
      CHECK(g->host_reads == 1);
      // Stopping at end-of-sequence from the graph: the same cut.
      Model stop_model = m;
      stop_model.config.eos_id = a->tokens[20];
      host.ignore_eos = graph.ignore_eos = false;
      fused::SetCudaKernels(fused_kernels);
      auto ha = generate_greedy(stop_model, prompt, host);
      auto ga = generate_greedy(stop_model, prompt, graph);
      fused::SetCudaKernels(false);
      REQUIRE(ha.ok());
      REQUIRE(ga.ok());
      CHECK(ga->tokens == ha->tokens);
      CHECK(ga->ended_at_eos);
    }
  }
}

TEST_CASE("gpu: decode buckets record one CUDA graph per bucket and replay it for the later generations") {
  if (!compat::CudaAvailable()) SKIP_TEST(kNoCuda);
  Model m = CudaModel(SmallConfig(), at::kBFloat16);
  m.lm_head.mul_(20.0);
  DecodeBuckets buckets;
  GenerateOptions host, graph;
  graph.decode_step = DecodeStep::kCudaGraph;
  // One bucket of 256 positions for all three; the third starts where the first left stale keys.
  const std::vector<std::pair<std::vector<int>, int64_t>> requests = {
      {{1, 17, 230, 5, 999, 42, 7}, 48}, {{3, 4}, 20}, {{9, 8, 7}, 100}};
  for (const auto& [prompt, new_tokens] : requests) {
    CAPTURE(new_tokens);
    host.max_new_tokens = graph.max_new_tokens = new_tokens;
    auto a = generate_greedy(m, prompt, host);
    auto g = generate_greedy(m, prompt, graph, nullptr, &buckets);
    REQUIRE(a.ok());
    REQUIRE(g.ok());
    CHECK(g->tokens == a->tokens);
    CHECK(g->host_reads == 1);
  }
  CHECK(buckets.size() == 1);
  CHECK(buckets.For(m, 64).captures == 1);  // recorded by the first generation, replayed by the other two
}

}  // namespace
}  // namespace native
}  // namespace protocol
