#ifndef PROTOCOL_REPORT_CELL_KEY_H_
#define PROTOCOL_REPORT_CELL_KEY_H_

// What identifies a report cell within one model (docs/report.md, "Cells"):
// workload, row length, system, nodes, network, variant. The report model
// (report_data.h) groups results by it; collect.h uses it to read only the
// cases a report shows.

#include <cstdint>
#include <string>
#include <tuple>

#include "runner/store/records.h"

namespace protocol {

struct CellKey {
  std::string workload;
  std::string length_unit;  // row length: report_as when present, else length
  int64_t length_count = 0;
  std::string system;
  int nodes = 1;
  std::string network;
  std::string variant;
  auto Tie() const { return std::tie(workload, length_unit, length_count, system, nodes, network, variant); }
  bool operator<(const CellKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const CellKey& o) const { return Tie() == o.Tie(); }
};

CellKey KeyOf(const CaseRecord& r);

// "pretrain 1000 steps share 2 nodes (10G) [variant]".
std::string KeyText(const CellKey& k);

// "1 node", "2 nodes".
std::string NodesText(int nodes);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_CELL_KEY_H_
