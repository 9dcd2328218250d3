#include "backends/native/distributed/fsdp_schedule.h"

#include <algorithm>
#include <utility>

#include "runner/base/text.h"

namespace protocol {
namespace native {

ScheduledUnit::ScheduledUnit(FsdpSchedule& schedule, std::string name)
    : schedule_(schedule), name_(std::move(name)) {}

UnitTensors ScheduledUnit::Gather(UnitPass pass) { return schedule_.Unshard(*this, pass); }

void ScheduledUnit::Free(UnitTensors& t) { schedule_.Reshard(*this, t); }

void ScheduledUnit::Refill(UnitTensors& t) { schedule_.Refill(*this, t); }

std::vector<at::Tensor> ScheduledUnit::ReduceGradients(UnitTensors& t) {
  GradientReduction reduction = Reduction(t);
  t = UnitTensors{};
  schedule_.Reduce(*this, std::move(reduction));
  // The gradients of Inputs() arrive when the reduction ends: the unit puts
  // them in place itself (ReductionStage::after), not through autograd.
  return std::vector<at::Tensor>(Inputs().size());
}

void FsdpSchedule::Add(ScheduledUnit& unit) {
  unit.index_ = static_cast<int>(units_.size());
  units_.push_back(&unit);
}

void FsdpSchedule::Trace(const ScheduledUnit& unit, const char* pass, const std::string& what) {
  if (trace_on_) trace_.push_back(fmt::format("{} {}: {}", pass, unit.name(), what));
}

void FsdpSchedule::BeginForward() {
  for (ScheduledUnit* u : units_) {
    if (u->prefetched_) u->prefetched_->collective.Wait();
    u->prefetched_.reset();
    u->resharded_.reset();
    u->backward_needs_ = ScheduledUnit::Next::kNothing;
  }
  awaiting_backward_.clear();
  FinishReductions();
}

std::optional<at::Tensor> FsdpSchedule::TakePrefetched(ScheduledUnit& unit, bool refill) {
  if (!unit.prefetched_) return std::nullopt;
  InFlightGather g = std::move(*unit.prefetched_);
  unit.prefetched_.reset();
  g.collective.Wait();
  if (unit.prefetched_refill_ != refill) return std::nullopt;  // not what is needed now: dropped
  return g.buffer;
}

void FsdpSchedule::PrefetchForward(const ScheduledUnit& unit) {
  const size_t next = static_cast<size_t>(unit.index_) + 1;
  if (next >= units_.size() || units_[next]->prefetched_) return;
  ScheduledUnit& u = *units_[next];
  u.prefetched_ = u.IssueGather();
  u.prefetched_refill_ = false;
  Trace(u, "forward", "all-gather issued (prefetch)");
}

void FsdpSchedule::IssueBackwardGather(ScheduledUnit& u) {
  if (u.prefetched_ || u.backward_needs_ == ScheduledUnit::Next::kNothing) return;
  const bool refill = u.backward_needs_ == ScheduledUnit::Next::kRefill;
  u.prefetched_ = refill ? u.IssueRefill(*u.resharded_) : u.IssueGather();
  u.prefetched_refill_ = refill;
  Trace(u, "backward", refill ? "refill all-gather issued (prefetch)" : "all-gather issued (prefetch)");
}

void FsdpSchedule::PrefetchBackward() {
  if (!awaiting_backward_.empty()) IssueBackwardGather(*awaiting_backward_.back());
}

UnitTensors FsdpSchedule::Unshard(ScheduledUnit& unit, UnitPass pass) {
  const bool backward = pass == UnitPass::kBackward;
  const char* name = backward ? "backward" : "forward";
  if (backward) awaiting_backward_.erase(std::remove(awaiting_backward_.begin(), awaiting_backward_.end(), &unit),
                                         awaiting_backward_.end());
  std::optional<at::Tensor> buffer = TakePrefetched(unit, /*refill=*/false);
  if (buffer) {
    Trace(unit, name, "all-gather waited");
  } else {
    InFlightGather g = unit.IssueGather();
    Trace(unit, name, "all-gather issued");
    g.collective.Wait();
    Trace(unit, name, "all-gather waited");
    buffer = g.buffer;
  }
  if (prefetch_) {
    if (backward) PrefetchBackward();
    else PrefetchForward(unit);
  }
  if (pass == UnitPass::kForward) {
    awaiting_backward_.push_back(&unit);
    unit.backward_needs_ = ScheduledUnit::Next::kGather;  // recomputed, unless Reshard says otherwise
  }
  if (backward) unit.backward_needs_ = ScheduledUnit::Next::kNothing;
  Trace(unit, name, "compute");
  return unit.Assemble(*buffer);
}

void FsdpSchedule::Reshard(ScheduledUnit& unit, UnitTensors& t) {
  if (!unit.reshard_after_forward_) {
    unit.backward_needs_ = ScheduledUnit::Next::kNothing;
    Trace(unit, "forward", "kept gathered for the backward");
    return;
  }
  unit.ReleaseStorage(t);
  Trace(unit, "forward", "resharded");
  if (unit.backward_reads_params_) {
    unit.resharded_ = t;  // the same storage: the refill fills the graph's views
    unit.backward_needs_ = ScheduledUnit::Next::kRefill;
  } else {
    unit.backward_needs_ = ScheduledUnit::Next::kNothing;
  }
}

void FsdpSchedule::Refill(ScheduledUnit& unit, UnitTensors& t) {
  awaiting_backward_.erase(std::remove(awaiting_backward_.begin(), awaiting_backward_.end(), &unit),
                           awaiting_backward_.end());
  if (unit.backward_needs_ == ScheduledUnit::Next::kRefill && unit.resharded_) {
    std::optional<at::Tensor> buffer = TakePrefetched(unit, /*refill=*/true);
    if (buffer) {
      Trace(unit, "backward", "refill all-gather waited");
    } else {
      InFlightGather g = unit.IssueRefill(*unit.resharded_);
      Trace(unit, "backward", "refill all-gather issued");
      g.collective.Wait();
      Trace(unit, "backward", "refill all-gather waited");
      buffer = g.buffer;
    }
    unit.AfterRefill(*buffer, t);
  }
  unit.resharded_.reset();
  unit.backward_needs_ = ScheduledUnit::Next::kNothing;
  if (prefetch_) PrefetchBackward();
  Trace(unit, "backward", "compute");
}

void FsdpSchedule::AdvanceReductions() {
  for (auto it = reductions_.begin(); it != reductions_.end();) {
    Pending& p = *it;
    p.collective.Wait();
    ReductionStage& done = p.reduction.stages[p.stage];
    if (done.after) done.after();
    if (trace_on_) trace_.push_back(fmt::format("backward {}: {} waited", p.unit, done.name));
    if (++p.stage < p.reduction.stages.size()) {
      ReductionStage& next = p.reduction.stages[p.stage];
      p.collective = next.issue();
      next.issue = nullptr;  // what it captured is now the collective's
      if (trace_on_) trace_.push_back(fmt::format("backward {}: {} issued", p.unit, next.name));
      ++it;
    } else {
      it = reductions_.erase(it);
    }
  }
}

void FsdpSchedule::FinishReductions() {
  while (!reductions_.empty()) AdvanceReductions();
}

void FsdpSchedule::Reduce(ScheduledUnit& unit, GradientReduction reduction) {
  if (!prefetch_) {
    for (ReductionStage& stage : reduction.stages) {
      compat::PendingCollective p = stage.issue();
      stage.issue = nullptr;
      Trace(unit, "backward", stage.name + " issued");
      p.Wait();
      if (stage.after) stage.after();
      Trace(unit, "backward", stage.name + " waited");
    }
    return;
  }
  // The reductions before this one advance by a stage while this unit's
  // first stage starts; the next unit's backward computes while they run.
  AdvanceReductions();
  if (!reduction.empty()) {
    Pending p;
    p.unit = unit.name();
    p.reduction = std::move(reduction);
    ReductionStage& first = p.reduction.stages.front();
    p.collective = first.issue();
    first.issue = nullptr;
    Trace(unit, "backward", first.name + " issued");
    reductions_.push_back(std::move(p));
  }
  if (awaiting_backward_.empty()) {  // the last unit of the backward: the gradients must be whole
    FinishReductions();
    Trace(unit, "backward", "end of backward: every reduction waited");
  }
}

}  // namespace native
}  // namespace protocol
