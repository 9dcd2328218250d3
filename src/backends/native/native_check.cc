#include "backends/native/native_check.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "backends/native/case/case_device.h"
#include "backends/native/launch/dist_layout.h"
#include "backends/native/memory_estimate.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/model_resolve.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/time_estimate.h"
#include "backends/native/traffic.h"
#include "backends/native/training/training_data.h"
#include "backends/native/training/data.h"
#include "backends/native/training/parquet.h"
#include "runner/base/text.h"
#include "runner/plan/case_placeholders.h"
#include "runner/plan/networks.h"
#include "runner/exec/calibration.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

bool IsNf4(const ModelSpec& ms) { return ms.quantization == Quantization::kNf4; }

// Why a case whose weights are kMissing cannot run (model_dir_has_weights in
// safetensors.h reads the same files).
CaseIssue MissingWeights(const ModelSpec& ms, const std::string& path, Workload workload, bool nf4) {
  const bool qlora_pretrain = nf4 && workload == Workload::kPretrain;
  // "a finetune", "a 4-bit finetune", "inference", "4-bit inference".
  const std::string work = workload == Workload::kInference
                               ? std::string(nf4 ? "4-bit inference" : "inference")
                               : fmt::format("a {}{}", nf4 ? "4-bit " : "", WorkloadName(workload));
  const std::string what = qlora_pretrain ? "a 4-bit pretrain is QLoRA continued pretraining of the model's own weights"
                                          : work + " measures the model's own weights";
  const std::string hint = " (or say `init: random` on the model to measure on seeded random weights)";
  std::error_code ec;
  if (path.empty())
    return CaseIssue{qlora_pretrain ? CaseIssueKind::kRefusal : CaseIssueKind::kError,
                     fmt::format("{}, but model '{}' has no path{}", what, ms.name, hint)};
  if (!fs::exists(path, ec))
    return CaseIssue{CaseIssueKind::kUnchecked,
                     fmt::format("cannot check the weights of model '{}' here: its path '{}' is not on this machine; {} "
                                 "needs model.safetensors or model.safetensors.index.json there",
                                 ms.name, path,
                                 qlora_pretrain ? "a 4-bit pretrain (QLoRA continued pretraining of the model's own weights)"
                                                : work + " (of the model's own weights)")};
  return CaseIssue{qlora_pretrain ? CaseIssueKind::kRefusal : CaseIssueKind::kError,
                   fmt::format("{}, but model '{}' has no model.safetensors or model.safetensors.index.json in its path "
                               "'{}'{}",
                               what, ms.name, path, hint)};
}

// The case of the plan that writes `model_path` (a model's directory, not yet
// on this machine): the first whose output_dir, expanded as the runner expands
// it and taken from the working directory, is that directory. An output_dir
// that varies by run or repeat ({run_id}, {repeat}) names no fixed directory.
const CaseSpec* ProducerOf(const Plan& plan, const std::string& model_path) {
  if (model_path.empty()) return nullptr;
  std::error_code ec;
  const std::string wanted = fs::absolute(model_path, ec).lexically_normal().string();
  for (const CaseSpec* c : plan.Cases())
    if (const std::string dir = FixedOutputDir(plan, *c); !dir.empty() && dir == wanted) return c;
  return nullptr;
}

// A model whose directory an earlier case of the plan writes: nothing to warn
// about, but three things to check. The producer must run first (plan order),
// and save a whole model (a training case of a full-precision model; a 4-bit
// one saves LoRA adapters, inference saves nothing). Returns the issue, or a
// note (kind kUnchecked is never returned) in *note when all holds.
std::optional<CaseIssue> ProducedModelIssue(const Plan& plan, const CaseSpec& spec, const ModelSpec& ms,
                                            const CaseSpec& producer, std::string* note) {
  const ModelSpec* made_by = plan.models.count(producer.model) ? &plan.models.at(producer.model) : nullptr;
  const auto cases = plan.Cases();
  const auto at = [&](const CaseSpec* c) { return std::find(cases.begin(), cases.end(), c) - cases.begin(); };
  if (&producer == &spec || at(&producer) > at(&spec))
    return CaseIssue{CaseIssueKind::kError,
                     fmt::format("model '{}' is read from the output_dir of case '{}', which runs {} this case: "
                                 "put '{}' before it",
                                 ms.name, producer.id, &producer == &spec ? "as" : "after", producer.id)};
  if (producer.workload == Workload::kInference)
    return CaseIssue{CaseIssueKind::kError,
                     fmt::format("model '{}' is read from the output_dir of case '{}', an inference case, which saves "
                                 "no model",
                                 ms.name, producer.id)};
  if (made_by && IsNf4(*made_by))
    return CaseIssue{CaseIssueKind::kError,
                     fmt::format("model '{}' is read from the output_dir of case '{}', which trains the 4-bit model "
                                 "'{}' and saves LoRA adapters there, not a model",
                                 ms.name, producer.id, made_by->name)};
  *note = fmt::format("model '{}': written by case '{}' (its output_dir), which runs earlier in this plan{}", ms.name,
                      producer.id, IsNf4(ms) ? "; quantized to 4 bits when loaded" : "");
  return std::nullopt;
}

