#include "backends/native/estimate/time_estimate.h"

#include <algorithm>

#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/model/decode_bucket_capacity.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

double NonEmbedding(const ModelConfig& c) {
  return static_cast<double>(c.ParameterCount() - c.EmbeddingParameterCount());
}

// Start-up: the rank processes (started side by side: one start, then `setup_seconds` of their
// own work before the first step or request) and the model's bytes read.
void AddStartUp(const DeviceRates& d, int64_t rank_processes, double setup_seconds, int64_t load_bytes,
                TimeEstimate* e) {
  const double start = rank_processes > 0 ? d.rank_start_seconds + setup_seconds : 0.0;
  const double load = static_cast<double>(load_bytes) / kAssumedDiskBytesPerSecond;
  std::vector<std::string> how;
  if (rank_processes > 0)
    how.push_back(fmt::format("{} rank process(es) start {}{}", rank_processes, FormatDuration(d.rank_start_seconds),
                              setup_seconds > 0
                                  ? fmt::format(" + set-up {}", FormatDuration(setup_seconds))
                                  : ""));
  else how.push_back("in the runner's process");
  how.push_back(load_bytes > 0 ? fmt::format("{} read at {}", FormatBytes(load_bytes),
                                             FormatRate(kAssumedDiskBytesPerSecond))
                               : "random weights, nothing read");
  e->terms.push_back({"start-up", start + load, Join(how, ", ")});
}

// The link probe (link_probe.h): per size S, 1 + iterations all-reduces of
// 2(n−1)/n · S bytes per link at the network's rate; sizes in order while the
// time so far plus the next size's stays within the budget (the first always).
void AddLinkProbe(const TrainingTimeShape& s, TimeEstimate* e) {
  if (s.network_bytes_per_second <= 0) {
    e->terms.push_back({"link probe", 0.0, "network rate unknown: not counted"});
    return;
  }
  const double n = static_cast<double>(s.probe_ranks);
  double seconds = 0;
  int64_t largest = 0;
  for (size_t i = 0; i < s.probe_sizes.size(); ++i) {
    const double bytes = 2 * (n - 1) / n * static_cast<double>(s.probe_sizes[i]);
    const double cost = (1 + s.probe_iterations) * bytes / s.network_bytes_per_second;
    if (i > 0 && seconds + cost > s.probe_budget_seconds) break;
    seconds += cost;
    largest = s.probe_sizes[i];
  }
  e->terms.push_back({"link probe", seconds,
                      fmt::format("all-reduces of {}..{} over {} ranks, {} each, at {} (its {} s budget)",
                                  FormatBytes(s.probe_sizes.front()), FormatBytes(largest), s.probe_ranks,
                                  1 + s.probe_iterations, s.network, FormatFigure(s.probe_budget_seconds))});
}

void Sum(TimeEstimate* e) {
  e->seconds = 0;
  for (const TimeTerm& t : e->terms)
    if (t.counted) e->seconds += t.seconds;
}

}  // namespace

std::string FormatFlops(double flops) {
  if (flops >= 1e15) return fmt::format("{:.3g} PFLOP", flops / 1e15);
  if (flops >= 1e12) return fmt::format("{:.3g} TFLOP", flops / 1e12);
  if (flops >= 1e9) return fmt::format("{:.3g} GFLOP", flops / 1e9);
  return fmt::format("{:.3g} MFLOP", flops / 1e6);
}

std::string FormatRate(double bytes_per_second) {
  if (bytes_per_second >= 1e9) return fmt::format("{:.3g} GB/s", bytes_per_second / 1e9);
  return fmt::format("{:.3g} MB/s", bytes_per_second / 1e6);
}

