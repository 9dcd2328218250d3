#include "report/csv.h"

#include "runner/base/text.h"

namespace protocol {

std::string ReportToCsv(const ReportData& data) {
  std::string out = "model,table,row,column,value,unit,marker,provenance,ratio,origin\n";
  for (const auto& m : data.models) {
    for (const auto& t : m.tables) {
      for (size_t i = 0; i < t.rows.size(); ++i) {
        const ReportRow& row = t.rows[i];
        for (size_t j = 0; j < row.cells.size(); ++j) {
          const ReportCell& c = row.cells[j];
          std::string ratio;
          if (i < t.efficiency.size() && j < t.efficiency[i].cells.size()) {
            const ReportCell& e = t.efficiency[i].cells[j];
            ratio = e.value ? FormatRatio(*e.value) : e.marker;
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
                                             c.origin};
          for (auto& f : fields) f = CsvField(f);
          out += Join(fields, ",") + "\n";
        }
      }
    }
  }
  return out;
}

}  // namespace protocol
