#include "backends/native/worker.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <c10/core/GradMode.h>

#include "backends/native/case_device.h"
#include "backends/native/case_weights.h"
#include "backends/native/eval_curve.h"
#include "backends/native/inference_request.h"
#include "backends/native/training/data.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/launch/events.h"
#include "backends/native/distributed/fsdp_qlora.h"
#include "backends/native/distributed/fsdp_sharded.h"
#include "backends/native/distributed/link_probe.h"
#include "backends/native/model/generate.h"
#include "backends/native/platform/host_memory.h"
#include "backends/native/memory_estimate.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/model_resolve.h"
#include "backends/native/native_check.h"
#include "backends/native/distributed/outer_step.h"
#include "backends/native/distributed/process_group.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/launch/stragglers.h"
#include "backends/native/model/tokenizer.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/throughput.h"
#include "backends/native/training/train.h"
#include "backends/native/training/training_data.h"
#include "backends/native/launch/rendezvous.h"
#include "backends/native/launch/worker_case.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// stdout carries whole lines from two threads (the work and the heartbeat).
std::mutex& OutputMutex() {
  static std::mutex m;
  return m;
}

void Emit(const WorkerEvent& e) {
  const std::string line = EncodeEvent(e);
  std::lock_guard<std::mutex> lock(OutputMutex());
  std::cout << line << std::endl;
}

template <typename... Args>
void Log(fmt::format_string<Args...> f, Args&&... args) {
  const std::string line = fmt::format(f, std::forward<Args>(args)...);
  std::lock_guard<std::mutex> lock(OutputMutex());
  std::cout << line << std::endl;
}

// `rank`: set for a figure of this rank itself (the runner names it <name>_rank<r>).
void EmitMeasurement(const std::string& name, double value, const char* unit, std::string method,
                     std::optional<int> rank = std::nullopt) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kMeasurement;
  e.rank = rank;
  e.measurement.name = name;
  e.measurement.value = value;
  e.measurement.unit = unit;
  e.measurement.method = std::move(method);
  Emit(e);
}

void EmitFigure(const Measurement& m) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kMeasurement;
  e.measurement = m;
  Emit(e);
}

// A fact of the case (rank 0 speaks for it).
void EmitFact(const std::string& key, const std::string& value) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kFact;
  e.text = key;
  e.value = value;
  Emit(e);
}

