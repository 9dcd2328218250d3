#ifndef PROTOCOL_REPORT_COLLECT_H_
#define PROTOCOL_REPORT_COLLECT_H_

// Store → ReportInput: reads the runs a report covers, their context (the
// machine fingerprint a ratio's sides are checked against), cases,
// measurements and request samples. No logic beyond selection.

#include "report/report.h"
#include "report/report_data.h"
#include "runner/base/status.h"
#include "runner/store/store.h"

namespace protocol {

// Reads every run (ListRuns): the history charts cover all of them, and
// ComputeReport selects options.run_ids itself. Each id of options.run_ids
// must exist (kNotFound names the first missing one). Cases of other models
// than options.model (when set) are skipped, but their runs are still listed.
// Store errors are returned as they are.
Result<ReportInput> CollectReportInput(Store& store, const ReportOptions& options);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_COLLECT_H_
