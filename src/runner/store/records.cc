#include "runner/store/records.h"

#include <cctype>

namespace protocol {

namespace {

// The registries of names: one row per enum value, so the name and the parser
// can never disagree.
struct CaseStatusRow {
  CaseStatus status;
  const char* name;
};
constexpr CaseStatusRow kCaseStatuses[] = {
    {CaseStatus::kRunning, "running"},   {CaseStatus::kOk, "ok"},
    {CaseStatus::kFailed, "failed"},     {CaseStatus::kTimeout, "timeout"},
    {CaseStatus::kSkipped, "skipped"},   {CaseStatus::kInterrupted, "interrupted"},
};

struct ProvenanceRow {
  Provenance how;
  const char* name;
};
constexpr ProvenanceRow kProvenances[] = {
    {Provenance::kMeasured, "measured"},
    {Provenance::kExtrapolated, "extrapolated"},
    {Provenance::kPrefix, "prefix"},
    {Provenance::kDeclared, "declared"},
    {Provenance::kEstimated, "estimated"},
    {Provenance::kImported, "imported"},
};

}  // namespace

const char* CaseStatusName(CaseStatus s) {
  for (const auto& row : kCaseStatuses)
    if (row.status == s) return row.name;
  return "?";
}

std::optional<CaseStatus> ParseCaseStatus(const std::string& s) {
  for (const auto& row : kCaseStatuses)
    if (s == row.name) return row.status;
  return std::nullopt;
}

bool IsFinal(CaseStatus s) {
  return s == CaseStatus::kOk || s == CaseStatus::kFailed || s == CaseStatus::kTimeout ||
         s == CaseStatus::kSkipped;
}

const char* ProvenanceName(Provenance p) {
  for (const auto& row : kProvenances)
    if (row.how == p) return row.name;
  return "?";
}

std::optional<Provenance> ParseProvenance(const std::string& s) {
  for (const auto& row : kProvenances)
    if (s == row.name) return row.how;
  return std::nullopt;
}

std::string LengthText(const std::string& unit, int64_t count) {
  if (unit.empty()) return "";
  if (unit == "steps" || unit == "epochs")
    return std::to_string(count) + " " + (count == 1 ? unit.substr(0, unit.size() - 1) : unit);
  return std::to_string(count) + " " + unit;
}

std::optional<double> ContendedShare(const std::vector<Measurement>& measurements) {
  for (const Measurement& m : measurements)
    if (m.name == metric::kContention && m.value && *m.value >= metric::kContendedShare)
      return m.value;
  return std::nullopt;
}

std::string RankFigureName(const std::string& name, int rank) { return name + "_rank" + std::to_string(rank); }

std::pair<std::string, std::optional<int>> SplitRankFigureName(const std::string& name) {
  const size_t at = name.rfind("_rank");
  if (at == std::string::npos || at == 0) return {name, std::nullopt};
  const std::string digits = name.substr(at + 5);
  if (digits.empty() || digits.size() > 6) return {name, std::nullopt};
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return {name, std::nullopt};
  if (digits.size() > 1 && digits[0] == '0') return {name, std::nullopt};  // "x_rank01" is not rank 1's
  return {name.substr(0, at), std::stoi(digits)};
}

}  // namespace protocol
