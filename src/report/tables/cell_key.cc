#include "report/tables/cell_key.h"

#include <algorithm>
#include <vector>

#include "runner/base/text.h"

namespace protocol {

CellKey KeyOf(const CaseRecord& r) {
  CellKey k;
  k.workload = r.workload;
  k.length_unit = r.length_unit;
  k.length_count = r.length_count;
  k.system = r.system;
  k.nodes = r.nodes;
  k.network = r.network;
  k.variant = r.variant;
  return k;
}

std::vector<CellKey> KeysOf(const CaseRecord& r, const std::vector<Measurement>& measurements) {
  std::vector<CellKey> keys = {KeyOf(r)};
  for (const Measurement& m : measurements) {
    if (m.name != metric::kWallSeconds || m.length_unit.empty()) continue;
    CellKey k = keys.front();
    k.length_unit = m.length_unit;
    k.length_count = m.length_count;
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
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

}  // namespace protocol