TimeEstimate estimate_training_time(const TrainingTimeShape& s) {
  TimeEstimate e;
  const DeviceRates& d = s.device;
  e.device = d.name + (d.source.empty() ? "" : ", " + d.source);
  AddStartUp(d, s.rank_processes, d.rank_setup_seconds, s.load_bytes, &e);
  const ModelConfig& c = s.config;
  const double layer_forward = 2.0 * static_cast<double>(layer_parameter_count(c)) +
                               4.0 * static_cast<double>(c.n_heads * c.HeadDim() * s.seq_len);
  const double per_token = s.frozen_base ? c.FrozenBaseTrainingFlopsPerToken(s.seq_len)
                                         : c.TrainingFlopsPerToken(s.seq_len);
  const double recompute_per_token = static_cast<double>(s.recomputed_layers) * layer_forward;
  const double rate = static_cast<double>(std::max<int64_t>(1, s.devices)) * d.flops_per_device * d.mfu;
  const double flops =
      static_cast<double>(s.steps) * static_cast<double>(s.tokens_per_step) * (per_token + recompute_per_token);
  const double compute = rate > 0 ? flops / rate : 0.0;
  const std::string rate_how = fmt::format("{} x {}/s at {:.2f} of peak", s.devices, FormatFlops(d.flops_per_device), d.mfu);
  // Communication of the steps (traffic.h's bytes over the links).
  const double within = d.link_bytes_per_second > 0
                            ? static_cast<double>(s.step_bytes_within_node_per_rank) / d.link_bytes_per_second
                            : 0.0;
  const bool net_known = s.network_bytes_per_second > 0;
  const double between =
      net_known ? static_cast<double>(s.step_bytes_between_nodes_per_link) / s.network_bytes_per_second : 0.0;
  const double per_step_comm = s.one_ring ? std::max(within, between) : within + between;
  const double comm = per_step_comm * static_cast<double>(s.steps);
  std::vector<std::string> comm_how;
  if (s.step_bytes_within_node_per_rank > 0)
    comm_how.push_back(fmt::format("{} per rank within a node at {}", FormatBytes(s.step_bytes_within_node_per_rank),
                                   FormatRate(d.link_bytes_per_second)));
  if (s.step_bytes_between_nodes_per_link > 0)
    comm_how.push_back(net_known ? fmt::format("{} per link between nodes at {}",
                                               FormatBytes(s.step_bytes_between_nodes_per_link), s.network)
                                 : fmt::format("{} per link between nodes, network rate unknown ({}): not counted",
                                               FormatBytes(s.step_bytes_between_nodes_per_link), s.network));
  e.terms.push_back({"compute", compute,
                     fmt::format("{} in {} steps{}, {}", FormatFlops(flops), s.steps,
                                 s.recomputed_layers > 0
                                     ? fmt::format(" ({} of {} layers recomputed in backward)", s.recomputed_layers,
                                                   c.n_layers)
                                     : "",
                                 rate_how)});
  if (!comm_how.empty()) {
    const bool hidden = s.prefetch && comm <= compute;
    e.terms.push_back({"communication", comm,
                       fmt::format("{} steps x {}; {}", s.steps, Join(comm_how, " + "),
                                   s.prefetch ? "prefetch: overlapped with compute (the larger counts)"
                                              : "no prefetch: added to compute"),
                       !hidden});
    if (s.prefetch && !hidden) e.terms[e.terms.size() - 2].counted = false;  // compute hides behind it
  }
  if (!s.probe_sizes.empty() && s.probe_ranks > 1) AddLinkProbe(s, &e);
  if (s.merges > 0) {
    const double merge = net_known ? static_cast<double>(s.merges) * static_cast<double>(s.merge_bytes_per_link) /
                                         s.network_bytes_per_second
                                   : 0.0;
    e.terms.push_back({"merges", merge,
                       fmt::format("{} merge(s) x {} per link at {}", s.merges, FormatBytes(s.merge_bytes_per_link),
                                   net_known ? s.network : "an unknown rate: not counted")});
  }
  if (s.eval_tokens > 0 && rate > 0) {
    const double eval = static_cast<double>(s.eval_tokens) * per_token / 3.0 / rate;
    e.terms.push_back({"evaluation", eval, fmt::format("{} held-out tokens, forward only", s.eval_tokens)});
  }
  if (s.save_bytes > 0)
    e.terms.push_back({"save", static_cast<double>(s.save_bytes) / kAssumedDiskBytesPerSecond,
                       fmt::format("{} written at {}", FormatBytes(s.save_bytes), FormatRate(kAssumedDiskBytesPerSecond))});
  Sum(&e);
  return e;
}

