#ifndef PROTOCOL_BACKENDS_NATIVE_ESTIMATE_TIME_ESTIMATE_H_
#define PROTOCOL_BACKENDS_NATIVE_ESTIMATE_TIME_ESTIMATE_H_

// Expected wall time of the native backends' cases, from the model's
// dimensions, the case's length and the devices' figures alone: pure
// arithmetic, no libtorch, so that `protocol validate` prints it for a plan on
// any machine (docs/estimates.md has the formulas with the shipped plans'
// figures). native_check.cc fills the inputs from a plan; each term is a
// separate figure so that a case whose measured time is far from it names the
// term most likely wrong.
//
// Letters as memory_estimate.h; N parameters, N_emb = V·C the embedding's.
//
// ---- training -------------------------------------------------------------
//   FLOPs per token  f = 6·(N − N_emb) + 12·L·NH·HD·T   (ModelConfig::TrainingFlopsPerToken,
//                    PaLM appendix B, the benchmark's and MFU's formula);
//                    4-bit (QLoRA, base frozen): 4·(N − N_emb) + 12·L·NH·HD·T
//                    plus, for each decoder layer recomputed in backward
//                    (training.checkpoint_every as the case runs), its forward
//                    again: 2·n_layer + 4·NH·HD·T
//   compute    = steps · B_global · T · f / R,   R = devices · peak · MFU
//                (a CPU host's achievable FLOP/s, every host of the case together)
//   communication per step, by traffic.h's formulas (what the byte counters are tested against):
//                between nodes: the bytes one node sends to the next (between_nodes / nodes)
//                  over the network rate; within a node: a rank's own bytes over the link
//                  between its devices; full sharding is one ring (its slowest link sets the
//                  pace: the larger of the two), hybrid sharding two collectives (their sum)
//   steps      = compute + communication        without prefetch (every collective waited)
//              = max(compute, communication)    with prefetch (training.prefetch: overlapped)
//   merges     (share) merges · merge bytes per link over the network rate
//   evaluation = held-out tokens · f/3 / R       (forward only; 5 % of the sequences read)
//   start-up   = rank processes' start (calibrated, else assumed) + model bytes read / disk rate
//   save       = model bytes written / disk rate
//
// ---- inference --------------------------------------------------------------
//   prefill    per request: prompt · 2·(N − N_emb) / (peak · MFU of one device)
//   decode     per token:   max( (weight bytes + KV bytes so far) / (bandwidth · efficiency),
//                                ops per token · seconds per op )
//              (with the position on the device, inference.decode_step device or graph,
//              and the composite ops: the KV bytes of the request's whole decode bucket)
//              memory-bound on a GPU (every weight read once per token); the op floor is
//              the dispatch of a decode layer's small ops (DecodeOpsPerToken), what bounds
//              a tiny model on a CPU
//   replicas   R replicas share the schedule: total / R; replicas on one CPU host share
//              its memory bandwidth
//   start-up   as training

#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/model/model_config.h"
#include "runner/exec/estimate.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

