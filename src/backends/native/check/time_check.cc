#include "backends/native/check/native_check.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "backends/native/check/check_support.h"
#include "backends/native/distributed/link_probe.h"
#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/estimate/time_estimate.h"
#include "backends/native/estimate/traffic.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/training/training_data.h"
#include "runner/base/text.h"
#include "runner/exec/calibration.h"
#include "runner/plan/networks.h"

namespace protocol {
namespace native {

namespace {
namespace fs = std::filesystem;

bool IsThisHost(const std::string& host) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1" || host == ThisHost();
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
  d.inference_rank_setup_seconds = kAssumedCpuInferenceRankSetupSeconds;
  d.link_bytes_per_second = kAssumedLoopbackBytesPerSecond;
  d.mfu = DeviceRates::kDefaultCpuMfu;
  if (calibrated && host->threads > 0) {
    // The threads the case's ranks use on a host, as dist_backend.cc gives them, against the calibration's.
    const int ranks_on_host = hosts.empty() ? 1 : hosts.begin()->second;
    const int used = ThreadsPerRank(spec.training, ranks_on_host) * ranks_on_host;
    d.flops_per_device *= std::min(1.0, static_cast<double>(used) / host->threads);
  }
  if (calibrated) {
    d.source = fmt::format("calibrated on this host ({}, {})", host->host, host->measured_at);
    // A calibration taken on a busy machine has low rates: every estimate from it runs long.
    if (const std::string note = CalibrationContentionNote(*host); !note.empty())
      d.source += ", " + note + ": `protocol calibrate` on an idle machine replaces it";
  } else {
    d.source = "assumed (no `protocol calibrate` figures for this host)";
  }
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
  s.recomputed_layers = checkpointed_layers(config.n_layers, native_case_checkpointing(plan, spec, role).every);
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
    const FsdpTrafficShape shape = FsdpTraffic(spec, ms, config, layout, gpu);
    const StepTraffic t = fsdp_step_traffic(shape);
    s.one_ring = shape.replicas == 1;  // no copies across nodes: one ring over every rank
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
  if (nodes > 1 && spec.training.link_probe) {  // the probe before the first step (link_probe.h), as the ranks size it
    s.probe_sizes = LinkProbeSizes(LargestCollectiveBytes(config, gpu ? 2 : 4, layout.groups, layout.group_size));
    s.probe_ranks = layout.world();
    s.probe_budget_seconds = kLinkProbeBudgetSeconds;
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
  s.fused_decode_ops = !gpu;
  s.nf4 = nf4;
  s.decode_step = spec.inference.decode_step;
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
