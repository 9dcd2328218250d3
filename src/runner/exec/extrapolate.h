#ifndef PROTOCOL_RUNNER_EXEC_EXTRAPOLATE_H_
#define PROTOCOL_RUNNER_EXEC_EXTRAPOLATE_H_

// Extrapolating a shorter measured run to the length a report asks for
// (a case's `report_as`), e.g. 100 measured steps reported as 1000 steps. The
// methodology marks such figures with `*`: computed, not measured end to end.
// Pure functions; the runner stores their result beside (never instead of) the
// measured wall time.
//
// The per-step formula. Given the measured wall time T of N steps, the per-step
// times s_1..s_N (from the backend's step samples) and W warm-up steps:
//
//     overhead = T − Σ_{i=1..N} s_i           (start-up, loading, saving: paid once)
//     mean     = mean(s_{W+1..N})              (steady-state step time)
//     T(M)     = overhead + Σ_{i≤W} s_i + (M − W) · mean
//
// i.e. the one-off costs and the warm-up are paid once whatever the length, and
// every further step costs the steady-state mean. When that formula cannot be
// applied (no per-step timings, timings that do not cover every step, only
// warm-up steps, or an epoch length), the wall time is scaled linearly:
//
//     T(M) = T · M / N
//
// and the method text says which rule was used and why, with its inputs.

#include <optional>
#include <vector>

#include "runner/base/status.h"
#include "runner/base/text.h"  // FormatFigure
#include "runner/plan/plan.h"
#include "runner/store/records.h"

namespace protocol {

struct ExtrapolationInput {
  Length measured;                   // N: the length that ran (CaseSpec::length)
  Length target;                     // M: the length to report (CaseSpec::report_as)
  double wall_seconds = 0;           // T: measured wall time of the whole case
  std::vector<double> step_seconds;  // s_1..s_K from the step samples, in order; may be empty
  int warmup_steps = 0;              // W (CaseSpec::warmup_steps)
};

// Measurement{wall_seconds, T(M), "s", kExtrapolated, method} per the formulas
// above. Method texts:
//   "extrapolated from 100 measured steps to 1000: overhead 12.3 s + warm-up 2 steps
//    4.5 s + (M−W)=998 × mean step 1.234 s (steps 3..100)"
//   "scaled wall time linearly 100→1000 steps (no per-step timings)"
// kInvalidArgument when the units differ ("cannot extrapolate 100 steps to 1 epoch:
// different units") or a count is not positive.
Result<Measurement> ExtrapolateWallSeconds(const ExtrapolationInput& input);

// A shorter length M < N read from the case's own step timings, so that one
// long run also gives the rows of shorter lengths:
//
//     T(M) = overhead + Σ_{i=1..M} s_i       overhead = T − Σ_{i=1..N} s_i
//
// i.e. what a run of M steps would have cost: the one-off costs (start-up,
// loading, evaluation, saving) paid once, and the first M steps as they ran,
// warm-up included as in the full length. Measurement{wall_seconds, T(M),
// "s", kPrefix, "computed from the first 100 of 1000 measured steps: overhead
// 12.3 s + steps 1..100 45.6 s"}. kInvalidArgument when M is not below N, the
// unit is not steps, or the timings do not cover every measured step (no
// figure then: scaling a long run down linearly would charge its whole
// overhead pro rata).
Result<Measurement> PrefixWallSeconds(const ExtrapolationInput& input);

// The case's time at each of its report_as lengths (PrefixWallSeconds below
// the measured length, ExtrapolateWallSeconds above it) and a not-provided
// figure (kDeclared, marker "not-provided", no value) at each not_provided length, every
// one carrying its length (Measurement::length_unit/count). A length whose
// figure cannot be computed is left out and its reason appended to *problems.
std::vector<Measurement> FiguresAtOtherLengths(const CaseSpec& spec, double wall_seconds,
                                               const std::vector<double>& step_seconds,
                                               std::vector<std::string>* problems);

// Measurement{step_seconds_mean, the mean seconds of the steps numbered above
// `warmup_steps`, "s", kMeasured, "mean of steps 3..100"}: steps go by their
// own numbers, as the system printed them (a log that prints every 10th step
// gives "mean of 3 logged steps (steps 10..30)"), the same numbers and the
// same warm-up rule as the log formats' figures. nullopt when no step is
// numbered above the warm-up.
std::optional<Measurement> StepSecondsMean(const std::vector<StepSample>& steps, int warmup_steps);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_EXTRAPOLATE_H_
