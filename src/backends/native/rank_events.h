#ifndef PROTOCOL_BACKENDS_NATIVE_RANK_EVENTS_H_
#define PROTOCOL_BACKENDS_NATIVE_RANK_EVENTS_H_

// The runner's side of the worker protocol (events.h): the decoded events of
// every rank of a distributed case, as the supervisor reads them, become the
// case's live events (steps, requests, status lines) and, once every rank has
// ended, its measurements:
//   - rank 0's figures as sent; the figures a rank sends about itself
//     (events with a rank) as <name>_rank<r>, and for the memory figures and
//     the host reads per step the
//     largest over the ranks under the plain name;
//   - the per-rank step figures and the stragglers among them (stragglers.h);
//   - inference: the replicas' generation totals; training: the best group's
//     held-out loss, the bytes the ranks sent (within and between groups, and
//     between nodes), and their communication time: exposed, in flight, and
//     the share hidden;
//   - a note event's text appended to every figure's method.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/native/launch/dist_layout.h"
#include "backends/native/launch/events.h"
#include "backends/native/launch/stragglers.h"
#include "runner/exec/backend.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

// What an inference figure's method says of the plan's decode step, the same
// for the one process and the replicas: "" at the host's position (the
// default), ", decode_step device" or ", decode_step graph" otherwise.
std::string DecodeStepMethodWords(DecodeStepChoice choice);

class RankEventCollector {
 public:
  // `events`: where live events go (the case's CaseEvents); must outlive this.
  explicit RankEventCollector(CaseEvents& events) : events_(events) {}

  // One event of `rank`, in the order its lines arrived. `now`: the steady
  // clock's seconds when it arrived (heartbeats).
  void Add(int rank, const WorkerEvent& event, double now);

  // The rank's error event text ("" when it sent none).
  std::string ErrorOf(int rank) const;
  // Whether the rank sent its "bytes" event, the last one of a finished rank.
  bool Reported(int rank) const { return reported_.count(rank) > 0; }
  // rank → when its last heartbeat arrived (steady clock seconds).
  const std::map<int, double>& last_beats() const { return last_beat_; }
  // Rank 0's facts, in arrival order (every rank runs the same setup).
  const std::vector<std::pair<std::string, std::string>>& facts() const { return facts_; }

  // Rank 0's own figures (the case's), in arrival order.
  std::vector<Measurement> RankZeroFigures() const { return rank0_; }
  // Appends the case's figures built from every rank's events (see above),
  // then the note to every figure's method, to `out.measurements`; rank 0's
  // held-out curve (kEvalPoint events) to `out.eval_curve`. `decode_words`:
  // what the inference figures' method says of the decode step after the
  // replicas (DecodeStepMethodWords below; "" for training).
  void AddCaseFigures(const DistLayout& layout, Workload workload, const std::string& decode_words,
                      BackendOutcome& out) const;

 private:
  void AddMeasurement(int rank, const WorkerEvent& e);
  void AddInferenceFigures(const DistLayout& layout, const std::string& decode_words, BackendOutcome& out) const;
  void AddTrainingFigures(const DistLayout& layout, BackendOutcome& out) const;
  void AddPerRankFigures(const DistLayout& layout, BackendOutcome& out) const;
  void AddStragglers(const DistLayout& layout, BackendOutcome& out) const;
  void AddCommunication(const DistLayout& layout, BackendOutcome& out) const;

  CaseEvents& events_;
  std::map<int, std::string> errors_;
  std::vector<Measurement> rank0_;
  std::map<std::string, std::map<int, Measurement>> per_rank_;  // largest-over-ranks figure → rank → its figure
  std::vector<std::pair<int, double>> group_evals_;             // (rank, loss)
  std::vector<double> replica_seconds_;
  std::string note_;
  int64_t within_ = 0, between_ = 0, between_nodes_ = 0, between_nodes_steps_ = 0;
  std::map<std::string, std::map<int, double>> means_;  // kMean figure → rank → its value
  int64_t generated_ = 0, requests_ = 0, steps_seen_ = 0;
  int bytes_reports_ = 0;
  std::set<int> reported_;
  std::map<int, double> last_beat_;
  std::map<int, RankStepTimes> step_times_;
  std::vector<Measurement> rank_step_figures_;
  std::vector<std::pair<std::string, std::string>> facts_;
  std::vector<EvalPoint> eval_curve_;  // rank 0's kEvalPoint events, in order
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_RANK_EVENTS_H_
