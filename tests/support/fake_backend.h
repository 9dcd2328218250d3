#ifndef PROTOCOL_TESTS_FAKE_BACKEND_H_
#define PROTOCOL_TESTS_FAKE_BACKEND_H_

// A scriptable Backend (after ninja's FakeCommandRunner). Each Run looks up a
// script by "case_id rK" (repeat K, 0-based), then by "case_id", then uses
// `default_script`, and plays it in this order:
//   hook(context) → advance the clock by seconds_before → for each step_seconds
//   value: advance the clock by it and OnStep → for each request: advance by its
//   seconds and OnRequest → status lines → advance by seconds_after → raise the
//   StopFlag when raise_stop is set → throw when throw_what is set → return
//   the outcome.
// Every call is recorded in `calls`. Factory() gives the runner a
// BackendFactory whose backends all forward to this one object.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fake_clock.h"
#include "runner/base/text.h"
#include "runner/exec/backend.h"
#include "runner/exec/runner.h"

namespace protocol {

struct FakeScript {
  CaseStatus status = CaseStatus::kOk;
  std::string reason;
  std::optional<int> exit_code;
  std::vector<Measurement> measurements;
  std::vector<std::pair<std::string, std::string>> facts;  // the outcome's facts
  std::vector<double> step_seconds;      // OnStep{step i+1, seconds, loss 1/(i+1)} each
  std::vector<RequestSample> requests;   // OnRequest each
  std::vector<std::string> status_lines; // OnStatusLine each
  double seconds_before = 0;             // clock advance before the samples
  double seconds_after = 0;              // clock advance after the samples
  StopFlag* raise_stop = nullptr;        // raised near the end, like a Ctrl-C mid-case
  std::string throw_what;                // non-empty: throw std::runtime_error(throw_what)
  std::function<void(BackendContext&)> hook;  // runs first, e.g. to inspect the store
};

struct FakeBackendCall {
  std::string case_id;
  int repeat = 0;
  std::string log_path;
  std::string output_dir;
};

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(FakeClock* clock = nullptr) : clock_(clock) {}

  FakeScript default_script;
  std::map<std::string, FakeScript> scripts;  // "2.1.1.1 r1" or "2.1.1.1"
  std::vector<std::string> problems;          // what Check() returns
  std::map<std::string, CaseAdvice> advice;   // what Advise() returns, by case id
  std::map<std::string, TimeEstimate> estimates;  // what EstimateTime() returns, by case id (else none)
  std::vector<FakeBackendCall> calls;

  // Backends for the names in `names` (default {"fake"}); nullptr for others.
  BackendFactory Factory(std::set<std::string> names = {"fake"}) {
    return [this, names](const std::string& name) -> std::unique_ptr<Backend> {
      if (!names.count(name)) return nullptr;
      return std::make_unique<Forwarder>(this);
    };
  }

  std::vector<std::string> Check(const Plan&, const CaseSpec&) const override { return problems; }
  CaseAdvice Advise(const Plan&, const CaseSpec& spec) const override {
    auto it = advice.find(spec.id);
    return it == advice.end() ? CaseAdvice{} : it->second;
  }
  TimeEstimate EstimateTime(const Plan& plan, const CaseSpec& spec,
                            const std::optional<HostCalibration>& host) const override {
    auto it = estimates.find(spec.id);
    return it == estimates.end() ? Backend::EstimateTime(plan, spec, host) : it->second;
  }

  BackendOutcome Run(BackendContext& context) override {
    const CaseSpec& spec = context.spec;
    calls.push_back({spec.id, context.repeat, context.log_path, context.output_dir});
    const FakeScript& s = ScriptFor(spec.id, context.repeat);
    if (s.hook) s.hook(context);
    Advance(s.seconds_before);
    for (size_t i = 0; i < s.step_seconds.size(); ++i) {
      Advance(s.step_seconds[i]);
      StepSample step;
      step.step = static_cast<int64_t>(i) + 1;
      step.seconds = s.step_seconds[i];
      step.loss = 1.0 / static_cast<double>(i + 1);
      context.events.OnStep(step);
    }
    for (const auto& r : s.requests) {
      Advance(r.seconds);
      context.events.OnRequest(r);
    }
    for (const auto& line : s.status_lines) context.events.OnStatusLine(line);
    Advance(s.seconds_after);
    if (s.raise_stop) s.raise_stop->Request();
    if (!s.throw_what.empty()) throw std::runtime_error(s.throw_what);
    BackendOutcome out;
    out.status = s.status;
    out.reason = s.reason;
    out.exit_code = s.exit_code;
    out.measurements = s.measurements;
    out.facts = s.facts;
    return out;
  }

 private:
  class Forwarder : public Backend {
   public:
    explicit Forwarder(FakeBackend* target) : target_(target) {}
    std::vector<std::string> Check(const Plan& plan, const CaseSpec& spec) const override {
      return target_->Check(plan, spec);
    }
    CaseAdvice Advise(const Plan& plan, const CaseSpec& spec) const override { return target_->Advise(plan, spec); }
    TimeEstimate EstimateTime(const Plan& plan, const CaseSpec& spec,
                              const std::optional<HostCalibration>& host) const override {
      return target_->EstimateTime(plan, spec, host);
    }
    BackendOutcome Run(BackendContext& context) override { return target_->Run(context); }

   private:
    FakeBackend* target_;
  };

  const FakeScript& ScriptFor(const std::string& id, int repeat) const {
    auto it = scripts.find(fmt::format("{} r{}", id, repeat));
    if (it != scripts.end()) return it->second;
    it = scripts.find(id);
    return it != scripts.end() ? it->second : default_script;
  }
  void Advance(double seconds) {
    if (clock_ && seconds != 0) clock_->Advance(seconds);
  }

  FakeClock* clock_;
};

// A case of the fake backend ("fake"): a `steps`-step pretrain of model tiny
// in stage1, the shape the runner's tests start from.
inline CaseSpec MakeCase(const std::string& id, int64_t steps = 10) {
  CaseSpec c;
  c.id = id;
  c.stage = "stage1";
  c.workload = Workload::kPretrain;
  c.backend = "fake";
  c.system = "fsdp";
  c.model = "tiny";
  c.dataset = "text";
  c.length = Length{Length::Unit::kSteps, steps};
  return c;
}

// A plan of one stage (stage1) holding `cases`, with a resolved text naming them.
inline Plan MakePlan(std::vector<CaseSpec> cases) {
  Plan plan;
  plan.name = "test";
  plan.title = "Runner test plan";
  plan.file = "<string>";
  StageSpec stage;
  stage.name = "stage1";
  std::string text = "protocol: 1\nname: test\ncases:\n";
  for (auto& c : cases) {
    text += "  - id: " + c.id + "\n";
    stage.cases.push_back(c);
  }
  plan.stages.push_back(stage);
  plan.resolved_text = text;
  return plan;
}

}  // namespace protocol

#endif  // PROTOCOL_TESTS_FAKE_BACKEND_H_
