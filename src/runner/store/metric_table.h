#ifndef PROTOCOL_RUNNER_STORE_METRIC_TABLE_H_
#define PROTOCOL_RUNNER_STORE_METRIC_TABLE_H_

// The well-known metrics, one row each: what every layer needs to know of a
// metric, in one place. Adding a metric is a row here plus the code that
// measures it; `compare`, the report's columns and the ranks' case figures
// read the row.
//
//   name        the stored name (records.h, namespace metric)
//   unit        as stored: "s", "tokens/s", "bytes", "" (a loss, a share) ...
//   better      which way is better: `compare` compares the metric by default
//               (table order) and calls a change a regression by it; kNone:
//               not compared unless asked for
//   report      the report's table that shows it as a column (kQuality:
//               "Quality & cost", kMetrics: "Additional metrics"), its
//               header, its number format, and whether the column is shown
//               only when some row has the figure; columns in table order
//   from_ranks  a distributed case's ranks each send the figure about
//               themselves (stored as NAME_rank<r>); the case's own figure
//               under NAME is their largest (kLargest) or mean (kMean);
//               kNotPerRank: the case's figure comes as sent

#include <string>
#include <vector>

namespace protocol {

enum class Better { kNone, kLower, kHigher };
enum class ReportSection { kNone, kQuality, kMetrics };
enum class ReportNumber { kLoss, kBinaryBytes, kSeconds, kOne, kTwo, kPercent, kGiB, kCount };
enum class FromRanks { kNotPerRank, kLargest, kMean };

struct MetricRow {
  const char* name;
  const char* unit;
  Better better = Better::kNone;
  ReportSection report = ReportSection::kNone;
  const char* column = "";
  ReportNumber number = ReportNumber::kOne;
  bool column_when_present = false;
  FromRanks from_ranks = FromRanks::kNotPerRank;
};

// Every row. Order: compared metrics in `compare`'s order; report columns
// in each table's order (held-out loss first, so that a speed-up is read
// next to it).
const std::vector<MetricRow>& MetricTable();
// The row of `name`; null for a metric the table does not know (a command
// backend's own).
const MetricRow* FindMetric(const std::string& name);
// The rows of one report table, in order.
std::vector<const MetricRow*> ReportColumns(ReportSection table);

// The quantities of a hardware sample (records.h TelemetrySample, namespace
// quantity), one row each: the unit it is stored in and where it is read.
struct TelemetryQuantity {
  const char* name;
  const char* unit;
  const char* source;
};
const std::vector<TelemetryQuantity>& TelemetryQuantities();
const TelemetryQuantity* FindTelemetryQuantity(const std::string& name);  // null when unknown

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_METRIC_TABLE_H_
