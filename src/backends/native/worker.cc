#include "backends/native/worker.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>
#include <c10/core/GradMode.h>

#include "backends/native/training/data.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/launch/events.h"
#include "backends/native/distributed/fsdp_qlora.h"
#include "backends/native/distributed/fsdp_sharded.h"
#include "backends/native/model/generate.h"
#include "backends/native/platform/host_memory.h"
#include "backends/native/memory_estimate.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/model_resolve.h"
#include "backends/native/native_check.h"
#include "backends/native/distributed/process_group.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/launch/stragglers.h"
#include "backends/native/model/tokenizer.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/train.h"
#include "backends/native/launch/worker_case.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

constexpr double kEvalFraction = 0.05;  // as the one-process fsdp backend

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

void EmitMeasurement(const std::string& name, double value, const char* unit, std::string method) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kMeasurement;
  e.measurement.name = name;
  e.measurement.value = value;
  e.measurement.unit = unit;
  e.measurement.method = std::move(method);
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
// mean work outside collectives, each as name_rank<r> (stragglers.h).
void EmitRankStepTimes(const ProcessGroups& g, const std::vector<double>& step_seconds,
                       const std::vector<double>& work_seconds, int64_t warmup_steps) {
  if (step_seconds.empty()) return;
  const double n = static_cast<double>(step_seconds.size());
  double sum = 0, work = 0, squares = 0;
  for (double x : step_seconds) sum += x;
  for (double x : work_seconds) work += x;
  const double mean = sum / n;
  for (double x : step_seconds) squares += (x - mean) * (x - mean);
  const std::string suffix = fmt::format("_rank{}", g.rank);
  const std::string how = fmt::format("rank {} of {} (group {}): its own clock over {} step(s) after {} warm-up step(s)",
                                      g.rank, g.world, g.group, step_seconds.size(), warmup_steps);
  EmitMeasurement(metric::kStepSecondsMean + suffix, mean, "s", how + ", mean");
  EmitMeasurement(metric::kRankStepSecondsSpread + suffix, std::sqrt(squares / n), "s", how + ", standard deviation");
  EmitMeasurement(metric::kRankWorkSecondsMean + suffix, work / n, "s",
                  how + ", mean of step time minus time in collectives (waiting for peers included there)");
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
  std::string weights_note;  // set when a finetune/inference model got random weights
};

Setup Resolve(const WorkerCase& wc, const DistEnv& env) {
  Setup s;
  Result<ResolvedModel> model = ResolveModel(wc.model_name, wc.model_preset, wc.model_path);
  if (!model.ok()) throw Failure(model.status().message());
  s.config = model->config;
  s.tokenizer_path = model->tokenizer_path;
  s.tokenizer = std::move(model->tokenizer);
  const DeviceChoice device = wc.training.device;
  if (device == DeviceChoice::kCuda && !compat::CudaAvailable())
    throw Failure("device 'cuda' was asked for but there is no CUDA device");
  if (device == DeviceChoice::kCuda || (device == DeviceChoice::kAuto && compat::CudaAvailable())) {
    // More ranks than GPUs on a node (inference replicas may share them): local rank mod the GPUs.
    const int gpus = std::max(1, static_cast<int>(at::getNumGPUs()));
    s.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank % gpus));
    compat::CudaSetDevice(s.device.index());
    s.dtype = at::kBFloat16;
  }
  return s;
}

// Where this rank's weights come from (native_weights_source, the rule Check
// applied before the launch); sets the "weights: " note for declared random
// weights; throws where there are none to load.
WeightsSource ResolveWeights(const WorkerCase& wc, bool nf4, Setup& s) {
  const WeightsSource source = native_weights_source(wc.workload, nf4, wc.init_random, wc.model_path);
  if (source == WeightsSource::kMissing)
    throw Failure(fmt::format("model '{}' has no weights in its path and does not say `init: random`", wc.model_name));
  if (std::string note = native_weights_note(source, wc.training.seed); !note.empty()) s.weights_note = "weights: " + note;
  return source;
}

