// The FSDP schedule (fsdp_schedule.h) on its own: four units in one process
// whose "collectives" complete at once, so that the order in which the
// schedule issues and waits for them is the whole story. The trace is the
// picture docs/distributed.md draws; the gradients equal plain autograd's.
#include "native_test_support.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/native/distributed/fsdp_schedule.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

// A unit whose parameters live flattened in `master` (its gradient the
// schedule's reduction puts in master.grad), "gathered" by a copy.
class LocalUnit : public ScheduledUnit {
 public:
  LocalUnit(FsdpSchedule& schedule, std::string name, std::vector<at::Tensor> weights, bool head, bool embedding)
      : ScheduledUnit(schedule, std::move(name)) {
    reshard_after_forward_ = !head;
    backward_reads_params_ = !embedding;
    std::vector<at::Tensor> flat;
    for (const at::Tensor& w : weights) {
      shapes.push_back(w.sizes().vec());
      flat.push_back(w.reshape({-1}));
    }
    master = at::cat(flat).detach().requires_grad_(true);
  }
  std::vector<std::vector<int64_t>> shapes;
  at::Tensor master;

  std::vector<at::Tensor> Inputs() override { return {master}; }

 protected:
  InFlightGather IssueGather() override {
    InFlightGather g;
    g.buffer = master.detach().clone();
    return g;
  }
  UnitTensors Assemble(const at::Tensor& buffer) override {
    UnitTensors t;
    t.buffer = buffer;
    int64_t offset = 0;
    for (const auto& shape : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      at::Tensor p = buffer.narrow(0, offset, n).view(shape).detach();
      if (at::GradMode::is_enabled()) p.requires_grad_(true);
      t.params.push_back(p);
      offset += n;
    }
    return t;
  }
  InFlightGather IssueRefill(UnitTensors& resharded) override {
    c10::NoGradGuard no_grad;
    InFlightGather g;
    g.buffer = compat::StorageRefill(resharded.buffer);
    g.buffer.copy_(master.detach());
    return g;
  }
  void ReleaseStorage(UnitTensors& t) override { compat::StorageFree(t.buffer); }
  GradientReduction Reduction(UnitTensors& t) override {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& p : t.params)
      flat.push_back(p.grad().defined() ? p.grad().reshape({-1}) : at::zeros({p.numel()}));
    at::Tensor g = at::cat(flat);
    GradientReduction r;
    r.stages.push_back({"reduce-scatter", [] { return compat::PendingCollective(); },
                        [this, g] {
                          if (master.grad().defined()) master.mutable_grad().add_(g);
                          else master.mutable_grad() = g;
                        }});
    return r;
  }
};

at::Tensor Linear(const at::Tensor& h, const std::vector<at::Tensor>& p) { return at::tanh(at::linear(h, p[0])); }

struct Model {
  at::Tensor embedding, w0, w1, head;
};

Model MakeModel() {
  at::manual_seed(11);
  return {at::randn({5, 4}), at::randn({4, 4}), at::randn({4, 4}), at::randn({3, 4})};
}

// Plain autograd: the loss of tokens through embedding, two layers and the head.
at::Tensor PlainLoss(const Model& m, const at::Tensor& tokens) {
  at::Tensor x = at::embedding(m.embedding, tokens);
  x = Linear(x, {m.w0});
  x = Linear(x, {m.w1});
  return at::linear(x, m.head).pow(2).sum();
}

struct Run {
  std::vector<std::string> trace;
  std::vector<at::Tensor> grads;
};

// The model as four scheduled units: the embedding (its backward reads no
// weight), layer 0 recomputed in backward, layer 1 keeping its graph, the head.
Run Scheduled(const Model& m, const at::Tensor& tokens, bool prefetch) {
  FsdpSchedule schedule(prefetch);
  schedule.set_trace(true);
  auto embedding = std::make_shared<LocalUnit>(schedule, "embedding", std::vector<at::Tensor>{m.embedding}, false, true);
  auto layer0 = std::make_shared<LocalUnit>(schedule, "layer 0", std::vector<at::Tensor>{m.w0}, false, false);
  auto layer1 = std::make_shared<LocalUnit>(schedule, "layer 1", std::vector<at::Tensor>{m.w1}, false, false);
  auto head = std::make_shared<LocalUnit>(schedule, "head", std::vector<at::Tensor>{m.head}, true, false);
  for (auto* u : {embedding.get(), layer0.get(), layer1.get(), head.get()}) schedule.Add(*u);
  schedule.BeginForward();
  auto lookup = [](const at::Tensor& t, const std::vector<at::Tensor>& p) { return at::embedding(p[0], t); };
  at::Tensor x = unit_apply(lookup, tokens, embedding, UnitMode::kKeepGraph);
  x = unit_apply(Linear, x, layer0, UnitMode::kRecompute);
  x = unit_apply(Linear, x, layer1, UnitMode::kKeepGraph);
  auto project = [](const at::Tensor& h, const std::vector<at::Tensor>& p) { return at::linear(h, p[0]); };
  x = unit_apply(project, x, head, UnitMode::kKeepGraph);
  x.pow(2).sum().backward();
  return {schedule.trace(), {embedding->master.grad(), layer0->master.grad(), layer1->master.grad(), head->master.grad()}};
}

}  // namespace

