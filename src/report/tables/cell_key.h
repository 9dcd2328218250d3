#ifndef PROTOCOL_REPORT_TABLES_CELL_KEY_H_
#define PROTOCOL_REPORT_TABLES_CELL_KEY_H_

// What identifies a report cell within one model (docs/report.md, "Cells"):
// workload, row length, system, nodes, network, variant. The report model
// (report_data.h) groups results by it; collect.h uses it to read only the
// cases a report shows.

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "runner/plan/coverage.h"  // NodesText
#include "runner/store/records.h"

namespace protocol {

struct CellKey {
  std::string workload;
  std::string length_unit;  // row length: the case's own, or a length one of its figures is for
  int64_t length_count = 0;
  std::string system;
  int nodes = 1;
  std::string network;
  std::string variant;
  auto Tie() const { return std::tie(workload, length_unit, length_count, system, nodes, network, variant); }
  bool operator<(const CellKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const CellKey& o) const { return Tie() == o.Tie(); }
};

// The cell of the case's own length.
CellKey KeyOf(const CaseRecord& r);
// Every cell a case gives: its own length, then each further length its
// wall_seconds figures are for (Measurement::length_unit/count: a report_as
// or not_provided length), in stored order, each once.
std::vector<CellKey> KeysOf(const CaseRecord& r, const std::vector<Measurement>& measurements);

// "pretrain 1000 steps share 2 nodes (10G) [variant]".
std::string KeyText(const CellKey& k);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_CELL_KEY_H_
