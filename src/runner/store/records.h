#ifndef PROTOCOL_RUNNER_STORE_RECORDS_H_
#define PROTOCOL_RUNNER_STORE_RECORDS_H_

// What a run produces and the store keeps: runs, case results, measurements and
// sample series. Shared by the runner (writes), the store (persists) and the
// report (reads). Plain data; no behaviour beyond name conversions.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace protocol {

enum class CaseStatus {
  kRunning,      // stored before the case starts; left so by a runner killed with -9
  kOk,
  kFailed,       // non-zero exit, crash, NaN loss, lost rank, backend error
  kTimeout,      // exceeded the case's timeout; its process group was killed
  kSkipped,      // not run (e.g. --only excluded it, or a backend declined with a reason)
  kInterrupted,  // Ctrl-C / SIGTERM stopped it, or it was left running by a dead runner
};
const char* CaseStatusName(CaseStatus s);  // "running" | "ok" | "failed" | ...
std::optional<CaseStatus> ParseCaseStatus(const std::string& s);
// True for statuses that --resume does not run again: ok, failed, timeout, skipped.
bool IsFinal(CaseStatus s);

// How a figure was obtained. Every stored figure says so.
enum class Provenance {
  kMeasured,      // timed end to end by this program
  kExtrapolated,  // computed from a shorter measured run; `method` says how
  kPrefix,        // computed from the first steps of a longer measured run; `method` says how
  kDeclared,      // not measured: the plan declared it (a not_provided length, no value)
  kImported,      // copied from a published source; `source` names it
  kEstimated,     // computed before the case ran from the plan's hardware (the time estimate); `method` has its terms
};
// "measured" | "extrapolated" | "prefix" | "declared" | "imported" | "estimated"
const char* ProvenanceName(Provenance p);
std::optional<Provenance> ParseProvenance(const std::string& s);

// A stored length as people read it: "1000 steps", "1 step", "1 epoch",
// "2 epochs" (unit "steps" | "epochs", as CaseRecord stores it; another unit is
// written after the count as it is). "" when `unit` is empty (inference).
std::string LengthText(const std::string& unit, int64_t count);

