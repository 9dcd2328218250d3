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
                             const std::string& baseline_name, bool between_nodes) {
  std::optional<double> within = CellMedian(candidate, metric::kBytesWithinGroups);
  std::optional<double> between = CellMedian(candidate, metric::kBytesBetweenGroups);
  std::optional<double> total = CellMedian(candidate, metric::kBytesCommunicated);
  std::optional<double> nodes = between_nodes ? CellMedian(candidate, metric::kBytesBetweenNodes) : std::nullopt;
  std::string s;
  if (within && between) {
    s = fmt::format("moving {} within groups and {} between groups", FormatBinaryBytes(*within),
                    FormatBinaryBytes(*between));
  } else if (total) {
    s = fmt::format("moving {}, not split by group", FormatBinaryBytes(*total));
  } else if (nodes) {
    s = fmt::format("moving {} between nodes", FormatBinaryBytes(*nodes));
    nodes.reset();
  } else {
    s = "bytes moved not stored";
  }
  if (nodes) s += fmt::format(", {} of it between nodes", FormatBinaryBytes(*nodes));
  std::optional<double> base = CellMedian(baseline, metric::kBytesCommunicated);
  std::optional<double> base_nodes = between_nodes ? CellMedian(baseline, metric::kBytesBetweenNodes) : std::nullopt;
  if (base && base_nodes) {
    s += fmt::format(" ({} {}, {} of it between nodes)", baseline_name, FormatBinaryBytes(*base),
                     FormatBinaryBytes(*base_nodes));
  } else if (base) {
    s += fmt::format(" ({} {})", baseline_name, FormatBinaryBytes(*base));
  } else if (base_nodes) {
    s += fmt::format(" ({} {} between nodes)", baseline_name, FormatBinaryBytes(*base_nodes));
  }
  return s;
}

std::string BetweenNodesText(const CellResults* cell) {
  const std::vector<CaseEntry>* winning = cell ? cell->Winning() : nullptr;
  if (!winning) return "";
  // The figure is the whole run's: read at the case's own length.
  auto own = [](const CaseEntry& e) {
    CaseEntry at_own = e;
    at_own.length_unit.clear();
    at_own.length_count = 0;
    return NamedFigure(at_own, metric::kBytesBetweenNodes);
  };
  std::optional<double> v = Resolve(cell, own, 1.0, "", FormatBinaryBytes).value;
  if (!v) return "";
  const CaseEntry& first = winning->front();
  if (first.length_unit.empty()) return FormatBinaryBytes(*v);
  return fmt::format("{} over its own {}", FormatBinaryBytes(*v),
                     LengthText(first.c->record.length_unit, first.c->record.length_count));
}

std::string HeldOutLossAgainst(const CellResults* candidate, const std::string& candidate_name,
                               const std::vector<std::pair<std::string, const CellResults*>>& baselines) {
  std::optional<double> c = CellMedian(candidate, metric::kEvalLoss);
  std::vector<std::string> with, without;
  for (const auto& [name, cell] : baselines) {
    std::optional<double> b = CellMedian(cell, metric::kEvalLoss);
    if (!b) {
      without.push_back(name);
    } else if (c) {
      with.push_back(*b != 0 ? fmt::format("{} for {} ({})", FormatLoss(*b), name,
                                           FormatSignedPercent((*c - *b) / *b * 100))
                             : fmt::format("{} for {}", FormatLoss(*b), name));
    }
  }
  if (!c) return without.size() == baselines.size() ? "no held-out loss stored"
                                                    : fmt::format("held-out loss of {} not stored", candidate_name);
  if (with.empty()) return fmt::format("held-out loss of {} not stored", Join(without, " and "));
  std::string s = fmt::format("held-out loss {} vs {}", FormatLoss(*c), Join(with, " and "));
  if (!without.empty()) s += ", not stored for " + Join(without, " and ");
  return s;
}

std::string BetweenNodesPhrase(const CellResults* candidate, const std::string& candidate_name,
                               const std::vector<std::pair<std::string, const CellResults*>>& baselines) {
  const std::string c = BetweenNodesText(candidate);
  std::string s = c.empty() ? fmt::format("bytes between nodes of {} not stored", candidate_name)
                            : fmt::format("moving {} between nodes", c);
  std::vector<std::string> sides;
  for (const auto& [name, cell] : baselines) {
    const std::string b = BetweenNodesText(cell);
    sides.push_back(name + " " + (b.empty() ? "not stored" : b));
  }
  if (!sides.empty()) s += " (" + Join(sides, ", ") + ")";
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
  if (!line.equal_quality.empty()) s += ", " + line.equal_quality;
  if (!line.bytes.empty()) s += ", " + line.bytes;
  for (const std::string& q : line.qualifiers) s += "; " + q;
  for (const std::string& n : line.notes) s += "; " + n;
  return s + ".";
}

}  // namespace protocol