// A heartbeat event every kHeartbeatSeconds from a thread of its own, while the
// object lives: the supervisor sees which rank went silent first (a hung or
// stopped process) when a collective times out on its peers.
class Heartbeat {
 public:
  Heartbeat() : thread_([this] { Beat(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void Beat() {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kHeartbeat;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      Emit(e);
      wake_.wait_for(lock, std::chrono::duration<double>(kHeartbeatSeconds), [this] { return done_; });
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// This rank's step times (its own clock, timed steps only): mean, spread and
// mean work outside collectives, each a figure of the rank (stragglers.h).
void EmitRankStepTimes(const ProcessGroups& g, const std::vector<double>& step_seconds,
                       const std::vector<double>& work_seconds, int64_t warmup_steps) {
  if (step_seconds.empty()) return;
  const double n = static_cast<double>(step_seconds.size());
  double sum = 0, work = 0, squares = 0;
  for (double x : step_seconds) sum += x;
  for (double x : work_seconds) work += x;
  const double mean = sum / n;
  for (double x : step_seconds) squares += (x - mean) * (x - mean);
  const std::string how = fmt::format("rank {} of {} (group {}): its own clock over {} step(s) after {} warm-up step(s)",
                                      g.rank, g.world, g.group, step_seconds.size(), warmup_steps);
  EmitMeasurement(metric::kStepSecondsMean, mean, "s", how + ", mean", g.rank);
  EmitMeasurement(metric::kRankStepSecondsSpread, std::sqrt(squares / n), "s", how + ", standard deviation", g.rank);
  EmitMeasurement(metric::kRankWorkSecondsMean, work / n, "s",
                  how + ", mean of step time minus time in collectives (waiting for peers included there)", g.rank);
}

// How the FSDP of each group shards and communicates: facts of the case.
void EmitShardingFacts(const WorkerCase& wc, at::ScalarType compute_dtype, const ProcessGroups& g) {
  const int S = g.shard_comm->size();
  const std::string sharding =
      g.replicas > 1 ? fmt::format("hybrid: {} rank(s) per node x {} nodes (sharded within a node, replicated across)",
                                   S, g.replicas)
                     : fmt::format("full over {} rank(s){}", S,
                                   wc.training.sharding == Sharding::kHybrid ? " (hybrid on one node)" : "");
  const std::pair<const char*, std::string> facts[] = {
      {fact::kSharding, sharding},
      {fact::kPrefetch, wc.training.prefetch ? "on" : "off"},
      {fact::kReduceDtype, compat::DtypeName(ResolveReduceDtype(wc.training.reduce_dtype, compute_dtype))}};
  std::vector<std::pair<const char*, std::string>> all(std::begin(facts), std::end(facts));
  if (g.groups > 1) {  // share: what a merge sends and where its state lives (outer_step.h)
    const TrainingSettings& t = wc.training;
    const at::ScalarType merge = ResolveReduceDtype(t.merge_dtype, compute_dtype);
    const bool pseudo = SendsPseudoGradient(t.outer_lr, t.outer_momentum, merge);
    all.emplace_back(fact::kMerge,
                     fmt::format("one flat {} all-reduce of {}; outer state {}", compat::DtypeName(merge),
                                 pseudo ? "the pseudo-gradient" : "the parameters (plain averaging)",
                                 pseudo ? (t.outer_state == OuterState::kHost ? "on the host" : "on the device")
                                        : "none"));
  }
  for (const auto& [key, value] : all) EmitFact(key, value);
}

// This rank's communication per timed step: the seconds it was stalled
// waiting for collectives and the seconds they were in flight (torch_compat.h
// says how each is clocked), means over the timed steps.
void EmitRankCommunication(ProcessGroups& g, const std::vector<double>& exposed, const std::vector<double>& in_flight,
                           int64_t warmup_steps, bool cuda) {
  if (exposed.empty()) return;
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  const std::string how = fmt::format("rank {} of {} (group {}): mean over {} step(s) after {} warm-up step(s)", g.rank,
                                      g.world, g.group, exposed.size(), warmup_steps);
  EmitMeasurement(metric::kCommExposedSeconds, mean(exposed), "s",
                  how + (cuda ? ", time the compute stream stood still at the waits for NCCL (CUDA events)"
                              : ", wall time the rank's thread spent waiting for collectives to end"),
                  g.rank);
  EmitMeasurement(metric::kCommInFlightSeconds, mean(in_flight), "s",
                  how + (cuda ? ", Σ of each NCCL collective's own duration (its start and end events)"
                              : ", Σ over the collectives of issue to end (Gloo marks the end)"),
                  g.rank);
}

// Test-only: PROTOCOL_TEST_STEP_DELAY="RANK:SECONDS" makes that rank sleep so
// long in every training step, a straggler on purpose (tests/native/distributed/dist_fsdp_test.cc).
double TestStepDelay(int rank) {
  const char* v = std::getenv("PROTOCOL_TEST_STEP_DELAY");
  if (!v) return 0;
  const std::string text = v;
  const size_t colon = text.find(':');
  if (colon == std::string::npos || std::stoi(text.substr(0, colon)) != rank) return 0;
  return std::stod(text.substr(colon + 1));
}

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Setup {
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  // What every figure of the case says about what ran (random weights, 4-bit,
  // QLoRA): rank 0 sends it as a note event.
  std::string method_note;
  void AddNote(const std::string& text) { method_note = method_note.empty() ? "weights: " + text : method_note + "; " + text; }
};

Setup Resolve(const WorkerCase& wc, const DistEnv& env) {
  Setup s;
  Result<ResolvedModel> model = ResolveModel(wc.model_name, wc.model_preset, wc.model_path);
  if (!model.ok()) throw Failure(model.status().message());
  s.config = model->config;
  s.tokenizer_path = model->tokenizer_path;
  s.tokenizer = std::move(model->tokenizer);
  // More ranks than GPUs on a node (inference replicas may share them): local rank mod the GPUs.
  auto device = ResolveCaseDevice(wc.training.device, env.local_rank);
  if (!device.ok()) throw Failure(device.status().message());
  s.device = device->device;
  s.dtype = device->dtype;
  return s;
}

// Where this rank's weights come from (case_weights.h, the rule Check applied
// before the launch); notes declared random weights; throws where there are none.
CaseWeights DecideRankWeights(const WorkerCase& wc, bool nf4, Setup& s) {
  auto weights = DecideWeights(wc.workload, nf4, wc.init_random, wc.model_path, wc.training.seed, wc.model_name);
  if (!weights.ok()) throw Failure(weights.status().message());
  if (!weights->note.empty()) s.method_note = weights->note;
  return *weights;
}

Model LoadModel(const WorkerCase& wc, Setup& s, const std::vector<at::Device>& devices = {},
                const LayerPlacement& placement = {}) {
  // A 4-bit model: each projection read, quantized and freed in turn (case_weights.h).
  const bool nf4 = wc.quantization == Quantization::kNf4;
  const ProjectionTensors projections = CaseProjectionTensors(nf4);
  Model model = placement.devices > 1
                    ? model_create_placed(s.config, s.dtype, devices, placement, projections)
                    : model_create(s.config, at::TensorOptions().dtype(s.dtype).device(s.device), projections);
  const CaseWeights weights = DecideRankWeights(wc, nf4, s);
  if (Status st = nf4 ? LoadOrInitNf4Weights(model, weights, wc.model_path, wc.training.seed, wc.double_quant)
                      : LoadOrInitWeights(model, weights, wc.model_path, wc.training.seed);
      !st.ok())
    throw Failure(st.message());
  return model;
}

// ---- training ------------------------------------------------------------------

// Mean loss on `seqs` computed by the ranks of one group together: each batch
// of batch_size sequences is split into contiguous parts, one per rank, as in
// training (a part may be empty; that rank still takes part in every gather).
// The loss sums meet in one all-reduce at the end. nullopt without counted targets.
using ShardedForward = std::function<at::Tensor(const at::Tensor& tokens)>;
std::optional<double> ShardedEvalLoss(const ShardedForward& forward, const std::vector<Sequence>& seqs,
                                      int64_t batch_size, int64_t seq_len, const at::Device& device, ProcessGroups& g) {
  double counted = 0;
  for (const Sequence& s : seqs)
    for (uint8_t m : s.mask) counted += m;
  if (counted == 0) return std::nullopt;
  at::Tensor sum = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));  // NCCL: on the device
  {
    // No grad mode, but not InferenceMode: Gloo writes the gathered tensors
    // from its own threads, where inference tensors may not be modified.
    c10::NoGradGuard no_grad;
    const size_t bs = static_cast<size_t>(std::max<int64_t>(1, batch_size));
    const size_t W = static_cast<size_t>(g.group_size), r = static_cast<size_t>(g.group_rank);
    for (size_t start = 0; start < seqs.size(); start += bs) {
      const size_t end = std::min(seqs.size(), start + bs), per = (end - start + W - 1) / W;
      std::vector<const Sequence*> part;
      for (size_t i = start + r * per; i < std::min(end, start + (r + 1) * per); ++i) part.push_back(&seqs[i]);
      BatchTensors b = batch_tensors(part, seq_len, device);
      sum += masked_loss(forward(b.inputs), b, counted).to(at::kDouble);
    }
  }
  g.group_comm->AllReduceSum(sum);
  return compat::ReadToHost(sum)[0];
}

// One rank's training, in the order every rank runs it: the data (its group's
// stream), the model (sharded over the group: full-precision FSDP, or a 4-bit
// base under LoRA adapters), the loop (with the share protocol's periodic
// merges), the final merge and evaluation, the save, and the figures.
class RankTraining {
 public:
  RankTraining(const WorkerCase& wc, Setup& s, ProcessGroups& g)
      : wc_(wc),
        ts_(wc.training),
        s_(s),
        g_(g),
        qlora_(wc.quantization == Quantization::kNf4),
        step_delay_(TestStepDelay(g.rank)) {}

  void Run() {
    BuildData();
    BuildModel();
    Loop();
    const std::optional<double> eval = MergeAndEvaluate();
    Save();
    if (g_.rank == 0) ReportCaseFigures(eval);
    ReportRankFigures();
  }
  // Bytes this rank sent to a rank on another node during the training steps.
  int64_t steps_between_nodes() const { return steps_between_nodes_; }

 private:
  void BuildData();
  void BuildModel();
  void BuildQlora(const ShardedParams::Fill& fill);
  void Loop();
  double TrainStep(int64_t step);
  at::Tensor Update(double lr);
  void TimedMerge(const std::function<void()>& combine);
  void Merge();
  void LateMerge();
  std::optional<double> MergeAndEvaluate();
  std::optional<double> EvaluatePoint(int64_t done);
  void Save();
  void ReportCaseFigures(const std::optional<double>& eval);
  void ReportRankFigures();
  at::Tensor Forward(const at::Tensor& tokens) { return quantized_ ? quantized_->Forward(tokens) : full_->Forward(tokens); }
  void SetGradientSync(bool on) {
    if (quantized_) quantized_->SetGradientSync(on);
    else full_->SetGradientSync(on);
  }
  bool leader() const { return g_.group_rank == 0; }

  const WorkerCase& wc_;
  const TrainingSettings& ts_;
  Setup& s_;
  ProcessGroups& g_;
  const bool qlora_;  // a 4-bit model trains LoRA adapters on its frozen NF4 base (FSDP-QLoRA, fsdp_qlora.h)
  const double step_delay_;  // PROTOCOL_TEST_STEP_DELAY for this rank (0: none)

  // data
  DataSplit split_;
  int64_t steps_ = 0, group_batch_ = 0, local_batch_ = 0;
  std::optional<EpochStream> stream_;
  // model
  TrainOptions options_;
  FsdpSetup fsdp_;  // where and how the sharded model communicates (fsdp_sharded.h)
  int64_t baseline_rss_ = 0;  // the baseline of this rank's memory figures: RSS just before the model is built
  std::unique_ptr<ShardedParams> full_;     // full-precision FSDP
  std::unique_ptr<ShardedQlora> quantized_;  // 4-bit base + LoRA
  std::shared_ptr<LoraAdapters> lora_, saved_adapters_;
  std::optional<AdamW> adapter_optimizer_;
  std::vector<at::Tensor> merged_tensors_;  // what a periodic merge averages over the groups
  std::optional<OuterStep> outer_step_;
  std::string memory_text_;
  // loop
  std::optional<TimedSteps> timed_;
  std::optional<EvalCurve> curve_;  // the held-out curve (eval_curve.h); rank 0 reports it
  double last_loss_ = 0, merge_seconds_ = 0;
  int merges_ = 0;
  std::string merge_kind_;  // how the merges combined the groups (4-bit), for the eval method
  std::vector<double> my_step_seconds_, my_work_seconds_;  // this rank's timed steps (stragglers.h)
  std::vector<double> my_exposed_seconds_, my_in_flight_seconds_;  // its communication in those steps
  int64_t steps_between_nodes_ = 0;  // bytes this rank sent to another node during the training steps
  int64_t host_reads_ = 0, host_read_steps_ = 0;  // compat::ReadToHost calls in the training steps
};

void RankTraining::BuildData() {
  TrainingDataRequest request;
  request.dataset = {wc_.dataset_path, wc_.dataset_format, wc_.dataset_column};
  request.count_every_token = qlora_ && wc_.workload == Workload::kPretrain;  // QLoRA continued pretraining
  request.seq_len = ts_.seq_len;
  request.batch_size = ts_.batch_size;
  request.seed = ts_.seed;
  request.steps = wc_.steps;
  request.epochs = wc_.epochs;
  auto data = LoadTrainingData(request, *s_.tokenizer);
  if (!data.ok()) throw Failure(data.status().message());
  split_ = std::move(data->split);
  steps_ = data->steps;
  group_batch_ = ts_.batch_size / g_.groups;  // sequences per group per step
  local_batch_ = group_batch_ / g_.group_size;
  stream_.emplace(split_.train, g_.groups, g_.group, static_cast<uint64_t>(ts_.seed));
  if (stream_->empty())
    throw Failure(fmt::format("group {} has no training sequences ({} for {} groups)", g_.group, split_.train.size(),
                              g_.groups));
  if (g_.rank == 0)
    Log("worker: read {}; {} train / {} eval sequences of {} tokens; {} steps; global batch {} = {} group(s) x {} "
        "rank(s) x {}; grad_accum {}; checkpoint_every {}",
        data->ReadNote(), split_.train.size(), split_.eval.size(), ts_.seq_len, steps_, ts_.batch_size, g_.groups, g_.group_size,
        local_batch_, ts_.grad_accum, ts_.checkpoint_every);
}

// The model is built sharded, unit by unit: no rank ever holds it whole. A 4-bit
// pretrain continues from the path's weights (checked before the launch).
void RankTraining::BuildModel() {
  options_ = train_options(ts_, steps_);
  fsdp_.shard = g_.shard_comm.get();
  fsdp_.replica = g_.replica_comm.get();
  fsdp_.prefetch = ts_.prefetch;
  fsdp_.reduce_dtype = ResolveReduceDtype(ts_.reduce_dtype, s_.dtype);
  baseline_rss_ = CurrentRssBytes().value_or(0);
  if (s_.device.is_cuda()) compat::CudaResetPeakMemory();
  at::Generator gen = init_generator(static_cast<uint64_t>(ts_.seed));
  std::optional<WeightsReader> reader;
  if (DecideRankWeights(wc_, qlora_, s_).source == WeightsSource::kPath) {
    auto opened = WeightsReader::Open(wc_.model_path);
    if (!opened.ok()) throw Failure(opened.status().message());
    reader = std::move(*opened);
  }
  auto fill = [&](const std::vector<NamedParameter>& unit) -> Status {
    if (!reader) {
      parameters_init_random(unit, gen);
      return Status::Ok();
    }
    for (const NamedParameter& p : unit)
      if (Status st = reader->Read(p); !st.ok()) return st;
    return Status::Ok();
  };
  if (qlora_) {
    BuildQlora(fill);
  } else {
    auto created = ShardedParams::Create(s_.config, s_.dtype, s_.device, fsdp_, options_, fill);
    if (!created.ok()) throw Failure(created.status().message());
    full_ = std::move(*created);
    merged_tensors_ = full_->shards();
    memory_text_ = fmt::format("the rank holds {} float32 shard elements", full_->shard_elements());
  }
  if (g_.groups > 1) {
    OuterStepOptions outer;
    outer.lr = ts_.outer_lr;
    outer.momentum = ts_.outer_momentum;
    outer.state_on_host = ts_.outer_state == OuterState::kHost;
    outer.merge_dtype = ResolveReduceDtype(ts_.merge_dtype, s_.dtype);
    outer_step_.emplace(merged_tensors_, outer);
  }
}

void RankTraining::BuildQlora(const ShardedParams::Fill& fill) {
  lora_ = std::make_shared<LoraAdapters>(
      lora_create(s_.config, ts_.LoraRank(), ts_.LoraAlpha(), static_cast<uint64_t>(ts_.seed), s_.device));
  auto created = ShardedQlora::Create(s_.config, s_.dtype, s_.device, fsdp_, options_, wc_.double_quant, lora_, fill);
  if (!created.ok()) throw Failure(created.status().message());
  quantized_ = std::move(*created);
  adapter_optimizer_.emplace(lora_trainable(*lora_, ts_.lora_freeze_a), options_);
  quantized_->SetTrainable(adapter_optimizer_->params());
  // freeze A: only B is trained and averaged (exact); otherwise A and B are
  // averaged separately at a periodic merge (not exact: mean(B)·mean(A) ≠ mean(B·A)).
  merged_tensors_ = adapter_optimizer_->params();
  const std::string method =
      qlora_method(*lora_, wc_.workload == Workload::kPretrain ? QloraKind::kContinuedPretraining : QloraKind::kFinetune,
                   wc_.double_quant, ts_.lora_freeze_a) +
      (g_.replicas > 1 ? fmt::format("; base sharded over each node's {} rank(s), replicated over {} nodes, as equal "
                                     "byte ranges of each layer's NF4 records",
                                     g_.shard_comm->size(), g_.replicas)
                       : fmt::format("; base sharded over the group's {} rank(s) as equal byte ranges of each layer's NF4 "
                                     "records",
                                     g_.group_size));
  s_.AddNote(method);
  memory_text_ = fmt::format("the rank holds {} bytes of the 4-bit base (its NF4 shards, embedding and head slices, "
                             "norms) and {} float32 adapter parameters",
                             quantized_->base_bytes(), lora_parameter_count(s_.config, ts_.LoraRank()));
  if (g_.rank == 0) Log("worker: {}", method);
}

// After the step's backward passes: clip and update (AdamW on this rank's
// slices, or on the adapters, whose gradients the last backward summed over
// the group).
at::Tensor RankTraining::Update(double lr) {
  if (full_) return full_->Step(lr);
  at::Tensor norm = grad_clip_norm(adapter_optimizer_->params(), options_.grad_clip);
  adapter_optimizer_->step(lr);
  adapter_optimizer_->zero_grad();
  return norm;
}

// One merge, timed from a common barrier to the end of its device work.
void RankTraining::TimedMerge(const std::function<void()>& combine) {
  g_.world_comm->Barrier();
  const double t0 = Now();
  combine();
  compat::DeviceSynchronize(s_.device);
  merge_seconds_ += Now() - t0;
  ++merges_;
}

// The outer step (outer_step.h) over the merged tensors: one flat all-reduce
// across groups in the merge dtype, SUM then divide (1.13 Gloo has no AVG).
void RankTraining::Merge() {
  TimedMerge([&] {
    Status st = outer_step_->Merge(merged_tensors_, [&](at::Tensor& flat) {
      g_.cross_comm->AllReduceSum(flat);
      flat.div_(static_cast<double>(g_.groups));
    });
    if (!st.ok()) throw Failure(st.message());
  });
}

// One training step of this rank; returns its seconds (device synchronised).
double RankTraining::TrainStep(int64_t step) {
  std::vector<const Sequence*> group_seqs = stream_->Next(group_batch_);
  std::vector<const Sequence*> mine(group_seqs.begin() + g_.group_rank * local_batch_,
                                    group_seqs.begin() + (g_.group_rank + 1) * local_batch_);
  double counted = 0;  // targets of the group's whole batch: the loss denominator
  for (const Sequence* q : group_seqs)
    for (uint8_t m : q->mask) counted += m;
  const double t0 = Now(), exposed0 = g_.ExposedSeconds(), in_flight0 = g_.InFlightSeconds();
  const int64_t reads0 = compat::HostReads();
  if (step_delay_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(step_delay_));
  at::Tensor loss_sum = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(s_.device));
  const int64_t micro = std::max<int64_t>(1, local_batch_ / std::max<int64_t>(1, ts_.grad_accum));
  for (int64_t start = 0; start < local_batch_; start += micro) {
    std::vector<const Sequence*> part(mine.begin() + start, mine.begin() + std::min(local_batch_, start + micro));
    BatchTensors b = batch_tensors(part, ts_.seq_len, s_.device);
    SetGradientSync(start + micro >= local_batch_);  // the step's last micro-batch completes its gradients
    at::Tensor loss = masked_loss(Forward(b.inputs), b, std::max(counted, 1.0));
    loss.backward();  // each unit's gradient is reduced as the backward leaves it (fsdp_schedule.h)
    loss_sum += loss.detach().to(at::kDouble);
  }
  const double lr = lr_at_step(step, steps_, options_);
  const at::Tensor norm = Update(lr);
  g_.group_comm->AllReduceSum(loss_sum);
  if (ts_.sync_every > 0 && (step + 1) % ts_.sync_every == 0 && step + 1 < steps_ && g_.groups > 1) Merge();
  compat::DeviceSynchronize(s_.device);
  const double seconds = Now() - t0;
  // The step's one read back from the device: its loss and gradient norm together.
  const std::vector<double> read = compat::ReadToHost(at::cat({loss_sum, norm.reshape({1}).to(loss_sum.device())}));
  const double loss = read[0], grad_norm = read[1];
  host_reads_ += compat::HostReads() - reads0;
  ++host_read_steps_;
  if (!std::isfinite(loss)) throw Failure(fmt::format("loss became {} at step {} (group {})", loss, step + 1, g_.group));
  last_loss_ = loss;
  const int64_t tokens = ts_.batch_size * ts_.seq_len;  // every group's sequences
  if (timed_->Add(step, seconds, tokens)) {
    const double exposed = g_.ExposedSeconds() - exposed0;
    my_step_seconds_.push_back(seconds);
    my_work_seconds_.push_back(seconds - exposed);
    my_exposed_seconds_.push_back(exposed);
    my_in_flight_seconds_.push_back(g_.InFlightSeconds() - in_flight0);
  }
  if (g_.rank == 0) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kStep;
    e.step.step = step + 1;
    e.step.seconds = seconds;
    e.step.loss = loss;
    e.step.tokens = tokens;
    Emit(e);
  }
  if (leader())
    Log("step {}/{} group {} loss {:.4f} lr {:.3g} grad_norm {:.3f} {:.3f} s", step + 1, steps_, g_.group, loss, lr,
        grad_norm, seconds);
  return seconds;
}

// The held-out loss after `done` steps, a point of the curve: every group
// evaluates its model over its own ranks (after a merge, or before the first
// step, every group holds the same model), timed apart from the steps; rank 0
// reports the point. nullopt without counted targets.
std::optional<double> RankTraining::EvaluatePoint(int64_t done) {
  const ShardedForward forward = [&](const at::Tensor& tokens) { return Forward(tokens); };
  const double t0 = Now();
  std::optional<double> ev = ShardedEvalLoss(forward, split_.eval, ts_.batch_size, ts_.seq_len, s_.device, g_);
  compat::DeviceSynchronize(s_.device);
  const double seconds = Now() - t0;
  if (!ev) return ev;
  curve_->Add(done, *ev, seconds);
  if (g_.rank == 0 && curve_->enabled()) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kEvalPoint;
    e.eval_point = curve_->points().back();
    Emit(e);
    Log("eval after {} step(s): held-out loss {:.4f} ({:.3f} s)", done, *ev, seconds);
  }
  return ev;
}

