// The backend registry: one row per backend (name, summary, factory).

#include "backends/registry.h"

#include "backends/command_backend.h"
#include "backends/native/fsdp_backend.h"
#include "backends/native/share_backend.h"

namespace protocol {

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
