// The metric table (metric_table.h): one row per metric, and the layers that
// read it: compare's directions, the report's columns, the ranks' case figures.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "runner/analysis/compare.h"
#include "runner/store/metric_table.h"
#include "runner/store/records.h"

namespace protocol {

TEST_CASE("metric table: one row per name; a report column has a header, a per-rank metric a unit") {
  std::set<std::string> names;
  for (const MetricRow& row : MetricTable()) {
    CAPTURE(row.name);
    CHECK(names.insert(row.name).second);
    CHECK(FindMetric(row.name) == &row);
    if (row.report != ReportSection::kNone) CHECK(std::string(row.column) != "");
    if (row.from_ranks != FromRanks::kNotPerRank) CHECK(std::string(row.unit) != "");
  }
  CHECK(FindMetric("a_command_backends_own_figure") == nullptr);
}

TEST_CASE("metric table: compare's directions, the report's columns and the ranks' case figures come from it") {
  // compare: the better direction of a row; none for a metric without one.
  CHECK(MetricDirection(metric::kEvalLoss) == Direction::kLower);
  CHECK(MetricDirection(metric::kTgs) == Direction::kHigher);
  CHECK_FALSE(MetricDirection(metric::kStragglers).has_value());
  CHECK(MetricDirection(metric::kEnergyPerToken) == Direction::kLower);
  CHECK_FALSE(MetricDirection(metric::kEnergy).has_value());  // a case's total: not comparable across lengths
  // The report: held-out loss first among quality and cost, TGS first among the additional metrics.
  const auto quality = ReportColumns(ReportSection::kQuality);
  REQUIRE_FALSE(quality.empty());
  CHECK(std::string(quality.front()->name) == metric::kEvalLoss);
  const auto metrics = ReportColumns(ReportSection::kMetrics);
  REQUIRE_FALSE(metrics.empty());
  CHECK(std::string(metrics.front()->name) == metric::kTgs);
  // The ranks: memory and host reads are the largest over the ranks, communication their mean.
  CHECK(FindMetric(metric::kPeakHostRss)->from_ranks == FromRanks::kLargest);
  CHECK(FindMetric(metric::kHostReadsPerStep)->from_ranks == FromRanks::kLargest);
  CHECK(FindMetric(metric::kCommExposedSeconds)->from_ranks == FromRanks::kMean);
  CHECK(FindMetric(metric::kFinalLoss)->from_ranks == FromRanks::kNotPerRank);
}

TEST_CASE("metric table: every hardware sample quantity has one row with a unit and a source") {
  std::set<std::string> names;
  for (const TelemetryQuantity& q : TelemetryQuantities()) {
    CAPTURE(q.name);
    CHECK(names.insert(q.name).second);
    CHECK(FindTelemetryQuantity(q.name) == &q);
    CHECK(std::string(q.unit) != "");
    CHECK(std::string(q.source) != "");
  }
  for (const char* q : {quantity::kGpuUtilization, quantity::kGpuMemoryUsed, quantity::kGpuPower, quantity::kGpuSmClock,
                        quantity::kGpuTemperature, quantity::kNetSent, quantity::kNetReceived, quantity::kCpuBusy})
    CHECK(names.count(q) == 1);
  CHECK(FindTelemetryQuantity("gpu_fan_speed") == nullptr);
}

}  // namespace protocol
