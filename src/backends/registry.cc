// The backend registry: one row per backend (name, summary, factory), and the
// shorthands of backend.h.

#include "backends/backend.h"
#include "backends/command_backend.h"
#include "backends/native/fsdp_backend.h"
#include "backends/native/share_backend.h"

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

const std::vector<BackendEntry>& BackendTable() {
  static const std::vector<BackendEntry> table = {
      {"fsdp", "native libtorch Llama-2, FSDP baseline: one process, or ranks sharded per decoder layer over c10d",
       &MakeNativeFsdpBackend},
      {"share", "native libtorch Llama-2, share protocol: independent FSDP groups merged by parameter averaging",
       &MakeNativeShareBackend},
      {"command", "runs a lab's own launch command verbatim, timed, metrics parsed from output",
       &MakeCommandBackend},
  };
  return table;
}

const BackendEntry* FindBackend(const std::string& name) {
  for (const auto& entry : BackendTable())
    if (name == entry.name) return &entry;
  return nullptr;
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (const auto& entry : BackendTable()) names.push_back(entry.name);
  return names;
}

}  // namespace protocol