Model LoadModel(const WorkerCase& wc, Setup& s, const std::vector<at::Device>& devices = {},
                const LayerPlacement& placement = {}) {
  Model model = placement.devices > 1 ? model_create_placed(s.config, s.dtype, devices, placement)
                                      : model_create(s.config, at::TensorOptions().dtype(s.dtype).device(s.device));
  if (ResolveWeights(wc, wc.quantization != Quantization::kNone, s) == WeightsSource::kPath) {
    Status st = model_load_weights(model, wc.model_path);
    if (!st.ok()) throw Failure(st.message());
  } else {
    model_init_random(model, static_cast<uint64_t>(wc.training.seed));
  }
  return model;
}

// ---- training ------------------------------------------------------------------

// A group's own stream of sequences: its shard of the training split (every
// groups-th sequence), reshuffled with seed + epoch at each epoch's end.
class Stream {
 public:
  Stream(const std::vector<Sequence>& train, int groups, int group, uint64_t seed) : seed_(seed) {
    for (size_t i = static_cast<size_t>(group); i < train.size(); i += static_cast<size_t>(groups)) order_.push_back(train[i]);
  }
  bool empty() const { return order_.empty(); }
  std::vector<const Sequence*> Next(int64_t n) {
    std::vector<const Sequence*> out;
    for (int64_t i = 0; i < n; ++i) {
      if (cursor_ == order_.size()) {
        cursor_ = 0;
        data_shuffle(order_, seed_ + ++epoch_);
      }
      out.push_back(&order_[cursor_++]);
    }
    return out;
  }

 private:
  std::vector<Sequence> order_;
  size_t cursor_ = 0;
  uint64_t epoch_ = 0;
  uint64_t seed_;
};

// Outer step of a merge (DiLoCo): Δ = θ_global − mean over groups of θ_group;
// with momentum μ: v = μ·v + Δ, θ_global −= η·(Δ + μ·v) (Nesterov), else
// θ_global −= η·Δ. η = 1, μ = 0 is plain averaging: θ_global = the mean, and
// no state is kept. Every group continues from θ_global. Memory per rank: a
// copy of its shards (θ_global) unless plain averaging, and the velocity when μ > 0.
class Merger {
 public:
  Merger(const std::vector<at::Tensor>& shards, const TrainingSettings& t) : lr_(t.outer_lr), momentum_(t.outer_momentum) {
    c10::NoGradGuard no_grad;
    if (plain()) return;
    for (const at::Tensor& s : shards) {
      global_.push_back(s.detach().clone());
      if (momentum_ > 0) velocity_.push_back(at::zeros_like(global_.back()));
    }
  }
  void Merge(std::vector<at::Tensor>& shards, ProcessGroups& g) {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < shards.size(); ++i) {
      at::Tensor avg = shards[i].detach().clone();
      g.bytes_between += compat::AllReduceSum(*g.cross_pg, avg);
      avg.div_(static_cast<double>(g.groups));  // SUM then divide: 1.13 Gloo has no AVG
      if (plain()) {
        shards[i].detach().copy_(avg);
        continue;
      }
      at::Tensor delta = global_[i] - avg;
      if (momentum_ > 0) {
        velocity_[i].mul_(momentum_).add_(delta);
        global_[i].sub_(delta + velocity_[i] * momentum_, lr_);
      } else {
        global_[i].sub_(delta, lr_);
      }
      shards[i].detach().copy_(global_[i]);
    }
  }

 private:
  bool plain() const { return lr_ == 1.0 && momentum_ == 0.0; }
  double lr_, momentum_;
  std::vector<at::Tensor> global_, velocity_;
};

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
  double local = 0;
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
      local += masked_loss(forward(b.inputs), b, counted).item<double>();
    }
  }
  at::Tensor sum = at::full({1}, local, at::TensorOptions().dtype(at::kDouble).device(device));  // NCCL: on the device
  g.bytes_within += compat::AllReduceSum(*g.group_pg, sum);
  return sum.item<double>();
}

