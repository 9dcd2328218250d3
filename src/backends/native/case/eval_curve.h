#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_EVAL_CURVE_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_EVAL_CURVE_H_

// The held-out loss curve of a training case (training.eval_every), kept one
// way for the one-process case (fsdp_backend.cc) and for the ranks of a
// distributed one (worker.cc): which step counts are evaluated, the training
// time and tokens up to each, and the time the evaluations took. No libtorch:
// the caller evaluates the held-out split and synchronises the device.
//
// When (EvalDue), with eval_every N > 0 and S steps: after 0 steps (before
// training), after every step count that is a multiple of N, and after step S.
// The share protocol's groups hold one model only after a merge, and the
// curve is of that merged model: an evaluation due at a step count waits for
// the first merge at or after it (merges every sync_every steps before the
// last; the last step's point is after the final merge). With N = 0 nothing
// is evaluated during training and no curve is kept (the case's eval_loss is
// its only held-out figure).
//
// Training time at a point = Σ of the steps' own seconds up to it (the
// share protocol's periodic merges are inside its steps; the final merge is
// added before the last point): an evaluation's time is never in it, and is
// summed apart as metric::kEvalSeconds.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/store/records.h"

namespace protocol {
namespace native {

// Whether the model after `done` optimizer steps (0..steps) is a point of the
// curve. `merge_every`: nullopt when the case trains one model (fsdp, or a
// share case of one group); the share protocol's sync_every otherwise (0:
// merged only at the end).
bool EvalDue(int64_t done, int64_t steps, int64_t eval_every, std::optional<int64_t> merge_every);

class EvalCurve {
 public:
  EvalCurve(int64_t eval_every, int64_t steps, std::optional<int64_t> merge_every)
      : eval_every_(eval_every), steps_(steps), merge_every_(merge_every) {}

  // Whether a curve is kept at all (eval_every > 0 and steps > 0).
  bool enabled() const { return eval_every_ > 0 && steps_ > 0; }
  // EvalDue for this case; false when !enabled().
  bool Due(int64_t done) const { return enabled() && EvalDue(done, steps_, eval_every_, merge_every_); }

  // A training step done: its own seconds (device synchronised) and the
  // tokens it trained on (global).
  void AddStep(double seconds, int64_t tokens) {
    training_seconds_ += seconds;
    tokens_ += tokens;
  }
  // Training time outside a step that the model of the next point needs
  // (the share protocol's final merge).
  void AddTrainingSeconds(double seconds) { training_seconds_ += seconds; }

  // The point after `done` steps: its held-out `loss`, evaluated in
  // `eval_seconds` (kept apart from the training time). Nothing when
  // !enabled().
  void Add(int64_t done, double loss, double eval_seconds);

  const std::vector<EvalPoint>& points() const { return points_; }
  double training_seconds() const { return training_seconds_; }
  double eval_seconds() const { return eval_seconds_; }

  // metric::kEvalSeconds over the points, with how it was measured
  // (`held_out` sequences each evaluation; `who` e.g. "rank 0"); nullopt
  // without a point.
  std::optional<Measurement> EvalSecondsFigure(size_t held_out, const std::string& who) const;

 private:
  int64_t eval_every_, steps_;
  std::optional<int64_t> merge_every_;
  double training_seconds_ = 0, eval_seconds_ = 0;
  int64_t tokens_ = 0;
  std::vector<EvalPoint> points_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_EVAL_CURVE_H_
