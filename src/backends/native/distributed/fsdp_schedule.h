#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SCHEDULE_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SCHEDULE_H_

// When the units of a sharded model communicate: the order PyTorch FSDP gives
// its all-gathers and gradient reductions (FSDP2's FSDPParamGroup transitions:
// unshard, wait_for_unshard, reshard, post_backward), in one place. The units
// (ScheduledUnit below: fsdp_sharded.h's full-precision units, fsdp_qlora.h's
// 4-bit ones) say how to gather and reduce; this class says when.
//
// Units are numbered in forward order (embedding 0, decoder layers, head).
// With prefetch (training.prefetch, the default):
//
//   forward, unit i    wait for its all-gather (issued while unit i−1
//                      computed), issue unit i+1's, compute, reshard
//   backward, unit i   wait for its all-gather, issue the gather of the unit
//                      that backward reaches next (i−1, or the one before it
//                      that has a backward), compute the gradients, then:
//                      advance the gradient reductions still in flight by one
//                      stage (wait for the previous unit's reduce-scatter,
//                      issue its all-reduce across replicas, ...) and issue
//                      unit i's first stage
//   end of backward    (after the last unit with a backward) wait for every
//                      reduction: the gradients are whole before the optimizer
//
// So at most two units are gathered at once (the one computing and the next
// one), the next unit's all-gather is issued before the current unit's
// reduce-scatter (on the same communicator the reduce-scatter cannot hold
// it back), and one unit's reduction runs while the next unit computes.
// Without prefetch every collective is waited right after it is issued:
// all-gather, compute, reduce-scatter, one after the other (FSDP with
// backward_prefetch=None and no forward prefetch).
//
// Two choices of PyTorch FSDP hold in both modes: the last unit of the forward
// (the head) is not resharded after the forward, as FSDP keeps its root's
// parameters for the backward that follows at once; and a unit whose backward
// does not read its parameters (the embedding: the gradient of a lookup needs
// only the indices) is not gathered again for it.
//
// Every rank of the shard group calls the same units in the same order, so
// the collectives meet; a forward that did not end (an exception) leaves
// gathers behind, which the next BeginForward waits for and drops.

#include <ATen/ATen.h>

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/unit_function.h"

namespace protocol {
namespace native {

class FsdpSchedule;

// An all-gather of a unit in flight: the collective and the buffer it fills.
struct InFlightGather {
  compat::PendingCollective collective;
  at::Tensor buffer;  // what the all-gather writes (undefined: nothing gathered)
};

// One stage of a gradient reduction: a collective and what to do once it ended.
struct ReductionStage {
  std::string name;                                // "reduce-scatter", "all-reduce across replicas", ...
  std::function<compat::PendingCollective()> issue;
  std::function<void()> after;                     // may be empty
};

// A unit's gradient reduction: stages issued one after the other, each when
// the previous one has ended.
struct GradientReduction {
  std::vector<ReductionStage> stages;
  bool empty() const { return stages.empty(); }
};

// What a unit knows how to do; FsdpSchedule decides when. Implements
// unit_function.h's UnitParameters for unit_apply.
class ScheduledUnit : public UnitParameters {
 public:
  ScheduledUnit(FsdpSchedule& schedule, std::string name);

  UnitTensors Gather(UnitPass pass) final;
  void Free(UnitTensors& t) final;
  void Refill(UnitTensors& t) final;
  std::vector<at::Tensor> ReduceGradients(UnitTensors& t) final;

  const std::string& name() const { return name_; }
  int index() const { return index_; }