// What the backends' ResolveModel (model_resolve.h) refuses about the model's
// files — no path, no readable <path>/tokenizer.model, neither a preset nor a
// config.json, a tokenizer larger than the vocabulary — by calling it, so that
// validate and run cannot disagree. A path that is not on this machine cannot
// be checked (kUnchecked). A path that is missing or not here is said once
// per case: not again when the weights' issue (`weights_reported`) said it.
// Returns whether *issue is set.
bool ModelFilesIssue(const ModelSpec& ms, const std::string& path, bool weights_reported, CaseIssue* issue) {
  if (path.empty() && !PresetConfig(ms.preset).ok()) return false;  // Check names the missing or unknown preset
  std::error_code ec;
  const bool here = !path.empty() && fs::exists(path, ec);
  if (weights_reported && !here) return false;  // "has no path" or "not on this machine" is said already
  if (!path.empty() && !here) {
    *issue = {CaseIssueKind::kUnchecked,
              fmt::format("cannot check the tokenizer of model '{}' here: its path '{}' is not on this machine; the "
                          "native backends need tokenizer.model there",
                          ms.name, path)};
    return true;
  }
  Result<ResolvedModel> resolved = ResolveModel(ms.name, ms.preset, path);
  if (resolved.ok()) return false;
  *issue = {CaseIssueKind::kError, resolved.status().message()};
  return true;
}

// The model's dimensions as the backends resolve them (model_resolve.h).
std::optional<ModelConfig> Dimensions(const Plan& plan, const ModelSpec& ms, std::string* problem = nullptr) {
  return ModelDimensions(ms.name, ms.preset, plan.ResolvePath(ms.path), problem);
}

// The nodes a case runs on, in the order of its layout.
std::vector<const NodeSpec*> CaseNodes(const Plan& plan, const CaseSpec& spec, const DistLayout& layout) {
  std::vector<const NodeSpec*> nodes;
  std::vector<std::string> seen;
  for (const std::string& n : layout.rank_nodes) {
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    nodes.push_back(plan.cluster.FindNode(n));  // null: a node the plan does not list (fsdp's "node0" on localhost)
  }
  return nodes;
}

// Does the case compute on GPUs? training.device, or `auto` with a GPU on its nodes.
bool OnGpu(const CaseSpec& spec, const std::vector<const NodeSpec*>& nodes) {
  if (spec.training.device == DeviceChoice::kCuda) return true;
  if (spec.training.device != DeviceChoice::kAuto) return false;
  for (const NodeSpec* n : nodes)
    if (n && n->gpus > 0) return true;
  return false;
}

std::string Plural(int64_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

// The device memory to compare a GPU case's peak with: the smallest stated
// among the case's nodes; none (0) when one of them states none.
struct GpuLimit {
  double gb = 0;     // 0: not stated
  std::string node;  // the node with the smallest
};

GpuLimit SmallestGpuMemory(const std::vector<const NodeSpec*>& nodes) {
  GpuLimit limit;
  for (const NodeSpec* n : nodes) {
    if (!n || n->gpu_memory_gb <= 0) return GpuLimit{};
    if (limit.gb == 0 || n->gpu_memory_gb < limit.gb) {
      limit.gb = n->gpu_memory_gb;
      limit.node = n->name;
    }
  }
  return limit;
}

// A case's expected peak memory per GPU (or per rank process on CPU), how the
// case runs (for the note) and the peak's terms.
struct PeakEstimate {
  int64_t peak_bytes = 0;
  std::string what;
  std::string terms;
  std::string first_hint;  // a remedy specific to the case, named before the general ones
};

// Bytes per element of a collective in `dtype` (reduce_dtype, merge_dtype):
// `auto` is the compute dtype (case_device.h ResolveReduceDtype): bf16 on a GPU.
int64_t CommunicationBytes(ReduceDtype dtype, bool gpu) {
  return static_cast<int64_t>(c10::elementSize(ResolveReduceDtype(dtype, gpu ? at::kBFloat16 : at::kFloat)));
}

// The ranks a unit is sharded over: the group (fsdp: every rank of the case;
// share: one group), or with hybrid sharding the group's ranks on one node.
int ShardWorld(const CaseSpec& spec, NativeRole role, const DistLayout& layout) {
  if (role != NativeRole::kFsdp || spec.training.sharding != Sharding::kHybrid || layout.rank_nodes.empty())
    return layout.group_size;
  const std::string& first = layout.rank_nodes.front();
  return static_cast<int>(std::count(layout.rank_nodes.begin(), layout.rank_nodes.begin() + layout.group_size, first));
}

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

// How one inference replica is placed: over `devices`, up to
// `replicas_per_device` replicas sharing a GPU.
struct ReplicaPlacement {
  int devices = 1;
  int replicas_per_device = 1;
};

// fsdp on one node is one process over the node's GPUs; otherwise (fsdp over
// nodes, share) each replica's leader places the model over its group's ranks
// on its node. Replicas share devices when a node has fewer GPUs than ranks.
ReplicaPlacement PlaceReplica(const Plan& plan, const CaseSpec& spec, NativeRole role, const DistLayout& layout,
                              bool gpu) {
  ReplicaPlacement r;
  if (!gpu) return r;
  if (role == NativeRole::kFsdp) {
    const std::string first = layout.rank_nodes.front();
    r.devices = static_cast<int>(std::count(layout.rank_nodes.begin(), layout.rank_nodes.end(), first));
    return r;
  }
  r.devices = layout.group_size;
  for (const TopologyPart& p : spec.topology.parts) {
    const NodeSpec* node = plan.cluster.FindNode(p.node);
    const int ranks = p.groups * p.ranks_per_group;
    if (node && node->gpus > 0 && ranks > node->gpus)
      r.replicas_per_device = std::max(r.replicas_per_device, (ranks + node->gpus - 1) / node->gpus);
  }
  return r;
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
  InferenceMemoryEstimate m = estimate_inference_memory(s);
  const MemoryEstimate& d = m.devices[static_cast<size_t>(m.peak_device)];
  PeakEstimate out;
  out.peak_bytes = m.peak_bytes * placement.replicas_per_device;
  std::vector<std::string> counts;
  for (int n : m.placement.device_layers) counts.push_back(std::to_string(n));
  out.what = fmt::format("{}{} model{}, KV cache for {} + {} tokens",
                         m.placement.devices > 1 ? fmt::format("balanced over {} devices (layers {}), ",
                                                               m.placement.devices, Join(counts, "/"))
                                                 : "",
                         gpu ? "bf16" : "float32",
                         nf4 ? fmt::format(" with NF4{} projections", ms.double_quant ? " (double quant)" : "") : "",
                         s.prompt_tokens, s.max_new_tokens);
  if (placement.replicas_per_device > 1)
    out.what += fmt::format("; up to {} replicas share a GPU (more ranks than GPUs on a node)",
                            placement.replicas_per_device);
  out.terms = fmt::format("device {}: {}", m.peak_device, d.Describe());
  return out;
}

// A training case's dataset: a format the backends read, and for parquet the
// column, checked in every file's footer (parquet.h) where the path is here.
void DatasetIssues(const Plan& plan, const CaseSpec& spec, std::vector<CaseIssue>* issues) {
  auto ds = plan.datasets.find(spec.dataset);
  if (ds == plan.datasets.end()) return;  // Check reports the missing dataset
  const DatasetSpec& d = ds->second;
  if (!data_format_supported(d.format)) {
    issues->push_back({CaseIssueKind::kError, fmt::format("dataset '{}' has format '{}', which the native backends "
                                                          "cannot read ({})",
                                                          d.name, d.format, kNativeDatasetFormats)});
    return;
  }
  if (d.format != "parquet") return;
  const std::string path = plan.ResolvePath(d.path);
  const std::string column = d.column.empty() ? kParquetDefaultColumn : d.column;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    issues->push_back({CaseIssueKind::kUnchecked,
                       fmt::format("cannot check dataset '{}' here: its path '{}' is not on this machine; a run "
                                   "reads the column '{}' of its parquet files",
                                   d.name, path, column)});
    return;
  }
  auto reader = ParquetTextReader::Open(path, column);
  if (!reader.ok())
    issues->push_back({CaseIssueKind::kError, fmt::format("dataset '{}': {}", d.name, reader.status().message())});
}

}  // namespace

