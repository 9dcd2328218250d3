#include "backends/native/case/case_training.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include "backends/native/case/case_device.h"
#include "backends/native/case/case_weights.h"
#include "backends/native/platform/host_memory.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/training/training_data.h"
#include "runner/base/text.h"
#include "runner/exec/backend.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

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

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

}  // namespace

std::optional<double> ShardedEvalLoss(const ShardedForward& forward, const std::vector<Sequence>& seqs,
                                      int64_t batch_size, int64_t seq_len, const at::Device& device,
                                      ProcessGroups& g) {
  double counted = 0;
  for (const Sequence& s : seqs)
    for (uint8_t m : s.mask) counted += m;
  if (counted == 0) return std::nullopt;
  at::Tensor sum = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));  // NCCL: on the device
  {
    // No grad mode, but not InferenceMode: Gloo writes the gathered tensors
    // from its own threads, where inference tensors may not be modified; and
    // the held-out curve evaluates between training steps, where a tensor a
    // layer made and kept under InferenceMode could not take part in autograd.
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

CaseTraining::CaseTraining(const WorkerCase& wc, CaseSetup& setup, ProcessGroups& g, TrainingSink& sink, Clock& clock,
                           StopCheck stop)
    : wc_(wc),
      ts_(wc.training),
      s_(setup),
      g_(g),
      sink_(sink),
      clock_(clock),
      stop_(std::move(stop)),
      qlora_(wc.quantization == Quantization::kNf4),
      step_delay_(TestStepDelay(g.rank)) {}

CaseTraining::~CaseTraining() = default;

void CaseTraining::Run() {
  BuildData();
  BuildModel();
  Loop();
  const std::optional<double> eval = MergeAndEvaluate();
  Save();
  if (g_.rank == 0) ReportCaseFigures(eval);
  ReportRankFigures();
  // Every figure of the case says what ran (the runner appends the note to each).
  if (g_.rank == 0 && !s_.method_note.empty()) sink_.Note(s_.method_note);
}

void CaseTraining::BuildData() {
  TrainingDataRequest request;
  request.dataset = {wc_.dataset_path, wc_.dataset_format, wc_.dataset_column};
  request.count_every_token = qlora_ && wc_.workload == Workload::kPretrain;  // QLoRA continued pretraining
  request.seq_len = ts_.seq_len;
  request.batch_size = ts_.batch_size;
  request.seed = ts_.seed;
  request.steps = wc_.steps;
  request.epochs = wc_.epochs;
  auto data = LoadTrainingData(request, *s_.tokenizer);
  if (!data.ok()) throw CaseEnded(CaseStatus::kFailed, data.status().message());
  split_ = std::move(data->split);
  steps_ = data->steps;
  group_batch_ = ts_.batch_size / g_.groups;  // sequences per group per step
  local_batch_ = group_batch_ / g_.group_size;
  stream_.emplace(split_.train, g_.groups, g_.group, static_cast<uint64_t>(ts_.seed));
  if (stream_->empty())
    throw CaseEnded(CaseStatus::kFailed, fmt::format("group {} has no training sequences ({} for {} groups)", g_.group,
                                                     split_.train.size(), g_.groups));
  if (g_.rank == 0)
    Log(fmt::format("dataset {} ({}): read {}; {} train / {} eval sequences of {} tokens; {} steps; global batch {} = "
                    "{} group(s) x {} rank(s) x {}; grad_accum {}; checkpoint_every {}",
                    wc_.dataset_path, wc_.dataset_format, data->ReadNote(), split_.train.size(), split_.eval.size(),
                    ts_.seq_len, steps_, ts_.batch_size, g_.groups, g_.group_size, local_batch_, ts_.grad_accum,
                    ts_.checkpoint_every));
}

void CaseTraining::BuildModel() {
  options_ = train_options(ts_, steps_);
  baseline_rss_ = CurrentRssBytes().value_or(0);
  if (s_.device.is_cuda()) compat::CudaResetPeakMemory();
  auto held = HoldModel(wc_, s_, g_, options_, [this](const std::string& line) { Log(line); });
  if (!held.ok()) throw CaseEnded(CaseStatus::kFailed, held.status().message());
  model_ = std::move(*held);
  merged_tensors_ = model_->MergedTensors();
  if (g_.groups > 1) {
    OuterStepOptions outer;
    outer.lr = ts_.outer_lr;
    outer.momentum = ts_.outer_momentum;
    outer.state_on_host = ts_.outer_state == OuterState::kHost;
    outer.merge_dtype = ResolveReduceDtype(ts_.merge_dtype, s_.dtype);
    outer_step_.emplace(merged_tensors_, outer);
  }
}

// One merge, timed from a common barrier to the end of its device work.
void CaseTraining::TimedMerge(const std::function<void()>& combine) {
  g_.world_comm->Barrier();
  const double t0 = clock_.NowSeconds();
  combine();
  compat::DeviceSynchronize(s_.device);
  merge_seconds_ += clock_.NowSeconds() - t0;
  ++merges_;
}

// The outer step (outer_step.h) over the merged tensors: one flat all-reduce
// across groups in the merge dtype, SUM then divide (1.13 Gloo has no AVG).
void CaseTraining::Merge() {
  TimedMerge([&] {
    Status st = outer_step_->Merge(merged_tensors_, [&](at::Tensor& flat) {
      g_.cross_comm->AllReduceSum(flat);
      flat.div_(static_cast<double>(g_.groups));
    });
    if (!st.ok()) throw CaseEnded(CaseStatus::kFailed, st.message());
  });
}

// One training step of this rank; returns its seconds (device synchronised).
double CaseTraining::TrainStep(int64_t step) {
  std::vector<const Sequence*> group_seqs = stream_->Next(group_batch_);
  std::vector<const Sequence*> mine(group_seqs.begin() + g_.group_rank * local_batch_,
                                    group_seqs.begin() + (g_.group_rank + 1) * local_batch_);
  const double denominator = std::max(counted_targets(group_seqs), 1.0);  // the group's whole batch
  const int64_t reads0 = compat::HostReads();
  const double exposed0 = g_.ExposedSeconds(), in_flight0 = g_.InFlightSeconds();
  const double t0 = clock_.NowSeconds();
  if (step_delay_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(step_delay_));
  // Sharded: each unit's gradient is reduced as the last micro-batch's backward leaves it (fsdp_schedule.h).
  at::Tensor loss_sum = backward_micro_batches([&](const at::Tensor& tokens) { return model_->Forward(tokens); },
                                               [&](bool last) { model_->SetGradientSync(last); }, mine,
                                               ts_.grad_accum, denominator, ts_.seq_len, s_.device);
  const double lr = lr_at_step(step, steps_, options_);
  const at::Tensor norm = model_->Update(lr);
  g_.group_comm->AllReduceSum(loss_sum);
  if (ts_.sync_every > 0 && (step + 1) % ts_.sync_every == 0 && step + 1 < steps_ && g_.groups > 1) Merge();
  compat::DeviceSynchronize(s_.device);
  const double seconds = clock_.NowSeconds() - t0;
  const auto [loss, grad_norm] = read_loss_and_norm(loss_sum, norm);  // the step's one read back
  host_reads_ += compat::HostReads() - reads0;
  ++host_read_steps_;
  const std::string group = g_.groups > 1 ? fmt::format(" group {}", g_.group) : "";
  if (!std::isfinite(loss))
    throw CaseEnded(CaseStatus::kFailed, fmt::format("loss became {} at step {}{}", loss, step + 1,
                                                     g_.groups > 1 ? fmt::format(" (group {})", g_.group) : ""));
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
    sink_.Event(e);
    sink_.Status(fmt::format("step {}/{} loss {:.2f}", step + 1, steps_, loss));
  }
  if (leader())
    Log(fmt::format("step {}/{}{} loss {:.4f} lr {:.3g} grad_norm {:.3f} {:.3f} s", step + 1, steps_, group, loss, lr,
                    grad_norm, seconds));
  return seconds;
}

