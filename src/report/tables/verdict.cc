#include "report/tables/verdict.h"

#include <map>

#include "report/formats/numbers.h"
#include "report/tables/cell_key.h"
#include "report/tables/stored_plan.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// The median of the winning run's `name` figures; nullopt when none.
std::optional<double> CellMedian(const CellResults* cell, const char* name) {
  const std::string metric = name;
  return Resolve(cell, [metric](const CaseEntry& e) { return NamedFigure(e, metric); }, 1.0, "", FormatOne).value;
}

}  // namespace

std::string HeldOutLossPhrase(const CellResults* baseline, const CellResults* candidate,
                              const std::string& baseline_name, const std::string& candidate_name) {
  std::optional<double> b = CellMedian(baseline, metric::kEvalLoss);
  std::optional<double> c = CellMedian(candidate, metric::kEvalLoss);
  if (!b && !c) return "no held-out loss stored";
  if (!b) return fmt::format("held-out loss of {} not stored", baseline_name);
  if (!c) return fmt::format("held-out loss of {} not stored", candidate_name);
  std::string s = fmt::format("held-out loss {} vs {} for {}", FormatLoss(*c), FormatLoss(*b), baseline_name);
  if (*b != 0) s += ", " + FormatSignedPercent((*c - *b) / *b * 100);
  return s;
}

std::string BytesMovedPhrase(const CellResults* baseline, const CellResults* candidate,
                             const std::string& baseline_name) {
  std::optional<double> within = CellMedian(candidate, metric::kBytesWithinGroups);
  std::optional<double> between = CellMedian(candidate, metric::kBytesBetweenGroups);
  std::optional<double> total = CellMedian(candidate, metric::kBytesCommunicated);
  std::string s;
  if (within && between) {
    s = fmt::format("moving {} within groups and {} between groups", FormatBinaryBytes(*within),
                    FormatBinaryBytes(*between));
  } else if (total) {
    s = fmt::format("moving {}, not split by group", FormatBinaryBytes(*total));
  } else {
    s = "bytes moved not stored";
  }
  if (std::optional<double> base = CellMedian(baseline, metric::kBytesCommunicated))
    s += fmt::format(" ({} {})", baseline_name, FormatBinaryBytes(*base));
  return s;
}

std::string OneHostQualifier(const RunIndex& runs, int nodes,
                             const std::vector<std::pair<std::string, const ReportCell*>>& sides) {
  std::map<std::string, std::vector<std::string>> systems_by_host;
  std::vector<std::string> hosts;  // in the order of `sides`
  for (const auto& [system, cell] : sides) {
    const StoredCase* stored = runs.CaseOf(*cell);
    const std::string host = stored ? OneHostOfNodes(*stored) : "";
    if (host.empty()) continue;
    if (!systems_by_host.count(host)) hosts.push_back(host);
    systems_by_host[host].push_back(system);
  }
  std::vector<std::string> parts;
  for (const std::string& host : hosts)
    parts.push_back(fmt::format("the {} of {} are one host ({})", NodesText(nodes), Join(systems_by_host[host], " and "),
                                host));
  return Join(parts, "; ");
}

std::string VerdictText(const std::string& model, const VerdictLine& line) {
  std::string s = fmt::format("{} {}, {}: {}", model, line.row, line.scope, line.claim);
  if (!line.quality.empty()) s += " (" + line.quality + ")";
  if (!line.bytes.empty()) s += ", " + line.bytes;
  for (const std::string& q : line.qualifiers) s += "; " + q;
  for (const std::string& n : line.notes) s += "; " + n;
  return s + ".";
}

}  // namespace protocol
