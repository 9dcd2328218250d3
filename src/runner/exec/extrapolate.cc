#include "runner/exec/extrapolate.h"

#include <algorithm>
#include <numeric>

#include "runner/base/text.h"

namespace protocol {

std::optional<Measurement> StepSecondsMean(const std::vector<StepSample>& steps, int warmup_steps) {
  double sum = 0;
  int64_t n = 0, first = 0, last = 0;
  for (const StepSample& s : steps) {
    if (s.step <= warmup_steps) continue;  // warm-up, by the step's own number
    first = n == 0 ? s.step : std::min(first, s.step);
    last = n == 0 ? s.step : std::max(last, s.step);
    sum += s.seconds;
    ++n;
  }
  if (n == 0) return std::nullopt;
  Measurement m;
  m.name = metric::kStepSecondsMean;
  m.value = sum / static_cast<double>(n);
  m.unit = "s";
  m.how = Provenance::kMeasured;
  m.method = last - first + 1 == n ? fmt::format("mean of steps {}..{}", first, last)
                                   : fmt::format("mean of {} logged steps (steps {}..{})", n, first, last);
  return m;
}

Result<Measurement> ExtrapolateWallSeconds(const ExtrapolationInput& in) {
  const int64_t n = in.measured.count;
  const int64_t m = in.target.count;
  if (in.measured.unit != in.target.unit)
    return Status::InvalidArgument(fmt::format("cannot extrapolate {} to {}: different units",
                                               in.measured.ToString(), in.target.ToString()));
  if (n <= 0 || m <= 0)
    return Status::InvalidArgument(fmt::format("cannot extrapolate {} to {}: lengths must be positive",
                                               in.measured.ToString(), in.target.ToString()));

  Measurement out;
  out.name = metric::kWallSeconds;
  out.unit = "s";
  out.how = Provenance::kExtrapolated;

  const int64_t k = static_cast<int64_t>(in.step_seconds.size());
  const int64_t w = in.warmup_steps > 0 ? in.warmup_steps : 0;
  const bool steps = in.measured.unit == Length::Unit::kSteps;

  // The per-step formula needs one timing per measured step and at least one
  // step after the warm-up.
  if (steps && k == n && k > w) {
    double total = std::accumulate(in.step_seconds.begin(), in.step_seconds.end(), 0.0);
    double warmup = std::accumulate(in.step_seconds.begin(), in.step_seconds.begin() + w, 0.0);
    double mean = (total - warmup) / static_cast<double>(k - w);
    double overhead = in.wall_seconds - total;
    out.value = overhead + warmup + static_cast<double>(m - w) * mean;
    out.method = fmt::format(
        "extrapolated from {} measured steps to {}: overhead {} s + warm-up {} {} {} s + "
        "(M\u2212W)={} \u00d7 mean step {} s (steps {}..{})",
        n, m, FormatFigure(overhead), w, w == 1 ? "step" : "steps", FormatFigure(warmup), m - w,
        FormatFigure(mean), w + 1, n);
    return out;
  }

  // Linear scaling, saying why the per-step formula was not used.
  std::string why;
  if (k == 0) {
    why = "no per-step timings";
  } else if (!steps) {
    why = "per-step timings are not used for epoch lengths";
  } else if (k != n) {
    why = fmt::format("per-step timings cover {} of {} steps", k, n);
  } else {
    why = fmt::format("all {} steps are warm-up", n);
  }
  out.value = in.wall_seconds * static_cast<double>(m) / static_cast<double>(n);
  out.method = fmt::format("scaled wall time linearly {}\u2192{} {} ({})", n, m,
                           in.measured.UnitName(), why);
  return out;
}

Result<Measurement> PrefixWallSeconds(const ExtrapolationInput& in) {
  const int64_t n = in.measured.count;
  const int64_t m = in.target.count;
  const auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument(
        fmt::format("cannot compute {} from {}: {}", in.target.ToString(), in.measured.ToString(), why));
  };
  if (in.measured.unit != Length::Unit::kSteps || in.target.unit != Length::Unit::kSteps)
    return refuse("a prefix is read from per-step timings, so both lengths must be in steps");
  if (m <= 0 || m >= n) return refuse("the length must be positive and below the measured one");
  if (static_cast<int64_t>(in.step_seconds.size()) != n)
    return refuse(fmt::format("per-step timings cover {} of {} steps", in.step_seconds.size(), n));
  const double total = std::accumulate(in.step_seconds.begin(), in.step_seconds.end(), 0.0);
  const double prefix = std::accumulate(in.step_seconds.begin(), in.step_seconds.begin() + m, 0.0);
  const double overhead = in.wall_seconds - total;
  Measurement out;
  out.name = metric::kWallSeconds;
  out.unit = "s";
  out.how = Provenance::kPrefix;
  out.value = overhead + prefix;
  out.method = fmt::format("computed from the first {} of {} measured steps: overhead {} s + steps 1..{} {} s", m, n,
                           FormatFigure(overhead), m, FormatFigure(prefix));
  return out;
}

std::vector<Measurement> FiguresAtOtherLengths(const CaseSpec& spec, double wall_seconds,
                                               const std::vector<double>& step_seconds,
                                               std::vector<std::string>* problems) {
  std::vector<Measurement> out;
  if (!spec.length) return out;
  for (const Length& target : spec.report_as) {
    ExtrapolationInput in;
    in.measured = *spec.length;
    in.target = target;
    in.wall_seconds = wall_seconds;
    in.step_seconds = step_seconds;
    in.warmup_steps = spec.warmup_steps;
    Result<Measurement> m =
        target.count < spec.length->count ? PrefixWallSeconds(in) : ExtrapolateWallSeconds(in);
    if (!m.ok()) {
      problems->push_back(fmt::format("no figure at {}: {}", target.ToString(), m.status().message()));
      continue;
    }
    m->length_unit = target.UnitName();
    m->length_count = target.count;
    out.push_back(*m);
  }
  for (const Length& target : spec.not_provided) {
    Measurement m;
    m.name = metric::kWallSeconds;
    m.unit = "s";
    m.how = Provenance::kDeclared;
    m.marker = "not-provided";
    m.method = fmt::format("not provided at {}: declared by the plan (not_provided), nothing was run at that length",
                           target.ToString());
    m.length_unit = target.UnitName();
    m.length_count = target.count;
    out.push_back(m);
  }
  return out;
}

}  // namespace protocol
