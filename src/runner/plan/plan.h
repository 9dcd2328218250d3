#ifndef PROTOCOL_RUNNER_PLAN_PLAN_H_
#define PROTOCOL_RUNNER_PLAN_PLAN_H_

// The plan model: what a YAML plan (format v1, docs/plan-format.md) means once
// parsed, validated and resolved. Inheritance (plan defaults → stage defaults →
// case) is already applied: every Case is complete on its own. Nothing here
// knows YAML (plan_parser.h builds it) or how cases are executed (runner.h).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/base/status.h"

namespace protocol {

// Where a value came from, for messages such as "plans/x.yaml:12:5: ...".
// line and column are 1-based; 0 means unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string ToString() const;  // "file:line:col" (or "file" when line is 0)
};

// ---- closed vocabularies ------------------------------------------------------
// Every word the plan format gives a fixed set of values is an enum, read once
// by the parser; its spelling is one table, Vocabulary<E>() (plan.cc), which
// NameOf, ParseName and NamesOf (the parser's choices) read.
template <typename E>
struct VocabularyEntry {
  E value;
  const char* name;
};
template <typename E>
const std::vector<VocabularyEntry<E>>& Vocabulary();

// The name of `value` ("?" for a value outside the table).
template <typename E>
const char* NameOf(E value) {
  for (const auto& entry : Vocabulary<E>())
    if (entry.value == value) return entry.name;
  return "?";
}
// The value named `text` exactly; nullopt for any other text.
template <typename E>
std::optional<E> ParseName(std::string_view text) {
  for (const auto& entry : Vocabulary<E>())
    if (text == entry.name) return entry.value;
  return std::nullopt;
}
// Every name, in table order.
template <typename E>
std::vector<std::string> NamesOf() {
  std::vector<std::string> names;
  for (const auto& entry : Vocabulary<E>()) names.push_back(entry.name);
  return names;
}

enum class Workload { kPretrain, kFinetune, kInference };  // "pretrain" | "finetune" | "inference"
enum class Quantization { kNone, kNf4 };                   // models[].quantization: "none" | "nf4"
enum class DeviceChoice { kAuto, kCpu, kCuda };            // training.device: "auto" | "cpu" | "cuda"
enum class Sharding { kFull, kHybrid };                     // training.sharding: "full" | "hybrid"
enum class ReduceDtype { kAuto, kFloat32, kBfloat16 };      // training.reduce_dtype, merge_dtype: "auto" | "float32" | "bfloat16"
enum class OuterState { kHost, kDevice };                   // training.outer_state: "host" | "device"
enum class DecodeStepChoice { kHost, kDevice, kGraph };     // inference.decode_step: "host" | "device" | "graph"
template <>
const std::vector<VocabularyEntry<Workload>>& Vocabulary<Workload>();
template <>
const std::vector<VocabularyEntry<Quantization>>& Vocabulary<Quantization>();
template <>
const std::vector<VocabularyEntry<DeviceChoice>>& Vocabulary<DeviceChoice>();
template <>
const std::vector<VocabularyEntry<Sharding>>& Vocabulary<Sharding>();
template <>
const std::vector<VocabularyEntry<ReduceDtype>>& Vocabulary<ReduceDtype>();
template <>
const std::vector<VocabularyEntry<OuterState>>& Vocabulary<OuterState>();
template <>
const std::vector<VocabularyEntry<DecodeStepChoice>>& Vocabulary<DecodeStepChoice>();

// The system an fsdp case with `training.sharding: hybrid` reports as when it
// names none: a baseline column of its own beside the methodology's `fsdp`.
inline constexpr const char* kHybridFsdpSystem = "fsdp-hybrid";

inline const char* WorkloadName(Workload w) { return NameOf(w); }
inline std::optional<Workload> ParseWorkload(const std::string& s) { return ParseName<Workload>(s); }

// A training length: N steps or N epochs.
struct Length {
  enum class Unit { kSteps, kEpochs };
  Unit unit = Unit::kSteps;
  int64_t count = 0;
  // "1000 steps", "1 epoch", "2 epochs".
  std::string ToString() const;
  const char* UnitName() const;  // "steps" | "epochs"
  bool operator==(const Length& o) const { return unit == o.unit && count == o.count; }
  bool operator!=(const Length& o) const { return !(*this == o); }
};