int64_t DecodeOpsPerToken(const ModelConfig& c, bool fused, bool nf4, bool device_position) {
  const int64_t per_layer =
      !fused ? kDecodeOpsPerLayerComposite : nf4 ? kDecodeOpsPerLayerFusedNf4 : kDecodeOpsPerLayerFused;
  int64_t rest = fused ? kDecodeOpsHeadFused : kDecodeOpsHeadComposite;
  if (device_position) rest += fused ? kDecodeOpsDevicePositionFused : kDecodeOpsDevicePositionComposite;
  return per_layer * c.n_layers + rest;
}

TimeEstimate estimate_inference_time(const InferenceTimeShape& s) {
  TimeEstimate e;
  const DeviceRates& d = s.device;
  e.device = d.name + (d.source.empty() ? "" : ", " + d.source);
  AddStartUp(d, s.rank_processes, d.inference_rank_setup_seconds, s.load_bytes, &e);
  const ModelConfig& c = s.config;
  const double rate = d.flops_per_device * d.mfu;
  const double prefill_per_request = rate > 0 ? static_cast<double>(s.prompt_tokens) * 2.0 * NonEmbedding(c) / rate : 0;
  // KV bytes per position: k and v of every layer.
  const double kv_per_position = 2.0 * static_cast<double>(c.n_layers * c.n_kv_heads * c.HeadDim() * s.dtype_bytes);
  const double bandwidth = d.memory_bytes_per_second * d.memory_efficiency /
                           static_cast<double>(std::max<int64_t>(1, s.replicas_sharing_memory));
  const bool device_position = s.decode_step != DecodeStepChoice::kHost;
  const bool graph = s.decode_step == DecodeStepChoice::kGraph;
  const int64_t ops = DecodeOpsPerToken(c, s.fused_decode_ops, s.nf4, device_position);
  const double op_floor = static_cast<double>(ops) * d.op_seconds;
  // The composite step at the device's position attends over its whole bucket, masked; the fused ops
  // (and the host's position) over the positions filled so far.
  const bool whole_bucket = device_position && !s.fused_decode_ops;
  double prefill = 0, decode = 0;
  int64_t tokens = 0, op_bound_tokens = 0;
  for (int n : s.max_new_tokens) {
    prefill += prefill_per_request;
    tokens += n;
    // Reads per token at the request's mean position (the KV cache grows
    // linearly), or of its whole bucket.
    const double position =
        whole_bucket ? static_cast<double>(DecodeBucketCapacity(s.prompt_tokens + n, c.max_seq_len))
                        : static_cast<double>(s.prompt_tokens) + static_cast<double>(n) / 2.0;
    const double memory = bandwidth > 0 ? (static_cast<double>(s.weight_bytes) + kv_per_position * position) / bandwidth : 0;
    if (op_floor > memory) op_bound_tokens += n;
    decode += static_cast<double>(n) * std::max(memory, op_floor);
  }
  const double r = static_cast<double>(std::max<int64_t>(1, s.replicas));
  e.terms.push_back({"prefill", prefill / r,
                     fmt::format("{} requests x {} prompt tokens at {}/s x {:.2f}{}", s.max_new_tokens.size(),
                                 s.prompt_tokens, FormatFlops(d.flops_per_device), d.mfu,
                                 s.replicas > 1 ? fmt::format(", over {} replicas", s.replicas) : "")});
  e.terms.push_back(
      {"decode", decode / r,
       fmt::format("{} tokens, each reading {} of weights + the KV cache{} at {}{}; op floor {} per token ({} ops{}){}",
                   tokens, FormatBytes(s.weight_bytes),
                   !device_position ? ""
                   : whole_bucket
                       ? fmt::format(" of its request's whole decode bucket (decode_step {})", NameOf(s.decode_step))
                       : fmt::format(" so far (decode_step {}: the fused ops at the device's position)",
                                     NameOf(s.decode_step)),
                   FormatRate(bandwidth),
                   s.replicas_sharing_memory > 1 ? fmt::format(" (shared by {} replicas)", s.replicas_sharing_memory) : "",
                   FormatDuration(op_floor), ops,
                   graph ? ", dispatched eagerly: a replayed CUDA graph's cost is not modeled, an upper bound" : "",
                   op_bound_tokens == tokens ? ", which bounds every token"
                   : op_bound_tokens > 0     ? ", which bounds some tokens"
                                             : "") +
           (s.replicas > 1 ? fmt::format("; over {} replicas", s.replicas) : "")});
  Sum(&e);
  return e;
}

}  // namespace native
}  // namespace protocol