void RankTraining::Loop() {
  timed_.emplace(wc_.warmup_steps, steps_);
  curve_.emplace(ts_.eval_every, steps_, g_.groups > 1 ? std::optional<int64_t>(ts_.sync_every) : std::nullopt);
  const int64_t before = g_.bytes_between_nodes();
  if (curve_->Due(0)) EvaluatePoint(0);
  int64_t evaluation_bytes = g_.bytes_between_nodes() - before;
  for (int64_t step = 0; step < steps_; ++step) {
    curve_->AddStep(TrainStep(step), ts_.batch_size * ts_.seq_len);
    if (step + 1 < steps_ && curve_->Due(step + 1)) {
      const int64_t b0 = g_.bytes_between_nodes();
      EvaluatePoint(step + 1);
      evaluation_bytes += g_.bytes_between_nodes() - b0;
    }
  }
  // The training steps' bytes between nodes: nothing was sent before the
  // first step but for an evaluation, whose bytes are left out.
  steps_between_nodes_ = g_.bytes_between_nodes() - evaluation_bytes;
}

// The last merge of the groups: the exact stack of the 4-bit groups' adapters
// (rank G·r) when A was trained, else the outer step.
void RankTraining::LateMerge() {
  if (qlora_ && !ts_.lora_freeze_a) {
    TimedMerge([&] {
      // An all-gather of one flat float32 vector: (G−1)·4·P bytes sent per rank.
      auto stacked = StackGroupAdapters(*lora_, g_.groups, [&](at::Tensor& all, const at::Tensor& flat) {
        g_.cross_comm->AllGather(all, flat);
      });
      if (!stacked.ok()) throw Failure(stacked.status().message());
      saved_adapters_ = std::make_shared<LoraAdapters>(std::move(*stacked));
      quantized_->UseAdapters(saved_adapters_);
    });
    merge_kind_ = fmt::format("{}, the last one the exact stack of the {} groups' adapters (rank {})",
                              merges_ > 1 ? " (periodic ones averaged A and B separately: not exact)" : "", g_.groups,
                              saved_adapters_->rank);
  } else {
    Merge();
    if (qlora_) merge_kind_ = " averaging B with A frozen at its shared seeded start (exact)";
  }
}

