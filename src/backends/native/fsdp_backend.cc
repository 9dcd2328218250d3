#include "backends/native/fsdp_backend.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backends/native/case_device.h"
#include "backends/native/case_weights.h"
#include "backends/native/eval_curve.h"
#include "backends/native/inference_request.h"
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
#include "backends/native/throughput.h"
#include "backends/native/training/train.h"
#include "backends/native/training/training_data.h"
#include "runner/base/text.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using namespace native;  // NOLINT: this file is the native backend

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
  auto device = ResolveCaseDevice(spec.training.device, /*local_rank=*/0);  // one process: cuda:0
  if (!device.ok()) return device.status();
  s.device = device->device;
  s.dtype = device->dtype;
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
      }  // its format and contents: native_case_issues
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

  TimeEstimate EstimateTime(const Plan& plan, const CaseSpec& spec,
                            const std::optional<HostCalibration>& host) const override {
    return native::native_case_time(plan, spec, NativeRole::kFsdp, host);
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

    std::vector<at::Device> devices;
    std::string quant_note, weights_note;
    auto model = PrepareModel(ctx, *layout, one_process_inference, *setup, log, devices, quant_note, weights_note);
    if (!model.ok()) return FailedOutcome(CaseStatus::kFailed, model.status().message());

    BackendOutcome out = spec.workload == Workload::kInference ? RunInference(ctx, *setup, *model, log)
                                                               : RunTraining(ctx, *setup, *model, log);
    if (out.status == CaseStatus::kOk || !out.measurements.empty()) {
      out.measurements.push_back(MeasuredFigure(metric::kPeakHostRss, static_cast<double>(PeakRssBytes()), "bytes",
                                         "getrusage ru_maxrss of the runner process (peak since it started)"));
      if (auto peak = compat::CudaPeakMemoryBytes())
        out.measurements.push_back(MeasuredFigure(metric::kPeakDeviceMemory, static_cast<double>(*peak), "bytes",
                                           "CUDA caching allocator peak allocated bytes during the case"));
    }
    // Every measurement, the peak memory included, says what ran (4-bit, QLoRA) and on which weights.
    NoteOnEveryMethod(out, quant_note);
    NoteOnEveryMethod(out, weights_note);
    out.facts = {{fact::kRanks, "1"}};
    for (auto& f : CaseFacts(at::get_num_threads(),
                             devices.size() > 1 ? fmt::format("{} GPUs (layers placed)", devices.size())
                                                : setup->device.str(),
                             setup->dtype, spec.workload))
      out.facts.push_back(std::move(f));
    log.Line("fsdp: {}{}", out.status == CaseStatus::kOk ? "done" : "ended", out.reason.empty() ? "" : ": " + out.reason);
    return out;
  }

  // The model on its device(s) with its weights: pretraining starts blank,
  // except a 4-bit pretrain (QLoRA continued pretraining of the path's weights,
  // checked before); the others load the path's weights when present (case_weights.h).
  // Inference on one node of several GPUs spreads the model over them
  // (placement.h). 4-bit: the decoder projections become NF4
  // (quantized_model.h); finetune (QLoRA) and pretrain (QLoRA continued
  // pretraining) train LoRA adapters on them. Sets `devices`, the note of
  // the quantization and that of the weights.
  static Result<Model> PrepareModel(BackendContext& ctx, const DistLayout& layout, bool one_process_inference,
                                    Setup& setup, CaseLog& log, std::vector<at::Device>& devices,
                                    std::string& quant_note, std::string& weights_note) {
    const CaseSpec& spec = ctx.spec;
    ModelSpec ms = ctx.plan.models.at(spec.model);
    ms.path = ctx.plan.ResolvePath(ms.path);
    const bool nf4 = ms.quantization == Quantization::kNf4;
    devices = {setup.device};
    if (one_process_inference && setup.device.is_cuda()) {
      const auto on_node = std::count(layout.rank_nodes.begin(), layout.rank_nodes.end(), layout.rank_nodes.front());
      const int gpus = std::min(static_cast<int>(on_node), static_cast<int>(at::getNumGPUs()));
      for (int d = 1; d < gpus; ++d) devices.push_back(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(d)));
    }
    const LayerPlacement placement = inference_placement(setup.config, c10::elementSize(setup.dtype), nf4,
                                                         ms.double_quant, static_cast<int>(devices.size()));
    // A 4-bit model is created without its projections: each is read, quantized and freed in turn.
    const ProjectionTensors projections = CaseProjectionTensors(nf4);
    Model model = placement.devices > 1
                      ? model_create_placed(setup.config, setup.dtype, devices, placement, projections)
                      : model_create(setup.config, at::TensorOptions().dtype(setup.dtype).device(setup.device),
                                     projections);
    setup.devices_text = setup.device.str();
    if (placement.devices > 1) {
      setup.devices_text = fmt::format("{} GPUs (model placed balanced, whole layers)", placement.devices);
      std::vector<std::string> counts;
      for (int n : placement.device_layers) counts.push_back(std::to_string(n));
      log.Line("fsdp: model placed over {} devices (balanced: decoder layers {} per device)", placement.devices,
               Join(counts, "/"));
    }
    auto weights = DecideWeights(spec.workload, nf4, ms.init_random, ms.path, spec.training.seed, ms.name);
    // Check refuses a case without weights first; never run on weights nobody asked for.
    if (!weights.ok()) return Status::InvalidArgument(native_run_refusal(ctx.plan, spec, NativeRole::kFsdp));
    if (Status s = nf4 ? LoadOrInitNf4Weights(model, *weights, ms.path, spec.training.seed, ms.double_quant)
                       : LoadOrInitWeights(model, *weights, ms.path, spec.training.seed);
        !s.ok())
      return s;
    weights_note = weights->note;
    const char* as_read = nf4 ? " (each projection quantized to NF4 as it is read)" : "";
    if (weights->source == WeightsSource::kPath) log.Line("fsdp: weights loaded from {}{}", ms.path, as_read);
    else log.Line("fsdp: weights: seeded random initialisation (seed {}){}", spec.training.seed, as_read);
    if (!nf4) return model;
    if (spec.workload == Workload::kInference) {
      quant_note = nf4_prepare_inference(model, setup.device, setup.dtype, ms.double_quant);
    } else {
      setup.lora = std::make_shared<LoraAdapters>(lora_create(setup.config, spec.training.LoraRank(),
                                                              spec.training.LoraAlpha(),
                                                              static_cast<uint64_t>(spec.training.seed), setup.device));
      if (Status s = model_attach_lora(model, setup.lora); !s.ok()) return s;
      quant_note = qlora_method(*setup.lora,
                                spec.workload == Workload::kPretrain ? QloraKind::kContinuedPretraining
                                                                     : QloraKind::kFinetune,
                                ms.double_quant, spec.training.lora_freeze_a);
    }
    log.Line("fsdp: {} ({} bytes of 4-bit projection weights)", quant_note, nf4_weight_bytes(model));
    return model;
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
    TrainingDataRequest request;
    request.dataset = {ctx.plan.ResolvePath(ds.path), ds.format, ds.column};
    request.count_every_token = setup.lora && spec.workload == Workload::kPretrain;  // QLoRA continued pretraining
    request.seq_len = ts.seq_len;
    request.batch_size = ts.batch_size;
    request.seed = ts.seed;
    if (spec.length->unit == Length::Unit::kSteps) request.steps = spec.length->count;
    else request.epochs = spec.length->count;
    auto data = LoadTrainingData(request, *setup.tokenizer);
    if (!data.ok()) return FailedOutcome(CaseStatus::kFailed, data.status().message());
    const DataSplit& split = data->split;
    const int64_t steps = data->steps;
    log.Line("fsdp: dataset {} ({}): read {}; {} train / {} eval sequences of {} tokens; {} steps of {} sequences",
             request.dataset.path, ds.format, data->ReadNote(), split.train.size(), split.eval.size(), ts.seq_len,
             steps, ts.batch_size);

    // ---- optimizer --------------------------------------------------------
    const TrainOptions o = train_options(ts, steps);
    AdamW optimizer(setup.lora ? lora_trainable(*setup.lora, ts.lora_freeze_a) : model_trainable(model), o);

    // ---- timed loop ---------------------------------------------------------
    EpochStream stream(split.train, /*groups=*/1, /*group=*/0, static_cast<uint64_t>(ts.seed));
    TimedSteps timed(spec.warmup_steps, steps);
    // The held-out curve (eval_curve.h): each evaluation timed apart from the steps.
    EvalCurve curve(ts.eval_every, steps, /*merge_every=*/std::nullopt);
    auto evaluate = [&](int64_t done) {
      const double e0 = ctx.clock.NowSeconds();
      std::optional<double> ev = eval_loss(model, split.eval, ts.batch_size);
      const double e1 = ctx.clock.NowSeconds();
      if (ev) curve.Add(done, *ev, e1 - e0);
      if (ev && curve.enabled()) log.Line("eval after {} step(s): held-out loss {:.4f} ({:.3f} s)", done, *ev, e1 - e0);
      return ev;
    };
    if (curve.Due(0)) evaluate(0);
    double last_loss = 0;
    int64_t reads = 0;
    for (int64_t step = 0; step < steps; ++step) {
      if (auto stop = ShouldStop(ctx, start, fmt::format("at step {} of {}", step, steps))) return *stop;
      std::vector<const Sequence*> batch = stream.Next(ts.batch_size);
      const int64_t reads0 = compat::HostReads();
      const double t0 = ctx.clock.NowSeconds();
      StepStats st = train_step(model, optimizer, batch, o, lr_at_step(step, steps, o));
      compat::DeviceSynchronize(setup.device);
      const double seconds = ctx.clock.NowSeconds() - t0;
      reads += compat::HostReads() - reads0;
      curve.AddStep(seconds, st.tokens);
      if (!std::isfinite(st.loss))
        return FailedOutcome(CaseStatus::kFailed, fmt::format("loss became {} at step {}", st.loss, step + 1));
      last_loss = st.loss;
      timed.Add(step, seconds, st.tokens);
      StepSample sample;
      sample.step = step + 1;
      sample.seconds = seconds;
      sample.loss = st.loss;
      sample.tokens = st.tokens;
      ctx.events.OnStep(sample);
      ctx.events.OnStatusLine(fmt::format("step {}/{} loss {:.2f}", step + 1, steps, st.loss));
      log.Line("step {}/{} loss {:.4f} lr {:.3g} grad_norm {:.3f} {:.3f} s", step + 1, steps, st.loss, st.lr,
               st.grad_norm, seconds);
      if (step + 1 < steps && curve.Due(step + 1)) evaluate(step + 1);
    }

    // ---- results --------------------------------------------------------------
    BackendOutcome out;
    if (steps > 0)
      out.measurements.push_back(MeasuredFigure(
          metric::kHostReadsPerStep, static_cast<double>(reads) / static_cast<double>(steps),
          "reads",
          fmt::format("device values read back on the host (compat::ReadToHost), each a wait for the device, per "
                      "training step over {} step(s)",
                      steps)));
    out.measurements.push_back(MeasuredFigure(metric::kFinalLoss, last_loss, "", "training loss of the last step"));
    if (auto ev = evaluate(steps))  // the curve's last point when it keeps one
      out.measurements.push_back(MeasuredFigure(metric::kEvalLoss, *ev, "",
                                                fmt::format("mean loss on {} held-out sequences", split.eval.size())));
    if (auto figure = curve.EvalSecondsFigure(split.eval.size(), "the process")) out.measurements.push_back(*figure);
    out.eval_curve = curve.points();
    ThroughputScope scope;
    scope.device_text = setup.device.str();
    scope.cuda = setup.device.is_cuda();
    scope.config = setup.config;
    scope.seq_len = ts.seq_len;
    scope.frozen_base = setup.lora != nullptr;
    if (scope.cuda) scope.device_name = compat::CudaDeviceName();
    for (Measurement& m : ThroughputFigures(timed, scope)) out.measurements.push_back(std::move(m));
    // ---- save -------------------------------------------------------------------
    if (!ctx.output_dir.empty()) {
      TrainedWeights trained;
      trained.adapters = setup.lora.get();
      trained.base_path = ctx.plan.ResolvePath(ctx.plan.models.at(spec.model).path);
      trained.save_model = [&](const std::string& dir) { return model_save(model, dir); };
      Status s = SaveTrainedWeights(ctx.output_dir, trained, setup.tokenizer_path, /*writer=*/true);
      if (!s.ok()) return FailedOutcome(CaseStatus::kFailed, s.message());
      log.Line("fsdp: {} saved to {}", setup.lora ? "LoRA adapters" : "model", ctx.output_dir);
    }
    return out;
  }

  BackendOutcome RunInference(BackendContext& ctx, Setup& setup, Model& model, CaseLog& log) {
    const CaseSpec& spec = ctx.spec;
    const double start = ctx.clock.NowSeconds();
    const std::vector<int> prompt = PromptTokens(*setup.tokenizer, spec.inference.prompt);
    double total_seconds = 0;
    int64_t generated = 0;
    const auto& schedule = spec.inference.max_new_tokens;
    for (size_t i = 0; i < schedule.size(); ++i) {
      if (auto stop = ShouldStop(ctx, start, fmt::format("at request {} of {}", i, schedule.size()))) return *stop;
      auto served = ServeRequest(model, *setup.tokenizer, prompt, static_cast<int>(i), schedule[i],
                                 spec.inference.ignore_eos, setup.device, [&ctx] { return ctx.clock.NowSeconds(); },
                                 &ctx.stop);
      if (!served.ok()) return FailedOutcome(CaseStatus::kFailed, served.status().message());
      if (served->interrupted)
        return FailedOutcome(CaseStatus::kInterrupted, fmt::format("stopped by request at request {} of {}", i, schedule.size()));
      const RequestSample& r = served->sample;
      const double seconds = r.seconds;
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