// The late merge of the share protocol's 4-bit groups: every rank gathers the
// adapters of every group over its cross-group communicator (an all-gather of
// one flat float32 vector: (G−1)·4·P bytes sent per rank) and stacks them
// (lora_merge_stack: rank G·r, ΔW = mean over groups of each group's ΔW).
LoraAdapters StackGroupAdapters(LoraAdapters& mine, ProcessGroups& g) {
  c10::NoGradGuard no_grad;
  at::Tensor flat = lora_flatten(mine);
  at::Tensor all = at::empty({g.groups * flat.numel()}, flat.options());
  g.bytes_between += compat::AllGatherFlat(*g.cross_pg, all, flat);
  std::vector<LoraAdapters> groups;
  for (int i = 0; i < g.groups; ++i) groups.push_back(lora_unflatten(mine, all.narrow(0, i * flat.numel(), flat.numel())));
  std::vector<const LoraAdapters*> views;
  for (const LoraAdapters& a : groups) views.push_back(&a);
  auto merged = lora_merge_stack(views);
  if (!merged.ok()) throw Failure(merged.status().message());
  return std::move(*merged);
}

int RunTraining(const WorkerCase& wc, Setup& s, ProcessGroups& g) {
  const TrainingSettings& ts = wc.training;
  const bool leader = g.group_rank == 0;
  // A 4-bit model trains LoRA adapters on its frozen NF4 base (FSDP-QLoRA, fsdp_qlora.h).
  const bool qlora = wc.quantization == Quantization::kNf4;
  auto docs = data_load(wc.dataset_path, wc.dataset_format, *s.tokenizer);
  if (!docs.ok()) throw Failure(docs.status().message());
  // QLoRA continued pretraining: the causal-LM loss counts every token (as the one-process backend).
  if (qlora && wc.workload == Workload::kPretrain)
    for (Document& d : *docs) std::fill(d.loss_mask.begin(), d.loss_mask.end(), 1);
  const int pad = s.tokenizer->eos_id() >= 0 ? s.tokenizer->eos_id() : 0;
  DataSplit split = data_split(data_pack(*docs, ts.seq_len, pad), kEvalFraction, static_cast<uint64_t>(ts.seed));
  if (split.train.empty()) throw Failure(fmt::format("{}: the dataset has no tokens", wc.dataset_path));
  const int64_t steps_per_epoch = (static_cast<int64_t>(split.train.size()) + ts.batch_size - 1) / ts.batch_size;
  const int64_t steps = wc.steps > 0 ? wc.steps : wc.epochs * steps_per_epoch;
  const int64_t group_batch = ts.batch_size / g.groups;  // sequences per group per step
  const int64_t local_batch = group_batch / g.group_size;
  Stream stream(split.train, g.groups, g.group, static_cast<uint64_t>(ts.seed));
  if (stream.empty()) throw Failure(fmt::format("group {} has no training sequences ({} for {} groups)", g.group,
                                                split.train.size(), g.groups));
  if (g.rank == 0)
    Log("worker: {} train / {} eval sequences of {} tokens; {} steps; global batch {} = {} group(s) x {} rank(s) x {}; "
        "grad_accum {}; checkpoint_every {}",
        split.train.size(), split.eval.size(), ts.seq_len, steps, ts.batch_size, g.groups, g.group_size, local_batch,
        ts.grad_accum, ts.checkpoint_every);

  const TrainOptions o = train_options(ts, steps);
  // The baseline of this rank's memory figures: RSS just before the model is built.
  const int64_t baseline_rss = CurrentRssBytes().value_or(0);
  if (s.device.is_cuda()) compat::CudaResetPeakMemory();
  // The model is built sharded, unit by unit: no rank ever holds it whole. A 4-bit
  // pretrain continues from the path's weights (checked before the launch).
  at::Generator gen = init_generator(static_cast<uint64_t>(ts.seed));
  std::optional<WeightsReader> reader;
  if (ResolveWeights(wc, qlora, s) == WeightsSource::kPath) {
    auto opened = WeightsReader::Open(wc.model_path);
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
  std::unique_ptr<ShardedParams> full;     // full-precision FSDP
  std::unique_ptr<ShardedQlora> quantized;  // 4-bit base + LoRA
  std::shared_ptr<LoraAdapters> lora;
  std::optional<AdamW> adapter_optimizer;
  std::vector<at::Tensor> merged_tensors;  // what a periodic merge averages over the groups
  std::string memory_text;
  if (qlora) {
    lora = std::make_shared<LoraAdapters>(
        lora_create(s.config, ts.LoraRank(), ts.LoraAlpha(), static_cast<uint64_t>(ts.seed), s.device));
    auto created = ShardedQlora::Create(s.config, s.dtype, s.device, *g.group_pg, g.group_rank, o, wc.double_quant,
                                        lora, &g.bytes_within, fill);
    if (!created.ok()) throw Failure(created.status().message());
    quantized = std::move(*created);
    adapter_optimizer.emplace(lora_trainable(*lora, ts.lora_freeze_a), o);
    // freeze A: only B is trained and averaged (exact); otherwise A and B are
    // averaged separately at a periodic merge (not exact: mean(B)·mean(A) ≠ mean(B·A)).
    merged_tensors = adapter_optimizer->params();
    const std::string method = qlora_method(*lora,
                                            wc.workload == Workload::kPretrain ? QloraKind::kContinuedPretraining
                                                                               : QloraKind::kFinetune,
                                            wc.double_quant, ts.lora_freeze_a) +
                               fmt::format("; base sharded over the group's {} rank(s) by whole NF4 blocks", g.group_size);
    s.weights_note = s.weights_note.empty() ? "weights: " + method : s.weights_note + "; " + method;
    memory_text = fmt::format("the rank holds {} bytes of the 4-bit base (its NF4 shards, embedding and head slices, "
                              "norms) and {} float32 adapter parameters",
                              quantized->base_bytes(), lora_parameter_count(s.config, ts.LoraRank()));
    if (g.rank == 0) Log("worker: {}", method);
  } else {
    auto created = ShardedParams::Create(s.config, s.dtype, s.device, *g.group_pg, g.group_rank, o, &g.bytes_within, fill);
    if (!created.ok()) throw Failure(created.status().message());
    full = std::move(*created);
    merged_tensors = full->shards();
    memory_text = fmt::format("the rank holds {} float32 shard elements", full->shard_elements());
  }
  reader.reset();
  const ShardedForward forward = [&](const at::Tensor& tokens) {
    return quantized ? quantized->Forward(tokens) : full->Forward(tokens);
  };
  // After the step's backward passes: clip and update (AdamW on this rank's
  // slices, or on the adapters once their gradients are summed over the group).
  auto step_update = [&](double lr) -> double {
    if (full) return full->Step(lr);
    quantized->ReduceAdapterGradients(adapter_optimizer->params());
    const double norm = grad_clip_norm(adapter_optimizer->params(), o.grad_clip);
    adapter_optimizer->step(lr);
    adapter_optimizer->zero_grad();
    return norm;
  };
  std::optional<Merger> merger;
  if (g.groups > 1) merger.emplace(merged_tensors, ts);
  double merge_seconds = 0;
  int merges = 0;
  // One merge, timed from a common barrier to the end of its device work.
  auto timed_merge = [&](const std::function<void()>& combine) {
    compat::Barrier(*g.world_pg);
    const double t0 = Now();
    combine();
    compat::DeviceSynchronize(s.device);
    merge_seconds += Now() - t0;
    ++merges;
  };
  auto merge = [&]() { timed_merge([&] { merger->Merge(merged_tensors, g); }); };

  double last_loss = 0, timed_seconds = 0;
  int64_t timed_tokens = 0, timed_steps = 0;
  std::vector<double> my_step_seconds, my_work_seconds;  // this rank's timed steps (stragglers.h)
  const double step_delay = TestStepDelay(g.rank);
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<const Sequence*> group_seqs = stream.Next(group_batch);
    std::vector<const Sequence*> mine(group_seqs.begin() + g.group_rank * local_batch,
                                      group_seqs.begin() + (g.group_rank + 1) * local_batch);
    double counted = 0;  // targets of the group's whole batch: the loss denominator
    for (const Sequence* q : group_seqs)
      for (uint8_t m : q->mask) counted += m;
    const double t0 = Now(), waited0 = g.WaitSeconds();
    if (step_delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(step_delay));
    at::Tensor loss_sum = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(s.device));
    const int64_t micro = std::max<int64_t>(1, local_batch / std::max<int64_t>(1, ts.grad_accum));
    for (int64_t start = 0; start < local_batch; start += micro) {
      std::vector<const Sequence*> part(mine.begin() + start, mine.begin() + std::min(local_batch, start + micro));
      BatchTensors b = batch_tensors(part, ts.seq_len, s.device);
      at::Tensor loss = masked_loss(forward(b.inputs), b, std::max(counted, 1.0));
      loss.backward();  // full FSDP: each unit's gradient is reduce-scattered into this rank's slice as it is reached
      loss_sum += loss.item<double>();
    }
    const double lr = lr_at_step(step, steps, o);
    const double grad_norm = step_update(lr);
    g.bytes_within += compat::AllReduceSum(*g.group_pg, loss_sum);
    if (ts.sync_every > 0 && (step + 1) % ts.sync_every == 0 && step + 1 < steps && g.groups > 1) merge();
    compat::DeviceSynchronize(s.device);
    const double seconds = Now() - t0;
    const double loss = loss_sum.item<double>();
    if (!std::isfinite(loss)) throw Failure(fmt::format("loss became {} at step {} (group {})", loss, step + 1, g.group));
    last_loss = loss;
    const int64_t tokens = ts.batch_size * ts.seq_len;  // every group's sequences
    if (step >= wc.warmup_steps || steps <= wc.warmup_steps) {
      timed_seconds += seconds;
      timed_tokens += tokens;
      ++timed_steps;
      my_step_seconds.push_back(seconds);
      my_work_seconds.push_back(seconds - (g.WaitSeconds() - waited0));
    }
    if (g.rank == 0) {
      WorkerEvent e;
      e.kind = WorkerEvent::Kind::kStep;
      e.step.step = step + 1;
      e.step.seconds = seconds;
      e.step.loss = loss;
      e.step.tokens = tokens;
      Emit(e);
    }
    if (leader)
      Log("step {}/{} group {} loss {:.4f} lr {:.3g} grad_norm {:.3f} {:.3f} s", step + 1, steps, g.group, loss, lr,
          grad_norm, seconds);
  }

  // Each group's own model on the held-out split, before the final merge
  // (every rank of a group takes part: the parameters are sharded).
  const std::string eval_how = fmt::format("mean loss on {} held-out sequences", split.eval.size());
  std::string merge_kind;  // how the merges combined the groups (4-bit), for the eval method
  std::shared_ptr<LoraAdapters> saved_adapters = lora;
  if (g.groups > 1) {
    auto ev = ShardedEvalLoss(forward, split.eval, ts.batch_size, ts.seq_len, s.device, g);
    if (leader && ev) EmitMeasurement("group_eval_loss", *ev, "", fmt::format("group {}: {}", g.group, eval_how));
    // Each group's own adapters, kept beside the merged one (what the merge combined).
    if (qlora && leader && !wc.output_dir.empty()) {
      const std::string dir = (fs::path(wc.output_dir) / "group_adapters" / fmt::format("group{}", g.group)).string();
      if (Status st = lora_save(*lora, dir, wc.model_path); !st.ok()) throw Failure(st.message());
    }
    if (qlora && !ts.lora_freeze_a) {
      // The exact late merge: the groups' adapters stacked (rank G·r).
      timed_merge([&] {
        saved_adapters = std::make_shared<LoraAdapters>(StackGroupAdapters(*lora, g));
        quantized->UseAdapters(saved_adapters);
      });
      merge_kind = fmt::format("{}, the last one the exact stack of the {} groups' adapters (rank {})",
                               merges > 1 ? " (periodic ones averaged A and B separately: not exact)" : "", g.groups,
                               saved_adapters->rank);
    } else {
      merge();
      if (qlora) merge_kind = " averaging B with A frozen at its shared seeded start (exact)";
    }
  }
  // After the merge every group holds the same model: group 0 evaluates and saves it.
  std::optional<double> eval;
  if (g.group == 0) eval = ShardedEvalLoss(forward, split.eval, ts.batch_size, ts.seq_len, s.device, g);
  if (g.group == 0 && !wc.output_dir.empty()) {
    Status st = Status::Ok();
    if (qlora) {
      if (g.rank == 0) st = lora_save(*saved_adapters, wc.output_dir, wc.model_path);
    } else {
      st = full->Save(wc.output_dir, g.rank == 0);
    }
    if (!st.ok()) throw Failure(st.message());
    if (g.rank == 0) {
      std::error_code ec;
      fs::copy_file(s.tokenizer_path, fs::path(wc.output_dir) / "tokenizer.model", fs::copy_options::overwrite_existing, ec);
      Log("worker: {} saved to {}", qlora ? "LoRA adapters" : "model", wc.output_dir);
    }
  }
  if (g.rank == 0) {
    EmitMeasurement(metric::kFinalLoss, last_loss, "",
                    g.groups > 1 ? "training loss of group 0 at the last step (before the merge)"
                                 : "training loss of the last step");
    if (eval)
      EmitMeasurement(metric::kEvalLoss, *eval, "",
                      g.groups > 1 ? fmt::format("merged model ({} merge(s){}): {}", merges, merge_kind, eval_how) : eval_how);
    if (timed_seconds > 0) {
      const double tps = static_cast<double>(timed_tokens) / timed_seconds;
      const std::string how = fmt::format("{} tokens over {} steps after {} warm-up step(s), rank 0's step times, {} ranks on {}",
                                          timed_tokens, timed_steps, wc.warmup_steps, g.world, s.device.is_cuda() ? "cuda" : "cpu");
      EmitMeasurement(metric::kTrainTokensPerSecond, tps, "tokens/s", how);
      EmitMeasurement(metric::kTgs, tps / g.world, "tokens/s",
                      how + (s.device.is_cuda() ? " / ranks (one device each)" : " / ranks (per process: CPU)"));
      if (s.device.is_cuda()) {  // per device: the tokens of one rank's share
        const double flops = qlora ? s.config.FrozenBaseTrainingFlopsPerToken(ts.seq_len)
                                   : s.config.TrainingFlopsPerToken(ts.seq_len);
        const double tflops = AchievedTflops(flops, tps / g.world);
        const std::string formula = qlora ? "4(N-N_emb)+12·L·H·Q·T FLOPs/token (PaLM, frozen base: no weight "
                                            "gradients; LoRA FLOPs not counted)"
                                          : "6(N-N_emb)+12·L·H·Q·T FLOPs/token (PaLM)";
        EmitMeasurement(metric::kTflops, tflops, "TFLOP/s", formula + " × tokens/s per device (" + how + " / ranks)");
        const std::string name = compat::CudaDeviceName();
        if (auto peak = PeakBf16Tflops(name))
          EmitMeasurement(metric::kMfu, tflops / *peak, "",
                          fmt::format("tflops per device / {} TFLOP/s dense bf16 peak of '{}'", *peak, name));
      }
    }
    if (g.groups > 1)
      EmitMeasurement(metric::kMergeSeconds, merge_seconds, "s",
                      qlora ? fmt::format("rank 0's time in {} merge(s) of the LoRA adapters across groups, after a barrier",
                                          merges)
                            : fmt::format("rank 0's time in {} merge(s) (cross-group all-reduce of the parameter shards "
                                          "+ outer step), after a barrier",
                                          merges));
  }
  EmitRankStepTimes(g, my_step_seconds, my_work_seconds, wc.warmup_steps);
  // This rank's memory: its peak RSS, and that peak above the rank's baseline
  // (its RSS just before the model was built: libtorch, the tokenizer and the data).
  const int64_t peak_rss = PeakRssBytes();
  const char* mmap_threshold = std::getenv("MALLOC_MMAP_THRESHOLD_");
  const std::string rss_how = fmt::format(
      "rank {} of {} ({} group(s) x {}): getrusage ru_maxrss of the rank process, i.e. its peak since it started; "
      "{}; checkpoint_every {}; MALLOC_MMAP_THRESHOLD_={}",
      g.rank, g.world, g.groups, g.group_size, memory_text, ts.checkpoint_every,
      mmap_threshold ? mmap_threshold : "unset");
  EmitMeasurement(metric::kPeakHostRss + std::string("_rank") + std::to_string(g.rank), static_cast<double>(peak_rss),
                  "bytes", rss_how);
  EmitMeasurement(metric::kPeakHostRssAboveBaseline + std::string("_rank") + std::to_string(g.rank),
                  static_cast<double>(peak_rss - baseline_rss), "bytes",
                  fmt::format("{}; minus the rank's RSS just before the model was built ({} bytes: VmRSS of /proc/self/status)",
                              rss_how, baseline_rss));
  if (auto device_peak = compat::CudaPeakMemoryBytes())
    EmitMeasurement(metric::kPeakDeviceMemory + std::string("_rank") + std::to_string(g.rank),
                    static_cast<double>(*device_peak), "bytes",
                    fmt::format("rank {} of {}: CUDA caching allocator peak allocated bytes since the model was built", g.rank, g.world));
  return 0;
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
    model_quantize_nf4(model, wc.double_quant);
    // Every measurement says what ran (dist_backend appends the "weights: " note to each).
    const std::string method = nf4_prepare_inference(model, devices.front(), s.dtype, wc.double_quant);
    s.weights_note = s.weights_note.empty() ? "weights: " + method : s.weights_note + "; " + method;
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
    prompt = s.tokenizer->Encode(wc.inference.prompt);
    if (s.tokenizer->bos_id() >= 0) prompt.insert(prompt.begin(), s.tokenizer->bos_id());
  }
  compat::Barrier(*g.world_pg);
  const double start = Now();
  int64_t generated = 0;
  int served = 0;
  double busy = 0;
  const auto& schedule = wc.inference.max_new_tokens;
  if (leader) {
    for (size_t i = static_cast<size_t>(g.group); i < schedule.size(); i += static_cast<size_t>(g.groups)) {
      GenerateOptions o;
      o.max_new_tokens = schedule[i];
      o.ignore_eos = wc.inference.ignore_eos;
      const double t0 = Now();
      auto gen = generate_greedy(*model, prompt, o, nullptr);
      compat::DeviceSynchronize(s.device);
      const double seconds = Now() - t0;
      if (!gen.ok()) throw Failure(gen.status().message());
      WorkerEvent e;
      e.kind = WorkerEvent::Kind::kRequest;
      e.request.index = static_cast<int>(i);
      e.request.max_new_tokens = schedule[i];
      e.request.prompt_tokens = static_cast<int>(prompt.size());
      e.request.generated_tokens = static_cast<int>(gen->tokens.size());
      e.request.seconds = seconds;
      e.request.answer = s.tokenizer->Decode(gen->tokens);
      e.request.token_ids = gen->tokens;
      Emit(e);
      generated += e.request.generated_tokens;
      busy += seconds;
      ++served;
    }
    const double elapsed = Now() - start;
    EmitMeasurement("replica_seconds", elapsed, "s",
                    fmt::format("replica {}: {} request(s), {} tokens, {:.3f} s generating", g.group, served, generated, busy));
    if (!s.weights_note.empty() && g.rank == 0) Log("worker: {}", s.weights_note);
  }
  compat::Barrier(*g.world_pg);
  return 0;
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
      std::vector<std::pair<std::string, std::string>> facts = {
          {fact::kThreadsPerRank, std::to_string(at::get_num_threads())},
          {fact::kDevice, s.device.is_cuda() ? "cuda (one GPU per rank)" : s.device.str()},
          {fact::kDtype, compat::DtypeName(s.dtype)}};
      if (wc->workload == Workload::kInference) facts.push_back({fact::kDecoding, kDecodingText});
      for (const auto& [key, value] : facts) {
        WorkerEvent e;
        e.kind = WorkerEvent::Kind::kFact;
        e.text = key;
        e.value = value;
        Emit(e);
      }
    }
    // Inference issues barriers only: Gloo groups, which also allow replicas that share a GPU
    // (NCCL refuses two ranks of one group on one device).
    const bool nccl = s.device.is_cuda() && wc->workload != Workload::kInference;
    Heartbeat heartbeat;
    ProcessGroups g = ConnectGroups(*env, wc->groups, wc->group_size, nccl, wc->training.collective_timeout);
    const int code = wc->workload == Workload::kInference ? RunInference(*wc, s, g, *env) : RunTraining(*wc, s, g);
    WorkerEvent bytes;
    bytes.kind = WorkerEvent::Kind::kBytes;
    bytes.bytes_within = g.bytes_within;
    bytes.bytes_between = g.bytes_between;
    Emit(bytes);
    if (!s.weights_note.empty() && env->rank == 0) {
      WorkerEvent note;
      note.kind = WorkerEvent::Kind::kStatus;
      note.text = s.weights_note;
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