int64_t prompt_token_bound(const std::string& prompt) { return static_cast<int64_t>(prompt.size()) + 2; }

std::vector<CaseIssue> native_case_issues(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  std::vector<CaseIssue> issues;
  auto model = plan.models.find(spec.model);
  if (model == plan.models.end()) return issues;  // Check reports the unknown model
  const ModelSpec& ms = model->second;
  const bool nf4 = IsNf4(ms);
  const bool training = spec.workload != Workload::kInference;
  // Share topologies: a training group runs one rank per GPU.
  if (role == NativeRole::kShare) {
    for (const TopologyPart& p : spec.topology.parts) {
      const NodeSpec* node = plan.cluster.FindNode(p.node);
      const int ranks = p.groups * p.ranks_per_group;
      if (!node || node->gpus <= 0 || ranks <= node->gpus || !training || spec.training.device == DeviceChoice::kCpu)
        continue;
      issues.push_back({CaseIssueKind::kError,
                        fmt::format("topology part '{}:{}x{}' needs {} GPUs but node '{}' has {} (a training rank "
                                    "runs on one GPU of its own; inference may share them)",
                                    p.node, p.groups, p.ranks_per_group, ranks, p.node, node->gpus)});
    }
  }
  if (training && role == NativeRole::kShare && spec.training.sharding == Sharding::kHybrid)
    issues.push_back({CaseIssueKind::kError,
                      "training.sharding: hybrid is an fsdp setting (shard within each node, replicate across "
                      "nodes); a share group runs on one node, where it is full sharding: remove it"});
  // bfloat16 collectives on CPU ranks: the gradient reductions, and a share case's merges.
  const std::pair<const char*, bool> bf16_settings[] = {
      {"reduce_dtype", spec.training.reduce_dtype == ReduceDtype::kBfloat16},
      {"merge_dtype", role == NativeRole::kShare && spec.training.merge_dtype == ReduceDtype::kBfloat16}};
  for (const auto& [setting, bf16] : bf16_settings) {
    if (!training || !bf16 || compat::GlooReducesBfloat16()) continue;
    auto layout = role == NativeRole::kFsdp ? FsdpLayout(plan, spec) : ShareLayout(plan, spec);
    if (layout.ok() && layout->world() > 1 && !OnGpu(spec, CaseNodes(plan, spec, *layout)))
      issues.push_back({CaseIssueKind::kRefusal,
                        fmt::format("training.{}: bfloat16 on CPU ranks: Gloo in this build (libtorch {}) "
                                    "cannot reduce bfloat16 tensors; use auto (float32 on a CPU)",
                                    setting, compat::TorchVersion())});
  }
  // Between rigs (ssh, slurm) a label must name a network: the label alone chooses no fabric.
  const std::string& launcher = plan.cluster.launcher;
  if (spec.nodes > 1 && (launcher == "ssh" || launcher == "slurm") && !plan.cluster.FindNetwork(spec.network))
    issues.push_back({CaseIssueKind::kError,
                      fmt::format("a {}-node case on the {} launcher needs its network defined in cluster.networks "
                                  "(rate, env, addresses): {}; a label alone chooses no fabric (NCCL would pick one "
                                  "by itself)",
                                  spec.nodes, launcher,
                                  spec.network.empty() ? std::string("the case names none (network:)")
                                                       : fmt::format("'{}' is not defined", spec.network))});
  if (training) DatasetIssues(plan, spec, &issues);
  const std::string path = plan.ResolvePath(ms.path);
  const bool weights_missing =
      native_weights_source(spec.workload, nf4, ms.init_random, path) == WeightsSource::kMissing;
  std::error_code ec;
  if (weights_missing && !path.empty() && !fs::exists(path, ec)) {
    // Not here yet: written by an earlier case of the plan?
    if (const CaseSpec* producer = ms.from_case.empty() ? ProducerOf(plan, path) : plan.FindCase(ms.from_case)) {
      std::string note;
      if (auto issue = ProducedModelIssue(plan, spec, ms, *producer, &note)) issues.push_back(*issue);
      else issues.push_back({CaseIssueKind::kNote, note});
      return issues;
    }
  }
  if (weights_missing) issues.push_back(MissingWeights(ms, path, spec.workload, nf4));
  if (CaseIssue files; ModelFilesIssue(ms, path, weights_missing, &files)) issues.push_back(files);
  return issues;
}

