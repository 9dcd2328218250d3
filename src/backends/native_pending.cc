#include "backends/native_pending.h"

#include <string>

namespace protocol {
namespace {

class PendingNativeBackend : public Backend {
 public:
  explicit PendingNativeBackend(std::string name) : name_(std::move(name)) {}
  std::vector<std::string> Check(const Plan&, const CaseSpec&) const override { return {}; }
  BackendOutcome Run(BackendContext&) override {
    BackendOutcome out;
    out.status = CaseStatus::kFailed;
    out.reason = "the native '" + name_ +
                 "' backend is not built yet in this version of protocol; nothing was run "
                 "(use the command backend with your own launch command meanwhile)";
    return out;
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> MakePendingShareBackend() {
  return std::make_unique<PendingNativeBackend>("share");
}

}  // namespace protocol
