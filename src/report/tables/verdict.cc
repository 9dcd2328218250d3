#include "report/tables/verdict.h"

#include <algorithm>
#include <map>

#include "report/formats/numbers.h"
#include "report/tables/cell_key.h"
#include "report/tables/stored_plan.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// The caveat tags of a verdict row, in the order the legend gives them: the
// tag (a contended one reads "contended 40 %"), its meaning in the legend,
// and what it changes in the row's conclusion ("" for nothing more than the
// claim says).
struct CaveatSpec {
  const char* tag;
  const char* legend_tag;
  const char* meaning;
  const char* consequence;
};
const CaveatSpec kCaveats[] = {
    {"contended", "contended N %",
     "other processes took N % of the machine's CPU while a side was measured (the most of its sides): its timings "
     "are less reliable (marked ! in the tables)",
     "measured while the machine was busy, so less reliable"},
    {"one host", "one host",
     "the nodes of a multi-node side ran on one machine: no network between machines was measured",
     "its nodes were one machine, so no network between machines was measured"},
    {"link ≠ label", "link ≠ label",
     "a multi-node side's link, measured by its ranks before the first step (all-reduce bus bandwidth, "
     "docs/distributed.md), was more than 2× away from its network label's nominal rate (marked ≠ in the tables): "
     "the label does not say what the figure ran on",
     "a side's link measured more than 2× away from its network's label, so the label does not say what it ran on"},
    {"random weights", "random weights",
     "measured on seeded random weights (the plan says init: random), not on a trained model",
     "measured on random weights, not on a trained model"},
    {"extrapolated", "extrapolated",
     "a side's time was extrapolated from a shorter run (marked * in the tables), not measured end to end",
     "partly extrapolated, not measured end to end"},
    {"first steps", "first steps", "a side's time was computed from the first steps of a longer run (marked * in the tables)",
     "partly computed from the first steps of a longer run"},
    {"imported", "imported", "a side's figure was imported, not measured by protocol", "partly imported"},
    {"different runs", "different runs", "the two sides come from different runs (marked † in the tables)",
     "its sides come from different runs"},
    {"not significant", "not significant", "the 95 % interval of the speed-up crosses 1 (marked ~ in the tables)",
     "its 95 % interval crosses 1, so the difference may be noise"},
    {"different machines", "different machines", "the sides ran on different machines: no ratio is computed", ""},
    {"different work", "different work", "the sides did different work: no ratio is computed", ""},
};

// The kCaveats entry of a tag ("contended 40 %" is "contended"); -1 when none.
int CaveatIndex(const std::string& tag) {
  for (size_t i = 0; i < std::size(kCaveats); ++i)
    if (tag == kCaveats[i].tag || StartsWith(tag, std::string(kCaveats[i].tag) + " ")) return static_cast<int>(i);
  return -1;
}

// "contended 40 %": the share, to keep the larger of two.
double ContendedShareOf(const std::string& tag) {
  return std::atof(tag.c_str() + std::string(kCaveats[0].tag).size());
}

// The n of a speed-up cell "1.42× (n=1)"; 0 when it has an interval or none.
int RepeatsOf(const std::string& speedup) {
  const size_t at = speedup.find("(n=");
  return at == std::string::npos ? 0 : std::atoi(speedup.c_str() + at + 3);
}

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
  std::optional<double> nodes;
  if (between_nodes) nodes = CellMedian(candidate, metric::kBytesBetweenNodes);
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
  if (!line.energy.empty()) s += ", " + line.energy;
  for (const std::string& q : line.qualifiers) s += "; " + q;
  for (const std::string& n : line.notes) s += "; " + n;
  return s + ".";
}

std::string SpeedupCell(const ReportCell& ratio, const std::vector<std::pair<std::string, const ReportCell*>>& inputs) {
  std::string s = FormatRatio(*ratio.value) + "×";
  if (ratio.interval) return s + fmt::format(" ({}–{})", FormatRatio(ratio.interval->low), FormatRatio(ratio.interval->high));
  size_t n = 0;
  for (size_t i = 0; i < inputs.size(); ++i)
    n = i == 0 ? inputs[i].second->repeats.size() : std::min(n, inputs[i].second->repeats.size());
  return n > 0 ? s + fmt::format(" (n={})", n) : s;
}

std::string LossDifferenceCell(const CellResults* baseline, const CellResults* candidate,
                               const std::string& baseline_name, const std::string& candidate_name) {
  std::optional<double> b = CellMedian(baseline, metric::kEvalLoss);
  std::optional<double> c = CellMedian(candidate, metric::kEvalLoss);
  if (!b && !c) return "not stored";
  if (!b) return baseline_name + ": not stored";
  if (!c) return candidate_name + ": not stored";
  if (*b == 0) return fmt::format("{} vs {}", FormatLoss(*c), FormatLoss(*b));
  return FormatSignedPercent((*c - *b) / *b * 100);
}

std::string LossClause(const CellResults* baseline, const CellResults* candidate) {
  std::optional<double> b = CellMedian(baseline, metric::kEvalLoss);
  std::optional<double> c = CellMedian(candidate, metric::kEvalLoss);
  if (!b || !c) return "";
  if (FormatLoss(*b) == FormatLoss(*c)) return ", at the same held-out loss";
  if (*b == 0) return fmt::format(", its held-out loss {} against {}", FormatLoss(*c), FormatLoss(*b));
  const double pct = (*c - *b) / *b * 100;
  return fmt::format(", its held-out loss {} % {}", FormatDecimals(std::abs(pct), 1), pct > 0 ? "higher" : "lower");
}