std::string native_run_refusal(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  std::vector<CaseIssue> issues = native_case_issues(plan, spec, role);
  if (issues.empty()) return "";
  // When the case runs, a model an earlier case writes must be there by now.
  if (issues.front().kind == CaseIssueKind::kNote)
    return issues.front().message + ", but its weights are not there yet: run that case first (with --only, name it "
                                     "too)";
  return issues.front().message;
}

namespace {

// The case's expected peak (training or inference) and where it is held;
// nullopt when the model's dimensions or the layout are unknown.
struct CasePeak {
  PeakEstimate estimate;
  bool gpu = false;
  GpuLimit limit;
};
std::optional<CasePeak> CasePeakOf(const Plan& plan, const CaseSpec& spec, NativeRole role) {
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
  out.estimate = spec.workload != Workload::kInference
                     ? TrainingPeak(spec, role, ms, *config, *layout, out.gpu)
                     : InferencePeak(plan, spec, role, ms, *config, *layout, out.gpu);
  return out;
}

}  // namespace

std::string native_case_expected_memory(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  std::optional<CasePeak> p = CasePeakOf(plan, spec, role);
  if (!p) return "";
  return fmt::format("{} {}", FormatBytes(p->estimate.peak_bytes), p->gpu ? "per GPU" : "per rank process");
}

CaseAdvice native_case_memory(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  CaseAdvice advice;
  std::optional<CasePeak> p = CasePeakOf(plan, spec, role);
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
  if (gpu && limit.gb > 0 && static_cast<double>(peak) > limit.gb * 1e9)
    advice.warnings.push_back(fmt::format(
        "expected peak memory per GPU {} exceeds the {} GB of node '{}' (cluster.nodes[].gpu_memory_gb); {}lower "
        "training.batch_size or seq_len, checkpoint more layers (checkpoint_every: 1), or spread the model over "
        "more ranks",
        FormatBytes(peak), limit.gb, limit.node, estimate.first_hint));
  return advice;
}

namespace {

// The shape of a training step of `spec` for traffic.h.
FsdpTrafficShape FsdpTraffic(const CaseSpec& spec, const ModelSpec& ms, const ModelConfig& config,
                             const DistLayout& layout, bool gpu) {
  FsdpTrafficShape t;
  t.config = config;
  t.nodes = layout.nodes();
  t.ranks_per_node = layout.world() / std::max<int64_t>(1, t.nodes);
  t.hybrid = spec.training.sharding == Sharding::kHybrid;
  t.grad_accum = spec.training.grad_accum;
  t.dtype_bytes = gpu ? 2 : 4;
  t.reduce_bytes = CommunicationBytes(spec.training.reduce_dtype, gpu);
  t.reduce_scatter_is_all_reduce = !gpu && !compat::GlooHasFlatCollectives();
  t.nf4 = IsNf4(ms);
  t.double_quant = ms.double_quant;
  t.lora_rank = spec.training.LoraRank();
  t.lora_freeze_a = spec.training.lora_freeze_a;
  return t;
}

// The merges of a share case of `steps` steps: every sync_every steps before
// the last, and the last.
int64_t ShareMerges(const CaseSpec& spec) {
  if (!spec.length || spec.length->unit != Length::Unit::kSteps) return 0;
  const int64_t steps = spec.length->count, every = spec.training.sync_every;
  return (every > 0 ? (steps - 1) / every : 0) + 1;
}

}  // namespace

std::string native_case_traffic(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  if (spec.workload == Workload::kInference) return "";
  auto model = plan.models.find(spec.model);
  if (model == plan.models.end()) return "";
  std::optional<ModelConfig> config = Dimensions(plan, model->second);
  auto layout = role == NativeRole::kFsdp ? FsdpLayout(plan, spec) : ShareLayout(plan, spec);
  if (!config || !layout.ok()) return "";
  const int64_t nodes = layout->nodes();
  if (nodes < 2) return "";
  const bool gpu = OnGpu(spec, CaseNodes(plan, spec, *layout));
  if (role == NativeRole::kShare) {
    ShareTrafficShape t;
    t.config = *config;
    t.nodes = nodes;
    t.groups = layout->groups;
    t.ranks_per_group = layout->group_size;
    t.nf4 = IsNf4(model->second);
    t.lora_rank = spec.training.LoraRank();
    t.lora_freeze_a = spec.training.lora_freeze_a;
    t.merge_bytes = CommunicationBytes(spec.training.merge_dtype, gpu);
    const int64_t merges = ShareMerges(spec);
    return fmt::format("between nodes: nothing in a step (each group trains on its node); {} per merge{}",
                       FormatBytes(share_merge_between_nodes(t)),
                       merges > 0 ? fmt::format(", {} merge(s) in {}", merges, spec.length->ToString()) : "");
  }
  FsdpTrafficShape t = FsdpTraffic(spec, model->second, *config, *layout, gpu);
  const StepTraffic mine = fsdp_step_traffic(t);
  t.hybrid = !t.hybrid;
  const StepTraffic other = fsdp_step_traffic(t);
  const bool hybrid = !t.hybrid;
  return fmt::format("between nodes per step: {} ({}: {}); {} sharding would send {} ({:.3g}x)", FormatBytes(mine.between_nodes),
                     hybrid ? "hybrid sharding" : "full sharding",
                     hybrid ? fmt::format("every rank all-reduces its gradient slices with its replicas on the other "
                                          "node(s); gathers and reduce-scatters stay within a node")
                            : fmt::format("one ring of {} ranks crosses between the {} nodes at {} ranks, each "
                                          "sending {} per step",
                                          layout->world(), nodes, nodes, FormatBytes(mine.per_rank)),
                     hybrid ? "full" : "hybrid", FormatBytes(other.between_nodes),
                     mine.between_nodes > 0 ? static_cast<double>(other.between_nodes) / static_cast<double>(mine.between_nodes) : 0.0);
}

