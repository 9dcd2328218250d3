#include "report/formats/csv.h"

#include "runner/base/text.h"

namespace protocol {

namespace {

// "same run" | "sides from different runs" | the refusal | "" (no ratio).
std::string RatioNote(const ReportCell& ratio) {
  if (ratio.numerator_run_id == 0 && ratio.denominator_run_id == 0) return "";
  if (!ratio.refused.empty()) return ratio.refused;
  return ratio.numerator_run_id == ratio.denominator_run_id ? "same run" : "sides from different runs";
}

std::string RunText(int64_t id) { return id == 0 ? "" : std::to_string(id); }

}  // namespace

std::string ReportToCsv(const ReportData& data) {
  std::string out =
      "model,table,row,column,value,unit,marker,provenance,ratio,origin,"
      "run_id,ratio_numerator_run,ratio_denominator_run,ratio_note\n";
  for (const auto& m : data.models) {
    for (const auto& t : m.tables) {
      for (size_t i = 0; i < t.rows.size(); ++i) {
        const ReportRow& row = t.rows[i];
        for (size_t j = 0; j < row.cells.size(); ++j) {
          const ReportCell& c = row.cells[j];
          std::string ratio;
          // The line's ratio: its efficiency cell, or the cell itself when it
          // is one (scaling efficiency).
          const ReportCell* r = &c;
          if (i < t.efficiency.size() && j < t.efficiency[i].cells.size()) {
            r = &t.efficiency[i].cells[j];
            ratio = r->value ? FormatRatio(*r->value) : r->marker;
          }
          std::vector<std::string> fields = {m.model,
                                             t.id,
                                             row.label,
                                             c.column,
                                             c.value ? fmt::format("{}", *c.value) : "",
                                             row.unit,
                                             c.marker,
                                             c.provenance,
                                             ratio,
                                             c.origin,
                                             RunText(c.run_id),
                                             RunText(r->numerator_run_id),
                                             RunText(r->denominator_run_id),
                                             RatioNote(*r)};
          for (auto& f : fields) f = CsvField(f);
          out += Join(fields, ",") + "\n";
        }
      }
    }
  }
  return out;
}

}  // namespace protocol