// Well-known measurement names (a registry of what reports understand).
namespace metric {
inline constexpr const char* kWallSeconds = "wall_seconds";                    // s
// The wall time the backend expected before the case ran (runner/exec/estimate.h),
// provenance estimated, its terms in the method.
inline constexpr const char* kExpectedWallSeconds = "expected_wall_seconds";  // s
// The band a measured wall time is expected in, measured / expected in
// [kEstimateBandLow, kEstimateBandHigh]; outside it, `run` and the report flag
// the case (docs/estimates.md). Its method ends "; largest term: NAME SECONDS".
inline constexpr double kEstimateBandLow = 0.5;
inline constexpr double kEstimateBandHigh = 2.0;
inline constexpr const char* kLargestTermNote = "; largest term: ";
inline constexpr const char* kTotalGenerationSeconds = "total_generation_seconds";  // s
inline constexpr const char* kSecondsPerToken = "seconds_per_token";          // s/token
inline constexpr const char* kTokensPerSecond = "tokens_per_second";          // tokens/s
inline constexpr const char* kGeneratedTokens = "generated_tokens";           // tokens
inline constexpr const char* kStepSecondsMean = "step_seconds_mean";          // s, after warm-up
inline constexpr const char* kTrainTokensPerSecond = "train_tokens_per_second";
inline constexpr const char* kTgs = "tokens_per_gpu_per_second";              // TGS
inline constexpr const char* kTflops = "tflops";                              // achieved TFLOP/s per device
inline constexpr const char* kMfu = "mfu";                                    // fraction 0..1
inline constexpr const char* kSamplesPerSecond = "samples_per_second";
inline constexpr const char* kPeakDeviceMemory = "peak_device_memory_bytes";
inline constexpr const char* kPeakHostRss = "peak_host_rss_bytes";
// Distributed native cases: the peak RSS of a rank above its RSS just before the
// model was built. Each rank r reports kPeakHostRss, kPeakHostRssAboveBaseline
// (and on CUDA kPeakDeviceMemory) as measurements of rank r; the case stores them
// with their rank (RankFigureName) and, under NAME itself, the largest over the ranks.
inline constexpr const char* kPeakHostRssAboveBaseline = "peak_host_rss_above_baseline_bytes";
inline constexpr const char* kFinalLoss = "final_loss";                      // the last logged training loss
inline constexpr const char* kEvalLoss = "eval_loss";
// Seconds spent evaluating the held-out split for the loss curve
// (training.eval_every), every point's evaluation included; not part of
// any point's training_seconds (EvalPoint).
inline constexpr const char* kEvalSeconds = "eval_seconds";               // s
inline constexpr const char* kBytesCommunicated = "bytes_communicated";   // within + between groups
inline constexpr const char* kBytesWithinGroups = "bytes_within_groups";   // collectives inside each group
inline constexpr const char* kBytesBetweenGroups = "bytes_between_groups"; // merges across groups
// What the ranks sent to a rank on another node (ring model: a rank's bytes
// cross when the next rank of its ring runs on another node; communicator.h).
inline constexpr const char* kBytesBetweenNodes = "bytes_between_nodes";
// Of them, those of the training steps (evaluation and save left out), per
// step: the figure `protocol validate` predicts (traffic.h).
inline constexpr const char* kBytesBetweenNodesPerStep = "bytes_between_nodes_per_step";
// Communication time per training step (distributed native cases, after
// warm-up), each rank's as NAME + "_rank<r>" and the mean over ranks as NAME:
// the seconds a rank was stalled waiting for collectives (exposed), and the
// seconds its collectives were in flight (issue to end, hidden or not).
inline constexpr const char* kCommExposedSeconds = "comm_exposed_seconds";
inline constexpr const char* kCommInFlightSeconds = "comm_in_flight_seconds";
// 1 − Σ exposed / Σ in flight over the ranks: the share of communication time
// that computation hid (0: none, every collective waited at once).
inline constexpr const char* kCommHiddenShare = "comm_hidden_share";
// Per rank (NAME + "_rank<r>"): device values the training step read back on
// the host per step (compat::ReadToHost): each a wait for the device.
inline constexpr const char* kHostReadsPerStep = "host_reads_per_step";
inline constexpr const char* kBestGroupEvalLoss = "best_group_eval_loss";  // share: best single group
inline constexpr const char* kMergeSeconds = "merge_seconds";              // share: moving + merging results
// Rank processes of a distributed case (dist_backend.cc), each name + "_rank<r>":
inline constexpr const char* kExitCode = "exit_code";  // the rank's exit code; a signal N as 128+N
//   kStepSecondsMean + "_rank<r>"                                            s, the rank's own clock, after warm-up
inline constexpr const char* kRankStepSecondsSpread = "step_seconds_spread";  // s, standard deviation of those
inline constexpr const char* kRankWorkSecondsMean = "step_work_seconds_mean";  // s, step time minus time in collectives
// What the method of every measurement taken on declared random weights
// contains (the native backends: "weights: random weights (init: random, seed
// 1234)"); the report marks such cells.
inline constexpr const char* kRandomWeightsNote = "random weights (init: random";
// Per case: ranks whose own work per step exceeds their group's median by more
// than kStragglerFraction (stragglers.h); 0 when none.
inline constexpr const char* kStragglers = "stragglers";
// Per case (cpu_meter.h): the share of the machine's CPU time that processes
// outside the case took while it ran (0..1), over the whole case and in its
// busiest sampling interval. A case at or above kContendedShare is
// "contended": the report, `compare` and `run` say so.
// Figures read from a system's own output (command.log_format; the table of
// formats in src/backends/log_format.cc says which line gives which). Besides
// these a format stores kTgs, kTflops, kSamplesPerSecond, kFinalLoss,
// kEvalLoss and kPeakDeviceMemory under their names above. A per-step figure
// is the median over the steps after warm-up; the rest are as printed.
inline constexpr const char* kStepSeconds = "step_seconds";                    // s, one step as the system timed it
inline constexpr const char* kTrainRuntimeSeconds = "train_runtime_seconds";  // s, the whole training as printed
inline constexpr const char* kRequestThroughput = "request_throughput";        // requests/s
inline constexpr const char* kOutputTokensPerSecond = "output_tokens_per_second";  // generated tokens/s
inline constexpr const char* kTotalTokensPerSecond = "total_tokens_per_second";    // prompt + generated tokens/s
inline constexpr const char* kTtftMeanSeconds = "ttft_mean_seconds";          // s, time to first token
inline constexpr const char* kTpotMeanSeconds = "tpot_mean_seconds";          // s, time per output token after the first
inline constexpr const char* kItlMeanSeconds = "itl_mean_seconds";            // s, inter-token latency
inline constexpr const char* kLatencyMeanSeconds = "latency_mean_seconds";    // s, one request (or batch) end to end
inline constexpr const char* kContention = "contention";
inline constexpr const char* kContentionPeak = "contention_peak";
inline constexpr double kContendedShare = 0.20;
// The link between the nodes of a multi-node native case, measured by its
// ranks before the first step on the case's own communicator (an all-reduce
// at a few sizes; training.link_probe): bus bandwidth as nccl-tests defines
// it, busbw = algbw x 2(n-1)/n with algbw = bytes / seconds, at the largest
// size; the latency is the time of the smallest size's all-reduce.
inline constexpr const char* kLinkBusBandwidth = "link_busbw_bytes_per_second";  // bytes/s
inline constexpr const char* kLinkLatency = "link_latency_seconds";             // s
// A measured link more than this factor away from its network's nominal rate
// (either way) is flagged: `run` warns, the report tags the cell "link ≠ label".
inline constexpr double kLinkLabelFactor = 2.0;
// Figures of the hardware samples taken while the case ran (telemetry.h,
// telemetry_figures.h; docs/runner.md "Sampling"). GPU figures are over the
// GPUs the case used: those busy (utilization above 0) in at least one sample.
inline constexpr const char* kGpuUtilizationMean = "gpu_utilization_mean";  // %, over samples and GPUs
inline constexpr const char* kGpuUtilizationPeak = "gpu_utilization_peak";  // %, the largest sample
// The largest memory.used of one GPU as the driver saw it (the allocator's
// own peak is kPeakDeviceMemory; the driver's includes the CUDA context and
// the allocator's cache).
inline constexpr const char* kGpuMemoryPeakDriver = "gpu_memory_peak_driver_bytes";  // bytes
// Σ over the GPUs of ∫ power.draw dt over the samples (trapezoid rule).
inline constexpr const char* kEnergy = "energy_joules";                    // J
inline constexpr const char* kEnergyPerToken = "energy_per_token_joules";  // J/token: training or generated tokens
inline constexpr const char* kEnergyPerStep = "energy_per_step_joules";    // J/step
// The node's network interfaces other than loopback: bytes sent and received
// while the case ran (/proc/net/dev), and their sum per second over the case
// and in its busiest sampling interval.
inline constexpr const char* kLinkBytesSent = "link_bytes_sent";          // bytes
inline constexpr const char* kLinkBytesReceived = "link_bytes_received";  // bytes
inline constexpr const char* kLinkThroughputMean = "link_throughput_mean_bytes_per_second";  // bytes/s
inline constexpr const char* kLinkThroughputPeak = "link_throughput_peak_bytes_per_second";  // bytes/s
}  // namespace metric