std::vector<std::string> native_check_errors(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  std::vector<std::string> errors;
  for (CaseIssue& i : native_case_issues(plan, spec, role))
    if (i.kind == CaseIssueKind::kError) errors.push_back(std::move(i.message));
  return errors;
}

std::string native_case_network(const Plan& plan, const CaseSpec& spec) {
  if (spec.nodes <= 1) return "";
  const NetworkSpec* net = plan.cluster.FindNetwork(spec.network);
  if (!net)
    return spec.network.empty() ? "network: none named (the transport picks its own)"
                                : fmt::format("network '{}': a label only (not in cluster.networks; the transport "
                                              "picks its own)",
                                              spec.network);
  std::string text = fmt::format("network '{}': {} nominal", net->name, net->rate);
  std::vector<std::string> nodes;
  for (const NodeSpec& n : plan.cluster.nodes) {
    const EnvSpec env = MergeEnv(&plan.cluster.env, &net->env, &n.env, &spec.env);
    std::string line = fmt::format("{}{}", n.name, net->addresses.count(n.name) ? " at " + net->addresses.at(n.name) : "");
    const std::string vars = DescribeEnv(env.vars);
    line += vars.empty() ? ", no env" : ", env " + vars;
    if (!env.inherit.empty()) line += " (inherits " + Join(env.inherit, ", ") + ")";
    nodes.push_back(line);
  }
  if (const std::optional<NetworkEmulation>& e = net->emulate ? net->emulate : plan.cluster.emulate)
    text += fmt::format(", emulated here at {}{}", e->bandwidth, e->delay.empty() ? "" : " + " + e->delay);
  return text + "; " + Join(nodes, "; ");
}

std::string native_network_mismatch(const Plan& plan, const CaseSpec& spec) {
  if (plan.cluster.compare_across_networks || spec.nodes <= 1 || spec.network.empty()) return "";
  for (const CaseSpec* other : plan.Cases()) {
    if (other == &spec) return "";  // only an earlier case of the row is named (once per pair)
    if (other->workload != spec.workload || other->model != spec.model || other->nodes != spec.nodes ||
        other->system == spec.system || other->network.empty() || other->network == spec.network ||
        (other->length.has_value() != spec.length.has_value()) ||
        (other->length && (other->length->unit != spec.length->unit || other->length->count != spec.length->count)))
      continue;
    return fmt::format("this case ({}) runs on network '{}' and case {} ({}) of its row on '{}': their ratio "
                       "compares the networks as well as the systems; if that is the comparison (as the "
                       "methodology's is), say so with cluster.compare_across_networks: true",
                       spec.system, spec.network, other->id, other->system, other->network);
  }
  return "";
}

CaseAdvice native_advise(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  CaseAdvice advice = native_case_memory(plan, spec, role);
  if (std::string traffic = native_case_traffic(plan, spec, role); !traffic.empty()) advice.notes.push_back(traffic);
  if (std::string network = native_case_network(plan, spec); !network.empty()) advice.notes.push_back(network);
  std::vector<std::string> refusals;
  for (CaseIssue& i : native_case_issues(plan, spec, role))
    if (i.kind == CaseIssueKind::kRefusal) refusals.push_back("a run fails: " + i.message);
    else if (i.kind == CaseIssueKind::kUnchecked) refusals.push_back(std::move(i.message));
    else if (i.kind == CaseIssueKind::kNote) advice.notes.push_back(std::move(i.message));
  advice.warnings.insert(advice.warnings.begin(), refusals.begin(), refusals.end());
  if (std::string mismatch = native_network_mismatch(plan, spec); !mismatch.empty())
    advice.warnings.push_back(std::move(mismatch));
  // 4-bit groups of the share protocol with periodic merges: exact only with A frozen (lora.h).
  auto model = plan.models.find(spec.model);
  int groups = 0;
  for (const TopologyPart& p : spec.topology.parts) groups += p.groups;
  if (model != plan.models.end() && IsNf4(model->second) && spec.workload != Workload::kInference &&
      role == NativeRole::kShare && groups > 1 && spec.training.sync_every > 0 && !spec.training.lora_freeze_a)
    advice.warnings.push_back(
        "periodic merges (training.sync_every) of 4-bit groups average each LoRA A and B separately, which is not "
        "the mean of the groups' updates; training.lora_freeze_a: true makes them exact (only B is trained and "
        "averaged); the final merge stacks the groups' adapters exactly either way");
  // The share protocol's held-out curve is of the merged model: its points fall at merges (eval_curve.h).
  const int64_t eval_every = spec.training.eval_every, sync_every = spec.training.sync_every;
  const bool interior_points = !spec.length || spec.length->unit != Length::Unit::kSteps ||
                               eval_every < spec.length->count;  // a point wanted between step 0 and the last
  if (spec.workload != Workload::kInference && role == NativeRole::kShare && groups > 1 && eval_every > 0 &&
      interior_points && (sync_every == 0 || eval_every % sync_every != 0))
    advice.warnings.push_back(
        sync_every == 0
            ? fmt::format("training.eval_every {} has no effect between step 0 and the last step: the groups are "
                          "merged only at the end (training.sync_every 0), and the held-out curve is of the merged "
                          "model",
                          eval_every)
            : fmt::format("training.eval_every {} is not a multiple of training.sync_every {}: the held-out curve is "
                          "of the merged model, so each evaluation waits for the next merge (its points fall at "
                          "multiples of {})",
                          eval_every, sync_every, sync_every));
  return advice;
}

