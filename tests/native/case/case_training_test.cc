// The one training loop (case_training.h): the one-process backend and a
// distributed case of one rank (a `protocol worker` process over a real Gloo
// group of one) run the same loop, so a seeded case gives the same losses,
// held-out curve and figures on both, bit for bit.
#include "dist_test_support.h"

#include <map>

#include "backends/native/fsdp_backend.h"
#include "runner/store/metric_table.h"

namespace protocol {
namespace {
using namespace dist_test;  // NOLINT: the distributed tests' harness

// Figures whose value is a time, a memory size or a process's exit: measured
// again on each run, so only their name, unit and method are compared (and
// the method not where it holds the bytes measured).
bool MeasuredAgain(const std::string& name) {
  for (const char* part : {"seconds", "per_second", "peak_", "exit_code", "tgs", "tflops", "mfu"})
    if (name.find(part) != std::string::npos) return true;
  return false;
}
bool MethodHoldsBytes(const std::string& name) { return name.rfind("peak_host_rss_above_baseline", 0) == 0; }

std::map<std::string, const Measurement*> ByName(const BackendOutcome& out) {
  std::map<std::string, const Measurement*> by;
  for (const Measurement& m : out.measurements) by[m.name] = &m;
  return by;
}

}  // namespace

TEST_CASE("one loop: the one process and one rank process train to the same losses, curve and figures, bit for bit") {
  MiniModelFixture fx;
  Plan plan = fx.MakePlan();
  CaseSpec spec = MiniTraining("fsdp", 5);
  spec.warmup_steps = 1;
  spec.training.eval_every = 2;
  spec.training.grad_accum = 2;  // two micro-batches: the loss denominator is the batch's
  spec.training.threads = 1;     // the same arithmetic in both processes

  Harness one;
  auto backend = MakeNativeFsdpBackend(Options());
  const BackendOutcome o1 = one.Run(*backend, plan, spec, (fx.root / "one").string(), "");
  REQUIRE(o1.status == CaseStatus::kOk);

  // A layout of one rank, launched as a worker process like any distributed case.
  native::DistLayout layout;
  layout.rank_nodes = {"node0"};
  layout.node_hosts = {{"node0", "localhost"}};
  Harness rank;
  BackendContext ctx{plan, spec, 0, "", (fx.root / "rank").string(), rank.stop, *rank.processes, SystemClock(),
                     rank.events};
  const BackendOutcome o2 = native::RunDistributed(ctx, native::NativeRole::kFsdp, layout, Options());
  INFO(o2.reason);
  REQUIRE(o2.status == CaseStatus::kOk);
  CHECK(FactOf(o1, fact::kRanks) == "1");
  CHECK(FactOf(o2, fact::kRanks) == "1");

  // Every step's loss.
  REQUIRE(one.events.steps.size() == 5);
  REQUIRE(rank.events.steps.size() == 5);
  for (size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(one.events.steps[i].step == rank.events.steps[i].step);
    CHECK(one.events.steps[i].tokens == rank.events.steps[i].tokens);
    CHECK(*one.events.steps[i].loss == *rank.events.steps[i].loss);  // bit for bit
  }
  // The held-out curve: before the first step, every 2 steps, and the last.
  REQUIRE(o1.eval_curve.size() == 4);
  REQUIRE(o2.eval_curve.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(o1.eval_curve[i].step == o2.eval_curve[i].step);
    CHECK(o1.eval_curve[i].tokens == o2.eval_curve[i].tokens);
    CHECK(o1.eval_curve[i].loss == o2.eval_curve[i].loss);
  }
  CHECK(o1.eval_curve[3].loss < o1.eval_curve[0].loss);  // it trained

  // The same figures: names, units and method texts (written once); values
  // equal bit for bit but for those measured again on each run.
  auto f1 = ByName(o1), f2 = ByName(o2);
  f2.erase(fmt::format("{}_rank0", metric::kExitCode));  // the rank process's own
  std::vector<std::string> n1, n2;
  for (const auto& [name, m] : f1) n1.push_back(name);
  for (const auto& [name, m] : f2) n2.push_back(name);
  CHECK(n1 == n2);
  for (const auto& [name, m] : f1) {
    CAPTURE(name);
    auto it = f2.find(name);
    if (it == f2.end()) continue;
    const Measurement& r = *it->second;
    CHECK(m->unit == r.unit);
    // A metric the table knows has its unit there (metric_table.h), a rank's own figure too.
    const size_t rank_suffix = name.rfind("_rank");
    if (const MetricRow* row = FindMetric(rank_suffix == std::string::npos ? name : name.substr(0, rank_suffix)))
      CHECK(m->unit == row->unit);
    CHECK(m->how == r.how);
    if (!MethodHoldsBytes(name)) CHECK(m->method == r.method);
    if (!MeasuredAgain(name)) {
      REQUIRE(m->value);
      REQUIRE(r.value);
      CHECK(*m->value == *r.value);
    }
  }
  for (const char* expected : {metric::kFinalLoss, metric::kEvalLoss, metric::kHostReadsPerStep,
                               metric::kTrainTokensPerSecond, metric::kPeakHostRss}) {
    CAPTURE(expected);
    CHECK(f1.count(expected) == 1);
  }
  CHECK(*f1.at(metric::kFinalLoss)->value == *one.events.steps.back().loss);
  CHECK(*f1.at(metric::kEvalLoss)->value == o1.eval_curve.back().loss);
  CHECK(*f1.at(metric::kHostReadsPerStep)->value == 1);  // the loss and the norm, read together

  // Both saved the same model.
  auto a = ReadFileText((fx.root / "one" / "model.safetensors").string());
  auto b = ReadFileText((fx.root / "rank" / "model.safetensors").string());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
}

}  // namespace protocol