// What a TelemetrySample measures (metric_table.h TelemetryQuantities() has
// each one's unit and source).
namespace quantity {
inline constexpr const char* kGpuUtilization = "gpu_utilization_percent";  // %, nvidia-smi utilization.gpu
inline constexpr const char* kGpuMemoryUsed = "gpu_memory_used_bytes";      // bytes, memory.used
inline constexpr const char* kGpuPower = "gpu_power_watts";                 // W, power.draw
inline constexpr const char* kGpuSmClock = "gpu_sm_clock_mhz";              // MHz, clocks.sm
inline constexpr const char* kGpuTemperature = "gpu_temperature_c";         // °C, temperature.gpu
inline constexpr const char* kNetSent = "net_sent_bytes";          // bytes sent since the case began (/proc/net/dev)
inline constexpr const char* kNetReceived = "net_received_bytes";  // bytes received since the case began
inline constexpr const char* kCpuBusy = "cpu_busy_share";          // 0..1 of every core, since the previous sample (/proc/stat)
}  // namespace quantity

// One reading of the hardware while a case ran (telemetry.h): a quantity of
// one device of one node at a time since the case began. The quantities and
// their units are a table (metric_table.h TelemetryQuantities()).
struct TelemetrySample {
  double seconds = 0;    // since the case began, on the runner's clock
  std::string node;      // the plan's node it was read on; "" the runner's own host
  std::string device;    // "gpu0" (nvidia-smi's index), "eth0" (an interface), "cpu"
  std::string quantity;  // metric_table.h TelemetryQuantities(): "gpu_power_watts" ...
  double value = 0;
};