std::optional<CaseResources> native_case_resources(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  auto layout = role == NativeRole::kFsdp ? FsdpLayout(plan, spec) : ShareLayout(plan, spec);
  if (!layout.ok()) return std::nullopt;
  const std::vector<const NodeSpec*> nodes = CaseNodes(plan, spec, *layout);
  CaseResources r;
  r.processes = layout->world();
  r.nodes = static_cast<int>(nodes.size());
  if (OnGpu(spec, nodes)) {
    // One GPU per rank, ranks beyond a node's GPUs sharing them (inference replicas).
    int gpus = 0;
    for (const NodeSpec* n : nodes) {
      const std::string name = n ? n->name : "";
      const int ranks = static_cast<int>(std::count(layout->rank_nodes.begin(), layout->rank_nodes.end(), name));
      gpus += n && n->gpus > 0 ? std::min(ranks, n->gpus) : ranks;
    }
    r.devices = Plural(gpus, "GPU");
  } else {
    r.devices = spec.training.threads > 0 ? fmt::format("{} CPU threads per host", spec.training.threads)
                                          : "every CPU thread of each host";
  }
  return r;
}

}  // namespace native
}  // namespace protocol

namespace protocol {
namespace native {
namespace {

bool IsThisHost(const std::string& host) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1" || host == ThisHost();
}

// The hosts of a case's ranks and how many ranks each runs.
std::map<std::string, int> RanksPerHost(const DistLayout& layout) {
  std::map<std::string, int> hosts;
  for (const std::string& node : layout.rank_nodes) {
    auto h = layout.node_hosts.find(node);
    ++hosts[h != layout.node_hosts.end() ? h->second : node];
  }
  return hosts;
}

// Whether every rank of the case runs on this machine.
bool AllHostsHere(const DistLayout& layout) {
  for (const auto& [host, ranks] : RanksPerHost(layout))
    if (!IsThisHost(host)) return false;
  return true;
}

// The rate of the link between the case's nodes: its network's emulated link
// (cluster.networks.<label>.emulate), else cluster.emulate's bandwidth (a
// rehearsal's shaped link), else its network's nominal rate, else the label
// read as a rate ("10G" and "80G" are Gbit/s; "100mbit" as tc reads it), else
// loopback when every node is this host. 0 when unknown; *text says which.
double NetworkBytesPerSecond(const Plan& plan, const CaseSpec& spec, const DistLayout& layout, std::string* text) {
  const NetworkSpec* network = plan.cluster.FindNetwork(spec.network);
  if (network && network->emulate && network->emulate->bits_per_second > 0) {
    *text = fmt::format("{} (network '{}', emulated at {})", FormatRate(network->emulate->bits_per_second / 8),
                        network->name, network->emulate->bandwidth);
    return network->emulate->bits_per_second / 8;
  }
  if (plan.cluster.emulate && plan.cluster.emulate->bits_per_second > 0) {
    *text = fmt::format("{} (cluster.emulate.bandwidth {})", FormatRate(plan.cluster.emulate->bits_per_second / 8),
                        plan.cluster.emulate->bandwidth);
    return plan.cluster.emulate->bits_per_second / 8;
  }
  if (network && network->bits_per_second > 0) {
    *text = fmt::format("{} (network '{}', {} nominal)", FormatRate(network->bits_per_second / 8), network->name,
                        network->rate);
    return network->bits_per_second / 8;
  }
  const std::string& label = spec.network;
  double bits = 0;
  if (auto tc = ParseTcRate(label); tc.ok()) {
    bits = *tc;
  } else if (label.size() > 1 && (label.back() == 'G' || label.back() == 'g')) {
    char* end = nullptr;
    const std::string digits = label.substr(0, label.size() - 1);
    const double v = std::strtod(digits.c_str(), &end);
    if (end && *end == '\0' && v > 0) bits = v * 1e9;
  }
  if (bits > 0) {
    *text = fmt::format("{} (network: {})", FormatRate(bits / 8), label);
    return bits / 8;
  }
  if (AllHostsHere(layout)) {
    *text = fmt::format("{} (loopback, assumed)", FormatRate(kAssumedLoopbackBytesPerSecond));
    return kAssumedLoopbackBytesPerSecond;
  }
  *text = label.empty() ? "no network label" : fmt::format("network label '{}' is not a rate", label);
  return 0;
}

// The figures of the devices a case computes on; nullopt with *why_not when a GPU node names no known device.
std::optional<DeviceRates> CaseDeviceRates(const Plan& plan, const CaseSpec& spec, const DistLayout& layout, bool gpu,
                                           const std::optional<HostCalibration>& host, std::string* why_not) {
  DeviceRates d;
  if (gpu) {
    const NodeSpec* first = nullptr;
    for (const NodeSpec* n : CaseNodes(plan, spec, layout)) {
      if (!n || n->gpu_model.empty()) {
        *why_not = fmt::format("node '{}' does not say which GPU it has (cluster.nodes[].gpu_model: one of {})",
                               n ? n->name : "?", DeviceNames());
        return std::nullopt;
      }
      if (!first) first = n;
    }
    const DeviceFigures* row = first ? FindDevice(first->gpu_model) : nullptr;
    if (!row) {
      *why_not = fmt::format("node '{}' has gpu_model '{}', which the device table does not list ({})",
                             first ? first->name : "?", first ? first->gpu_model : "", DeviceNames());
      return std::nullopt;
    }
    d.name = row->name;
    d.flops_per_device = row->bf16_tflops * 1e12;
    d.mfu = first->gpu_mfu > 0 ? first->gpu_mfu : kAssumedGpuMfu;
    d.memory_bytes_per_second = row->memory_gb_per_s * 1e9;
    d.memory_efficiency = kAssumedMemoryEfficiency;
    d.link_bytes_per_second = row->link_gb_per_s * 1e9;
    d.op_seconds = kAssumedGpuOpSeconds;
    d.rank_start_seconds = kAssumedGpuRankStartSeconds;
    d.source = fmt::format("datasheet bf16 {} TFLOP/s, MFU {:.2f} ({})", row->bf16_tflops, d.mfu,
                           first->gpu_mfu > 0 ? "the plan's gpu_mfu" : "assumed");
    return d;
  }
  // CPU: every host of the case together; its threads against the calibration's.
  const std::map<std::string, int> hosts = RanksPerHost(layout);
  const bool calibrated = host && host->ok() && AllHostsHere(layout);
  d.name = "CPU host";
  d.flops_per_device = calibrated ? host->cpu_flops : kAssumedCpuGflops * 1e9;
  d.memory_bytes_per_second = calibrated ? host->memory_bytes_per_second : kAssumedCpuMemoryGbPerS * 1e9;
  d.op_seconds = calibrated && host->op_seconds > 0 ? host->op_seconds : kAssumedCpuOpSeconds;
  d.rank_start_seconds =
      calibrated && host->process_start_seconds > 0 ? host->process_start_seconds : kAssumedCpuRankStartSeconds;
  d.rank_setup_seconds = kAssumedCpuRankSetupSeconds;
  d.link_bytes_per_second = kAssumedLoopbackBytesPerSecond;
  d.mfu = DeviceRates::kDefaultCpuMfu;
  if (calibrated && host->threads > 0) {
    // The threads the case's ranks use on a host, as dist_backend.cc gives them, against the calibration's.
    const int ranks_on_host = hosts.empty() ? 1 : hosts.begin()->second;
    const int used = ThreadsPerRank(spec.training, ranks_on_host) * ranks_on_host;
    d.flops_per_device *= std::min(1.0, static_cast<double>(used) / host->threads);
  }
  d.source = calibrated ? fmt::format("calibrated on this host ({}, {})", host->host, host->measured_at)
                        : "assumed (no `protocol calibrate` figures for this host)";
  return d;
}

// Whether the case reads the model's weights: from its path, or from a path not on this machine.
bool ReadsWeights(WeightsSource source) {
  return source == WeightsSource::kPath || source == WeightsSource::kMissing;
}

// Bytes of the model's weights file(s) in `path` when here, else 2·N (an fp16 checkpoint).
int64_t CheckpointBytes(const std::string& path, const ModelConfig& config) {
  std::error_code ec;
  int64_t bytes = 0;
  if (!path.empty() && fs::is_directory(path, ec))
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.path().extension() == ".safetensors") bytes += static_cast<int64_t>(entry.file_size(ec));
  return bytes > 0 ? bytes : 2 * config.ParameterCount();
}

TimeEstimate TrainingTime(const Plan& plan, const CaseSpec& spec, NativeRole role, const ModelSpec& ms,
                          const ModelConfig& config, const DistLayout& layout, bool gpu, const DeviceRates& d) {
  TrainingTimeShape s;
  s.config = config;
  s.frozen_base = IsNf4(ms);
  s.steps = spec.length->count;
  s.seq_len = spec.training.seq_len;
  s.tokens_per_step = spec.training.batch_size * spec.training.seq_len;
  const int64_t sequences = SequencesForSteps(s.steps, spec.training.batch_size);
  s.eval_tokens = (sequences - s.steps * spec.training.batch_size) * s.seq_len *
                  (role == NativeRole::kShare ? layout.groups : 1);  // share: every group evaluates
  const std::map<std::string, int> hosts = RanksPerHost(layout);
  s.devices = gpu ? layout.world() : static_cast<int64_t>(hosts.size());
  s.device = d;
  s.prefetch = spec.training.prefetch;
  const int64_t nodes = layout.nodes();
  s.network_bytes_per_second = NetworkBytesPerSecond(plan, spec, layout, &s.network);
  if (role == NativeRole::kFsdp && layout.world() > 1) {
    const StepTraffic t = fsdp_step_traffic(FsdpTraffic(spec, ms, config, layout, gpu));
    s.one_ring = spec.training.sharding != Sharding::kHybrid || nodes < 2;
    s.step_bytes_between_nodes_per_link = nodes > 1 ? t.between_nodes / nodes : 0;
    const int64_t cross_per_rank = nodes > 1 ? t.between_nodes / layout.world() : 0;
    // Full sharding: one ring, every link carries a rank's bytes (within a node only when a node
    // runs several ranks); hybrid: the gathers and reduce-scatters within, the replicas' all-reduce across.
    s.step_bytes_within_node_per_rank =
        s.one_ring ? (layout.world() > nodes ? t.per_rank : 0) : t.per_rank - cross_per_rank;
  } else if (role == NativeRole::kShare) {
    if (layout.group_size > 1) {  // each group: FSDP over its K ranks of one node
      DistLayout group = layout;
      group.rank_nodes.assign(static_cast<size_t>(layout.group_size), layout.rank_nodes.front());
      group.groups = 1;
      s.step_bytes_within_node_per_rank = fsdp_step_traffic(FsdpTraffic(spec, ms, config, group, gpu)).per_rank;
    }
    ShareTrafficShape m;
    m.config = config;
    m.nodes = nodes;
    m.groups = layout.groups;
    m.ranks_per_group = layout.group_size;
    m.nf4 = IsNf4(ms);
    m.lora_rank = spec.training.LoraRank();
    m.lora_freeze_a = spec.training.lora_freeze_a;
    m.merge_bytes = CommunicationBytes(spec.training.merge_dtype, gpu);
    s.merges = layout.groups > 1 ? ShareMerges(spec) : 0;
    // One node: the merges go over the link between its devices (the bytes a rank sends).
    s.merge_bytes_per_link = nodes > 1 ? share_merge_between_nodes(m) / nodes : share_merge_per_rank(m);
    if (nodes <= 1) {
      s.network_bytes_per_second = d.link_bytes_per_second;
      s.network = FormatRate(d.link_bytes_per_second) + (gpu ? " (between the node's GPUs)" : " (loopback, assumed)");
    }
  }
  s.rank_processes = layout.world() > 1 || role == NativeRole::kShare ? layout.world() : 0;
  const WeightsSource source =
      native_weights_source(spec.workload, s.frozen_base, ms.init_random, plan.ResolvePath(ms.path));
  s.load_bytes = ReadsWeights(source) ? CheckpointBytes(plan.ResolvePath(ms.path), config) : 0;
  if (!spec.output_dir.empty())
    s.save_bytes = s.frozen_base ? 4 * adapter_parameter_count(config, spec.training.LoraRank())
                                 : (gpu ? 2 : 4) * config.ParameterCount();
  TimeEstimate e = estimate_training_time(s);
  e.nodes = static_cast<int>(nodes);
  return e;
}

TimeEstimate InferenceTime(const Plan& plan, const CaseSpec& spec, NativeRole role, const ModelSpec& ms,
                           const ModelConfig& config, const DistLayout& layout, bool gpu, const DeviceRates& d) {
  InferenceTimeShape s;
  s.config = config;
  s.max_new_tokens = spec.inference.max_new_tokens;
  s.prompt_tokens = prompt_token_bound(spec.inference.prompt);
  s.dtype_bytes = gpu ? 2 : 4;
  const bool nf4 = IsNf4(ms);
  // What a token reads: every decoder layer as placed and the head (the embedding: one row).
  s.weight_bytes = config.n_layers * inference_layer_bytes(config, s.dtype_bytes, nf4, ms.double_quant) +
                   s.dtype_bytes * (config.dim + config.vocab_size * config.dim);
  const bool one_process = role == NativeRole::kFsdp && spec.nodes <= 1;
  s.replicas = one_process ? 1 : layout.groups;
  const std::map<std::string, int> hosts = RanksPerHost(layout);
  if (gpu) {
    s.replicas_sharing_memory = PlaceReplica(plan, spec, role, layout, gpu).replicas_per_device;
  } else {
    s.replicas_sharing_memory = std::max<int64_t>(1, s.replicas / std::max<int64_t>(1, static_cast<int64_t>(hosts.size())));
  }
  s.device = d;
  s.rank_processes = one_process ? 0 : layout.world();
  const WeightsSource source = native_weights_source(spec.workload, nf4, ms.init_random, plan.ResolvePath(ms.path));
  s.load_bytes = ReadsWeights(source) ? CheckpointBytes(plan.ResolvePath(ms.path), config) : 0;
  TimeEstimate e = estimate_inference_time(s);
  e.nodes = layout.nodes();
  return e;
}

}  // namespace