// A model as named in the plan's `models:` map.
struct ModelSpec {
  std::string name;          // key in `models:`, e.g. "llama2-70b"; reports group by it
  std::string preset;        // built-in architecture preset, e.g. "llama2-70b", "tiny"
  std::string path;          // HF-style model directory (config.json, *.safetensors, tokenizer.model); may be empty
  Quantization quantization = Quantization::kNone;
  // nf4 only: QLoRA's double quantization — the float32 absmax of each block
  // of 64 weights is itself quantized to 8 bits in blocks of 256 (one float32
  // scale per 256 absmax values). Default false (bitsandbytes' default).
  bool double_quant = false;
  // `init: random`: measure on seeded random weights, even where the path has
  // weights. Default (`init: weights`): the path's weights; a native case
  // whose model has none fails validate, except a full-precision pretrain,
  // which trains from a seeded random start by definition.
  bool init_random = false;
  // `from_case: ID`: the model that case of this plan saves. The parser sets
  // `path` to that case's output_dir, expanded and made absolute from the
  // working directory (where the case writes it); the plan's text keeps the id.
  std::string from_case;
  SourceLocation where;
};

// A dataset as named in the plan's `datasets:` map.
struct DatasetSpec {
  std::string name;    // key in `datasets:`
  std::string format;  // "text" | "jsonl" | "dolly" | "tokens" | "parquet"
  std::string path;
  std::string column;  // parquet: the text column; "" = "text" (fineweb-edu's)
  SourceLocation where;
};

// `env:` at cluster, network, node or case level (docs/plan-format.md,
// "env"): what the ranks of a native case get besides protocol's own
// variables, merged in that order (a later level's value wins; networks.h
// MergeEnv). Written as a map of NAME: value; the key `inherit` takes a list
// of names whose values are passed on from the runner's own environment.
struct EnvSpec {
  std::map<std::string, std::string> vars;
  std::vector<std::string> inherit;
  SourceLocation where;  // the `env:` map, for messages
  bool empty() const { return vars.empty() && inherit.empty(); }
};

struct NodeSpec {
  std::string name;  // e.g. "rig0"; topologies refer to it
  std::string host;  // hostname or address used by launchers
  int gpus = 0;      // accelerators on the node (0 = CPU only)
  double gpu_memory_gb = 0;  // memory of each accelerator in GB (10^9 bytes); 0 = not stated
  // Which accelerator, as the device table names it ("H100 SXM"; the native
  // backends' time estimate reads its figures, docs/estimates.md); "" = not stated.
  std::string gpu_model;
  // The fraction of the accelerator's peak FLOP/s training achieves (MFU),
  // in (0, 1]; 0 = not stated (the device table's assumption).
  double gpu_mfu = 0;
  EnvSpec env;
};

// Optional two-node rehearsal on one host (docs/rehearsal.md): a veth pair shaped with tc.
// The texts are kept as written (the resolved plan writes them back); the
// parser reads them with ParseTcRate / ParseTcTime, which the run uses as read.
struct NetworkEmulation {
  std::string bandwidth;       // as written, e.g. "100mbit"; "" = no rate limit
  std::string delay;           // as written, e.g. "5ms"; "" = no delay
  double bits_per_second = 0;  // bandwidth, read (> 0 when bandwidth is set)
  double delay_seconds = 0;    // delay, read (>= 0)
};

// tc's rates in bits per second: a number > 0 and a unit, "100mbit" -> 1e8,
// "1gbit", "10kbit", "bit", "tbit"; the byte rates "bps" "kbps" "mbps" "gbps"
// "tbps" (x8). SI prefixes (1000). Units are case-insensitive, as tc reads
// them ("100Mbit" = "100mbit"). InvalidArgument otherwise:
// "bad bandwidth '0mbit' (tc rate, e.g. 100mbit, 1gbit)".
Result<double> ParseTcRate(std::string_view text);
// tc's times in seconds: a number >= 0 and us | ms | s, case-insensitive:
// "2ms" -> 0.002, "500us", "1.5s". InvalidArgument otherwise.
Result<double> ParseTcTime(std::string_view text);

