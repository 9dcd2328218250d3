// Benchmarks of the native Llama-2 model on this machine's CPU (or CUDA when
// the libtorch build has it): training-step throughput and single-stream
// greedy decode speed, per preset. Prints figures; asserts nothing.
//
//   build/protocol_bench                       # tiny and small-100m, defaults below
//   build/protocol_bench --presets tiny --steps 10 --batch 8 --seq 128 --decode 64
//   build/protocol_bench --device cuda --presets llama-1b --batch 4 --seq 2048 --decode 0   # MFU
//   build/protocol_bench --device cuda --presets llama2-7b --no-train --decode 256          # decode
//   build/protocol_bench --device cuda --presets llama2-7b --quant nf4 --batch 4 --seq 512  # QLoRA + 4-bit decode
//   build/protocol_bench --presets small-100m --quant nf4 --vs-fp32   # 4-bit / full-precision ratios
//   build/protocol_bench --recompute 0 ...     # no activation recompute (default 1: every layer)
//   build/protocol_bench --device cuda --cuda-fused-ops ...   # decode through fused_ops.h's CUDA kernels
//                                              # (and, with --quant nf4, the batch-1 GEMV of nf4_gemv.h)
//   build/protocol_bench --device cuda --decode-step graph ...   # each decode step replayed from a CUDA graph
//   build/protocol_bench --profile 12 ...    # then one more step and generation under libtorch's profiler:
//                                              # the 12 longest kernels and host ops, the device's busy share
// Each training preset also prints its loss alone (PrintLossTimes): the chunked
// cross-entropy against cross_entropy over a float32 copy of the logits; and
// one RMSNorm alone (PrintNormTimes): the model's against the composite ops,
// and SwiGLU's gating alone (PrintGatingTimes), likewise.
// Its PyTorch peer, the same figures for the same shapes: bench/peer/llama_peer.py.
//
// On CUDA the compute dtype is bf16 (--dtype fp32 to change it), MFU is
// printed for devices in device_peak.h's table, and so is the caching
// allocator's peak. With --quant nf4 the projections are NF4 (quantized_model.h)
// and the training step is a QLoRA step (LoRA rank 8 on the seven projections;
// the base is frozen, so its weights need no weight gradients: the MFU line
// then also states the 4·N-per-token figure, since PaLM's 6·N assumes every
// weight is trained).
//
// Method (one place, as in google/benchmark): `warmup` steps are run and
// discarded, then `steps` timed steps; on CUDA the device is synchronised
// before each clock read. Training FLOPs use the PaLM/torchtitan formula
// (ModelConfig::TrainingFlopsPerToken); achieved GFLOP/s = FLOPs/token ×
// tokens/s. The BLAS library libtorch actually loaded is printed, since
// Debian's libtorch multiplies matrices through whatever libblas.so.3 points to
// (the reference BLAS was measured ~18× slower than OpenBLAS on a train step).

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <c10/core/GradMode.h>

#include "bench_args.h"
#include "backends/native/training/chunked_loss.h"
#include "backends/native/training/data.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/model/fused_ops.h"
#include "backends/native/model/generate.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/rms_norm.h"
#include "backends/native/model/swiglu.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/platform/op_profile.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/train.h"
#include "runner/base/text.h"

using namespace protocol;
using namespace protocol::native;