// ATen ops one decoder layer's decode step dispatches (model.cc;
// native_model_test.cc counts them all, and the ops of a whole token):
//   fused      a CPU float32 model with its own projections: fused_ops.h's ops
//              and the joined projections
//   fused nf4  a CPU float32 4-bit model, its projections dequantized on use:
//              the fused ops over seven projections (q, k and v set side by
//              side by one cat: 15 ops, what a layer of kept dequantized
//              projections runs), and 4 more ops per projection for its
//              dequantization's output and views
//   composite  anything else (a GPU's bf16): two RMSNorms of 8
//              ops, rotary as 5 ops for q and for k, the cache's copies,
//              libtorch 1.13's attention math (2.x's one SDPA op makes it a
//              few fewer), the projections, SiLU·up, the residual adds, views
// A step at a position on the device (inference.decode_step device or graph,
// model.h model_decode_step) runs the same layer: where the fused ops serve,
// their rotation, cache write and attention read the position on the device
// (fused_ops.h rope_cache_at, decode_attention_at); elsewhere the composite
// layer's rotation writes the cache with index_copy_ and attends over the
// whole cache, masked, in no more ops than the composite layer's count.
inline constexpr int64_t kDecodeOpsPerLayerFused = 10;
inline constexpr int64_t kDecodeOpsPerLayerFusedNf4 = 43;
inline constexpr int64_t kDecodeOpsPerLayerComposite = 61;
// A token's ops outside its decoder layers: the embedding, the final RMSNorm
// (one fused op, or 8), the head, the argmax and the token's bookkeeping.
inline constexpr int64_t kDecodeOpsHeadFused = 13;
inline constexpr int64_t kDecodeOpsHeadComposite = 20;
// What a step at a position on the device adds to them: the rotary rows
// selected at the position (2 ops where the fused ops serve), and where the
// composite ops attend, the mask of the visible positions (3 more).
inline constexpr int64_t kDecodeOpsDevicePositionFused = 2;
inline constexpr int64_t kDecodeOpsDevicePositionComposite = 5;
// Ops of one decode step (every layer and the rest of the token): `fused`,
// the fused ops serve (a CPU float32 model); `nf4`, a 4-bit model;
// `device_position`, the step at a position on the device.
int64_t DecodeOpsPerToken(const ModelConfig& c, bool fused, bool nf4 = false, bool device_position = false);
// Disk rate of model reads and writes: 2 GB/s, a datacenter NVMe SSD's
// sequential read (PCIe 4.0 drives list 3-7 GB/s; a shared path is slower).
inline constexpr double kAssumedDiskBytesPerSecond = 2e9;
// Gloo over loopback TCP between processes of one host: 2 GB/s.
inline constexpr double kAssumedLoopbackBytesPerSecond = 2e9;
// Starting a rank on a GPU node: the process, libtorch, the CUDA context and
// the NCCL communicator: 15 s (assumed; a CPU host's is calibrated).
inline constexpr double kAssumedGpuRankStartSeconds = 15.0;
// Starting a rank process on a CPU host without calibration: 1 s (assumed).
inline constexpr double kAssumedCpuRankStartSeconds = 1.0;
// A CPU case's rank processes past their start: the Gloo rendezvous, the
// tokenizer and the dataset read and tokenized, the model built, the results
// sent back to the runner: 0.75 s, what the quick start's cases spent outside
// their steps beyond the calibrated process start on the development
// machine (docs/performance.md, "Time estimate"). On a GPU node it is part
// of kAssumedGpuRankStartSeconds.
inline constexpr double kAssumedCpuRankSetupSeconds = 0.75;
// An inference case's rank processes past their start: no rendezvous beyond
// their own group, no dataset; the model's read is the start-up's load term.
// 0.05 s: the quick start's one-process share inference (qn.2.5) on a 2-core
// AMD EPYC spent 0.596 s in all, of which 0.489 s the calibrated process
// start and 0.072 s generating, leaving 0.035 s (docs/estimates.md).
inline constexpr double kAssumedCpuInferenceRankSetupSeconds = 0.05;

// The figures a case computes with (native_check.cc fills them from the
// device table, the node's gpu_mfu and this host's calibration).
struct DeviceRates {
  std::string name;                 // "8 x H100 SXM per node", "CPU host"
  double flops_per_device = 0;      // peak FLOP/s in the compute dtype (a CPU host: its matmul rate)
  double mfu = kDefaultCpuMfu;      // the achievable fraction of it
  double memory_bytes_per_second = 0;  // per device
  double memory_efficiency = 1.0;
  double link_bytes_per_second = 0;    // between two devices of a node (a CPU host: loopback)
  double op_seconds = 0;               // one small op's dispatch
  double rank_start_seconds = 0;       // starting one rank process
  double rank_setup_seconds = 0;       // a training rank's set-up past the start (kAssumedCpuRankSetupSeconds)
  double inference_rank_setup_seconds = 0;  // an inference rank's (kAssumedCpuInferenceRankSetupSeconds)
  std::string source;                  // "assumed (datasheet, MFU 0.40 assumed)", "calibrated on HOST at DATE"
  // What fraction of a CPU host's calibrated matmul rate training achieves:
  // the quick start's steps (small matmuls, 256 x 192 x 512, and the
  // backward's elementwise work) on this project's development machine
  // (docs/performance.md, "Time estimate").
  static constexpr double kDefaultCpuMfu = 0.55;
};