std::string MeasuredLinkNote(const CellResults* cell) {
  const std::optional<CaseLink> link = CellLink(cell);
  if (!link) return "";
  std::string note = (link->network.empty() ? "" : link->network + ", ") + "measured " +
                     GbitText(*link->busbw_bytes_per_second * 8);
  if (link->OffLabel()) note += ": link ≠ label";
  return " (" + note + ")";
}

std::string BytesBetweenNodesCell(const CellResults* candidate, const CellResults* baseline) {
  std::string c = BetweenNodesText(candidate), b = BetweenNodesText(baseline);
  return (c.empty() ? "not stored" : c) + MeasuredLinkNote(candidate) + " vs " + (b.empty() ? "not stored" : b) +
         MeasuredLinkNote(baseline);
}

std::vector<std::string> RatioCaveats(const ReportCell& ratio,
                                      const std::vector<std::pair<std::string, const ReportCell*>>& inputs) {
  std::vector<std::string> tags;
  if (!ratio.refused.empty()) {
    tags.push_back(ratio.refused.find("different machines") != std::string::npos ? "different machines"
                                                                                 : "different work");
  }
  std::optional<double> contended;
  for (const auto& [who, cell] : inputs) {
    if (cell->contended) contended = std::max(contended.value_or(0), *cell->contended);
    if (cell->provenance == "prefix") {
      tags.push_back("first steps");
    } else if (cell->provenance == "extrapolated" || (cell->marker == "*" && cell->provenance != "imported")) {
      tags.push_back("extrapolated");
    } else if (cell->provenance == "imported") {
      tags.push_back("imported");
    }
  }
  if (std::any_of(inputs.begin(), inputs.end(), [](const auto& side) { return side.second->link_off_label; }))
    tags.push_back("link ≠ label");
  if (contended) tags.push_back(fmt::format("contended {} %", FormatPercent(*contended)));
  if (ratio.value && ratio.numerator_run_id != ratio.denominator_run_id) tags.push_back("different runs");
  if (ratio.interval && ratio.interval->low <= 1 && ratio.interval->high >= 1) tags.push_back("not significant");
  std::vector<std::string> out;
  AddCaveats(&out, tags);
  return out;
}

void AddCaveats(std::vector<std::string>* caveats, const std::vector<std::string>& tags) {
  for (const std::string& tag : tags) {
    const int kind = CaveatIndex(tag);
    auto same = std::find_if(caveats->begin(), caveats->end(),
                             [&](const std::string& c) { return kind >= 0 ? CaveatIndex(c) == kind : c == tag; });
    if (same == caveats->end()) {
      caveats->push_back(tag);
    } else if (kind == 0 && ContendedShareOf(tag) > ContendedShareOf(*same)) {
      *same = tag;
    }
  }
  // Known tags in kCaveats order, any other after them in the order added.
  auto order = [](const std::string& c) { return CaveatIndex(c) < 0 ? std::size(kCaveats) : size_t(CaveatIndex(c)); };
  std::stable_sort(caveats->begin(), caveats->end(),
                   [&](const std::string& a, const std::string& b) { return order(a) < order(b); });
}

std::vector<LegendEntry> VerdictLegend(const std::vector<VerdictLine>& lines) {
  std::vector<LegendEntry> out;
  for (size_t i = 0; i < std::size(kCaveats); ++i) {
    const bool used = std::any_of(lines.begin(), lines.end(), [&](const VerdictLine& v) {
      return std::any_of(v.caveats.begin(), v.caveats.end(),
                         [&](const std::string& c) { return CaveatIndex(c) == static_cast<int>(i); });
    });
    if (used) out.push_back({kCaveats[i].legend_tag, kCaveats[i].meaning});
  }
  for (const VerdictLine& v : lines) {
    if (RepeatsOf(v.speedup) == 0) continue;
    out.push_back({"n=1", "after a speed-up, instead of its 95 % interval: the fewest repeats on a side (an "
                          "interval needs at least 3 on each)"});
    break;
  }
  return out;
}

std::string VerdictConclusion(const VerdictLine& line) {
  std::string s = fmt::format("{}, {}: {}", line.row, line.scope, line.finding.empty() ? line.claim : line.finding);
  std::vector<std::string> parts;
  // The speed-up at equal quality beside the one at equal steps.
  const std::string& eq = line.equal_quality_cell;
  if (!eq.empty() && EndsWith(eq, "×"))
    parts.push_back(eq + " at equal quality (the time to reach the baseline's held-out loss)");
  else if (!line.equal_quality.empty())
    parts.push_back(line.equal_quality);  // "no speed-up at equal quality (…): share not reached (…)"
  if (int n = RepeatsOf(line.speedup); n > 0)
    parts.push_back(n == 1 ? "one repeat, so no interval yet" : fmt::format("{} repeats, so no interval yet", n));
  for (const std::string& c : line.caveats) {
    const int i = CaveatIndex(c);
    if (i >= 0 && *kCaveats[i].consequence) parts.push_back(kCaveats[i].consequence);
  }
  for (const std::string& p : parts) s += "; " + p;
  return s + ".";
}

}  // namespace protocol