 protected:
  // A fresh all-gather of the unit, issued and not waited for.
  virtual InFlightGather IssueGather() = 0;
  // The unit's tensors from a finished gather's buffer (called in the caller's
  // grad mode: parameters that train require grad when it is on).
  virtual UnitTensors Assemble(const at::Tensor& buffer) = 0;
  // The all-gather that refills `resharded` (tensors whose storage
  // ReleaseStorage freed), issued and not waited for; and, once it ended,
  // what is left to put the data in place (nothing when it gathered in place).
  virtual InFlightGather IssueRefill(UnitTensors& resharded) = 0;
  virtual void AfterRefill(const at::Tensor& buffer, UnitTensors& resharded) {}
  // Frees the gathered storage of `t`, keeping the tensors and their shapes.
  virtual void ReleaseStorage(UnitTensors& t) = 0;
  // After the unit's backward: its gradient reduction (none for a frozen
  // unit), built from the .grad of t's tensors; t is released by the caller.
  virtual GradientReduction Reduction(UnitTensors& t) = 0;

  FsdpSchedule& schedule() { return schedule_; }

  // The head: kept gathered from its forward to its backward.
  bool reshard_after_forward_ = true;
  // False for the embedding: its backward reads no parameter.
  bool backward_reads_params_ = true;

 private:
  friend class FsdpSchedule;
  enum class Next { kNothing, kGather, kRefill };  // what the unit's backward needs

  FsdpSchedule& schedule_;
  std::string name_;
  int index_ = -1;
  std::optional<InFlightGather> prefetched_;  // issued by the schedule before the unit asked
  bool prefetched_refill_ = false;
  std::optional<UnitTensors> resharded_;      // freed after the forward, for the backward's refill
  Next backward_needs_ = Next::kNothing;
};

class FsdpSchedule {
 public:
  explicit FsdpSchedule(bool prefetch) : prefetch_(prefetch) {}
  FsdpSchedule(const FsdpSchedule&) = delete;
  FsdpSchedule& operator=(const FsdpSchedule&) = delete;

  // Units register in forward order; the first is unit 0.
  void Add(ScheduledUnit& unit);
  // Before a forward: waits for and drops what an unfinished forward left.
  void BeginForward();
  // Whether gradient reductions include their last stages (hybrid sharding's
  // all-reduce across replicas, the 4-bit adapters' reduction): false for the
  // micro-batches before the last of a step, whose gradients accumulate
  // locally (FSDP2's set_requires_gradient_sync). Default true.
  void set_gradient_sync(bool on) { gradient_sync_ = on; }
  bool gradient_sync() const { return gradient_sync_; }
  bool prefetch() const { return prefetch_; }

  // Every transition in order ("forward 1: all-gather issued", ...), when
  // tracing is on (tests print and check the schedule).
  void set_trace(bool on) { trace_on_ = on; }
  const std::vector<std::string>& trace() const { return trace_; }

 private:
  friend class ScheduledUnit;
  UnitTensors Unshard(ScheduledUnit& unit, UnitPass pass);
  void Refill(ScheduledUnit& unit, UnitTensors& t);
  void Reshard(ScheduledUnit& unit, UnitTensors& t);
  void Reduce(ScheduledUnit& unit, GradientReduction reduction);

  // A gather of `unit` for the backward (a refill or a fresh gather), issued.
  void IssueBackwardGather(ScheduledUnit& unit);
  // Waits for `unit`'s prefetched gather, if any; returns its buffer.
  std::optional<at::Tensor> TakePrefetched(ScheduledUnit& unit, bool refill);
  // Prefetch: the forward's next unit, or the backward's.
  void PrefetchForward(const ScheduledUnit& unit);
  void PrefetchBackward();
  // Reductions in flight: wait for the current stage of each, issue its next.
  void AdvanceReductions();
  void FinishReductions();
  void Trace(const ScheduledUnit& unit, const char* pass, const std::string& what);

  struct Pending {
    std::string unit;
    GradientReduction reduction;
    size_t stage = 0;
    compat::PendingCollective collective;
  };

  bool prefetch_;
  bool gradient_sync_ = true;
  std::vector<ScheduledUnit*> units_;
  // Units whose backward is still to come, in forward order (the last is next).
  std::vector<ScheduledUnit*> awaiting_backward_;
  std::deque<Pending> reductions_;
  bool trace_on_ = false;
  std::vector<std::string> trace_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_FSDP_SCHEDULE_H_
