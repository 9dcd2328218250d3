#include "backends/native/check/native_check.h"

#include <algorithm>
#include <optional>

#include "backends/native/check/check_support.h"
#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/platform/host_memory.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

namespace {

// A case's expected peak memory per GPU (or per rank process on CPU), how the
// case runs (for the note) and the peak's terms.
struct PeakEstimate {
  int64_t peak_bytes = 0;
  std::string what;
  std::string terms;
  std::string first_hint;  // a remedy specific to the case, named before the general ones
};

// Training: FSDP over the case's ranks (share: over one group; hybrid: over
// one node's) or one process (memory_estimate.h).
PeakEstimate TrainingPeak(const CaseSpec& spec, NativeRole role, const ModelSpec& ms, const ModelConfig& config,
                          const DistLayout& layout, bool gpu) {
  TrainingMemoryShape s;
  s.config = config;
  const int world = layout.world();
  const int shard_world = ShardWorld(spec, role, layout);
  s.world = shard_world;
  s.sharded = role == NativeRole::kShare || world > 1;
  s.prefetch = spec.training.prefetch;
  s.reduce_bytes = CommunicationBytes(spec.training.reduce_dtype, gpu);
  const int64_t per_rank = spec.training.batch_size / std::max(1, world);
  s.micro_batch = std::max<int64_t>(1, per_rank / std::max<int64_t>(1, spec.training.grad_accum));
  s.seq_len = spec.training.seq_len;
  s.grad_accum = spec.training.grad_accum;
  s.checkpoint_every = spec.training.checkpoint_every;
  // A GPU case in a build without CUDA (validate on a CPU machine) is
  // estimated as the builds that run it step: their libtorch (2.x: the rigs'
  // image, a GPU machine's wheel) has the fused AdamW on CUDA.
  const bool builds_cuda = !compat::CudaRuntimeVersion().empty();
  s.fused_adamw = gpu ? (!builds_cuda || compat::FusedAdamWAvailable(at::Device(at::kCUDA)))
                      : compat::FusedAdamWAvailable(at::Device(at::kCPU));
  s.dtype_bytes = gpu ? 2 : 4;
  s.attention_probs_kept = !gpu;
  s.nf4 = IsNf4(ms);
  s.double_quant = ms.double_quant;
  s.lora_rank = spec.training.LoraRank();
  s.lora_freeze_a = spec.training.lora_freeze_a;
  s.merges = role == NativeRole::kShare && layout.groups > 1;
  s.outer_lr = spec.training.outer_lr;
  s.outer_momentum = spec.training.outer_momentum;
  s.outer_state_on_device = spec.training.outer_state == OuterState::kDevice;
  s.merge_bytes = CommunicationBytes(spec.training.merge_dtype, gpu);
  MemoryEstimate m = estimate_training_memory(s);
  PeakEstimate out;
  out.peak_bytes = m.peak_bytes;
  out.terms = m.Describe();
  for (const MemoryTerm& t : m.resident)
    if (t.name.rfind("outer ", 0) == 0) {
      out.first_hint = "keep the merges' outer state on the host (training.outer_state: host), ";
      break;
    }
  out.what = fmt::format("{}, {}{}; micro-batch {} x {} tokens, checkpoint_every {}",
                         s.sharded ? (shard_world < layout.group_size
                                          ? fmt::format("FSDP HYBRID_SHARD over W = {} per node, {} replicas",
                                                        shard_world, layout.group_size / shard_world)
                                          : fmt::format("FSDP FULL_SHARD over W = {}{}", s.world,
                                                        role == NativeRole::kShare
                                                            ? fmt::format(" (each of {})",
                                                                          Plural(layout.groups, "group"))
                                                            : ""))
                                   : "one process",
                         gpu ? "bf16" : "float32",
                         s.nf4 ? fmt::format(", 4-bit NF4{} + LoRA rank {}", ms.double_quant ? " (double quant)" : "",
                                             s.lora_rank)
                               : "",
                         s.micro_batch, s.seq_len, s.checkpoint_every);
  return out;
}

// Inference: one replica's model placed over its devices (PlaceReplica), the
// busiest device's peak times the replicas sharing it.
PeakEstimate InferencePeak(const Plan& plan, const CaseSpec& spec, NativeRole role, const ModelSpec& ms,
                           const ModelConfig& config, const DistLayout& layout, bool gpu) {
  const ReplicaPlacement placement = PlaceReplica(plan, spec, role, layout, gpu);
  const bool nf4 = IsNf4(ms);
  InferenceMemoryShape s;
  s.config = config;
  s.devices = placement.devices;
  s.dtype_bytes = gpu ? 2 : 4;
  s.attention_probs_kept = !gpu;
  s.nf4 = nf4;
  s.double_quant = ms.double_quant;
  s.prompt_tokens = prompt_token_bound(spec.inference.prompt);
  const std::vector<int>& requests = spec.inference.max_new_tokens;
  s.max_new_tokens = requests.empty() ? 0 : *std::max_element(requests.begin(), requests.end());
  const bool buckets = spec.inference.decode_step != DecodeStepChoice::kHost;
  if (buckets) s.kv_cache_positions = decode_bucket_positions(s.prompt_tokens, requests, config.max_seq_len);
  InferenceMemoryEstimate m = estimate_inference_memory(s);
  const MemoryEstimate& d = m.devices[static_cast<size_t>(m.peak_device)];
  PeakEstimate out;
  out.peak_bytes = m.peak_bytes * placement.replicas_per_device;
  std::vector<std::string> counts;
  for (int n : m.placement.device_layers) counts.push_back(std::to_string(n));
  out.what = fmt::format("{}{} model{}, KV cache for {}",
                         m.placement.devices > 1 ? fmt::format("balanced over {} devices (layers {}), ",
                                                               m.placement.devices, Join(counts, "/"))
                                                 : "",
                         gpu ? "bf16" : "float32",
                         nf4 ? fmt::format(" with NF4{} projections", ms.double_quant ? " (double quant)" : "") : "",
                         buckets ? fmt::format("{} positions (the decode buckets of decode_step {}, kept "
                                               "between requests)",
                                               s.kv_cache_positions, NameOf(spec.inference.decode_step))
                                 : fmt::format("{} + {} tokens", s.prompt_tokens, s.max_new_tokens));
  if (placement.replicas_per_device > 1)
    out.what += fmt::format("; up to {} replicas share a GPU (more ranks than GPUs on a node)",
                            placement.replicas_per_device);
  out.terms = fmt::format("device {}: {}", m.peak_device, d.Describe());
  return out;
}


// The case's expected peak (training or inference) and where it is held;
// nullopt when the model's dimensions or the layout are unknown.
struct CasePeak {
  PeakEstimate estimate;
  bool gpu = false;
  GpuLimit limit;
  int ranks_on_busiest_host = 1;
};
std::optional<CasePeak> CasePeakOf(const Plan& plan, const CaseSpec& given, NativeRole role) {
  CaseSpec spec = given;
  if (spec.training.checkpoint_every == kCheckpointAuto)
    spec.training.checkpoint_every = native_case_checkpointing(plan, given, role).every;
  auto model = plan.models.find(spec.model);
  if (model == plan.models.end()) return std::nullopt;
  const ModelSpec& ms = model->second;
  std::optional<ModelConfig> config = Dimensions(plan, ms);
  if (!config) return std::nullopt;
  auto layout = role == NativeRole::kFsdp ? FsdpLayout(plan, spec) : ShareLayout(plan, spec);
  if (!layout.ok()) return std::nullopt;
  const std::vector<const NodeSpec*> nodes = CaseNodes(plan, spec, *layout);
  CasePeak out;
  out.gpu = OnGpu(spec, nodes);
  out.limit = out.gpu ? SmallestGpuMemory(nodes) : GpuLimit{};
  for (const auto& [host, ranks] : RanksPerHost(*layout))
    out.ranks_on_busiest_host = std::max(out.ranks_on_busiest_host, ranks);
  out.estimate = spec.workload != Workload::kInference
                     ? TrainingPeak(spec, role, ms, *config, *layout, out.gpu)
                     : InferencePeak(plan, spec, role, ms, *config, *layout, out.gpu);
  return out;
}

// Of the memory a case runs in, the part `auto` lets its expected peak take.
constexpr double kGpuShareForAuto = 0.9;
constexpr double kHostShareForAuto = 0.5;

}  // namespace