namespace {

struct Options {
  std::vector<std::string> presets = {"tiny", "small-100m"};
  std::string device = "auto";  // auto | cpu | cuda
  std::string dtype;            // "" = bf16 on cuda, fp32 on cpu; or bf16 | fp32
  std::string quant;            // "" | nf4
  bool double_quant = false;
  bool train = true;
  int warmup = 2;
  int steps = 5;
  int64_t batch = 8;
  int64_t seq = 128;
  int64_t decode = 64;
  int64_t prompt = 16;
  int64_t recompute = 1;  // training.checkpoint_every: 1 every layer (this bench's default; a plan's is auto), 0 none
  bool vs_fp32 = false;  // with --quant nf4: the same preset in full precision first, then the ratios
  bool cuda_fused_ops = false;  // decode on CUDA through the fused ops' CUDA kernels (fused_ops.h)
  std::string decode_step = "host";  // host | device | graph (generate.h: DecodeStep)
  int profile = 0;  // > 0: one more training step and generation under libtorch's profiler, this many rows a side
};

// What one preset measured (0: not measured).
struct Figures {
  double step_seconds = 0;
  double decode_seconds_per_token = 0;       // 4-bit: dequantized on use
  double decode_kept_seconds_per_token = 0;  // 4-bit: after nf4_prepare_inference kept them (0: it did not)
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs `work` once more under libtorch's profiler, after the timed runs (its figures are the
// profiler's, not the timed ones': recording every op slows the host), and prints where the
// window's time went (op_profile.h): `units` of `unit` in the window.
// A profiler that cannot start (a libtorch whose Kineto finds no CUPTI, say) costs the profile,
// not the figures printed before it.
void PrintProfile(const Options& o, const at::Device& device, const std::function<double()>& work,
                  const std::string& unit) {
  std::string text;
  try {
    compat::DeviceSynchronize(device);
    compat::OpProfiler profiler(/*device_kernels=*/device.is_cuda());
    const double start = Now();
    const double units = work();
    compat::DeviceSynchronize(device);
    const double window = Now() - start;
    text = FormatProfile(SummarizeProfile(profiler.Stop(), window), static_cast<size_t>(o.profile), units, unit);
  } catch (const std::exception& e) {
    text = std::string("profile: not taken: ") + Split(e.what(), '\n').front() + "\n";
  }
  for (const std::string& line : Split(text, '\n'))
    if (!line.empty()) std::printf("           %s\n", line.c_str());
}

// Every loaded shared object whose name mentions a BLAS implementation,
// resolved through symlinks (libblas.so.3 → .../openblas-openmp/libblas.so.3).
std::vector<std::string> LoadedBlas() {
  std::vector<std::string> found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* out = static_cast<std::vector<std::string>*>(data);
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("blas") != std::string::npos || name.find("mkl") != std::string::npos) {
          char resolved[4096];
          out->push_back(realpath(name.c_str(), resolved) ? resolved : name);
        }
        return 0;
      },
      &found);
  return found;
}

void PrintDeviceMemory(const at::Device& device) {
  if (auto peak = compat::CudaPeakMemoryBytes(); peak && device.is_cuda())
    std::printf("           peak device memory %.2f GiB (caching allocator, since the preset started)\n",
                static_cast<double>(*peak) / (1024.0 * 1024.0 * 1024.0));
}

// Milliseconds of each variant's forward and backward, the median of `reps`
// rounds after one warm-up round; the variants take turns in each round, so
// that none is favoured by its place in the run (on the CPU, fresh pages of a
// freed gradient are faulted in again each time); `reset` runs before each
// (clearing the gradients); the device synchronised around each.
std::vector<double> MedianForwardBackwardMs(const std::vector<std::function<at::Tensor()>>& variants,
                                            const std::function<void()>& reset, const at::Device& device, int reps) {
  std::vector<std::vector<double>> ms(variants.size());
  for (int i = 0; i <= reps; ++i)
    for (size_t v = 0; v < variants.size(); ++v) {
      reset();
      compat::DeviceSynchronize(device);
      const double start = Now();
      variants[v]().backward();
      compat::DeviceSynchronize(device);
      if (i > 0) ms[v].push_back((Now() - start) * 1e3);
    }
  std::vector<double> medians;
  for (std::vector<double>& x : ms) {
    std::sort(x.begin(), x.end());
    medians.push_back(x[x.size() / 2]);
  }
  return medians;
}

// The training loss alone, over random logits of a step's shape (N = B·T
// rows, V columns, the compute dtype): the chunked cross-entropy the training
// step uses (chunked_loss.h) at its chunk size and at 16 times it, against
// cross_entropy over a float32 copy of the logits (what a plain PyTorch step
// does).
void PrintLossTimes(int64_t N, int64_t V, const at::TensorOptions& options, int reps) {
  at::Tensor logits = at::randn({N, V}, options).mul_(2).requires_grad_(true);
  at::Tensor targets = at::randint(0, V, {N}, options.dtype(at::kLong));
  at::Tensor weights = at::full({N}, 1.0 / static_cast<double>(N), options.dtype(at::kFloat));
  const std::vector<double> ms = MedianForwardBackwardMs(
      {[&] { return chunked_cross_entropy(logits, targets, weights); },
       [&] { return chunked_cross_entropy(logits, targets, weights, 16 * kLossChunkElements); },
       [&] { return at::cross_entropy_loss(logits.to(at::kFloat), targets); }},
      [&] { logits.mutable_grad() = at::Tensor(); }, options.device(), reps);
  std::printf("           loss fwd+bwd over %lldx%lld logits: chunked %.2f ms (chunks of 2^22 elements), %.2f ms "
              "(2^26), cross_entropy over a float32 copy %.2f ms\n",
              static_cast<long long>(N), static_cast<long long>(V), ms[0], ms[1], ms[2]);
}

