// The backend registry: one row per backend (name, summary, factory).

#include "backends/backend.h"
#include "backends/command_backend.h"
#include "backends/native/fsdp_backend.h"
#include "backends/native_pending.h"

namespace protocol {

const std::vector<BackendEntry>& BackendTable() {
  static const std::vector<BackendEntry> table = {
      {"fsdp", "native libtorch Llama-2 FSDP baseline (one process in this build; multi-node cases fail with a reason)",
       &MakeNativeFsdpBackend},
      {"share", "native libtorch share protocol (not built yet: cases fail with a reason)",
       &MakePendingShareBackend},
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