CheckpointChoice native_case_checkpointing(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  if (spec.training.checkpoint_every != kCheckpointAuto) return {spec.training.checkpoint_every, ""};
  if (spec.workload == Workload::kInference) return {0, ""};
  CaseSpec off = spec;
  off.training.checkpoint_every = 0;
  std::optional<CasePeak> p = CasePeakOf(plan, off, role);
  if (!p) return {1, "checkpoint_every auto: every layer recomputed (no memory estimate: the model's dimensions are unknown)"};
  const int64_t peak = p->estimate.peak_bytes;
  double room = 0;
  std::string against;
  if (p->gpu) {
    if (p->limit.gb <= 0)
      return {1, fmt::format("checkpoint_every auto: every layer recomputed (the peak without recompute, {} per GPU, "
                             "is compared with nothing: cluster.nodes[].gpu_memory_gb is not stated)",
                             FormatBytes(peak))};
    room = kGpuShareForAuto * p->limit.gb * 1e9;
    against = fmt::format("90 % of the {} GB of node '{}'", p->limit.gb, p->limit.node);
  } else {
    const int64_t host = PhysicalMemoryBytes();
    room = kHostShareForAuto * static_cast<double>(host) / p->ranks_on_busiest_host;
    against = fmt::format("half of this host's {} over {} rank process{}", FormatBytes(host),
                          p->ranks_on_busiest_host, p->ranks_on_busiest_host == 1 ? "" : "es");
  }
  const bool fits = static_cast<double>(peak) <= room;
  return {fits ? 0 : 1, fmt::format("checkpoint_every auto: {}: the peak without recompute, {} per {}, {} {} ({})",
                                    fits ? "no layer recomputed" : "every layer recomputed", FormatBytes(peak),
                                    p->gpu ? "GPU" : "rank process", fits ? "fits in" : "does not fit in", against,
                                    FormatBytes(static_cast<int64_t>(room)))};
}

