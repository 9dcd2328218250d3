#include "runner/exec/estimate.h"

#include <algorithm>
#include <cmath>

#include "runner/base/text.h"

namespace protocol {

std::string FormatDuration(double seconds) {
  if (seconds <= 0) return "0 s";
  if (seconds < 1e-3) return fmt::format("{:.3g} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
  if (seconds < 120) return fmt::format("{:.3g} s", seconds);
  if (seconds < 2 * 3600) return fmt::format("{:.3g} min", seconds / 60);
  return fmt::format("{:.3g} h", seconds / 3600);
}

std::string TimeEstimate::Describe() const {
  std::vector<std::string> parts;
  for (const TimeTerm& t : terms)
    parts.push_back(fmt::format("{} {}{}{}", t.name, FormatDuration(t.seconds), t.how.empty() ? "" : " (" + t.how + ")",
                                t.counted ? "" : " [overlapped, not added]"));
  return fmt::format("{}: {}", FormatDuration(seconds), Join(parts, " + "));
}

const TimeTerm* TimeEstimate::Largest() const {
  const TimeTerm* best = nullptr;
  for (const TimeTerm& t : terms)
    if (t.counted && (!best || t.seconds > best->seconds)) best = &t;
  return best;
}

std::string DescribeCaseTime(const TimeEstimate& e, int repeats) {
  if (!e.estimated()) return "no time estimate: " + e.why_not;
  return fmt::format("expected wall time {} per repeat{} on {}, {}:\n{}", FormatDuration(e.seconds),
                     repeats > 1 ? fmt::format(" (x{} repeats: {})", repeats, FormatDuration(e.seconds * repeats)) : "",
                     e.nodes == 1 ? "1 node" : fmt::format("{} nodes", e.nodes), e.device, e.Describe());
}

void PlanTimeTotal::Add(const std::string& case_id, const TimeEstimate& e, int repeats) {
  if (!e.estimated()) {
    if (std::find(not_estimated.begin(), not_estimated.end(), case_id) == not_estimated.end())
      not_estimated.push_back(case_id);
    return;
  }
  const double s = e.seconds * std::max(1, repeats);
  seconds += s;
  rig_hours += s * std::max(1, e.nodes) / 3600.0;
  ++estimated;
}

std::string PlanTimeTotal::Describe() const {
  std::string out = fmt::format("plan total: {} of cases, {:.3g} rig-hours (each case's time x its repeats x its nodes)",
                                FormatDuration(seconds), rig_hours);
  if (!not_estimated.empty())
    out += fmt::format("; {} case{} not estimated ({})", not_estimated.size(), not_estimated.size() == 1 ? "" : "s",
                       Join(not_estimated, ", "));
  return out;
}

std::optional<std::string> EstimateBandFlag(double measured_seconds, double expected_seconds,
                                            const std::string& largest_term) {
  if (!(measured_seconds > 0) || !(expected_seconds > 0)) return std::nullopt;
  const double ratio = measured_seconds / expected_seconds;
  if (ratio >= kEstimateBandLow && ratio <= kEstimateBandHigh) return std::nullopt;
  return fmt::format("{:.2g}x its estimate ({} expected, {} measured; outside {}-{}x){}", ratio,
                     FormatDuration(expected_seconds), FormatDuration(measured_seconds), kEstimateBandLow,
                     kEstimateBandHigh,
                     largest_term.empty() ? "" : fmt::format("; the term most likely at fault: {}", largest_term));
}

}  // namespace protocol