struct TrainingTimeShape {
  ModelConfig config;
  bool frozen_base = false;      // 4-bit QLoRA: 4·(N − N_emb) instead of 6·
  int64_t recomputed_layers = 0; // decoder layers whose forward runs again in backward
  int64_t steps = 0;
  int64_t tokens_per_step = 0;   // global batch × seq_len
  int64_t seq_len = 0;
  int64_t eval_tokens = 0;
  int64_t devices = 1;           // compute devices of the case (a CPU case: its hosts)
  DeviceRates device;
  // Per step: a node's bytes to the next node, and one rank's bytes within its node.
  int64_t step_bytes_between_nodes_per_link = 0;
  int64_t step_bytes_within_node_per_rank = 0;
  bool one_ring = true;          // full sharding: within and between are one ring (max); hybrid: sum
  double network_bytes_per_second = 0;  // 0: unknown (the term says so; not counted)
  std::string network;           // "10 Gbit/s (network: 10G)"
  bool prefetch = true;
  int64_t merges = 0;
  int64_t merge_bytes_per_link = 0;
  int64_t rank_processes = 0;    // 0: the case runs in the runner's process
  int64_t load_bytes = 0;        // model bytes read at start (0: random init)
  int64_t save_bytes = 0;        // the resulting model written
  // The link probe before the first step (link_probe.h; multi-node cases with
  // training.link_probe): its sizes in order, over `probe_ranks` ranks, each
  // one warm-up and `probe_iterations` timed all-reduces, ended by its budget
  // as the probe ends itself. Empty: no probe.
  std::vector<int64_t> probe_sizes;
  int64_t probe_ranks = 0;
  int probe_iterations = 5;
  double probe_budget_seconds = 10;
};
TimeEstimate estimate_training_time(const TrainingTimeShape& shape);

struct InferenceTimeShape {
  ModelConfig config;
  std::vector<int> max_new_tokens;  // the schedule
  int64_t prompt_tokens = 0;
  int64_t weight_bytes = 0;         // one replica's weights as placed
  int64_t dtype_bytes = 4;          // of the KV cache
  int64_t replicas = 1;
  int64_t replicas_sharing_memory = 1;  // replicas on one CPU host (their bandwidth is shared)
  bool fused_decode_ops = false;        // the fused ops serve (a CPU float32 model)
  bool nf4 = false;                     // a 4-bit model (kDecodeOpsPerLayerFusedNf4 where the fused ops serve)
  // inference.decode_step: device or graph put the position on the device:
  // its ops (DecodeOpsPerToken), and without the fused ops every token attends
  // to its request's whole decode bucket (decode_bucket_capacity.h), masked;
  // graph replays the step from a CUDA graph, whose dispatch is not modeled
  // (the eager step's op floor is counted: an upper bound).
  DecodeStepChoice decode_step = DecodeStepChoice::kHost;
  DeviceRates device;
  int64_t rank_processes = 0;
  int64_t load_bytes = 0;
};
TimeEstimate estimate_inference_time(const InferenceTimeShape& shape);

// "1.2 TFLOP", "340 GFLOP"; "12.5 GB/s"; "989 TFLOP/s".
std::string FormatFlops(double flops);
std::string FormatRate(double bytes_per_second);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_ESTIMATE_TIME_ESTIMATE_H_
