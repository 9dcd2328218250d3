#include "backends/native/fsdp_backend.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backends/native/training/data.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/model/generate.h"
#include "backends/native/platform/host_memory.h"
#include "backends/native/model/model.h"
#include "backends/native/memory_estimate.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/model_resolve.h"
#include "backends/native/native_check.h"
#include "backends/native/model/placement.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/model/tokenizer.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/train.h"
#include "runner/base/text.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using namespace native;  // NOLINT: this file is the native backend

constexpr double kEvalFraction = 0.05;  // share of packed sequences held out for eval_loss

// Appends lines to the case log.
class CaseLog {
 public:
  explicit CaseLog(const std::string& path) {
    if (!path.empty()) out_.open(path, std::ios::app);
  }
  template <typename... Args>
  void Line(fmt::format_string<Args...> f, Args&&... args) {
    if (out_) out_ << fmt::format(f, std::forward<Args>(args)...) << '\n' << std::flush;
  }

 private:
  std::ofstream out_;
};

// Everything a case needs, resolved from the plan.
struct Setup {
  ModelConfig config;
  std::string config_source;  // ResolvedModel::config_source
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  std::shared_ptr<LoraAdapters> lora;  // QLoRA finetune of a 4-bit model: what is trained and saved
  std::string devices_text;            // where the model runs, for method texts: "cpu", "cuda:0", "8 GPUs (balanced)"
};

Result<Setup> Resolve(const Plan& plan, const CaseSpec& spec) {
  auto model_it = plan.models.find(spec.model);
  if (model_it == plan.models.end()) return Status::InvalidArgument(fmt::format("unknown model '{}'", spec.model));
  ModelSpec ms = model_it->second;
  ms.path = plan.ResolvePath(ms.path);  // relative to the plan's directory
  Setup s;
  Result<ResolvedModel> model = ResolveModel(ms.name, ms.preset, ms.path);
  if (!model.ok()) return model.status();
  s.config = model->config;
  s.config_source = model->config_source;
  s.tokenizer_path = model->tokenizer_path;
  s.tokenizer = std::move(model->tokenizer);
  const DeviceChoice device = spec.training.device;
  if (device == DeviceChoice::kCuda && !compat::CudaAvailable())
    return Status::InvalidArgument("device 'cuda' was asked for but this build/machine has no CUDA device");
  if (device == DeviceChoice::kCuda || (device == DeviceChoice::kAuto && compat::CudaAvailable())) {
    s.device = at::Device(at::kCUDA, 0);
    s.dtype = at::kBFloat16;
  }
  return s;
}

class NativeFsdpBackend : public Backend {
 public:
  explicit NativeFsdpBackend(native::DistOptions options) : options_(std::move(options)) {}

  std::vector<std::string> Check(const Plan& plan, const CaseSpec& spec) const override {
    std::vector<std::string> problems;
    // Messages carry no location: callers (validate, the runner) add the case's.
    const std::string where;
    auto model_it = plan.models.find(spec.model);
    if (model_it == plan.models.end()) {
      problems.push_back(where + "unknown model '" + spec.model + "'");
    } else {
      const ModelSpec& ms = model_it->second;
      if (ms.preset.empty() && ms.path.empty())
        problems.push_back(where + "model '" + ms.name + "' needs a preset or a path for the fsdp backend");
      if (!ms.preset.empty() && !PresetConfig(ms.preset).ok() && ms.path.empty())
        problems.push_back(where + PresetConfig(ms.preset).status().message());
    }
    if (spec.workload != Workload::kInference) {
      auto ds = plan.datasets.find(spec.dataset);
      if (spec.dataset.empty() || ds == plan.datasets.end()) {
        problems.push_back(where + "a training workload needs a dataset");
      } else if (ds->second.format != "text" && ds->second.format != "jsonl" && ds->second.format != "dolly") {
        std::string hint =
            ds->second.format == "parquet"
                ? "; no parquet reader is packaged for Debian, so convert it to jsonl with a `text` "
                  "field first, e.g. duckdb -c \"COPY (SELECT text FROM 'DIR/*.parquet') TO "
                  "'out.jsonl' (FORMAT JSON)\" (docs/native.md)"
                : "";
        problems.push_back(where + "dataset '" + ds->first + "' has format '" + ds->second.format +
                           "', which the fsdp backend cannot read (text, jsonl, dolly)" + hint);
      }
      if (!spec.length || spec.length->count <= 0) problems.push_back(where + "a training workload needs a length");
      if (spec.training.batch_size <= 0 || spec.training.seq_len <= 0 || spec.training.grad_accum <= 0 ||
          spec.training.batch_size % spec.training.grad_accum != 0)
        problems.push_back(where + "training needs batch_size, seq_len, grad_accum > 0 and batch_size divisible by grad_accum");
    } else if (spec.inference.max_new_tokens.empty()) {
      problems.push_back(where + "an inference workload needs max_new_tokens values");
    }
    if (!spec.topology.empty()) problems.push_back(where + "the fsdp backend takes `nodes`, not a topology (that is the share backend's)");
    if (auto layout = native::FsdpLayout(plan, spec); !layout.ok()) {
      problems.push_back(where + layout.status().message());
    } else if (layout->world() > 1) {
      for (std::string& p : native::CheckDistributed(plan, spec, *layout)) problems.push_back(where + p);
    }
    for (std::string& p : native_check_errors(plan, spec, NativeRole::kFsdp)) problems.push_back(where + p);
    return problems;
  }