// One RMSNorm alone, over random activations of a step's shape (N = B·T rows,
// C columns, the compute dtype): the model's (rms_norm.h: one autograd
// function, closed-form backward; or libtorch's fused kernel where it has
// one, then beside that function too) against the composite ops under
// autograd (what a plain PyTorch RMSNorm module does), the gradient of x and
// of the weight both asked for.
void PrintNormTimes(int64_t N, int64_t C, const at::TensorOptions& options, int reps) {
  at::Tensor x = at::randn({N, C}, options).requires_grad_(true);
  at::Tensor weight = at::ones({C}, options).requires_grad_(true);
  at::Tensor g = at::randn({N, C}, options);
  auto composite = [&] {
    at::Tensor xs = x.to(at::kFloat);
    at::Tensor y = weight * (xs * at::rsqrt(xs.pow(2).mean({-1}, true) + 1e-5)).to(x.scalar_type());
    return (y * g).sum();
  };
  const bool aten_fused = compat::AtenFusedRmsNormAvailable(x, weight);
  std::vector<std::function<at::Tensor()>> variants = {[&] { return (rms_norm(x, weight, 1e-5) * g).sum(); },
                                                       composite};
  if (aten_fused) variants.push_back([&] { return (rms_norm_closed_form(x, weight, 1e-5) * g).sum(); });
  const std::vector<double> ms = MedianForwardBackwardMs(
      variants,
      [&] {
        x.mutable_grad() = at::Tensor();
        weight.mutable_grad() = at::Tensor();
      },
      options.device(), reps);
  const std::string closed_form = aten_fused ? fmt::format("one autograd function {:.2f} ms, ", ms[2]) : "";
  std::printf("           RMSNorm fwd+bwd over %lldx%lld: %.2f ms (%s), %scomposite ops %.2f ms\n",
              static_cast<long long>(N), static_cast<long long>(C), ms[0],
              aten_fused ? "libtorch's fused kernel" : "one autograd function", closed_form.c_str(), ms[1]);
}

// SwiGLU's gating alone, over random gate and up of a step's shape (N = B·T
// rows, F columns, the compute dtype): the model's (swiglu.h: one autograd
// function keeping gate and up, silu recomputed in backward) against
// silu(gate)·up under autograd.
void PrintGatingTimes(int64_t N, int64_t F, const at::TensorOptions& options, int reps) {
  at::Tensor gate = at::randn({N, F}, options).requires_grad_(true);
  at::Tensor up = at::randn({N, F}, options).requires_grad_(true);
  at::Tensor g = at::randn({N, F}, options);
  const std::vector<double> ms = MedianForwardBackwardMs(
      {[&] { return (swiglu(gate, up) * g).sum(); }, [&] { return (at::silu(gate) * up * g).sum(); }},
      [&] {
        gate.mutable_grad() = at::Tensor();
        up.mutable_grad() = at::Tensor();
      },
      options.device(), reps);
  std::printf("           SiLU(gate)·up fwd+bwd over %lldx%lld: %.2f ms (one autograd function), composite ops %.2f ms\n",
              static_cast<long long>(N), static_cast<long long>(F), ms[0], ms[1]);
}