TimeEstimate native_case_time(const Plan& plan, const CaseSpec& spec, NativeRole role,
                              const std::optional<HostCalibration>& host) {
  TimeEstimate none;
  std::string* why_not = &none.why_not;
  auto model = plan.models.find(spec.model);
  if (model == plan.models.end()) {
    *why_not = fmt::format("unknown model '{}'", spec.model);
    return none;
  }
  std::optional<ModelConfig> config = Dimensions(plan, model->second);
  auto layout = role == NativeRole::kFsdp ? FsdpLayout(plan, spec) : ShareLayout(plan, spec);
  if (!config || !layout.ok()) {
    *why_not = "the model's dimensions or the case's layout are unknown";
    return none;
  }
  const bool training = spec.workload != Workload::kInference;
  if (training && (!spec.length || spec.length->unit != Length::Unit::kSteps)) {
    *why_not = "a length in epochs: its steps depend on the dataset's size, which validate does not read";
    return none;
  }
  const bool gpu = OnGpu(spec, CaseNodes(plan, spec, *layout));
  std::optional<DeviceRates> d = CaseDeviceRates(plan, spec, *layout, gpu, host, why_not);
  if (!d) return none;
  if (gpu)
    d->name = fmt::format("{} x {}", training ? layout->world() : layout->group_size, d->name);
  return training ? TrainingTime(plan, spec, role, model->second, *config, *layout, gpu, *d)
                  : InferenceTime(plan, spec, role, model->second, *config, *layout, gpu, *d);
}

}  // namespace native
}  // namespace protocol