// Each group's own model on the held-out split, before the final merge (every
// rank of a group takes part: the parameters are sharded); then the merge; then
// group 0 evaluates the merged model, which every group now holds.
std::optional<double> RankTraining::MergeAndEvaluate() {
  const ShardedForward forward = [&](const at::Tensor& tokens) { return Forward(tokens); };
  saved_adapters_ = lora_;
  const double merged_before = merge_seconds_;
  if (g_.groups > 1) {
    auto ev = ShardedEvalLoss(forward, split_.eval, ts_.batch_size, ts_.seq_len, s_.device, g_);
    if (leader() && ev)
      EmitMeasurement("group_eval_loss", *ev, "",
                      fmt::format("group {}: mean loss on {} held-out sequences", g_.group, split_.eval.size()));
    // Each group's own adapters, kept beside the merged one (what the merge combined).
    if (qlora_ && leader() && !wc_.output_dir.empty()) {
      const std::string dir = (fs::path(wc_.output_dir) / "group_adapters" / fmt::format("group{}", g_.group)).string();
      if (Status st = lora_save(*lora_, dir, wc_.model_path); !st.ok()) throw Failure(st.message());
    }
    LateMerge();
  }
  curve_->AddTrainingSeconds(merge_seconds_ - merged_before);  // the final merge: the last point's model
  if (g_.group != 0) return std::nullopt;
  return EvaluatePoint(steps_);  // the curve's last point when it keeps one
}

