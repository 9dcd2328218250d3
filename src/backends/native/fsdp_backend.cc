#include "backends/native/fsdp_backend.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <fstream>

#include "backends/native/case/case_device.h"
#include "backends/native/case/case_setup.h"
#include "backends/native/case/case_training.h"
#include "backends/native/case/case_weights.h"
#include "backends/native/case/training_sink.h"
#include "backends/native/distributed/process_group.h"
#include "backends/native/inference_model.h"
#include "backends/native/rank_events.h"
#include "backends/native/inference_request.h"
#include "backends/native/platform/host_memory.h"
#include "backends/native/model/model.h"
#include "backends/native/check/native_check.h"
#include "backends/native/model/placement.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/text.h"

namespace protocol {
namespace {
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

// The one process's sink (training_sink.h): the events a rank would send go
// to the runner's own collector as rank 0's of a world of one, so that the
// one process's figures come from the same code as the ranks'; the lines go
// to the case log.
class InProcessSink : public TrainingSink {
 public:
  InProcessSink(RankEventCollector& collector, CaseLog& log) : collector_(collector), log_(log) {}
  void Event(const WorkerEvent& e) override { collector_.Add(/*rank=*/0, e, /*now=*/0); }
  void Line(const std::string& text) override { log_.Line("{}", text); }

 private:
  RankEventCollector& collector_;
  CaseLog& log_;
};

// The one process's stop check, asked between steps and between requests:
// the runner's Ctrl-C, and the case's timeout on the context's clock from now.
StopCheck StopCheckOf(BackendContext& ctx) {
  const double start = ctx.clock.NowSeconds();
  return [&ctx, start](const std::string& where) -> std::optional<CaseEnded> {
    if (ctx.stop.requested()) return CaseEnded(CaseStatus::kInterrupted, "stopped by request " + where);
    if (ctx.spec.timeout_seconds > 0 && ctx.clock.NowSeconds() - start > ctx.spec.timeout_seconds)
      return CaseEnded(CaseStatus::kTimeout,
                       fmt::format("exceeded the case's timeout of {} s {}", ctx.spec.timeout_seconds, where));
    return std::nullopt;
  };
}

// One rank on the case's first node: the layout of the one process.
DistLayout OneRank(const DistLayout& layout) {
  DistLayout one = layout;
  one.groups = one.group_size = 1;
  one.rank_nodes.resize(1);
  return one;
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
    const WorkerCase wc = native::WorkerCaseOf(ctx, NativeRole::kFsdp, OneRank(*layout));
    auto setup = ResolveCaseSetup(wc, /*local_rank=*/0);  // one process: cuda:0
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
    std::string devices_text = setup->device.str();
    BackendOutcome out = spec.workload == Workload::kInference
                             ? RunInference(ctx, wc, *layout, *setup, log, devices_text)
                             : RunTraining(ctx, wc, *layout, *setup, log);
    out.facts.insert(out.facts.begin(), {fact::kRanks, "1"});
    for (auto& f : CaseFacts(at::get_num_threads(), devices_text, setup->device, setup->dtype, spec.workload,
                               spec.inference.decode_step))
      out.facts.push_back(std::move(f));
    log.Line("fsdp: {}{}", out.status == CaseStatus::kOk ? "done" : "ended", out.reason.empty() ? "" : ": " + out.reason);
    return out;
  }

  // The one training loop (case_training.h) on a mesh of one rank whose
  // collectives do nothing, in this process: the runner's Ctrl-C and the
  // case's timeout (on the context's clock) are asked before every step.
  static BackendOutcome RunTraining(BackendContext& ctx, const WorkerCase& wc, const DistLayout& layout,
                                    CaseSetup& setup, CaseLog& log) {
    RankEventCollector collector(ctx.events);
    InProcessSink sink(collector, log);
    ProcessGroups mesh = SoloGroups();
    try {
      CaseTraining(wc, setup, mesh, sink, ctx.clock, StopCheckOf(ctx)).Run();
    } catch (const CaseEnded& ended) {
      return FailedOutcome(ended.status, ended.what());
    }
    BackendOutcome out;
    out.measurements = collector.RankZeroFigures();
    collector.AddCaseFigures(OneRank(layout), wc.workload, /*decode_words=*/"", out);
    for (const auto& f : collector.facts()) out.facts.push_back(f);
    return out;
  }