// The held-out loss after `done` steps, a point of the curve: every group
// evaluates its model over its own ranks (after a merge, or before the first
// step, every group holds the same model), timed apart from the steps; rank 0
// reports the point. nullopt without counted targets.
std::optional<double> CaseTraining::EvaluatePoint(int64_t done) {
  const double t0 = clock_.NowSeconds();
  std::optional<double> ev = GroupEvalLoss();
  compat::DeviceSynchronize(s_.device);
  const double seconds = clock_.NowSeconds() - t0;
  if (!ev) return ev;
  curve_->Add(done, *ev, seconds);
  if (g_.rank == 0 && curve_->enabled()) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kEvalPoint;
    e.eval_point = curve_->points().back();
    sink_.Event(e);
    Log(fmt::format("eval after {} step(s): held-out loss {:.4f} ({:.3f} s)", done, *ev, seconds));
  }
  return ev;
}

std::optional<double> CaseTraining::GroupEvalLoss() {
  const ShardedForward forward = [&](const at::Tensor& tokens) { return model_->Forward(tokens); };
  return ShardedEvalLoss(forward, split_.eval, ts_.batch_size, ts_.seq_len, s_.device, g_);
}

void CaseTraining::Loop() {
  timed_.emplace(wc_.warmup_steps, steps_);
  curve_.emplace(ts_.eval_every, steps_, g_.groups > 1 ? std::optional<int64_t>(ts_.sync_every) : std::nullopt);
  const int64_t before = g_.bytes_between_nodes();
  if (curve_->Due(0)) EvaluatePoint(0);
  int64_t evaluation_bytes = g_.bytes_between_nodes() - before;
  for (int64_t step = 0; step < steps_; ++step) {
    if (std::optional<CaseEnded> stop = stop_ ? stop_(fmt::format("at step {} of {}", step, steps_)) : std::nullopt)
      throw *stop;
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
void CaseTraining::LateMerge() {
  if (qlora_ && !ts_.lora_freeze_a) {
    TimedMerge([&] {
      // An all-gather of one flat float32 vector: (G−1)·4·P bytes sent per rank.
      auto stacked = StackGroupAdapters(*model_->adapters(), g_.groups, [&](at::Tensor& all, const at::Tensor& flat) {
        g_.cross_comm->AllGather(all, flat);
      });
      if (!stacked.ok()) throw CaseEnded(CaseStatus::kFailed, stacked.status().message());
      saved_adapters_ = std::make_shared<LoraAdapters>(std::move(*stacked));
      model_->UseAdapters(saved_adapters_);
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
std::optional<double> CaseTraining::MergeAndEvaluate() {
  saved_adapters_ = model_->adapters();
  const double merged_before = merge_seconds_;
  if (g_.groups > 1) {
    auto ev = GroupEvalLoss();
    if (leader() && ev)
      sink_.Figure(MeasuredFigure("group_eval_loss", *ev, "",
                                  fmt::format("group {}: mean loss on {} held-out sequences", g_.group,
                                              split_.eval.size())));
    // Each group's own adapters, kept beside the merged one (what the merge combined).
    if (qlora_ && leader() && !wc_.output_dir.empty()) {
      const std::string dir = (fs::path(wc_.output_dir) / "group_adapters" / fmt::format("group{}", g_.group)).string();
      if (Status st = lora_save(*model_->adapters(), dir, wc_.model_path); !st.ok())
        throw CaseEnded(CaseStatus::kFailed, st.message());
    }
    LateMerge();
  }
  curve_->AddTrainingSeconds(merge_seconds_ - merged_before);  // the final merge: the last point's model
  if (g_.group != 0) return std::nullopt;
  return EvaluatePoint(steps_);  // the curve's last point when it keeps one
}

// Group 0 saves the merged model (a collective of its ranks) or rank 0 the adapters.
void CaseTraining::Save() {
  if (g_.group != 0 || wc_.output_dir.empty()) return;
  TrainedWeights trained;
  if (qlora_) trained.adapters = saved_adapters_.get();
  trained.base_path = wc_.model_path;
  trained.save_model = [&](const std::string& dir) { return model_->SaveModel(dir, g_.rank == 0); };
  Status st = SaveTrainedWeights(wc_.output_dir, trained, s_.tokenizer_path, /*writer=*/g_.rank == 0);
  if (!st.ok()) throw CaseEnded(CaseStatus::kFailed, st.message());
  if (g_.rank == 0) Log(fmt::format("{} saved to {}", qlora_ ? "LoRA adapters" : "model", wc_.output_dir));
}

// Rank 0's figures for the case: losses, throughput (throughput.h), merge time.
void CaseTraining::ReportCaseFigures(const std::optional<double>& eval) {
  sink_.Figure(MeasuredFigure(metric::kFinalLoss, last_loss_, "",
                              g_.groups > 1 ? "training loss of group 0 at the last step (before the merge)"
                                            : "training loss of the last step"));
  const std::string eval_how = fmt::format("mean loss on {} held-out sequences", split_.eval.size());
  if (eval)
    sink_.Figure(MeasuredFigure(metric::kEvalLoss, *eval, "",
                                g_.groups > 1 ? fmt::format("merged model ({} merge(s){}): {}", merges_, merge_kind_,
                                                            eval_how)
                                              : eval_how));
  ThroughputScope scope;
  scope.one_process = one_process();
  scope.ranks = g_.world;
  scope.cuda = s_.device.is_cuda();
  scope.device_text = one_process() ? s_.device.str() : scope.cuda ? "cuda" : "cpu";
  scope.config = s_.config;
  scope.seq_len = ts_.seq_len;
  scope.frozen_base = qlora_;
  if (scope.cuda) scope.device_name = compat::CudaDeviceName();
  for (const Measurement& m : ThroughputFigures(*timed_, scope)) sink_.Figure(m);
  if (auto figure = curve_->EvalSecondsFigure(split_.eval.size(), one_process() ? "the process" : "rank 0"))
    sink_.Figure(*figure);
  if (g_.groups > 1)
    sink_.Figure(MeasuredFigure(
        metric::kMergeSeconds, merge_seconds_, "s",
        qlora_ ? fmt::format("rank 0's time in {} merge(s) of the LoRA adapters across groups, after a barrier",
                             merges_)
               : fmt::format("rank 0's time in {} merge(s) (cross-group all-reduce of the parameter shards + outer "
                             "step), after a barrier",
                             merges_)));
}

// This rank's step times (its own clock, timed steps only): mean, spread and
// mean work outside collectives, each a figure of the rank (stragglers.h).
void CaseTraining::ReportRankStepTimes() {
  if (my_step_seconds_.empty()) return;
  const double mean = Mean(my_step_seconds_);
  double squares = 0;
  for (double x : my_step_seconds_) squares += (x - mean) * (x - mean);
  const std::string how = fmt::format("rank {} of {} (group {}): its own clock over {} step(s) after {} warm-up step(s)",
                                      g_.rank, g_.world, g_.group, my_step_seconds_.size(), wc_.warmup_steps);
  sink_.Figure(MeasuredFigure(metric::kStepSecondsMean, mean, "s", how + ", mean"), g_.rank);
  sink_.Figure(MeasuredFigure(metric::kRankStepSecondsSpread,
                              std::sqrt(squares / static_cast<double>(my_step_seconds_.size())), "s",
                              how + ", standard deviation"),
               g_.rank);
  sink_.Figure(MeasuredFigure(metric::kRankWorkSecondsMean, Mean(my_work_seconds_), "s",
                              how + ", mean of step time minus time in collectives (waiting for peers included there)"),
               g_.rank);
}

// This rank's communication per timed step: the seconds it was stalled
// waiting for collectives and the seconds they were in flight (torch_compat.h
// says how each is clocked), means over the timed steps. One process issues none.
void CaseTraining::ReportRankCommunication() {
  if (my_exposed_seconds_.empty() || one_process()) return;
  const bool cuda = s_.device.is_cuda();
  const std::string how = fmt::format("rank {} of {} (group {}): mean over {} step(s) after {} warm-up step(s)",
                                      g_.rank, g_.world, g_.group, my_exposed_seconds_.size(), wc_.warmup_steps);
  sink_.Figure(MeasuredFigure(metric::kCommExposedSeconds, Mean(my_exposed_seconds_), "s",
                              how + (cuda ? ", time the compute stream stood still at the waits for NCCL (CUDA events)"
                                          : ", wall time the rank's thread spent waiting for collectives to end")),
               g_.rank);
  sink_.Figure(MeasuredFigure(metric::kCommInFlightSeconds, Mean(my_in_flight_seconds_), "s",
                              how + (cuda ? ", Σ of each NCCL collective's own duration (its start and end events)"
                                          : ", Σ over the collectives of issue to end (Gloo marks the end)")),
               g_.rank);
}

// This rank's own figures: its step times, its communication, its host
// reads, its peak RSS and that peak above the rank's baseline (its RSS just
// before the model was built: libtorch, the tokenizer and the data), and on
// CUDA its device peak.
void CaseTraining::ReportRankFigures() {
  ReportRankStepTimes();
  ReportRankCommunication();
  const std::string who = one_process() ? "the process (one rank)"
                                        : fmt::format("rank {} of {} ({} group(s) x {})", g_.rank, g_.world, g_.groups,
                                                      g_.group_size);
  if (host_read_steps_ > 0)
    sink_.Figure(MeasuredFigure(metric::kHostReadsPerStep,
                                static_cast<double>(host_reads_) / static_cast<double>(host_read_steps_), "reads",
                                fmt::format("{}: device values read back on the host (compat::ReadToHost), each a "
                                            "wait for the device, per training step over {} step(s), merges included",
                                            who, host_read_steps_)),
                 g_.rank);
  const int64_t peak_rss = PeakRssBytes();
  const char* mmap_threshold = std::getenv("MALLOC_MMAP_THRESHOLD_");
  const std::string rss_how =
      fmt::format("{}: getrusage ru_maxrss of its process, i.e. its peak since it started; {}; checkpoint_every {}; "
                  "MALLOC_MMAP_THRESHOLD_={}",
                  who, model_->memory_text(), ts_.checkpoint_every, mmap_threshold ? mmap_threshold : "unset");
  sink_.Figure(MeasuredFigure(metric::kPeakHostRss, static_cast<double>(peak_rss), "bytes", rss_how), g_.rank);
  // The kernel counts a thread's resident pages in batches (up to 64 page events per thread before they
  // reach the process's counters), so the baseline and the peak can each lag by a few hundred KiB: a
  // growth below that may read as a small negative difference, stored as 0.
  sink_.Figure(MeasuredFigure(metric::kPeakHostRssAboveBaseline,
                              static_cast<double>(std::max<int64_t>(0, peak_rss - baseline_rss_)), "bytes",
                              fmt::format("{}; minus its RSS just before the model was built ({} bytes: VmRSS of "
                                          "/proc/self/status; the kernel counts resident pages in batches per "
                                          "thread, so a growth under a few hundred KiB may read 0)",
                                          rss_how, baseline_rss_)),
               g_.rank);
  if (auto device_peak = compat::CudaPeakMemoryBytes())
    sink_.Figure(MeasuredFigure(metric::kPeakDeviceMemory, static_cast<double>(*device_peak), "bytes",
                                fmt::format("{}: CUDA caching allocator peak allocated bytes since the model was built",
                                            who)),
                 g_.rank);
}

}  // namespace native
}  // namespace protocol