// Group 0 saves the merged model (a collective of its ranks) or rank 0 the adapters.
void RankTraining::Save() {
  if (g_.group != 0 || wc_.output_dir.empty()) return;
  TrainedWeights trained;
  if (qlora_) trained.adapters = saved_adapters_.get();
  trained.base_path = wc_.model_path;
  trained.save_model = [&](const std::string& dir) { return full_->Save(dir, g_.rank == 0); };
  Status st = SaveTrainedWeights(wc_.output_dir, trained, s_.tokenizer_path, /*writer=*/g_.rank == 0);
  if (!st.ok()) throw Failure(st.message());
  if (g_.rank == 0) Log("worker: {} saved to {}", qlora_ ? "LoRA adapters" : "model", wc_.output_dir);
}

// Rank 0's figures for the case: losses, throughput (throughput.h), merge time.
void RankTraining::ReportCaseFigures(const std::optional<double>& eval) {
  EmitMeasurement(metric::kFinalLoss, last_loss_, "",
                  g_.groups > 1 ? "training loss of group 0 at the last step (before the merge)"
                                : "training loss of the last step");
  const std::string eval_how = fmt::format("mean loss on {} held-out sequences", split_.eval.size());
  if (eval)
    EmitMeasurement(metric::kEvalLoss, *eval, "",
                    g_.groups > 1 ? fmt::format("merged model ({} merge(s){}): {}", merges_, merge_kind_, eval_how)
                                  : eval_how);
  ThroughputScope scope;
  scope.one_process = false;
  scope.ranks = g_.world;
  scope.cuda = s_.device.is_cuda();
  scope.device_text = scope.cuda ? "cuda" : "cpu";
  scope.config = s_.config;
  scope.seq_len = ts_.seq_len;
  scope.frozen_base = qlora_;
  if (scope.cuda) scope.device_name = compat::CudaDeviceName();
  for (const Measurement& m : ThroughputFigures(*timed_, scope)) EmitFigure(m);
  if (auto figure = curve_->EvalSecondsFigure(split_.eval.size(), "rank 0")) EmitFigure(*figure);
  if (g_.groups > 1)
    EmitMeasurement(metric::kMergeSeconds, merge_seconds_, "s",
                    qlora_ ? fmt::format("rank 0's time in {} merge(s) of the LoRA adapters across groups, after a barrier",
                                         merges_)
                           : fmt::format("rank 0's time in {} merge(s) (cross-group all-reduce of the parameter shards "
                                         "+ outer step), after a barrier",
                                         merges_));
}

