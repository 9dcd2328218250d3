// Placeholder until the command backend lands (owned by the command-backend work).
#include "backends/command_backend.h"

namespace protocol {
namespace {
class PendingCommandBackend : public Backend {
 public:
  std::vector<std::string> Check(const Plan&, const CaseSpec&) const override { return {}; }
  BackendOutcome Run(BackendContext&) override {
    return {CaseStatus::kFailed, "command backend not implemented yet", std::nullopt, {}};
  }
};
}  // namespace
std::unique_ptr<Backend> MakeCommandBackend() { return std::make_unique<PendingCommandBackend>(); }
}  // namespace protocol