  // The inference model (inference_model.h) over the node's GPUs, as many as
  // the node has ranks (the baseline's "balanced" placement), or on the one
  // device. Sets `devices_text`.
  static Result<Model> PrepareInferenceModel(const WorkerCase& wc, const DistLayout& layout, CaseSetup& setup,
                                             CaseLog& log, std::string& devices_text) {
    std::vector<at::Device> devices = {setup.device};
    if (setup.device.is_cuda()) {
      const auto on_node = std::count(layout.rank_nodes.begin(), layout.rank_nodes.end(), layout.rank_nodes.front());
      const int gpus = std::min(static_cast<int>(on_node), static_cast<int>(at::getNumGPUs()));
      for (int d = 1; d < gpus; ++d) devices.push_back(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(d)));
    }
    auto loaded = LoadInferenceModel(wc, setup, devices);
    if (!loaded.ok()) return loaded.status();
    const LayerPlacement& placement = loaded->placement;
    if (placement.devices > 1) {
      devices_text = fmt::format("{} GPUs (model placed balanced, whole layers)", placement.devices);
      log.Line("fsdp: model placed over {} devices (balanced: decoder layers {} per device)", placement.devices,
               DeviceLayersText(placement));
    }
    const bool nf4 = wc.quantization == Quantization::kNf4;
    const char* as_read = nf4 ? " (each projection quantized to NF4 as it is read)" : "";
    if (loaded->weights.source == WeightsSource::kPath) log.Line("fsdp: weights loaded from {}{}", wc.model_path, as_read);
    else log.Line("fsdp: weights: seeded random initialisation (seed {}){}", wc.training.seed, as_read);
    if (nf4)
      log.Line("fsdp: {} ({} bytes of 4-bit projection weights)", loaded->nf4_serving, nf4_weight_bytes(loaded->model));
    return std::move(loaded->model);
  }

  static BackendOutcome RunInference(BackendContext& ctx, const WorkerCase& wc, const DistLayout& layout,
                                     CaseSetup& setup, CaseLog& log, std::string& devices_text) {
    const CaseSpec& spec = ctx.spec;
    if (setup.device.is_cuda()) compat::CudaResetPeakMemory();
    auto loaded = PrepareInferenceModel(wc, layout, setup, log, devices_text);
    if (!loaded.ok()) return FailedOutcome(CaseStatus::kFailed, loaded.status().message());
    Model& model = *loaded;
    const StopCheck stop = StopCheckOf(ctx);
    const std::vector<int> prompt = PromptTokens(*setup.tokenizer, spec.inference.prompt);
    DecodeBuckets buckets;
    const RequestDecoding decoding = RequestDecodingOf(spec.inference, &buckets);
    std::string decode_check;
    if (decoding.step != DecodeStep::kHostPosition) {
      auto checked = CheckDecodeStep(model, prompt, decoding.step);
      if (!checked.ok()) return FailedOutcome(CaseStatus::kFailed, checked.status().message());
      decode_check = checked->text;
      log.Line("fsdp: decode check (decode_step {}): {}", NameOf(spec.inference.decode_step), decode_check);
    }
    double total_seconds = 0;
    int64_t generated = 0;
    const auto& schedule = spec.inference.max_new_tokens;
    for (size_t i = 0; i < schedule.size(); ++i) {
      if (auto ended = stop(fmt::format("at request {} of {}", i, schedule.size())))
        return FailedOutcome(ended->status, ended->what());
      auto served = ServeRequest(model, *setup.tokenizer, prompt, static_cast<int>(i), schedule[i], decoding,
                                 setup.device, [&ctx] { return ctx.clock.NowSeconds(); }, &ctx.stop);
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
    const std::string how =
        fmt::format("{} greedy requests, KV cache{}, one process on {}", schedule.size(),
                    DecodeStepMethodWords(spec.inference.decode_step), devices_text);
    out.measurements.push_back(MeasuredFigure(metric::kTotalGenerationSeconds, total_seconds, "s", "sum of request times; " + how));
    out.measurements.push_back(MeasuredFigure(metric::kGeneratedTokens, static_cast<double>(generated), "tokens", how));
    if (generated > 0 && total_seconds > 0) {
      out.measurements.push_back(MeasuredFigure(metric::kSecondsPerToken, total_seconds / static_cast<double>(generated), "s/token", how));
      out.measurements.push_back(MeasuredFigure(metric::kTokensPerSecond, static_cast<double>(generated) / total_seconds, "tokens/s", how));
    }
    out.measurements.push_back(MeasuredFigure(metric::kPeakHostRss, static_cast<double>(PeakRssBytes()), "bytes",
                                              "getrusage ru_maxrss of the runner process (peak since it started)"));
    if (auto peak = compat::CudaPeakMemoryBytes())
      out.measurements.push_back(MeasuredFigure(metric::kPeakDeviceMemory, static_cast<double>(*peak), "bytes",
                                                "CUDA caching allocator peak allocated bytes during the case"));
    if (!decode_check.empty()) out.facts.push_back({fact::kDecodeCheck, decode_check});
    // Every measurement says what ran (4-bit) and on which weights.
    NoteOnEveryMethod(out, setup.method_note);
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