// This rank's own figures: its step times, its peak RSS and that peak above
// the rank's baseline (its RSS just before the model was built: libtorch, the
// tokenizer and the data), and on CUDA its device peak.
void RankTraining::ReportRankFigures() {
  EmitRankStepTimes(g_, my_step_seconds_, my_work_seconds_, wc_.warmup_steps);
  EmitRankCommunication(g_, my_exposed_seconds_, my_in_flight_seconds_, wc_.warmup_steps, s_.device.is_cuda());
  if (host_read_steps_ > 0)
    EmitMeasurement(metric::kHostReadsPerStep, static_cast<double>(host_reads_) / static_cast<double>(host_read_steps_),
                    "reads",
                    fmt::format("rank {} of {}: device values read back on the host (compat::ReadToHost), each a wait "
                                "for the device, per training step over {} step(s), merges included",
                                g_.rank, g_.world, host_read_steps_),
                    g_.rank);
  const int64_t peak_rss = PeakRssBytes();
  const char* mmap_threshold = std::getenv("MALLOC_MMAP_THRESHOLD_");
  const std::string rss_how = fmt::format(
      "rank {} of {} ({} group(s) x {}): getrusage ru_maxrss of the rank process, i.e. its peak since it started; "
      "{}; checkpoint_every {}; MALLOC_MMAP_THRESHOLD_={}",
      g_.rank, g_.world, g_.groups, g_.group_size, memory_text_, ts_.checkpoint_every,
      mmap_threshold ? mmap_threshold : "unset");
  EmitMeasurement(metric::kPeakHostRss, static_cast<double>(peak_rss), "bytes", rss_how, g_.rank);
  EmitMeasurement(metric::kPeakHostRssAboveBaseline, static_cast<double>(peak_rss - baseline_rss_), "bytes",
                  fmt::format("{}; minus the rank's RSS just before the model was built ({} bytes: VmRSS of "
                              "/proc/self/status)",
                              rss_how, baseline_rss_),
                  g_.rank);
  if (auto device_peak = compat::CudaPeakMemoryBytes())
    EmitMeasurement(metric::kPeakDeviceMemory, static_cast<double>(*device_peak), "bytes",
                    fmt::format("rank {} of {}: CUDA caching allocator peak allocated bytes since the model was built",
                                g_.rank, g_.world),
                    g_.rank);
}