struct Measurement {
  std::string name;              // see namespace metric, or a command-backend metric name
  std::optional<double> value;   // absent only for imported "not-provided" figures
  std::string unit;              // "s", "tokens/s", "min", "" ...
  Provenance how = Provenance::kMeasured;
  std::string method;  // for kExtrapolated: the formula and inputs; may be empty otherwise
  std::string source;  // for kImported: where the figure comes from
  // Marker carried from an import: "" | "extrapolated" (shows `*`) | "not-provided" (shows `X`);
  // a plan's not_provided lengths store "not-provided" too.
  std::string marker;
  // The length this figure is for when it is not the case's own (a
  // report_as / not_provided length): "steps" | "epochs" and the count;
  // "" and 0 for the case's own length.
  std::string length_unit = "";
  int64_t length_count = 0;
};

// A figure a rank of a distributed case reports about itself (its memory,
// its step times, its exit code: metric_table.h FromRanks) carries the rank
// in its name in memory, NAME_rank<r>, so that a lookup by NAME finds the
// case's own figure. The store keeps NAME and r apart (the measurements
// table's `rank` column, docs/database.md), and so do the exports.
std::string RankFigureName(const std::string& name, int rank);
// NAME_rank<r> → {NAME, r}; {name, nullopt} for any other name.
std::pair<std::string, std::optional<int>> SplitRankFigureName(const std::string& name);

// The case's metric::kContention value when it was measured and at or above
// metric::kContendedShare; nullopt for an idle (or unmeasured) case.
std::optional<double> ContendedShare(const std::vector<Measurement>& measurements);

// Well-known keys of CaseResult::facts (docs/database.md, `case_facts`).
namespace fact {
inline constexpr const char* kRanks = "ranks";                    // rank processes; 1: one process
inline constexpr const char* kThreadsPerRank = "threads_per_rank";  // CPU threads of each (at::get_num_threads)
inline constexpr const char* kDevice = "device";                  // the device used: "cpu", "cuda:0", "cuda"
inline constexpr const char* kDtype = "dtype";                    // the compute dtype: "float32", "bfloat16"
inline constexpr const char* kDecoding = "decoding";              // inference: generate.h DecodingText
inline constexpr const char* kDecodeCheck = "decode_check";       // inference, a step off the host's position: inference_request.h CheckDecodeStep
// Distributed training: how FSDP sharded and communicated (docs/distributed.md).
inline constexpr const char* kSharding = "sharding";          // "full over 4 ranks", "hybrid: 2 ranks per node x 2 nodes"
inline constexpr const char* kPrefetch = "prefetch";          // "on" | "off"
inline constexpr const char* kReduceDtype = "reduce_dtype";   // the gradient reductions' dtype: "float32", "bfloat16"
inline constexpr const char* kMerge = "merge";                 // share: "one flat bfloat16 all-reduce of the pseudo-gradient; outer state on the host"
// Multi-node native cases: the network they ran on (cluster.networks).
inline constexpr const char* kNetwork = "network";                            // the case's label: "10G"
inline constexpr const char* kNetworkRate = "network_rate_bits_per_second";   // its nominal rate: "1e+10"
// Multi-node native cases whose link was not measured (metric::kLinkBusBandwidth):
// why, "off (training.link_probe: false)".
inline constexpr const char* kLinkProbe = "link_probe";
// What every rank was given besides protocol's own variables, secrets masked
// (docs/plan-format.md, "env"): "NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth1".
inline constexpr const char* kRankEnv = "rank_env";
// What the hardware sampler read while the case ran, or why a part was not
// read: "gpus: 8 (nvidia-smi every 1 s); network: eth0, ib0 (/proc/net/dev)",
// "gpus: not sampled (nvidia-smi: no such program)".
inline constexpr const char* kTelemetry = "telemetry";
}  // namespace fact

