#ifndef PROTOCOL_BACKENDS_REGISTRY_H_
#define PROTOCOL_BACKENDS_REGISTRY_H_

// The backends this program has, by the name plans use. The contract a
// backend implements (Backend, BackendContext, CaseEvents) belongs to the
// runner: runner/exec/backend.h.

#include <memory>
#include <string>
#include <vector>

#include "runner/exec/backend.h"

namespace protocol {

// The registry: a table of backends by name (ninja's kTools style).
struct BackendEntry {
  const char* name;     // as written in plans: "fsdp", "share", "command"
  const char* summary;  // one line for `protocol --help` and docs
  std::unique_ptr<Backend> (*make)();
};
const std::vector<BackendEntry>& BackendTable();
const BackendEntry* FindBackend(const std::string& name);  // nullptr when unknown
std::vector<std::string> BackendNames();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_REGISTRY_H_