// ---- inference -----------------------------------------------------------------

// The replica leader's model: on CUDA placed over the GPUs of its group's ranks
// on its node (local ranks l0, l0+1, ..., mod the node's GPUs; placement.h),
// in NF4 for a 4-bit model. Loads in the compute dtype, then quantizes.
Model LoadReplica(const WorkerCase& wc, Setup& s, const ProcessGroups& g, const DistEnv& env) {
  std::vector<at::Device> devices = {s.device};
  if (s.device.is_cuda()) {
    const size_t first = static_cast<size_t>(g.group * g.group_size);
    int on_node = 0;
    for (int j = 0; j < g.group_size; ++j)
      if (wc.rank_nodes[first + static_cast<size_t>(j)] == wc.rank_nodes[first]) ++on_node;
    const int gpus = std::max(1, static_cast<int>(at::getNumGPUs()));
    for (int j = 1; j < on_node; ++j)
      devices.push_back(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>((env.local_rank + j) % gpus)));
  }
  const bool nf4 = wc.quantization == Quantization::kNf4;
  const LayerPlacement placement =
      inference_placement(s.config, c10::elementSize(s.dtype), nf4, wc.double_quant, static_cast<int>(devices.size()));
  Model model = LoadModel(wc, s, devices, placement);
  if (placement.devices > 1) {
    std::vector<std::string> counts;
    for (int n : placement.device_layers) counts.push_back(std::to_string(n));
    Log("worker: replica {}: model placed over {} GPUs from {} (balanced: decoder layers {} per device)", g.group,
        placement.devices, devices.front().str(), Join(counts, "/"));
  }
  if (nf4) {
    // Every measurement says what ran (the runner appends the note event to each).
    s.AddNote(nf4_prepare_inference(model, devices.front(), s.dtype, wc.double_quant));
  }
  return model;
}

// Replica g (its leader; the other ranks of the group wait) serves requests
// g, g+G, g+2G, ... of the schedule.
int RunInference(const WorkerCase& wc, Setup& s, ProcessGroups& g, const DistEnv& env) {
  const bool leader = g.group_rank == 0;
  std::optional<Model> model;
  std::vector<int> prompt;
  if (leader) {
    model = LoadReplica(wc, s, g, env);
    prompt = PromptTokens(*s.tokenizer, wc.inference.prompt);
  }
  g.world_comm->Barrier();
  const double start = Now();
  int64_t generated = 0;
  int served = 0;
  double busy = 0;
  const auto& schedule = wc.inference.max_new_tokens;
  if (leader) {
    for (size_t i = static_cast<size_t>(g.group); i < schedule.size(); i += static_cast<size_t>(g.groups)) {
      auto request = ServeRequest(*model, *s.tokenizer, prompt, static_cast<int>(i), schedule[i],
                                  wc.inference.ignore_eos, s.device, Now, nullptr);
      if (!request.ok()) throw Failure(request.status().message());
      WorkerEvent e;
      e.kind = WorkerEvent::Kind::kRequest;
      e.request = request->sample;
      Emit(e);
      generated += e.request.generated_tokens;
      busy += e.request.seconds;
      ++served;
    }
    const double elapsed = Now() - start;
    EmitMeasurement("replica_seconds", elapsed, "s",
                    fmt::format("replica {}: {} request(s), {} tokens, {:.3f} s generating", g.group, served, generated, busy));
    if (!s.method_note.empty() && g.rank == 0) Log("worker: {}", s.method_note);
  }
  g.world_comm->Barrier();
  return 0;
}

