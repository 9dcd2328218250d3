#ifndef PROTOCOL_REPORT_COLLECT_H_
#define PROTOCOL_REPORT_COLLECT_H_

// Store → ReportInput: reads what a report shows, and nothing else, so that a
// report costs the same whatever the length of the stored history (but for
// the history charts, which plot it):
//
//   1. the identity and status of every case of the selected runs (one query,
//      no measurement, no plan text);
//   2. per cell (cell_key.h), the newest run with an ok result wins; the ok
//      cases of that run, and the cases not ok that the report lists (a cell
//      with no ok result, or a failure not older than its newest ok run), are
//      read whole: record, measurements, request samples, and their runs with
//      context and resolved plan;
//   3. with options.history, every other ok case of every run up to
//      history_through (selected or not), with only the measurements a
//      history chart plots (ReportInput::history_only).
//
// ComputeReport gives the same report from this input as from every stored
// record (tests/report/report_scale_test.cc checks it).

#include "report/report_options.h"
#include "report/report_data.h"
#include "runner/base/status.h"
#include "runner/store/store.h"

namespace protocol {

// Each id of options.run_ids must exist (kNotFound names the first missing
// one). Cases of other models than options.model (when set) are not read.
// Store errors are returned as they are.
Result<ReportInput> CollectReportInput(Store& store, const ReportOptions& options);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_COLLECT_H_
