#include "runner/exec/backend.h"

namespace protocol {

Measurement MeasuredFigure(std::string name, double value, std::string unit, std::string method) {
  Measurement m;
  m.name = std::move(name);
  m.value = value;
  m.unit = std::move(unit);
  m.how = Provenance::kMeasured;
  m.method = std::move(method);
  return m;
}

BackendOutcome FailedOutcome(CaseStatus status, std::string reason) {
  BackendOutcome out;
  out.status = status;
  out.reason = std::move(reason);
  return out;
}

void NoteOnEveryMethod(BackendOutcome& out, const std::string& note) {
  if (note.empty()) return;
  for (Measurement& m : out.measurements) m.method = m.method.empty() ? note : m.method + "; " + note;
}

}  // namespace protocol