TEST_CASE("fsdp schedule: with prefetch the next unit's all-gather is issued before the current unit computes, in forward and backward; a reduction is waited while the next unit computes") {
  const Model m = MakeModel();
  const at::Tensor tokens = at::tensor({0, 3, 3, 1}, at::kLong);
  const Run run = Scheduled(m, tokens, /*prefetch=*/true);
  const std::vector<std::string> want = {
      "forward embedding: all-gather issued",
      "forward embedding: all-gather waited",
      "forward layer 0: all-gather issued (prefetch)",
      "forward embedding: compute",
      "forward embedding: resharded",
      "forward layer 0: all-gather waited",
      "forward layer 1: all-gather issued (prefetch)",
      "forward layer 0: compute",
      "forward layer 1: all-gather waited",
      "forward head: all-gather issued (prefetch)",
      "forward layer 1: compute",
      "forward layer 1: resharded",
      "forward head: all-gather waited",
      "forward head: compute",
      "forward head: kept gathered for the backward",
      "backward layer 1: refill all-gather issued (prefetch)",
      "backward head: compute",
      "backward head: reduce-scatter issued",
      "backward layer 1: refill all-gather waited",
      "backward layer 0: all-gather issued (prefetch)",
      "backward layer 1: compute",
      "backward head: reduce-scatter waited",
      "backward layer 1: reduce-scatter issued",
      "backward layer 0: all-gather waited",
      "backward layer 0: compute",
      "backward layer 1: reduce-scatter waited",
      "backward layer 0: reduce-scatter issued",
      "backward embedding: compute",
      "backward layer 0: reduce-scatter waited",
      "backward embedding: reduce-scatter issued",
      "backward embedding: reduce-scatter waited",
      "backward embedding: end of backward: every reduction waited",
  };
  CHECK(Join(run.trace, "\n") == Join(want, "\n"));
}

TEST_CASE("fsdp schedule: without prefetch every collective is waited as soon as it is issued") {
  const Model m = MakeModel();
  const Run run = Scheduled(m, at::tensor({0, 3, 3, 1}, at::kLong), /*prefetch=*/false);
  const std::vector<std::string> want = {
      "forward embedding: all-gather issued",
      "forward embedding: all-gather waited",
      "forward embedding: compute",
      "forward embedding: resharded",
      "forward layer 0: all-gather issued",
      "forward layer 0: all-gather waited",
      "forward layer 0: compute",
      "forward layer 1: all-gather issued",
      "forward layer 1: all-gather waited",
      "forward layer 1: compute",
      "forward layer 1: resharded",
      "forward head: all-gather issued",
      "forward head: all-gather waited",
      "forward head: compute",
      "forward head: kept gathered for the backward",
      "backward head: compute",
      "backward head: reduce-scatter issued",
      "backward head: reduce-scatter waited",
      "backward layer 1: refill all-gather issued",
      "backward layer 1: refill all-gather waited",
      "backward layer 1: compute",
      "backward layer 1: reduce-scatter issued",
      "backward layer 1: reduce-scatter waited",
      "backward layer 0: all-gather issued",
      "backward layer 0: all-gather waited",
      "backward layer 0: compute",
      "backward layer 0: reduce-scatter issued",
      "backward layer 0: reduce-scatter waited",
      "backward embedding: compute",
      "backward embedding: reduce-scatter issued",
      "backward embedding: reduce-scatter waited",
  };
  CHECK(Join(run.trace, "\n") == Join(want, "\n"));
}

TEST_CASE("fsdp schedule: both orders give plain autograd's gradients (the embedding's without gathering it again)") {
  const Model m = MakeModel();
  const at::Tensor tokens = at::tensor({0, 3, 3, 1}, at::kLong);
  Model plain{m.embedding.clone().requires_grad_(true), m.w0.clone().requires_grad_(true),
              m.w1.clone().requires_grad_(true), m.head.clone().requires_grad_(true)};
  PlainLoss(plain, tokens).backward();
  const std::vector<at::Tensor> want = {plain.embedding.grad(), plain.w0.grad(), plain.w1.grad(), plain.head.grad()};
  for (bool prefetch : {true, false}) {
    CAPTURE(prefetch);
    const Run run = Scheduled(m, tokens, prefetch);
    for (size_t i = 0; i < want.size(); ++i) {
      REQUIRE(run.grads[i].defined());
      CHECK(at::allclose(run.grads[i], want[i].reshape({-1}), 1e-6, 1e-6));
    }
  }
}

TEST_CASE("fsdp schedule: a forward that never reached its backward leaves nothing behind for the next") {
  const Model m = MakeModel();
  FsdpSchedule schedule(/*prefetch=*/true);
  auto a = std::make_shared<LocalUnit>(schedule, "a", std::vector<at::Tensor>{m.w0}, false, false);
  auto b = std::make_shared<LocalUnit>(schedule, "b", std::vector<at::Tensor>{m.w1}, true, false);
  schedule.Add(*a);
  schedule.Add(*b);
  const at::Tensor x = at::randn({2, 4});
  {
    schedule.BeginForward();
    at::Tensor y = unit_apply(Linear, x, a, UnitMode::kKeepGraph);  // b's gather is now in flight
  }  // dropped: no backward
  schedule.set_trace(true);
  schedule.BeginForward();
  at::Tensor y = unit_apply(Linear, unit_apply(Linear, x, a, UnitMode::kKeepGraph), b, UnitMode::kKeepGraph);
  y.sum().backward();
  // The second forward gathered b anew (the stale prefetch was dropped) and finished.
  const auto& trace = schedule.trace();
  CHECK(std::find(trace.begin(), trace.end(), "forward b: all-gather issued (prefetch)") != trace.end());
  CHECK(schedule.trace().back() == "backward a: end of backward: every reduction waited");
}

}  // namespace native
}  // namespace protocol
