// Name conversions for records.h (the only behaviour records have).

#include "runner/records.h"

namespace protocol {

const char* CaseStatusName(CaseStatus s) {
  switch (s) {
    case CaseStatus::kRunning: return "running";
    case CaseStatus::kOk: return "ok";
    case CaseStatus::kFailed: return "failed";
    case CaseStatus::kTimeout: return "timeout";
    case CaseStatus::kSkipped: return "skipped";
    case CaseStatus::kInterrupted: return "interrupted";
  }
  return "?";
}

std::optional<CaseStatus> ParseCaseStatus(const std::string& s) {
  for (CaseStatus c : {CaseStatus::kRunning, CaseStatus::kOk, CaseStatus::kFailed,
                       CaseStatus::kTimeout, CaseStatus::kSkipped, CaseStatus::kInterrupted})
    if (s == CaseStatusName(c)) return c;
  return std::nullopt;
}

bool IsFinal(CaseStatus s) {
  return s == CaseStatus::kOk || s == CaseStatus::kFailed || s == CaseStatus::kTimeout ||
         s == CaseStatus::kSkipped;
}

const char* ProvenanceName(Provenance p) {
  switch (p) {
    case Provenance::kMeasured: return "measured";
    case Provenance::kExtrapolated: return "extrapolated";
    case Provenance::kImported: return "imported";
  }
  return "?";
}

std::optional<Provenance> ParseProvenance(const std::string& s) {
  for (Provenance p : {Provenance::kMeasured, Provenance::kExtrapolated, Provenance::kImported})
    if (s == ProvenanceName(p)) return p;
  return std::nullopt;
}

}  // namespace protocol
