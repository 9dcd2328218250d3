#include "runner/base/statistics.h"

#include <algorithm>

namespace protocol {

double MedianOfSorted(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

std::optional<double> Median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  return MedianOfSorted(values);
}

}  // namespace protocol