// `cluster.networks.<label>`: what a case's `network` label means
// (docs/plan-format.md, "networks"): its nominal rate, the environment that
// makes the ranks' transport use it (NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE ...),
// each node's address on it (rendezvous and Gloo then use that address), and
// in a rehearsal the emulated link of its own.
struct NetworkSpec {
  std::string name;                              // the label, e.g. "10G"
  std::string rate;                              // as written, e.g. "10gbit" (tc units)
  double bits_per_second = 0;                    // rate, read (> 0)
  EnvSpec env;
  std::map<std::string, std::string> addresses;  // node name -> its address on this network
  std::optional<NetworkEmulation> emulate;       // overrides cluster.emulate for this network's cases
  SourceLocation where;                          // the network's entry
};

struct ClusterSpec {
  std::vector<NodeSpec> nodes;
  std::string launcher = "local";  // "local" | "ssh" | "slurm"
  std::string network;             // default network label for multi-node cases, e.g. "10G"
  std::optional<NetworkEmulation> emulate;
  EnvSpec env;
  std::map<std::string, NetworkSpec> networks;  // by label
  // `compare_across_networks: true`: the plan compares systems each on its own
  // network on purpose (the methodology: FSDP over InfiniBand, share over
  // 10 Gbit). Otherwise validate warns where two systems of one row run on
  // different networks.
  bool compare_across_networks = false;
  const NetworkSpec* FindNetwork(const std::string& label) const;
  const NodeSpec* FindNode(const std::string& name) const;
};

// Share-protocol topology "rig0:2x4 rig1:2x4": G groups of K ranks per node.
struct TopologyPart {
  std::string node;
  int groups = 0;
  int ranks_per_group = 0;
};
struct Topology {
  std::vector<TopologyPart> parts;  // empty when the case has no topology
  int NodeCount() const;            // number of distinct nodes
  int TotalRanks() const;           // sum of groups * ranks_per_group
  std::string ToString() const;     // canonical "rig0:2x4 rig1:2x4"
  bool empty() const { return parts.empty(); }
};

// The inference schedule: one request per max_new_tokens value, in order.
struct InferenceSchedule {
  std::string prompt;
  std::vector<int> max_new_tokens;  // e.g. 100, 110, ..., 400 (31 values, 7750 tokens)
  bool ignore_eos = true;           // generate exactly max_new_tokens tokens
  // The native backends' decode step after the prompt (generate.h
  // DecodeStep): at the host's position, at a position on the device, or that
  // step replayed as a CUDA graph. The command backend takes none but host.
  DecodeStepChoice decode_step = DecodeStepChoice::kHost;
  int64_t TotalTokens() const;      // sum of max_new_tokens
};

// `metrics: [{name, regex, unit}]` for the command backend: the first capture
// group of `regex`, matched against each output line, is the value; the last
// match wins.
struct MetricPattern {
  std::string name;
  std::string regex;
  std::string unit;
};

// How the command backend launches a case. Each argv element is one argument:
// plan values substituted into "{placeholders}" never split or reach a shell,
// unless `shell` is true (then argv must be a single string run by /bin/sh -c).
struct CommandSpec {
  std::vector<std::string> argv;
  bool shell = false;
  std::map<std::string, std::string> env;  // added to the inherited environment
  std::string workdir;                     // empty = the runner's working directory
  std::vector<MetricPattern> metrics;
  // Optional per-step pattern with named values, e.g. "step (?<step>\\d+) loss (?<loss>\\S+)";
  // std::regex has no named groups, so groups are positional: 1 = step, 2 = loss (optional).
  std::string step_regex;
  // Optional per-request pattern for inference commands: group 1 = generated
  // tokens, group 2 = seconds; the i-th match is the i-th request of the
  // schedule (its max_new_tokens from the plan), e.g. "tokens (\\d+) seconds (\\S+)".
  std::string request_regex;
  // Optional named reader of one system's output (src/backends/log_format.h:
  // "xtuner", "megatron", "vllm-serving", ...): it stores canonical figures
  // beside `metrics`; "" = none. The backend's Check knows the names.
  std::string log_format;
};

