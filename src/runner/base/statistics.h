#ifndef PROTOCOL_RUNNER_BASE_STATISTICS_H_
#define PROTOCOL_RUNNER_BASE_STATISTICS_H_

// The median, shared by `protocol compare` (runner/analysis/compare_stats.h)
// and by the figures a backend reads from a system's output (a per-step
// figure is the median over the steps after warm-up).

#include <optional>
#include <vector>

namespace protocol {

// Median of `values` (mean of the two middle values for an even count).
// nullopt when empty.
std::optional<double> Median(std::vector<double> values);

// The same for values already sorted ascending. REQUIRES: !sorted.empty().
double MedianOfSorted(const std::vector<double>& sorted);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_STATISTICS_H_
