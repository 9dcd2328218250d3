#ifndef PROTOCOL_REPORT_REPORT_H_
#define PROTOCOL_REPORT_REPORT_H_

// Reports: the efficiency-ratio tables of the methodology
// (docs/methodology.md, "What is compared, and how"; docs/report.md says how
// every cell is computed), rendered from templates/ (mustache; kainjow/mustache
// is included only in render.cc) or written as JSON or CSV.
//
//   CollectReport: store → ReportData (collect.h reads, report_data.h computes;
//                  the tables are built in tables/, one ModelBuilder per model).
//   RenderReport:  ReportData → Markdown | HTML (templates) | JSON | CSV
//                  (formats/report_json.h, formats/csv.h) text.
//   BuildReport:   both. `protocol report` goes through RenderReportFile
//                  (verify.h), which also writes the report's comment.

#include <cstdint>
#include <string>
#include <vector>

#include "report/report_options.h"
#include "runner/base/status.h"
#include "runner/store/store.h"

namespace protocol {

struct ReportData;  // defined in report/report_data.h

enum class ReportFormat { kMarkdown, kHtml, kJson, kCsv };
bool ParseReportFormat(const std::string& text, ReportFormat* out);  // "md" | "html" | "json" | "csv"

// Whether a report in `format` shows the history charts: HTML and JSON do,
// and so does Markdown with a custom template (`template_path` not empty: it
// may use them); CSV and the default Markdown template do not.
bool FormatShowsHistory(ReportFormat format, const std::string& template_path);

// Store → the report model (collect.h, then ComputeReport). Unknown run ids
// and store errors are returned as values.
Result<ReportData> CollectReport(Store& store, const ReportOptions& options);

// The report model → text. `template_path` empty: templates/report.<ext>.mustache
// found via FindTemplate; ignored for json and csv.
Result<std::string> RenderReport(const ReportData& data, ReportFormat format, const std::string& template_path);

// CollectReport then RenderReport, reading the history only when the format
// shows it.
Result<std::string> BuildReport(Store& store, const ReportOptions& options, ReportFormat format,
                                const std::string& template_path);

// Locates a default template by file name: $PROTOCOL_TEMPLATES, then
// <dir of executable>/../share/protocol/templates, then the source tree's
// templates/ (compiled in). kNotFound lists where it looked.
Result<std::string> FindTemplate(const std::string& file_name);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_REPORT_H_
