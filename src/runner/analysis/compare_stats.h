#ifndef PROTOCOL_RUNNER_ANALYSIS_COMPARE_STATS_H_
#define PROTOCOL_RUNNER_ANALYSIS_COMPARE_STATS_H_

// Statistics for `protocol compare`: the median, and a percentile bootstrap
// confidence interval for the ratio of two medians (Efron & Tibshirani, "An
// Introduction to the Bootstrap", 1993, ch. 13: the percentile interval).
// Deterministic: the same inputs and seed give the same interval on every
// platform (our own index draw, not std::uniform_int_distribution, whose
// algorithm the standard leaves to the library).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "runner/base/statistics.h"  // Median

namespace protocol {

// The bootstrap settings every interval of this program uses (`protocol
// compare` and the report's ratio intervals): one seed, so the same stored
// figures give the same interval in both places and on every run.
inline constexpr int kBootstrapResamples = 2000;
inline constexpr uint64_t kBootstrapSeed = 20240501;
inline constexpr double kBootstrapConfidence = 0.95;
// An interval needs at least this many values on each side.
inline constexpr size_t kBootstrapMinRepeats = 3;

struct RatioInterval {
  double low = 0;
  double high = 0;
};

// Percentile bootstrap interval of median(candidate) / median(baseline):
// `resamples` times, draw each side with replacement (same sizes), take the
// ratio of the medians; the interval is the (1-confidence)/2 and
// (1+confidence)/2 quantiles of those ratios (nearest rank).
// nullopt when either side has fewer than `min_repeats` values, or a resampled
// baseline median is 0 (no ratio).
// REQUIRES: resamples >= 1, 0 < confidence < 1.
std::optional<RatioInterval> BootstrapMedianRatio(const std::vector<double>& baseline,
                                                  const std::vector<double>& candidate,
                                                  int resamples, uint64_t seed,
                                                  double confidence,
                                                  size_t min_repeats = kBootstrapMinRepeats);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_ANALYSIS_COMPARE_STATS_H_
