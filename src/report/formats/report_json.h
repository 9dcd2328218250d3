#ifndef PROTOCOL_REPORT_FORMATS_REPORT_JSON_H_
#define PROTOCOL_REPORT_FORMATS_REPORT_JSON_H_

// ReportData as JSON: the `--format json` output (schema_version 1) and, with
// a few presence flags added, the view that the mustache templates see.
// docs/report.md lists every field.

#include "report/report_data.h"
#include "runner/base/json.h"

namespace protocol {

// The whole ReportData; a value absent is null. Keys in declaration order.
Json ReportToJson(const ReportData& data);

// ReportToJson plus template helpers: top level `empty` (bool), `has_runs`;
// per model `has_sentences`, `has_appendix`, `has_failures`, `has_untabulated`,
// `has_chart`, `has_requests`; per table `has_efficiency`.
Json ReportView(const ReportData& data);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_FORMATS_REPORT_JSON_H_
