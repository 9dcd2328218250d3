#include "backends/native/share_backend.h"

#include "backends/native/check/native_check.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

class NativeShareBackend : public Backend {
 public:
  explicit NativeShareBackend(native::DistOptions options) : options_(std::move(options)) {}

  std::vector<std::string> Check(const Plan& plan, const CaseSpec& spec) const override {
    std::vector<std::string> problems;
    if (plan.models.find(spec.model) == plan.models.end()) problems.push_back("unknown model '" + spec.model + "'");
    auto layout = native::ShareLayout(plan, spec);
    if (!layout.ok()) {
      problems.push_back(layout.status().message());
      return problems;
    }
    if (spec.workload != Workload::kInference) {
      auto ds = plan.datasets.find(spec.dataset);
      if (spec.dataset.empty() || ds == plan.datasets.end())
        problems.push_back("a training workload needs a dataset");  // its format and contents: native_case_issues
      if (!spec.length || spec.length->count <= 0) problems.push_back("a training workload needs a length");
    } else if (spec.inference.max_new_tokens.empty()) {
      problems.push_back("an inference workload needs max_new_tokens values");
    }
    for (std::string& p : native::CheckDistributed(plan, spec, *layout)) problems.push_back(std::move(p));
    for (std::string& p : native::native_check_errors(plan, spec, native::NativeRole::kShare))
      problems.push_back(std::move(p));
    return problems;
  }

  std::optional<CaseResources> Resources(const Plan& plan, const CaseSpec& spec) const override {
    return native::native_case_resources(plan, spec, native::NativeRole::kShare);
  }

  CaseAdvice Advise(const Plan& plan, const CaseSpec& spec) const override {
    return native::native_advise(plan, spec, native::NativeRole::kShare);
  }

  TimeEstimate EstimateTime(const Plan& plan, const CaseSpec& spec,
                            const std::optional<HostCalibration>& host) const override {
    return native::native_case_time(plan, spec, native::NativeRole::kShare, host);
  }

  BackendOutcome Run(BackendContext& ctx) override {
    // What validate reports as an error or a "a run fails" warning is refused here, from the
    // same function (native_check.h).
    if (std::string refusal = native::native_run_refusal(ctx.plan, ctx.spec, native::NativeRole::kShare);
        !refusal.empty())
      return FailedOutcome(CaseStatus::kFailed, refusal + "; nothing was run");
    auto layout = native::ShareLayout(ctx.plan, ctx.spec);
    if (!layout.ok()) {
      BackendOutcome out;
      out.status = CaseStatus::kFailed;
      out.reason = layout.status().message();
      return out;
    }
    return native::RunDistributed(ctx, native::NativeRole::kShare, *layout, options_);
  }

 private:
  native::DistOptions options_;
};

}  // namespace

std::unique_ptr<Backend> MakeNativeShareBackend() { return MakeNativeShareBackend(native::DistOptions{}); }
std::unique_ptr<Backend> MakeNativeShareBackend(const native::DistOptions& options) {
  return std::make_unique<NativeShareBackend>(options);
}

}  // namespace protocol
