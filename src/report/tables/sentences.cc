#include "report/tables/sentences.h"

#include "report/formats/numbers.h"
#include "report/tables/ratios.h"
#include "runner/base/text.h"

namespace protocol {

std::string Sentence(const std::string& subject, const std::string& object, const ReportCell& ratio_cell,
                     const std::string& what, const std::string& context,
                     const std::vector<std::pair<std::string, const ReportCell*>>& inputs,
                     const std::string& clause) {
  const double ratio = *ratio_cell.value;
  std::string pct = FormatPercent(ratio);
  std::string s;
  const auto& iv = ratio_cell.interval;
  if (FormatRatio(ratio) == "1.00") {
    std::string interval =
        iv ? fmt::format(", 95 % interval {}–{}", FormatRatio(iv->low), FormatRatio(iv->high)) : "";
    s = fmt::format("{} is as fast as {} ({} %{}) for {}", subject, object, pct, interval, what);
  } else if (ratio > 1) {
    std::string interval =
        iv ? fmt::format(" (95 % interval {}–{})", FormatRatio(iv->low), FormatRatio(iv->high)) : "";
    s = fmt::format("{} is {}×{} faster than {} ({} %) for {}", subject, FormatRatio(ratio), interval, object, pct,
                    what);
  } else {
    std::string interval =
        iv && iv->low > 0
            ? fmt::format(" (95 % interval {}–{})", FormatRatio(1 / iv->high), FormatRatio(1 / iv->low))
            : "";
    s = fmt::format("{} is {}×{} slower than {} ({} %) for {}", subject, FormatRatio(1 / ratio), interval, object,
                    pct, what);
  }
  if (!context.empty()) s += " (" + context + ")";
  s += clause;
  for (const std::string& note : RatioNotes(ratio_cell, inputs)) s += "; " + note;
  return s + ".";
}

std::vector<std::string> RatioNotes(const ReportCell& ratio_cell,
                                    const std::vector<std::pair<std::string, const ReportCell*>>& inputs) {
  std::vector<std::string> notes;
  std::vector<std::string> provenance;
  for (const auto& [who, cell] : inputs) {
    if (cell->provenance == "prefix") {
      provenance.push_back(who + " figure computed from the first steps of a longer run");
    } else if (cell->provenance == "extrapolated" || (cell->marker == "*" && cell->provenance != "imported")) {
      provenance.push_back(who + " figure extrapolated");
    } else if (cell->provenance == "imported") {
      provenance.push_back(who + (cell->marker == "*" ? " figure imported, marked extrapolated"
                                                      : " figure imported"));
    }
  }
  if (!provenance.empty()) notes.push_back(Join(provenance, ", "));
  std::vector<std::string> contended;
  for (const auto& [who, cell] : inputs)
    if (cell->contended)
      contended.push_back(fmt::format("other processes took {} % of the CPU while {}'s figure was measured",
                                      FormatPercent(*cell->contended), who));
  if (!contended.empty()) notes.push_back("contended: " + Join(contended, ", ") + " (less reliable)");
  if (ratio_cell.numerator_run_id != ratio_cell.denominator_run_id) {
    std::vector<std::string> sides;
    for (const auto& [who, cell] : inputs) sides.push_back(fmt::format("{} run {}", who, cell->run_id));
    notes.push_back(fmt::format("{} ({})", kDifferentRunsText, Join(sides, ", ")));
  }
  if (!ratio_cell.interval_note.empty()) notes.push_back(ratio_cell.interval_note);
  return notes;
}

std::string SpeedClaim(const std::string& subject, const std::string& object, double ratio) {
  if (FormatRatio(ratio) == "1.00") return fmt::format("{} is as fast as {}", subject, object);
  if (ratio > 1) return fmt::format("{} is {}× faster than {}", subject, FormatRatio(ratio), object);
  return fmt::format("{} is {}× slower than {}", subject, FormatRatio(1 / ratio), object);
}

std::string RefusalReason(const ReportCell& ratio_cell) {
  return ratio_cell.refused.substr(std::string(kRefusedPrefix).size());
}

std::string RefusedSentence(const std::string& subject, const std::string& object, const std::string& what,
                            const ReportCell& ratio_cell) {
  return fmt::format("No ratio of {} to {} for {}: {}.", subject, object, what, RefusalReason(ratio_cell));
}

}  // namespace protocol