Figures BenchPreset(const std::string& preset, const Options& o, const at::TensorOptions& device) {
  Figures figures;
  auto config = PresetConfig(preset);
  if (!config.ok()) {
    std::printf("%s: %s\n", preset.c_str(), config.status().message().c_str());
    return figures;
  }
  ModelConfig c = config.value();
  int64_t seq = std::min(o.seq, c.max_seq_len);
  if (device.device().is_cuda()) compat::CudaResetPeakMemory();
  Model model = model_create(c, device);
  if (device.device().is_cuda()) {
    // Drawn on the device: the host's one generator takes about half a minute for a 7B model's
    // 6.7 G draws, a GPU lease's scarce time; the figures do not depend on the values (HF's
    // initializer_range, gains at 1, as model_init_random).
    at::manual_seed(1234);
    c10::NoGradGuard no_grad;
    for (const NamedParameter& p : model_parameters(model)) {
      if (p.shape.size() == 1) p.tensor->fill_(1.0);
      else p.tensor->normal_(0.0, 0.02);
    }
  } else {
    model_init_random(model, 1234);
  }
  std::shared_ptr<LoraAdapters> lora;
  if (o.quant == "nf4") {
    model_quantize_nf4(model, o.double_quant);
    lora = std::make_shared<LoraAdapters>(lora_create(c, 8, 16, 1234, device.device()));
    if (Status s = model_attach_lora(model, lora); !s.ok()) {
      std::printf("%s: %s\n", preset.c_str(), s.message().c_str());
      return figures;
    }
    std::printf("%-10s NF4%s projections: %.2f GiB of codes and scales; LoRA rank 8 (%lld parameters)\n",
                preset.c_str(), o.double_quant ? " (double quant)" : "",
                static_cast<double>(nf4_weight_bytes(model)) / (1024.0 * 1024.0 * 1024.0),
                static_cast<long long>(lora_parameter_count(c, 8)));
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(3, static_cast<int>(c.vocab_size) - 1);

  // With --profile, the training step runs once more under the profiler at the very end, after
  // every timed figure, the decode's included (a profiler may leave the device's tracing hooks
  // costing something afterwards); the generation's profile ends the decode's section.
  std::function<double()> profiled_step;

  // ---- training: random tokens, every target counted ----
  if (o.train) {
    auto data = std::make_shared<std::vector<Sequence>>(o.batch);
    for (auto& s : *data) {
      s.tokens.resize(seq + 1);
      for (int& t : s.tokens) t = token(rng);
      s.mask.assign(seq, 1);  // one flag per target (Sequence contract)
    }
    std::vector<const Sequence*> batch;
    for (const auto& s : *data) batch.push_back(&s);
    TrainOptions train;
    train.batch_size = o.batch;
    train.checkpoint_every = o.recompute;
    auto optimizer_owner = std::make_shared<AdamW>(lora ? lora_trainable(*lora) : model_trainable(model), train);
    AdamW& optimizer = *optimizer_owner;
    for (int i = 0; i < o.warmup; ++i) train_step(model, optimizer, batch, train, 1e-4);
    compat::DeviceSynchronize(device.device());
    double start = Now();
    double loss = 0;
    for (int i = 0; i < o.steps; ++i) loss = train_step(model, optimizer, batch, train, 1e-4).loss;
    compat::DeviceSynchronize(device.device());
    double step_seconds = (Now() - start) / o.steps;
    figures.step_seconds = step_seconds;
    double tokens_per_second = o.batch * seq / step_seconds;
    const double flops = c.TrainingFlopsPerToken(seq);
    double gflops = AchievedTflops(flops, tokens_per_second) * 1e3;
    std::printf("%-10s params %6.1f M  train%s B=%lld T=%lld: %8.3f s/step  %9.0f tokens/s  %9.1f GFLOP/s  (loss %.3f)\n",
                preset.c_str(), c.ParameterCount() / 1e6, lora ? " (QLoRA)" : "", static_cast<long long>(o.batch),
                static_cast<long long>(seq), step_seconds, tokens_per_second, gflops, loss);
    if (device.device().is_cuda()) {
      const std::string name = compat::CudaDeviceName();
      if (auto peak = PeakBf16Tflops(name)) {
        std::printf("           MFU %.1f %% of %.0f TFLOP/s (%s; 6·(N−N_emb) + 12·L·H·Q·T FLOPs/token)\n",
                    100 * gflops / 1e3 / *peak, *peak, name.c_str());
        if (lora) {
          // Frozen base: forward (2·N) + input gradients (2·N), no weight gradients.
          const double frozen = c.FrozenBaseTrainingFlopsPerToken(seq);
          std::printf("           frozen-base FLOPs (4·(N−N_emb) + 12·L·H·Q·T): MFU %.1f %%\n",
                      100 * AchievedTflops(frozen, tokens_per_second) / *peak);
        }
      } else {
        std::printf("           no MFU: '%s' is not in device_peak.cc's table\n", name.c_str());
      }
    }
    PrintDeviceMemory(device.device());
    if (!lora) PrintLossTimes(o.batch * seq, c.vocab_size, device, 5);
    if (!lora) PrintNormTimes(o.batch * seq, c.dim, device, 5);
    if (!lora) PrintGatingTimes(o.batch * seq, c.hidden_dim, device, 5);
    profiled_step = [&model, data, optimizer_owner, batch, train] {
      (void)train_step(model, *optimizer_owner, batch, train, 1e-4);
      return 1.0;
    };
  }

  // ---- single-stream greedy decode with the KV cache ----
  if (o.decode > 0) {
    c10::NoGradGuard no_grad;
    std::vector<int> prompt(o.prompt);
    for (int& t : prompt) t = token(rng);
    GenerateOptions g;
    g.max_new_tokens = std::min<int64_t>(o.decode, c.max_seq_len - o.prompt);
    g.ignore_eos = true;
    g.decode_step = o.decode_step == "graph"    ? DecodeStep::kCudaGraph
                    : o.decode_step == "device" ? DecodeStep::kDevicePosition
                                                : DecodeStep::kHostPosition;
    // Seconds per token of a warmed-up generation, decoded as a schedule of requests is: into a
    // decode bucket kept between generations (with a CUDA graph, the warm-up records it and the
    // timed generation replays it).
    int64_t host_reads = 0;  // of the timed generation: waits of the host for the device
    auto decode = [&](const Model& m, size_t* generated, DecodeBuckets& buckets) {
      (void)generate_greedy(m, prompt, g, nullptr, &buckets);  // warm-up
      compat::DeviceSynchronize(device.device());
      double start = Now();
      auto generation = generate_greedy(m, prompt, g, nullptr, &buckets);
      compat::DeviceSynchronize(device.device());
      const double seconds = Now() - start;
      *generated = generation.ok() ? generation->tokens.size() : 0;
      host_reads = generation.ok() ? generation->host_reads : 0;
      return seconds / static_cast<double>(std::max<size_t>(*generated, 1));
    };
    // A 4-bit model decodes as an inference case serves it: the NF4 base, no adapters (the QLoRA
    // adapters above are for its training step).
    Model decoded = model;
    if (lora) (void)model_attach_lora(decoded, nullptr);
    size_t generated = 0;
    DecodeBuckets decoded_buckets;  // kept for the profiled generation at the end
    const double per_token = decode(decoded, &generated, decoded_buckets);
    figures.decode_seconds_per_token = per_token;
    const double seconds = per_token * static_cast<double>(generated);
    std::printf("%-10s params %6.1f M  decode%s prompt=%lld new=%zu: %8.4f s/token  %9.1f tokens/s  %lld host read(s), "
                "step: position on the %s\n",
                preset.c_str(), c.ParameterCount() / 1e6, lora ? " (4-bit, no adapters)" : "",
                static_cast<long long>(o.prompt), generated, per_token, 1.0 / per_token,
                static_cast<long long>(host_reads),
                o.decode_step == "graph" ? "device, CUDA graph" : o.decode_step == "device" ? "device" : "host");
    {
      // The host's cost of a decode step: the ATen ops one decoder layer dispatches at one position
      // (at the host's position), or the whole step (model_decode_step: every layer and the head) at
      // the device's, the step a CUDA graph records once.
      c10::InferenceMode inference;
      KvCache cache = kv_cache_create(decoded, 1, o.prompt + 1);
      std::vector<int64_t> ids(prompt.begin(), prompt.end());
      (void)model_forward(decoded, at::tensor(ids, at::kLong).view({1, o.prompt}).to(device.device()), &cache);
      const at::Tensor token = at::tensor(std::vector<int64_t>{ids.back()}, at::kLong).view({1, 1}).to(device.device());
      if (o.decode_step == "host") {
        at::Tensor x = embed_forward(decoded.embed, token);
        const RopeRows rope = rope_rows(decoded, cache.length, 1, x.scalar_type());
        compat::OpCounter counter;
        (void)decoder_layer_forward(decoded, 0, decoded.layers[0], x, rope, &cache, cache.length);
        std::printf("           ops per decode layer %lld (%s)\n", static_cast<long long>(counter.total()),
                    counter.Describe().c_str());
      } else {
        const at::Tensor pos = at::full({1}, cache.length, at::TensorOptions().dtype(at::kLong).device(device.device()));
        compat::OpCounter counter;
        (void)model_decode_step(decoded, token, pos, cache);
        std::printf("           ops per decode step %lld over %lld layers and the head, position on the device%s (%s)\n",
                    static_cast<long long>(counter.total()), static_cast<long long>(c.n_layers),
                    o.decode_step == "graph" ? ", recorded once as a CUDA graph" : "", counter.Describe().c_str());
      }
    }
    if (lora) {
      // As the backends serve a 4-bit model: the dequantized projections kept when they fit.
      Model served = decoded;
      const std::string how = nf4_prepare_inference(served, device.device(), device.dtype().toScalarType(), o.double_quant);
      if (!model_nf4(served)->dequantized.empty()) {
        size_t n = 0;
        DecodeBuckets served_buckets;
        figures.decode_kept_seconds_per_token = decode(served, &n, served_buckets);
        std::printf("%-10s params %6.1f M  decode (4-bit, kept) prompt=%lld new=%zu: %8.4f s/token  %9.1f tokens/s\n",
                    preset.c_str(), c.ParameterCount() / 1e6, static_cast<long long>(o.prompt), n,
                    figures.decode_kept_seconds_per_token, 1.0 / figures.decode_kept_seconds_per_token);
      }
      std::printf("           served as: %s\n", how.c_str());
    }
    if (device.device().is_cuda() && generated > 0) {
      // Memory roofline of single-stream decode: every weight byte is read once per token.
      double weight_bytes = 0;
      for (const NamedParameter& p : model_parameters(model))
        if (p.tensor->defined()) weight_bytes += static_cast<double>(p.tensor->numel() * p.tensor->element_size());
      if (lora) weight_bytes += static_cast<double>(nf4_weight_bytes(model));
      const double achieved_gb_per_s = weight_bytes * generated / seconds / 1e9;
      std::printf("           weights read per token %.2f GB; achieved %.0f GB/s of weight traffic\n",
                  weight_bytes / 1e9, achieved_gb_per_s);
      const std::string name = compat::CudaDeviceName();
      if (const DeviceFigures* card = FindCudaDevice(name)) {
        std::printf("           %.1f %% of the card's %.0f GB/s memory bandwidth (%s; datasheet)\n",
                    100 * achieved_gb_per_s / card->memory_gb_per_s, card->memory_gb_per_s, name.c_str());
      } else {
        std::printf("           no share of bandwidth: '%s' is not in device_peak.cc's table\n", name.c_str());
      }
    }
    PrintDeviceMemory(device.device());
    if (o.profile > 0) {  // one more generation, in the timed one's bucket
      PrintProfile(o, device.device(), [&] {
        auto generation = generate_greedy(decoded, prompt, g, nullptr, &decoded_buckets);
        return generation.ok() ? static_cast<double>(generation->tokens.size()) : 0.0;
      }, "token");
    }
  }
  if (o.profile > 0 && profiled_step) PrintProfile(o, device.device(), profiled_step, "step");
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  native::compat::TurnOffCudnn();  // as protocol-native does at its start
  Options o;
  for (BenchArgs args(argc, argv, 1); args.Next();) {
    const std::string& a = args.flag();
    if (a == "--presets") o.presets = Split(args.Value(), ',');
    else if (a == "--steps") o.steps = std::atoi(args.Value().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(args.Value().c_str());
    else if (a == "--batch") o.batch = std::atoll(args.Value().c_str());
    else if (a == "--seq") o.seq = std::atoll(args.Value().c_str());
    else if (a == "--decode") o.decode = std::atoll(args.Value().c_str());
    else if (a == "--recompute") o.recompute = std::atoll(args.Value().c_str());
    else if (a == "--device") o.device = args.Value();
    else if (a == "--dtype") o.dtype = args.Value();
    else if (a == "--quant") o.quant = args.Value();
    else if (a == "--double-quant") o.double_quant = true;
    else if (a == "--no-train") o.train = false;
    else if (a == "--vs-fp32") o.vs_fp32 = true;
    else if (a == "--cuda-fused-ops") o.cuda_fused_ops = true;
    else if (a == "--decode-step") o.decode_step = args.Value();
    else if (a == "--profile") o.profile = std::atoi(args.Value().c_str());
    else {
      std::fprintf(stderr,
                   "usage: protocol_bench [--presets a,b] [--steps N] [--warmup N] [--batch B] [--seq T]\n"
                   "                      [--decode N (0: no decode)] [--no-train] [--device auto|cpu|cuda]\n"
                   "                      [--dtype bf16|fp32] [--quant nf4] [--double-quant] [--vs-fp32]\n"
                   "                      [--recompute N (layer l recomputed when l %% N == 0; 1 default, 0 none)]\n"
                   "                      [--cuda-fused-ops (decode through the fused ops' CUDA kernels and,\n"
                   "                       4-bit, the batch-1 GEMV)]\n"
                   "                      [--decode-step host|device|graph (the decode step's position on the\n"
                   "                       host, on the device, or on the device and replayed as a CUDA graph)]\n"
                   "                      [--profile N (after the timed runs, one more training step and\n"
                   "                       generation under libtorch's profiler: the N longest kernels and\n"
                   "                       host ops of each, and the share of the window the device was busy)]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  const bool cuda = o.device == "cuda" || (o.device == "auto" && compat::CudaAvailable());
  if (cuda && !compat::CudaAvailable()) {
    std::fprintf(stderr, "--device cuda: this build or machine has no CUDA device\n");
    return 2;
  }
  if (!o.quant.empty() && o.quant != "nf4") {
    std::fprintf(stderr, "--quant: only nf4 is built\n");
    return 2;
  }
  if (o.cuda_fused_ops && !(cuda && native::fused::SetCudaKernels(true))) {
    std::fprintf(stderr, "--cuda-fused-ops: %s\n",
                 cuda ? "this build has no CUDA kernels (no CUDA compiler at configure)" : "needs --device cuda");
    return 2;
  }
  if (o.decode_step != "host" && o.decode_step != "device" && o.decode_step != "graph") {
    std::fprintf(stderr, "--decode-step: host, device or graph\n");
    return 2;
  }
  if (o.decode_step == "graph" && !cuda) {
    std::fprintf(stderr, "--decode-step graph: needs --device cuda\n");
    return 2;
  }
  const std::string dtype = o.dtype.empty() ? (cuda ? "bf16" : "fp32") : o.dtype;
  if (dtype != "bf16" && dtype != "fp32") {
    std::fprintf(stderr, "--dtype: bf16 or fp32\n");
    return 2;
  }
  // As the fsdp backend does: one intra-op thread per hardware thread.
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  at::TensorOptions device = at::TensorOptions()
                                .dtype(dtype == "bf16" ? at::kBFloat16 : at::kFloat)
                                .device(cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU));
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("load average %.2f (figures are contended when it exceeds the core count)\n", load[0]);
  std::printf("libtorch %s, %d threads, device %s%s%s, dtype %s%s\n", compat::TorchVersion().c_str(),
              at::get_num_threads(), device.device().str().c_str(), cuda ? " " : "",
              cuda ? compat::CudaDeviceName().c_str() : "", dtype.c_str(),
              cuda ? (o.cuda_fused_ops ? ", fused decode ops: CUDA kernels" : ", fused decode ops: off (composite)") : "");
  std::vector<std::string> blas = LoadedBlas();
  std::printf("BLAS loaded: %s\n", blas.empty() ? "(none found by name)" : Join(blas, ", ").c_str());
  for (const auto& preset : o.presets) {
    if (!(o.vs_fp32 && o.quant == "nf4")) {
      BenchPreset(preset, o, device);
      continue;
    }
    // The 4-bit model against the same preset in full precision (same seed, shapes, threads).
    Options full = o;
    full.quant.clear();
    const Figures f = BenchPreset(preset, full, device);
    const Figures q = BenchPreset(preset, o, device);
    if (f.step_seconds > 0 && q.step_seconds > 0)
      std::printf("%-10s 4-bit / full precision: QLoRA step %.2fx the full training step\n", preset.c_str(),
                  q.step_seconds / f.step_seconds);
    if (f.decode_seconds_per_token > 0 && q.decode_seconds_per_token > 0)
      std::printf("%-10s 4-bit / full precision: decode %.2fx dequantized on use%s\n", preset.c_str(),
                  q.decode_seconds_per_token / f.decode_seconds_per_token,
                  q.decode_kept_seconds_per_token > 0
                      ? fmt::format(", {:.2f}x kept", q.decode_kept_seconds_per_token / f.decode_seconds_per_token).c_str()
                      : "");
  }
  return 0;
}
