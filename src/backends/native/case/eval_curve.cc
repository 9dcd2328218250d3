#include "backends/native/case/eval_curve.h"

#include "runner/base/text.h"

namespace protocol {
namespace native {

bool EvalDue(int64_t done, int64_t steps, int64_t eval_every, std::optional<int64_t> merge_every) {
  if (eval_every <= 0 || done < 0 || done > steps) return false;
  if (done == 0 || done == steps) return true;
  if (!merge_every) return done % eval_every == 0;
  // One merged model only at a merge (every *merge_every steps before the
  // last): due when a multiple of eval_every fell since the previous merge.
  const int64_t m = *merge_every;
  if (m <= 0 || done % m != 0) return false;
  return done / eval_every > (done - m) / eval_every;
}

void EvalCurve::Add(int64_t done, double loss, double eval_seconds) {
  if (!enabled()) return;
  EvalPoint p;
  p.step = done;
  p.tokens = tokens_;
  p.training_seconds = training_seconds_;
  p.loss = loss;
  points_.push_back(p);
  eval_seconds_ += eval_seconds;
}

std::optional<Measurement> EvalCurve::EvalSecondsFigure(size_t held_out, const std::string& who) const {
  if (points_.empty()) return std::nullopt;
  Measurement m;
  m.name = metric::kEvalSeconds;
  m.value = eval_seconds_;
  m.unit = "s";
  m.how = Provenance::kMeasured;
  m.method = fmt::format(
      "{}'s time in {} evaluation(s) of the {} held-out sequences for the loss curve (training.eval_every {}, "
      "device synchronised); not in the curve's training seconds",
      who, points_.size(), held_out, eval_every_);
  return m;
}

}  // namespace native
}  // namespace protocol
