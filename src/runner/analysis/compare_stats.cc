#include "runner/analysis/compare_stats.h"

#include <algorithm>
#include <cmath>

namespace protocol {

namespace {

// SplitMix64 (Steele, Lea & Flood 2014): a tiny, portable, well-mixed generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) up to a bias below 2^-40 for the small n used here.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

}  // namespace

std::optional<RatioInterval> BootstrapMedianRatio(const std::vector<double>& baseline,
                                                  const std::vector<double>& candidate,
                                                  int resamples, uint64_t seed,
                                                  double confidence, size_t min_repeats) {
  if (baseline.size() < min_repeats || candidate.size() < min_repeats || baseline.empty() ||
      candidate.empty() || resamples < 1)
    return std::nullopt;
  SplitMix64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(resamples));
  std::vector<double> b(baseline.size()), c(candidate.size());
  for (int i = 0; i < resamples; ++i) {
    for (double& x : b) x = baseline[rng.Below(baseline.size())];
    for (double& x : c) x = candidate[rng.Below(candidate.size())];
    std::sort(b.begin(), b.end());
    std::sort(c.begin(), c.end());
    double denominator = MedianOfSorted(b);
    if (denominator == 0) return std::nullopt;
    ratios.push_back(MedianOfSorted(c) / denominator);
  }
  std::sort(ratios.begin(), ratios.end());
  auto at = [&](double q) {
    // Nearest rank: the ceil(q·n)-th smallest (1-based), clamped to the ends.
    double rank = std::ceil(q * static_cast<double>(ratios.size()));
    size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
    return ratios[std::min(index, ratios.size() - 1)];
  };
  double tail = (1 - confidence) / 2;
  return RatioInterval{at(tail), at(1 - tail)};
}

}  // namespace protocol