std::string native_case_expected_memory(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  std::optional<CasePeak> p = CasePeakOf(plan, spec, role);
  if (!p) return "";
  return fmt::format("{} {}", FormatBytes(p->estimate.peak_bytes), p->gpu ? "per GPU" : "per rank process");
}

CaseAdvice native_case_memory(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  CaseAdvice advice;
  // The case as it runs: `auto` decided once, here, for the estimate and the note.
  const CheckpointChoice checkpointing = native_case_checkpointing(plan, spec, role);
  CaseSpec as_run = spec;
  as_run.training.checkpoint_every = checkpointing.every;
  std::optional<CasePeak> p = CasePeakOf(plan, as_run, role);
  if (!p) return advice;
  const bool gpu = p->gpu;
  const GpuLimit& limit = p->limit;
  const std::string per = gpu ? "per GPU" : "per rank process (host memory, float32)";
  const PeakEstimate& estimate = p->estimate;
  const int64_t peak = estimate.peak_bytes;
  std::string against;
  if (gpu && limit.gb > 0)
    against = fmt::format(" of {} GB ({})", limit.gb,
                          static_cast<double>(peak) > limit.gb * 1e9 ? "does not fit" : "fits");
  else if (gpu) against = " (GPU memory not stated in cluster.nodes[].gpu_memory_gb: not compared)";
  else against = " (not compared: the plan states no host memory)";
  advice.notes.push_back(fmt::format("expected peak memory {}: {}{}; {}\n{}", per, FormatBytes(peak), against,
                                     estimate.what, estimate.terms));
  if (!checkpointing.why.empty()) advice.notes.push_back(checkpointing.why);
  if (gpu && limit.gb > 0 && static_cast<double>(peak) > limit.gb * 1e9)
    advice.warnings.push_back(fmt::format(
        "expected peak memory per GPU {} exceeds the {} GB of node '{}' (cluster.nodes[].gpu_memory_gb); {}lower "
        "training.batch_size or seq_len, checkpoint more layers (checkpoint_every: 1), or spread the model over "
        "more ranks",
        FormatBytes(peak), limit.gb, limit.node, estimate.first_hint));
  return advice;
}

}  // namespace native
}  // namespace protocol
