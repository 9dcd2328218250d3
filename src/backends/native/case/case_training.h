#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_CASE_TRAINING_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_CASE_TRAINING_H_

// The one training loop. It runs a training case for the one-process backend
// and for every rank of a distributed one alike; one process is a mesh of one
// rank whose collectives do nothing (SoloGroups, process_group.h), as FSDP2
// with world_size 1, llm.c with num_processes 1 and torchtitan with
// dp_degree 1 run. In the order every process runs it:
//
//   data      the case's sequences (training_data.h); group g of G reads its
//             own stream, rank r of the group's K its contiguous slice of the
//             group's batch_size / G sequences
//   model     held whole (one rank) or sharded over the group (held_model.h)
//   loop      per step: grad_accum micro-batches, each loss divided by the
//             counted targets of the group's whole batch (so they add up);
//             gradient sync on the last; clip and AdamW (Update); the loss
//             summed over the group; the share protocol's periodic merge;
//             one read back from the device (loss and norm together); NaN
//             ends the case. Held-out points per training.eval_every
//             (eval_curve.h), timed apart from the steps
//   merge     share: each group's own held-out loss, then the last merge
//             (outer step, or the exact stack of 4-bit groups' adapters)
//   save      group 0: the model (a collective) or rank 0: the adapters
//   figures   rank 0 the case's (losses, throughput, merge time); every rank
//             its own (step times, communication, host reads, memory), sent
//             to the sink (training_sink.h) as the worker protocol's events
//
// Stop and timeout: `stop` is asked before every step; the one process asks
// its runner (Ctrl-C, the case's timeout on the injected clock), a rank
// answers never: its supervisor stops or times out every rank of the case at
// once (supervisor.h), since one rank leaving alone would hang its peers.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/native/case/case_setup.h"
#include "backends/native/case/eval_curve.h"
#include "backends/native/case/held_model.h"
#include "backends/native/case/throughput.h"
#include "backends/native/case/training_sink.h"
#include "backends/native/distributed/outer_step.h"
#include "backends/native/distributed/process_group.h"
#include "backends/native/launch/worker_case.h"
#include "backends/native/training/data.h"
#include "backends/native/training/train.h"
#include "backends/native/training/training_data.h"
#include "runner/base/clock.h"
#include "runner/store/records.h"

namespace protocol {
namespace native {

// Why a case ends early: thrown out of CaseTraining::Run.
//   failed      the case cannot go on (no data, a load error, the loss became NaN)
//   stopped     `stop` answered (kInterrupted or kTimeout, with the reason)
struct CaseEnded : std::runtime_error {
  CaseEnded(CaseStatus status, const std::string& reason) : std::runtime_error(reason), status(status) {}
  CaseStatus status;
};

// Asked before each step with where the case is ("at step 3 of 10"): a stop
// (kInterrupted, kTimeout) with its reason, or nullopt to go on.
using StopCheck = std::function<std::optional<CaseEnded>(const std::string& where)>;

class CaseTraining {
 public:
  // All must outlive the object. `g`: this process's mesh (SoloGroups for one process).
  CaseTraining(const WorkerCase& wc, CaseSetup& setup, ProcessGroups& g, TrainingSink& sink, Clock& clock,
               StopCheck stop);
  ~CaseTraining();

  // Runs the case to its end (see above). Throws CaseEnded; libtorch's
  // c10::Error (a lost peer, a collective's timeout, out of memory).
  void Run();
  // Bytes this rank sent to a rank on another node during the training steps.
  int64_t steps_between_nodes() const { return steps_between_nodes_; }

 private:
  void BuildData();
  void BuildModel();
  void Loop();
  double TrainStep(int64_t step);
  void TimedMerge(const std::function<void()>& combine);
  void Merge();
  void LateMerge();
  std::optional<double> MergeAndEvaluate();
  std::optional<double> EvaluatePoint(int64_t done);
  std::optional<double> GroupEvalLoss();
  void Save();
  void ReportCaseFigures(const std::optional<double>& eval);
  void ReportRankFigures();
  void ReportRankStepTimes();
  void ReportRankCommunication();
  bool leader() const { return g_.group_rank == 0; }
  bool one_process() const { return g_.world == 1; }
  void Log(const std::string& line) { sink_.Line(line); }

  const WorkerCase& wc_;
  const TrainingSettings& ts_;
  CaseSetup& s_;
  ProcessGroups& g_;
  TrainingSink& sink_;
  Clock& clock_;
  StopCheck stop_;
  const bool qlora_;         // a 4-bit model trains LoRA adapters on its frozen NF4 base
  const double step_delay_;  // PROTOCOL_TEST_STEP_DELAY for this rank (0: none)

  // data
  DataSplit split_;
  int64_t steps_ = 0, group_batch_ = 0, local_batch_ = 0;
  std::optional<EpochStream> stream_;
  // model
  TrainOptions options_;
  int64_t baseline_rss_ = 0;  // the baseline of this rank's memory figures: RSS just before the model is built
  std::unique_ptr<HeldModel> model_;
  std::shared_ptr<LoraAdapters> saved_adapters_;  // qlora: what is saved (the merged stack after a late merge)
  std::vector<at::Tensor> merged_tensors_;        // what a periodic merge averages over the groups
  std::optional<OuterStep> outer_step_;
  // loop
  std::optional<TimedSteps> timed_;
  std::optional<EvalCurve> curve_;  // the held-out curve (eval_curve.h); rank 0 reports it
  double last_loss_ = 0, merge_seconds_ = 0;
  int merges_ = 0;
  std::string merge_kind_;  // how the merges combined the groups (4-bit), for the eval method
  std::vector<double> my_step_seconds_, my_work_seconds_;          // this rank's timed steps (stragglers.h)
  std::vector<double> my_exposed_seconds_, my_in_flight_seconds_;  // its communication in those steps
  int64_t steps_between_nodes_ = 0;  // bytes this rank sent to another node during the training steps
  int64_t host_reads_ = 0, host_read_steps_ = 0;  // compat::ReadToHost calls in the training steps
};

// Mean loss on `seqs` computed by the ranks of one group together: each batch
// of batch_size sequences is split into contiguous parts, one per rank, as in
// training (a part may be empty; that rank still takes part in every gather).
// The loss sums meet in one all-reduce at the end. nullopt without counted
// targets. On one rank: eval_loss's sum, in its order.
using ShardedForward = std::function<at::Tensor(const at::Tensor& tokens)>;
std::optional<double> ShardedEvalLoss(const ShardedForward& forward, const std::vector<Sequence>& seqs,
                                      int64_t batch_size, int64_t seq_len, const at::Device& device,
                                      ProcessGroups& g);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_CASE_TRAINING_H_