// The link between the case's nodes, measured before anything of the case
// crosses it (link_probe.h) on the world group, which spans every node; rank
// 0 stores its bus bandwidth and latency. Nothing on one node; with
// training.link_probe false, a fact that says it was not measured.
// `cuda_groups`: the groups are NCCL's, so the probe's buffers live on the device.
void ProbeCaseLink(const WorkerCase& wc, const Setup& s, ProcessGroups& g, bool cuda_groups) {
  const int nodes = static_cast<int>(std::set<std::string>(wc.rank_nodes.begin(), wc.rank_nodes.end()).size());
  if (nodes < 2) return;
  if (!wc.training.link_probe) {
    if (g.rank == 0) EmitFact(fact::kLinkProbe, "off (training.link_probe: false)");
    return;
  }
  const int64_t largest = wc.workload == Workload::kInference
                              ? 0  // inference sends no tensors between ranks
                              : LargestCollectiveBytes(s.config, static_cast<int64_t>(c10::elementSize(s.dtype)),
                                                       wc.groups, wc.group_size);
  LinkProbeOptions options;
  options.sizes = LinkProbeSizes(largest);
  options.device = cuda_groups ? s.device : at::Device(at::kCPU);
  const LinkProbeResult probe = ProbeLink(*g.world_comm, options);
  if (g.rank != 0) return;
  EmitMeasurement(metric::kLinkBusBandwidth, probe.bandwidth().busbw, "bytes/s", probe.BandwidthMethod(nodes));
  EmitMeasurement(metric::kLinkLatency, probe.latency_seconds(), "s", probe.LatencyMethod(nodes));
  Log("worker: link between {} nodes: {:.3g} GB/s bus bandwidth at {}, latency {:.0f} us ({:.2f} s)", nodes,
      probe.bandwidth().busbw / 1e9, ProbeSizeText(probe.sizes.back().bytes), probe.latency_seconds() * 1e6,
      probe.seconds);
}

}  // namespace

int RunWorker(const std::string& case_path) {
  auto wc = ReadWorkerCase(case_path);
  if (!wc.ok()) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kError;
    e.text = wc.status().message();
    Emit(e);
    return 2;
  }
  auto env = DistEnvFromEnvironment();
  if (!env.ok() || env->world != wc->world()) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kError;
    e.text = !env.ok() ? env.status().message()
                       : fmt::format("WORLD_SIZE {} disagrees with the case file's {} ranks", env->world, wc->world());
    Emit(e);
    return 2;
  }
  try {
    Setup s = Resolve(*wc, *env);
    // OMP_NUM_THREADS is set by the launch (ThreadsPerRank); without it, one thread.
    if (s.device.is_cpu()) {
      const char* omp = std::getenv("OMP_NUM_THREADS");
      at::set_num_threads(omp && std::atoi(omp) > 0 ? std::atoi(omp) : 1);
    }
    if (env->rank == 0) {
      Log("worker: case {} ({} {}), {} rank(s) = {} group(s) x {}, device {}, libtorch {}", wc->case_id, NameOf(wc->role),
          WorkloadName(wc->workload), wc->world(), wc->groups, wc->group_size, s.device.str(), compat::TorchVersion());
      for (const auto& [key, value] : CaseFacts(at::get_num_threads(),
                                                s.device.is_cuda() ? "cuda (one GPU per rank)" : s.device.str(),
                                                s.dtype, wc->workload))
        EmitFact(key, value);
    }
    // Inference issues barriers only: Gloo groups, which also allow replicas that share a GPU
    // (NCCL refuses two ranks of one group on one device).
    GroupsRequest request;
    request.groups = wc->groups;
    request.group_size = wc->group_size;
    request.rank_nodes = wc->rank_nodes;
    request.hybrid = wc->workload != Workload::kInference && wc->training.sharding == Sharding::kHybrid;
    request.cuda = s.device.is_cuda() && wc->workload != Workload::kInference;
    request.timeout_seconds = wc->training.collective_timeout;
    if (request.hybrid)
      if (std::string problem = HybridLayoutProblem(request); !problem.empty())
        throw Failure("sharding: hybrid: " + problem);
    Heartbeat heartbeat;
    PortExchange exchange;  // MASTER_PORT=0 (rendezvous.h): announced on stdout, read from stdin
    exchange.announce = [](int port) {
      std::lock_guard<std::mutex> lock(OutputMutex());
      std::cout << RendezvousLine(port) << std::endl;
    };
    exchange.await = [](double timeout_seconds) { return ReadAnnouncedPort(STDIN_FILENO, timeout_seconds); };
    ProcessGroups g = ConnectGroups(*env, request, exchange);
    if (env->rank == 0 && wc->workload != Workload::kInference) EmitShardingFacts(*wc, s.dtype, g);
    ProbeCaseLink(*wc, s, g, request.cuda);
    int code = 0;
    int64_t steps_between_nodes = 0;
    if (wc->workload == Workload::kInference) {
      code = RunInference(*wc, s, g, *env);
    } else {
      RankTraining training(*wc, s, g);
      training.Run();
      steps_between_nodes = training.steps_between_nodes();
    }
    WorkerEvent bytes;
    bytes.kind = WorkerEvent::Kind::kBytes;
    bytes.bytes_within = g.bytes_within();
    bytes.bytes_between = g.bytes_between();
    bytes.bytes_between_nodes = g.bytes_between_nodes();
    bytes.bytes_between_nodes_steps = steps_between_nodes;
    Emit(bytes);
    if (!s.method_note.empty() && env->rank == 0) {
      WorkerEvent note;
      note.kind = WorkerEvent::Kind::kNote;  // appended to the method of every figure of the case
      note.text = s.method_note;
      Emit(note);
    }
    return code;
  } catch (const std::exception& ex) {  // Failure, c10::Error (a lost peer, a collective timeout)
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kError;
    std::string what = ex.what();
    e.text = what.substr(0, what.find('\n'));
    Emit(e);
    return 1;
  }
}

}  // namespace native
}  // namespace protocol
