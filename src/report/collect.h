#ifndef PROTOCOL_REPORT_COLLECT_H_
#define PROTOCOL_REPORT_COLLECT_H_

// Store → ReportInput: reads the runs a report covers, their cases,
// measurements and request samples. No logic beyond selection.

#include "report/report.h"
#include "report/report_data.h"
#include "runner/status.h"
#include "runner/store.h"

namespace protocol {

// Reads options.run_ids (each must exist: kNotFound names the first missing
// one) or, when empty, every run (ListRuns). Cases of other models than
// options.model (when set) are skipped, but their runs are still listed.
// Store errors are returned as they are.
Result<ReportInput> CollectReportInput(Store& store, const ReportOptions& options);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_COLLECT_H_