  std::optional<CaseResources> Resources(const Plan& plan, const CaseSpec& spec) const override {
    return native::native_case_resources(plan, spec, native::NativeRole::kFsdp);
  }

  CaseAdvice Advise(const Plan& plan, const CaseSpec& spec) const override {
    return native_advise(plan, spec, NativeRole::kFsdp);
  }

  BackendOutcome Run(BackendContext& ctx) override {
    try {
      return RunCase(ctx);
    } catch (const std::exception& e) {  // libtorch errors (out of memory, shape bugs) are data too
      return FailedOutcome(CaseStatus::kFailed, std::string("libtorch error: ") + e.what());
    }
  }

 private:
  BackendOutcome RunCase(BackendContext& ctx) {
    const CaseSpec& spec = ctx.spec;
    auto model_it = ctx.plan.models.find(spec.model);
    const bool nf4 = model_it != ctx.plan.models.end() && model_it->second.quantization == Quantization::kNf4;
    // What validate reports as an error or a "a run fails" warning is refused here, from the same
    // function (native_check.h): a 4-bit pretrain without weights, 4-bit training on more than
    // one rank.
    if (std::string refusal = native_run_refusal(ctx.plan, spec, NativeRole::kFsdp); !refusal.empty())
      return FailedOutcome(CaseStatus::kFailed, refusal + "; nothing was run");
    if (!spec.topology.empty()) return FailedOutcome(CaseStatus::kFailed, "the fsdp backend takes `nodes`, not a topology");
    auto layout = native::FsdpLayout(ctx.plan, spec);
    if (!layout.ok()) return FailedOutcome(CaseStatus::kFailed, layout.status().message());
    // Training on more than one rank, and inference over several nodes, run as rank workers.
    // Inference on one node is one process: on CUDA the model is spread over the node's GPUs
    // (the baseline's "balanced" placement, placement.h).
    const bool one_process_inference = spec.workload == Workload::kInference && spec.nodes <= 1;
    if (layout->world() > 1 && !one_process_inference)
      return native::RunDistributed(ctx, NativeRole::kFsdp, *layout, options_);
    CaseLog log(ctx.log_path);
    auto setup = Resolve(ctx.plan, spec);
    if (!setup.ok()) {
      log.Line("fsdp: cannot start: {}", setup.status().message());
      return FailedOutcome(CaseStatus::kFailed, setup.status().message());
    }
    // Threads: the same rule as for ranks (training.threads; one rank on this host).
    if (setup->device.is_cpu()) at::set_num_threads(native::ThreadsPerRank(spec.training, 1));
    log.Line("fsdp: case {} ({}), one process, device {}, dtype {}, {} threads, libtorch {}", spec.id,
             WorkloadName(spec.workload), setup->device.str(), std::string(c10::toString(setup->dtype)),
             at::get_num_threads(), compat::TorchVersion());
    log.Line("fsdp: model from {}: dim {} layers {} heads {} kv_heads {} ffn {} vocab {} ({} parameters)",
             setup->config_source, setup->config.dim, setup->config.n_layers, setup->config.n_heads,
             setup->config.n_kv_heads, setup->config.hidden_dim, setup->config.vocab_size,
             setup->config.ParameterCount());
    if (setup->device.is_cuda()) compat::CudaResetPeakMemory();

    // Weights: pretraining starts blank, except a 4-bit pretrain (QLoRA continued pretraining of the
    // path's weights, checked above); the others load the path's weights when present.
    ModelSpec ms = model_it->second;
    ms.path = ctx.plan.ResolvePath(ms.path);
    // Inference on one node of several GPUs: the model spread over them (placement.h).
    std::vector<at::Device> devices = {setup->device};
    if (one_process_inference && setup->device.is_cuda()) {
      const auto on_node = std::count(layout->rank_nodes.begin(), layout->rank_nodes.end(), layout->rank_nodes.front());
      const int gpus = std::min(static_cast<int>(on_node), static_cast<int>(at::getNumGPUs()));
      for (int d = 1; d < gpus; ++d) devices.push_back(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(d)));
    }
    const LayerPlacement placement = inference_placement(setup->config, c10::elementSize(setup->dtype), nf4,
                                                         ms.double_quant, static_cast<int>(devices.size()));
    Model model = placement.devices > 1
                      ? model_create_placed(setup->config, setup->dtype, devices, placement)
                      : model_create(setup->config, at::TensorOptions().dtype(setup->dtype).device(setup->device));
    setup->devices_text = setup->device.str();
    if (placement.devices > 1) {
      setup->devices_text = fmt::format("{} GPUs (model placed balanced, whole layers)", placement.devices);
      std::vector<std::string> counts;
      for (int n : placement.device_layers) counts.push_back(std::to_string(n));
      log.Line("fsdp: model placed over {} devices (balanced: decoder layers {} per device)", placement.devices,
               Join(counts, "/"));
    }
    std::string weights_note;
    const WeightsSource source = native_weights_source(spec.workload, nf4, ms.init_random, ms.path);
    if (source == WeightsSource::kPath) {
      Status s = model_load_weights(model, ms.path);
      if (!s.ok()) return FailedOutcome(CaseStatus::kFailed, s.message());
      log.Line("fsdp: weights loaded from {}", ms.path);
    } else if (source == WeightsSource::kMissing) {  // Check refuses it first; never run on weights nobody asked for
      return FailedOutcome(CaseStatus::kFailed, native_run_refusal(ctx.plan, spec, NativeRole::kFsdp));
    } else {
      model_init_random(model, static_cast<uint64_t>(spec.training.seed));
      if (std::string note = native_weights_note(source, spec.training.seed); !note.empty()) weights_note = "weights: " + note;
      log.Line("fsdp: weights: seeded random initialisation (seed {})", spec.training.seed);
    }

