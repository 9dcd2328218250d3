#include "backends/native/check/native_check.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "backends/native/check/check_support.h"
#include "backends/native/model/model_resolve.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/data.h"
#include "backends/native/training/parquet.h"
#include "backends/native/training/training_data.h"
#include "runner/base/text.h"
#include "runner/plan/case_placeholders.h"
#include "runner/plan/networks.h"

namespace protocol {
namespace native {

namespace {
namespace fs = std::filesystem;


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

// inference.decode_step off the host's position: its step needs the model
// on one device (model.h model_decode_step), and a CUDA graph needs that
// device to be a GPU. Only what the plan decides is checked: a case on
// `device: auto` whose nodes do not state their GPUs is refused by the run
// (generate.h), before its first request.
void DecodeStepIssues(const Plan& plan, const CaseSpec& spec, NativeRole role, std::vector<CaseIssue>* issues) {
  const DecodeStepChoice step = spec.inference.decode_step;
  if (spec.workload != Workload::kInference || step == DecodeStepChoice::kHost) return;
  auto layout = role == NativeRole::kFsdp ? FsdpLayout(plan, spec) : ShareLayout(plan, spec);
  if (!layout.ok()) return;  // Check reports the layout
  const std::vector<const NodeSpec*> nodes = CaseNodes(plan, spec, *layout);
  const bool gpu = OnGpu(spec, nodes);
  if (step == DecodeStepChoice::kGraph && !gpu) {
    bool cpu_only = spec.training.device == DeviceChoice::kCpu;
    if (!cpu_only && spec.training.device == DeviceChoice::kAuto) {
      cpu_only = !nodes.empty();
      for (const NodeSpec* n : nodes) cpu_only = cpu_only && n && n->gpus == 0;
    }
    if (cpu_only)
      issues->push_back({CaseIssueKind::kError,
                         fmt::format("inference.decode_step: graph replays a CUDA graph, and this case runs on CPUs "
                                     "({}); use decode_step: device (the same step, not recorded) or host",
                                     spec.training.device == DeviceChoice::kCpu ? "training.device: cpu"
                                                                                : "its nodes state no GPUs")});
    return;
  }
  const ReplicaPlacement placement = PlaceReplica(plan, spec, role, *layout, gpu);
  if (placement.devices > 1)
    issues->push_back({CaseIssueKind::kError,
                       fmt::format("inference.decode_step: {} decodes with the model on one GPU, and this case places "
                                   "each replica over {} GPUs (one per rank of a replica on its node); use "
                                   "decode_step: host, or one rank per replica ({})",
                                   NameOf(step), placement.devices,
                                   role == NativeRole::kFsdp ? "training.ranks_per_node: 1" : "a topology of Gx1 parts")});
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
  DecodeStepIssues(plan, spec, role, &issues);
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
