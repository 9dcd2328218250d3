#include "report/cell_key.h"

#include <vector>

#include "runner/base/text.h"

namespace protocol {

CellKey KeyOf(const CaseRecord& r) {
  CellKey k;
  k.workload = r.workload;
  if (!r.report_as_unit.empty()) {
    k.length_unit = r.report_as_unit;
    k.length_count = r.report_as_count;
  } else {
    k.length_unit = r.length_unit;
    k.length_count = r.length_count;
  }
  k.system = r.system;
  k.nodes = r.nodes;
  k.network = r.network;
  k.variant = r.variant;
  return k;
}

std::string KeyText(const CellKey& k) {
  std::vector<std::string> parts = {k.workload};
  std::string len = LengthText(k.length_unit, k.length_count);
  if (!len.empty()) parts.push_back(len);
  parts.push_back(k.system);
  parts.push_back(NodesText(k.nodes));
  if (!k.network.empty()) parts.push_back("(" + k.network + ")");
  if (!k.variant.empty()) parts.push_back("[" + k.variant + "]");
  return Join(parts, " ");
}

std::string NodesText(int nodes) { return fmt::format("{} {}", nodes, nodes == 1 ? "node" : "nodes"); }

}  // namespace protocol