// Settings the native backends read, for every workload (inference reads
// device, seed and ranks_per_node). Each member's default, bounds and meaning
// are its row in training_fields.h, which everything that lists the settings
// iterates (parser, resolved text, the workers' case file, docs); the
// constructor sets every member to its row's default.
// training.checkpoint_every: auto (training_fields.h: an integer row that also takes `auto`).
inline constexpr int64_t kCheckpointAuto = -1;

struct TrainingSettings {
  TrainingSettings();
  int64_t batch_size;
  int64_t seq_len;
  int64_t grad_accum;
  double learning_rate;
  int64_t seed;
  DeviceChoice device;
  int64_t threads;  // CPU threads of the case per host (dist_backend.h ThreadsPerRank)
  // Distributed native backends (docs/distributed.md):
  int ranks_per_node;
  double collective_timeout;
  int64_t sync_every;
  double outer_lr;
  double outer_momentum;
  // LoRA adapters of a 4-bit model (QLoRA, docs/native.md):
  int64_t lora_rank;
  double lora_alpha;
  // Activation checkpointing of decoder layers (the distributed FSDP
  // re-gathers a unit's parameters in backward either way): k >= 0, or
  // kCheckpointAuto (`auto`), which the native backends resolve per case
  // before it runs (none where the memory estimate fits, every layer where it
  // does not: native_check.h native_case_checkpointing).
  int64_t checkpoint_every;
  // share + 4-bit + sync_every: keep every group's LoRA A at its shared seeded
  // start and train only B, so that averaging B is the exact mean of the groups'
  // updates (mean_g B_g·A = (mean_g B_g)·A). false: A and B are both trained and
  // averaged, which is not exact (the method text says so).
  bool lora_freeze_a;
  // The FSDP schedule (docs/distributed.md, "The schedule"): issue the next
  // unit's all-gather before the current one computes (PyTorch FSDP's forward
  // and backward prefetch); false = every collective waited at once.
  bool prefetch;
  // fsdp over several nodes: `full` shards over every rank of the group
  // (FULL_SHARD), `hybrid` shards within each node and replicates across nodes
  // (HYBRID_SHARD): only gradient shards cross the link.
  Sharding sharding;
  // The dtype gradients are reduced in; `auto` = the compute dtype (bf16 on a
  // GPU, float32 on a CPU), as accelerate's bf16 policy does.
  ReduceDtype reduce_dtype;
  // share: where a merge's outer state lives (θ_global and the outer
  // momentum, float32, one copy of the rank's merged slice each): on the host
  // (torchft's and PrimeIntellect's DiLoCo; copied to and from the device only
  // at a merge) or on the device.
  OuterState outer_state;
  // share: the dtype a merge sends (one flat all-reduce of the pseudo-gradient
  // θ_global − θ, or of θ itself for plain float32 averaging); `auto` = the
  // compute dtype (bfloat16 on a GPU, float32 on a CPU).
  ReduceDtype merge_dtype;
  // The held-out loss curve (eval_curve.h in the native backends): the
  // held-out split evaluated every eval_every optimizer steps, at step 0 and
  // at the last step; 0 = only at the end. The time to a target loss
  // (docs/report.md, "Speed-up at equal quality") is read from it.
  int64_t eval_every;
  // Multi-node native cases: the ranks time an all-reduce between the nodes
  // before the first step and store the link's bus bandwidth and latency
  // (link_probe.h in the native backends; docs/distributed.md, "The link,
  // measured before each case"); false: not measured, a fact says so.
  bool link_probe;
  int64_t LoraRank() const { return lora_rank; }
  double LoraAlpha() const { return lora_alpha; }
};

// `reference: {wall_minutes: [93, -5%, +10%]}` (docs/regression.md): an expected value and
// the band around it that `protocol run --check` accepts (reference_check.h).
struct ReferenceBand {
  std::string metric;  // as written: "wall_minutes", "wall_seconds", "tokens_per_second", ...
  double value = 0;    // the expected value, in the metric's unit (minutes for wall_minutes)
  double lower = 0;    // fraction <= 0: "-5%" is -0.05
  double upper = 0;    // fraction >= 0: "+10%" is 0.10
  SourceLocation where;
};

