#ifndef PROTOCOL_REPORT_FORMATS_CSV_H_
#define PROTOCOL_REPORT_FORMATS_CSV_H_

// ReportData as CSV (RFC 4180, "\n" line ends): a header, then one row per
// table cell: model, table, row, column, value, unit, marker, provenance,
// ratio, origin, run_id, ratio_numerator_run, ratio_denominator_run,
// ratio_note. `value` is the full-precision number in `unit` (empty when
// the cell has none); `ratio` is the efficiency coefficient of that cell
// ("3.21", or its marker: "–", "X", "no solution"; empty for tables without
// ratios); `run_id` the run the value comes from; the ratio_* columns the
// runs of the line's ratio (its efficiency coefficient, or the scaling
// efficiency itself) and "same run" | "sides from different runs" | why it
// was refused — empty when there is no ratio with two sides. Sentences and
// failures are not cells: see the other formats.

#include <string>

#include "report/report_data.h"


namespace protocol {

std::string ReportToCsv(const ReportData& data);


}  // namespace protocol

#endif  // PROTOCOL_REPORT_FORMATS_CSV_H_