// One training step, as the backend reports it.
struct StepSample {
  int64_t step = 0;
  double seconds = 0;               // wall time of this step
  std::optional<double> loss;
  std::optional<int64_t> tokens;    // tokens processed in this step (global)
};

// One point of a training case's held-out loss curve (training.eval_every):
// the model after `step` optimizer steps (0: before the first) evaluated on
// the held-out split. `training_seconds` is the training time up to that
// step: the steps' own seconds (device synchronised; the share protocol's
// merges included), never the evaluations' (metric::kEvalSeconds).
struct EvalPoint {
  int64_t step = 0;
  int64_t tokens = 0;            // training tokens seen up to the step (global)
  double training_seconds = 0;
  double loss = 0;               // mean loss over the held-out split's counted targets
};

// One inference request.
struct RequestSample {
  int index = 0;
  int max_new_tokens = 0;
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double seconds = 0;
  std::string answer;  // the decoded text (valid UTF-8: tokenizer.h)
  // The generated token ids, in order (prompt excluded); nullopt when not
  // recorded (a command backend's request, a row stored before schema 3).
  std::optional<std::vector<int>> token_ids;
};

// A stored run (a `protocol run` invocation, or one `protocol import`).
struct RunRecord {
  int64_t id = 0;
  std::string kind = "run";  // "run" | "import"
  std::string plan_name;
  std::string plan_title;
  std::string plan_file;
  std::string plan_text;     // resolved plan (or the import file's text)
  std::string plan_sha256;
  std::string source;        // import: the file's `source:` text
  std::string started_at;    // ISO 8601 UTC
  std::string finished_at;   // empty while running
  std::string status;        // "running" | "ok" | "failed" | "interrupted"
  std::string protocol_version;
  std::string git_revision;
};

// The identity of a case result, as reports group it, plus its outcome.
struct CaseRecord {
  int64_t row_id = 0;  // store's primary key
  int64_t run_id = 0;
  std::string case_id;  // "2.1.1.1"
  int repeat = 0;       // 0-based repeat index
  std::string stage;
  std::string model;    // model name as in plans, e.g. "llama2-70b"
  std::string workload; // "pretrain" | "finetune" | "inference"
  std::string backend;  // how it was executed: "fsdp" | "share" | "command" | "import"
  std::string system;   // what was measured (report columns): "fsdp" | "share" | other label
  int nodes = 1;
  std::string topology;  // canonical text or ""
  std::string network;   // column label or ""
  std::string variant;   // free label or ""
  std::string length_unit;   // "steps" | "epochs" | "" (inference)
  int64_t length_count = 0;
  std::string report_as_unit;  // "" when not extrapolated
  int64_t report_as_count = 0;
  CaseStatus status = CaseStatus::kRunning;
  std::string reason;  // why it failed / was skipped / interrupted
  std::optional<int> exit_code;
  std::string started_at;
  std::string finished_at;
  std::string log_path;
  std::string log_sha256;  // sha256 of the case log when the case finished; "" before (schema 2)
};

// Everything the runner stores when a case ends, in one transaction.
struct CaseResult {
  CaseStatus status = CaseStatus::kOk;
  std::string reason;
  std::optional<int> exit_code;
  std::string finished_at;
  std::vector<Measurement> measurements;
  std::vector<StepSample> steps;        // not yet appended ones
  std::vector<RequestSample> requests;  // not yet appended ones
  std::vector<EvalPoint> eval_curve;    // by step; empty without training.eval_every
  std::vector<TelemetrySample> samples;  // the hardware while it ran (telemetry.h); not yet appended ones
  std::string log_sha256;  // sha256 of the case log as it stands at finish; may be ""
  // What the case ran on and how, as its backend saw it (key, value), e.g.
  // ("device", "cpu"), ("threads_per_rank", "1"): CaseFacts keys.
  std::vector<std::pair<std::string, std::string>> facts;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_RECORDS_H_