// One case of the methodology, fully resolved.
struct CaseSpec {
  std::string id;            // the methodology's section number, e.g. "2.1.1.1"; unique in a plan
  std::string title;         // optional human text
  std::string stage;         // name of the stage the case belongs to
  Workload workload = Workload::kPretrain;
  std::string backend;       // registry name: "fsdp" | "share" | "command" | ...
  // The system under test, as reports group it: "fsdp" (the baseline) or "share",
  // or another label. Defaults to `backend` for the native backends; a command
  // case must say which system its launch command runs.
  std::string system;
  std::string model;         // key into Plan::models
  std::string dataset;       // key into Plan::datasets; may be empty for inference
  int nodes = 1;             // node count (for share: Topology::NodeCount())
  Topology topology;         // share protocol only
  std::string network;       // column label for multi-node cases, e.g. "80G"; empty on 1 node
  std::string variant;       // free label, e.g. "single-stream", "multi-inference"
  std::optional<Length> length;     // training workloads; absent for inference
  // Further lengths (the case's unit) this case's time is reported at, in the
  // order written: a shorter one read from its own step timings (prefix), a
  // longer one extrapolated (extrapolate.h); both show `*` in the report.
  std::vector<Length> report_as;
  // Lengths at which this case's column is declared not provided (the
  // methodology's `X`: e.g. the share protocol at few steps).
  std::vector<Length> not_provided;
  InferenceSchedule inference;      // inference workload only
  double timeout_seconds = 0;       // 0 = no limit
  int repeats = 1;                  // >= 1
  int warmup_steps = 0;             // steps excluded from per-step statistics
  std::string output_dir;           // where the resulting model is saved; "{placeholders}" expanded
  CommandSpec command;              // command backend only
  TrainingSettings training;
  EnvSpec env;                      // native cases: the case's level of the ranks' environment
  std::vector<ReferenceBand> references;  // in the order written; empty = nothing to check
  // `quality_target: {loss: X}`: the held-out loss the report's time to
  // target aims at for this case's rows instead of the baseline's own final
  // one (docs/report.md, "Speed-up at equal quality"); training only.
  std::optional<double> quality_target_loss;
  SourceLocation where;             // the case's `- id:` entry
};

struct StageSpec {
  std::string name;   // e.g. "stage1"
  std::string title;  // e.g. "Open source (FSDP baseline)"
  std::vector<CaseSpec> cases;
};

// `telemetry:` (docs/plan-format.md): the hardware the runner samples while
// each case runs (runner/exec/telemetry.h): GPUs through nvidia-smi, the
// network interfaces and the CPU through /proc.
struct TelemetrySpec {
  static constexpr double kDefaultIntervalSeconds = 1.0;
  double interval_seconds = kDefaultIntervalSeconds;  // `interval`; 0: nothing sampled
};

struct Plan {
  int format_version = 1;  // `protocol: 1`
  std::string name;
  std::string title;
  std::string file;  // path the plan was read from ("<string>" for tests)
  std::map<std::string, ModelSpec> models;
  std::map<std::string, DatasetSpec> datasets;
  ClusterSpec cluster;
  TelemetrySpec telemetry;
  std::vector<StageSpec> stages;
  // `interleave: [[2.1.1.1, 2.2.1.1], ...]` (docs/plan-format.md): groups of case ids,
  // as written, whose repeats alternate in ABBA rounds (schedule.h). Each id
  // names a case of the plan and is in at most one group; a group has at
  // least two cases, all with the same `repeats`. Empty: plan order.
  std::vector<std::vector<std::string>> interleave;
  // The plan after inheritance and --set overrides, as canonical YAML text; stored
  // with every run with its sha256 so a result names exactly what produced it.
  // Every setting a backend reads is written with its value, defaults included
  // (plan_emit.h), so the text means the same whatever later defaults become.
  std::string resolved_text;

  // All cases in execution order (stage order, then case order).
  std::vector<const CaseSpec*> Cases() const;
  const CaseSpec* FindCase(const std::string& id) const;

  // The plan file's directory, absolute and normalised ("/repo/plans").
  std::string Directory() const;
  // Input paths (models[].path, datasets[].path) are relative to the plan's
  // directory, so a plan works from any working directory; absolute paths and
  // "" are returned unchanged. (Outputs — output_dir, --db, --logs — are
  // relative to the working directory.)
  std::string ResolvePath(const std::string& path) const;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_PLAN_H_