    // 4-bit: the decoder projections become NF4 (quantized_model.h); finetune (QLoRA) and pretrain
    // (QLoRA continued pretraining) train LoRA adapters on them.
    std::string quant_note;
    if (nf4) {
      model_quantize_nf4(model, ms.double_quant);
      if (spec.workload == Workload::kInference)
        quant_note = nf4_prepare_inference(model, setup->device, setup->dtype, ms.double_quant);
      if (spec.workload != Workload::kInference) {
        setup->lora = std::make_shared<LoraAdapters>(lora_create(setup->config, spec.training.LoraRank(),
                                                                 spec.training.LoraAlpha(),
                                                                 static_cast<uint64_t>(spec.training.seed), setup->device));
        Status s = model_attach_lora(model, setup->lora);
        if (!s.ok()) return FailedOutcome(CaseStatus::kFailed, s.message());
        quant_note = qlora_method(*setup->lora,
                                  spec.workload == Workload::kPretrain ? QloraKind::kContinuedPretraining
                                                                       : QloraKind::kFinetune,
                                  ms.double_quant, spec.training.lora_freeze_a);
      }
      log.Line("fsdp: {} ({} bytes of 4-bit projection weights)", quant_note, nf4_weight_bytes(model));
    }

    BackendOutcome out = spec.workload == Workload::kInference ? RunInference(ctx, *setup, model, log)
                                                               : RunTraining(ctx, *setup, model, log);
    if (out.status == CaseStatus::kOk || !out.measurements.empty()) {
      out.measurements.push_back(MeasuredFigure(metric::kPeakHostRss, static_cast<double>(PeakRssBytes()), "bytes",
                                         "getrusage ru_maxrss of the runner process (peak since it started)"));
      if (auto peak = compat::CudaPeakMemoryBytes())
        out.measurements.push_back(MeasuredFigure(metric::kPeakDeviceMemory, static_cast<double>(*peak), "bytes",
                                           "CUDA caching allocator peak allocated bytes during the case"));
    }
    // Every measurement, the peak memory included, says what ran (4-bit, QLoRA) and on which weights.
    if (!quant_note.empty())
      for (Measurement& m : out.measurements) m.method = m.method.empty() ? quant_note : m.method + "; " + quant_note;
    if (!weights_note.empty())
      for (Measurement& m : out.measurements) m.method = m.method.empty() ? weights_note : m.method + "; " + weights_note;
    out.facts = {{fact::kRanks, "1"},
                 {fact::kThreadsPerRank, std::to_string(at::get_num_threads())},
                 {fact::kDevice, devices.size() > 1 ? fmt::format("{} GPUs (layers placed)", devices.size())
                                                    : setup->device.str()},
                 {fact::kDtype, compat::DtypeName(setup->dtype)}};
    if (spec.workload == Workload::kInference) out.facts.push_back({fact::kDecoding, native::kDecodingText});
    log.Line("fsdp: {}{}", out.status == CaseStatus::kOk ? "done" : "ended", out.reason.empty() ? "" : ": " + out.reason);
    return out;
  }

  // Returns the reason to stop between steps, if any.
  static std::optional<BackendOutcome> ShouldStop(BackendContext& ctx, double start, const std::string& where) {
    if (ctx.stop.requested()) return FailedOutcome(CaseStatus::kInterrupted, "stopped by request " + where);
    if (ctx.spec.timeout_seconds > 0 && ctx.clock.NowSeconds() - start > ctx.spec.timeout_seconds)
      return FailedOutcome(CaseStatus::kTimeout,
                  fmt::format("exceeded the case's timeout of {} s {}", ctx.spec.timeout_seconds, where));
    return std::nullopt;
  }

  BackendOutcome RunTraining(BackendContext& ctx, Setup& setup, Model& model, CaseLog& log) {
    const CaseSpec& spec = ctx.spec;
    const double start = ctx.clock.NowSeconds();
    const TrainingSettings& ts = spec.training;
    // ---- data -------------------------------------------------------------
    DatasetSpec ds = ctx.plan.datasets.at(spec.dataset);
    ds.path = ctx.plan.ResolvePath(ds.path);
    auto docs = data_load(ds.path, ds.format, *setup.tokenizer);
    if (!docs.ok()) return FailedOutcome(CaseStatus::kFailed, docs.status().message());
    // QLoRA continued pretraining: the causal-LM loss counts every token (an instruction
    // dataset's prompt tokens too; text and jsonl datasets count every token already).
    if (setup.lora && spec.workload == Workload::kPretrain)
      for (Document& d : *docs) std::fill(d.loss_mask.begin(), d.loss_mask.end(), 1);
    const int pad = setup.tokenizer->eos_id() >= 0 ? setup.tokenizer->eos_id() : 0;
    DataSplit split = data_split(data_pack(*docs, ts.seq_len, pad), kEvalFraction, static_cast<uint64_t>(ts.seed));
    if (split.train.empty()) return FailedOutcome(CaseStatus::kFailed, fmt::format("{}: the dataset has no tokens", ds.path));
    const int64_t steps_per_epoch = (static_cast<int64_t>(split.train.size()) + ts.batch_size - 1) / ts.batch_size;
    const int64_t steps = spec.length->unit == Length::Unit::kSteps ? spec.length->count
                                                                    : spec.length->count * steps_per_epoch;
    log.Line("fsdp: dataset {} ({}): {} train / {} eval sequences of {} tokens; {} steps of {} sequences",
             ds.path, ds.format, split.train.size(), split.eval.size(), ts.seq_len, steps, ts.batch_size);

    // ---- optimizer --------------------------------------------------------
    const TrainOptions o = train_options(ts, steps);
    AdamW optimizer(setup.lora ? lora_trainable(*setup.lora, ts.lora_freeze_a) : model_trainable(model), o);

    // ---- timed loop ---------------------------------------------------------
    uint64_t epoch = 0;
    size_t cursor = 0;
    std::vector<Sequence> order = split.train;
    double last_loss = 0, timed_seconds = 0;
    int64_t timed_tokens = 0, timed_steps = 0;
    for (int64_t step = 0; step < steps; ++step) {
      if (auto stop = ShouldStop(ctx, start, fmt::format("at step {} of {}", step, steps))) return *stop;
      std::vector<const Sequence*> batch;
      for (int64_t i = 0; i < ts.batch_size; ++i) {
        if (cursor == order.size()) {  // next epoch: a new seeded order
          cursor = 0;
          data_shuffle(order, static_cast<uint64_t>(ts.seed) + ++epoch);
        }
        batch.push_back(&order[cursor++]);
      }
      const double t0 = ctx.clock.NowSeconds();
      StepStats st = train_step(model, optimizer, batch, o, lr_at_step(step, steps, o));
      compat::DeviceSynchronize(setup.device);
      const double seconds = ctx.clock.NowSeconds() - t0;
      if (!std::isfinite(st.loss))
        return FailedOutcome(CaseStatus::kFailed, fmt::format("loss became {} at step {}", st.loss, step + 1));
      last_loss = st.loss;
      if (step >= spec.warmup_steps || steps <= spec.warmup_steps) {
        timed_seconds += seconds;
        timed_tokens += st.tokens;
        ++timed_steps;
      }
      StepSample sample;
      sample.step = step + 1;
      sample.seconds = seconds;
      sample.loss = st.loss;
      sample.tokens = st.tokens;
      ctx.events.OnStep(sample);
      ctx.events.OnStatusLine(fmt::format("step {}/{} loss {:.2f}", step + 1, steps, st.loss));
      log.Line("step {}/{} loss {:.4f} lr {:.3g} grad_norm {:.3f} {:.3f} s", step + 1, steps, st.loss, st.lr,
               st.grad_norm, seconds);
    }

    // ---- results --------------------------------------------------------------
    BackendOutcome out;
    out.measurements.push_back(MeasuredFigure(metric::kFinalLoss, last_loss, "", "training loss of the last step"));
    if (auto ev = eval_loss(model, split.eval, ts.batch_size))
      out.measurements.push_back(MeasuredFigure(metric::kEvalLoss, *ev, "",
                                         fmt::format("mean loss on {} held-out sequences", split.eval.size())));
    if (timed_seconds > 0) {
      const double tps = static_cast<double>(timed_tokens) / timed_seconds;
      const std::string how = fmt::format("{} tokens over {} steps after {} warm-up step(s), one process on {}",
                                          timed_tokens, timed_steps, spec.warmup_steps, setup.device.str());
      out.measurements.push_back(MeasuredFigure(metric::kTrainTokensPerSecond, tps, "tokens/s", how));
      out.measurements.push_back(MeasuredFigure(metric::kTgs, tps, "tokens/s",
                                         setup.device.is_cuda() ? how + " (one device)" : how + " (per process: CPU)"));
      if (setup.device.is_cuda()) {
        // A frozen 4-bit base has no weight gradients: 4(N−N_emb) instead of 6(N−N_emb).
        const double flops = setup.lora ? setup.config.FrozenBaseTrainingFlopsPerToken(ts.seq_len)
                                        : setup.config.TrainingFlopsPerToken(ts.seq_len);
        const double tflops = AchievedTflops(flops, tps);
        out.measurements.push_back(MeasuredFigure(metric::kTflops, tflops, "TFLOP/s",
                                                  setup.lora ? "4(N-N_emb)+12·L·H·Q·T FLOPs/token (PaLM, frozen base: no "
                                                               "weight gradients; LoRA FLOPs not counted) × tokens/s"
                                                             : "6(N-N_emb)+12·L·H·Q·T FLOPs/token (PaLM) × tokens/s"));
        const std::string name = compat::CudaDeviceName();
        if (auto peak = PeakBf16Tflops(name))
          out.measurements.push_back(MeasuredFigure(metric::kMfu, tflops / *peak, "",
                                             fmt::format("tflops / {} TFLOP/s dense bf16 peak of '{}'", *peak, name)));
      }
    }
    // ---- save -------------------------------------------------------------------
    if (!ctx.output_dir.empty()) {
      Status s = setup.lora ? lora_save(*setup.lora, ctx.output_dir, ctx.plan.ResolvePath(ctx.plan.models.at(spec.model).path))
                            : model_save(model, ctx.output_dir);
      if (!s.ok()) return FailedOutcome(CaseStatus::kFailed, s.message());
      std::error_code ec;
      fs::copy_file(setup.tokenizer_path, fs::path(ctx.output_dir) / "tokenizer.model",
                    fs::copy_options::overwrite_existing, ec);
      log.Line("fsdp: {} saved to {}", setup.lora ? "LoRA adapters" : "model", ctx.output_dir);
    }
    return out;
  }

  BackendOutcome RunInference(BackendContext& ctx, Setup& setup, Model& model, CaseLog& log) {
    const CaseSpec& spec = ctx.spec;
    const double start = ctx.clock.NowSeconds();
    std::vector<int> prompt = setup.tokenizer->Encode(spec.inference.prompt);
    if (setup.tokenizer->bos_id() >= 0) prompt.insert(prompt.begin(), setup.tokenizer->bos_id());
    double total_seconds = 0;
    int64_t generated = 0;
    const auto& schedule = spec.inference.max_new_tokens;
    for (size_t i = 0; i < schedule.size(); ++i) {
      if (auto stop = ShouldStop(ctx, start, fmt::format("at request {} of {}", i, schedule.size()))) return *stop;
      GenerateOptions o;
      o.max_new_tokens = schedule[i];
      o.ignore_eos = spec.inference.ignore_eos;
      const double t0 = ctx.clock.NowSeconds();
      auto g = generate_greedy(model, prompt, o, &ctx.stop);
      compat::DeviceSynchronize(setup.device);
      const double seconds = ctx.clock.NowSeconds() - t0;
      if (!g.ok()) return FailedOutcome(CaseStatus::kFailed, g.status().message());
      if (g->interrupted) return FailedOutcome(CaseStatus::kInterrupted, fmt::format("stopped by request at request {} of {}", i, schedule.size()));
      RequestSample r;
      r.index = static_cast<int>(i);
      r.max_new_tokens = schedule[i];
      r.prompt_tokens = static_cast<int>(prompt.size());
      r.generated_tokens = static_cast<int>(g->tokens.size());
      r.seconds = seconds;
      r.answer = setup.tokenizer->Decode(g->tokens);
      r.token_ids = g->tokens;
      ctx.events.OnRequest(r);
      ctx.events.OnStatusLine(fmt::format("request {}/{}: {} tokens in {:.2f} s", i + 1, schedule.size(),
                                          r.generated_tokens, seconds));
      log.Line("request {}/{} max_new_tokens {} generated {} in {:.3f} s", i + 1, schedule.size(), schedule[i],
               r.generated_tokens, seconds);
      total_seconds += seconds;
      generated += r.generated_tokens;
    }
    BackendOutcome out;
    const std::string how = fmt::format("{} greedy requests, KV cache, one process on {}", schedule.size(), setup.devices_text);
    out.measurements.push_back(MeasuredFigure(metric::kTotalGenerationSeconds, total_seconds, "s", "sum of request times; " + how));
    out.measurements.push_back(MeasuredFigure(metric::kGeneratedTokens, static_cast<double>(generated), "tokens", how));
    if (generated > 0 && total_seconds > 0) {
      out.measurements.push_back(MeasuredFigure(metric::kSecondsPerToken, total_seconds / static_cast<double>(generated), "s/token", how));
      out.measurements.push_back(MeasuredFigure(metric::kTokensPerSecond, static_cast<double>(generated) / total_seconds, "tokens/s", how));
    }
    return out;
  }

  native::DistOptions options_;
};

}  // namespace

std::unique_ptr<Backend> MakeNativeFsdpBackend() { return MakeNativeFsdpBackend(native::DistOptions{}); }
std::unique_ptr<Backend> MakeNativeFsdpBackend(const native::DistOptions& options) {
  return std::make_unique<NativeFsdpBackend>(options);
}

}  // namespace protocol
