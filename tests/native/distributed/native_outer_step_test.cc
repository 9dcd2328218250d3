// The share protocol's merge (outer_step.h): one outer step against numbers
// computed by hand, with the averaging across groups faked in process (the
// fakes average what a group sends: its parameters for plain float32
// averaging, else its pseudo-gradient θ_global − θ_g).
#include "native_test_support.h"

#include <ATen/CPUGeneratorImpl.h>

#include "backends/native/distributed/outer_step.h"

namespace protocol {
namespace native {
namespace {

at::Tensor Values(std::initializer_list<float> v) { return at::tensor(std::vector<float>(v)); }

OuterStepOptions Outer(double lr, double momentum, at::ScalarType merge = at::kFloat) {
  OuterStepOptions o;
  o.lr = lr;
  o.momentum = momentum;
  o.merge_dtype = merge;
  return o;
}

// Two groups: what this one sends and what the other sent.
OuterStep::Average AverageWith(at::Tensor other) {
  return [other](at::Tensor& t) { t.add_(other).div_(2.0); };
}

// The groups' mean of what they sent is `mean`, whatever this group sent.
OuterStep::Average MeanIs(at::Tensor mean) {
  return [mean](at::Tensor& t) { t.copy_(mean); };
}

void CheckValues(const at::Tensor& t, std::initializer_list<float> expected) {
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  size_t i = 0;
  for (float e : expected) CHECK(t.view({-1})[static_cast<int64_t>(i++)].item<float>() == doctest::Approx(e));
}

}  // namespace

TEST_CASE("outer step: η = 1, μ = 0 is plain averaging of the groups") {
  std::vector<at::Tensor> params = {Values({1, 2})};
  OuterStep step(params, Outer(1.0, 0.0));
  CHECK(step.plain());
  CHECK_FALSE(step.sends_pseudo_gradient());  // θ itself, in float32: exact, no state
  CHECK(step.state_bytes() == 0);
  params[0].copy_(Values({3, 4}));  // this group trained to θ = (3, 4)
  REQUIRE(step.Merge(params, AverageWith(Values({5, 8}))).ok());  // the other group's θ
  CheckValues(params[0], {4, 6});  // (3+5)/2, (4+8)/2
}

TEST_CASE("outer step: outer lr 0.5 moves θ_global half-way to the mean") {
  std::vector<at::Tensor> params = {Values({1, 2})};  // θ_global = (1, 2)
  OuterStep step(params, Outer(0.5, 0.0));
  CHECK_FALSE(step.plain());
  CHECK(step.sends_pseudo_gradient());
  CHECK(step.state_bytes() == 4 * 2);  // θ_global only
  params[0].copy_(Values({3, 4}));
  // The other group trained to (5, 8): it sends (1, 2) − (5, 8) = (−4, −6); this one (−2, −2).
  REQUIRE(step.Merge(params, AverageWith(Values({-4, -6}))).ok());
  // Δ = (−3, −4) = θ_global − mean θ; θ_global = (1, 2) − 0.5·(−3, −4) = (2.5, 4)
  CheckValues(params[0], {2.5, 4});
}

TEST_CASE("outer step: Nesterov momentum over two merges") {
  std::vector<at::Tensor> params = {Values({1})};  // θ_global = 1
  OuterStep step(params, Outer(0.5, 0.5));
  CHECK(step.state_bytes() == 4 + 4);  // θ_global and v
  // Merge 1: mean θ 3, Δ = 1 − 3 = −2; v = 0.5·0 + (−2) = −2;
  //          θ_global = 1 − 0.5·(−2 + 0.5·(−2)) = 1 + 1.5 = 2.5
  REQUIRE(step.Merge(params, MeanIs(Values({-2}))).ok());
  CheckValues(params[0], {2.5});
  // Merge 2: mean θ 2, Δ = 2.5 − 2 = 0.5; v = 0.5·(−2) + 0.5 = −0.5;
  //          θ_global = 2.5 − 0.5·(0.5 + 0.5·(−0.5)) = 2.5 − 0.125 = 2.375
  params[0].fill_(7);  // what the group trained to does not matter past the mean
  REQUIRE(step.Merge(params, MeanIs(Values({0.5}))).ok());
  CheckValues(params[0], {2.375});
}

TEST_CASE("outer step: a count or a shape that differs from the start is an error, not a crash") {
  std::vector<at::Tensor> start = {Values({1, 2}), Values({3})};
  OuterStep step(start, Outer(0.7, 0.9));
  std::vector<at::Tensor> fewer = {Values({1, 2})};
  Status s = step.Merge(fewer, MeanIs(Values({0, 0})));
  CHECK(s.message() == "merge of 1 tensors, but the outer step was set up for 2");
  std::vector<at::Tensor> reshaped = {Values({1, 2, 3}), Values({3})};
  s = step.Merge(reshaped, MeanIs(Values({0, 0, 0})));
  CHECK(s.message() == "merged tensor 0 has shape [3], expected [2]");
  std::vector<at::Tensor> same = {Values({1, 2}), Values({3})};
  s = step.Merge(same, [](at::Tensor& t) { t = at::zeros({5}); });
  CHECK(s.message() == "the groups' mean has 5 elements, expected 3");
}

// G groups merged in process: each group's OuterStep sends, the mean of what
// they sent is received by each. Returns every group's tensors after the merge.
static std::vector<std::vector<at::Tensor>> MergeGroups(std::vector<OuterStep>& steps,
                                                 std::vector<std::vector<at::Tensor>>& groups) {
  std::vector<at::Tensor> sent;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto flat = steps[g].Send(groups[g]);
    REQUIRE(flat.ok());
    sent.push_back(*flat);
  }
  at::Tensor mean = at::stack(sent).to(at::kFloat).mean(0).to(sent[0].scalar_type());
  for (size_t g = 0; g < groups.size(); ++g) REQUIRE(steps[g].Receive(groups[g], mean).ok());
  return groups;
}

TEST_CASE("outer step: the flat pseudo-gradient merge equals the outer step on the mean of the groups' θ") {
  // DiLoCo's settings, three groups, three tensors of several shapes, two merges;
  // the reference applies outer_step.h's formulas tensor by tensor to the mean θ.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const std::vector<std::vector<int64_t>> shapes = {{4, 3}, {5}, {2, 2, 2}};
  std::vector<at::Tensor> start;
  for (const auto& shape : shapes) start.push_back(at::randn(shape, gen));
  const double lr = 0.7, mu = 0.9;
  for (bool on_host : {true, false}) {
    CAPTURE(on_host);
    OuterStepOptions o = Outer(lr, mu);
    o.state_on_host = on_host;
    std::vector<OuterStep> steps;
    std::vector<std::vector<at::Tensor>> groups;
    for (int g = 0; g < 3; ++g) {
      steps.emplace_back(start, o);
      std::vector<at::Tensor> mine;
      for (const at::Tensor& t : start) mine.push_back(t.clone());
      groups.push_back(mine);
    }
    std::vector<at::Tensor> global, velocity;
    for (const at::Tensor& t : start) {
      global.push_back(t.clone());
      velocity.push_back(at::zeros_like(t));
    }
    for (int merge = 0; merge < 2; ++merge) {
      for (auto& group : groups)  // each group trains somewhere else
        for (at::Tensor& t : group) t.add_(at::randn(t.sizes(), gen) * 0.1);
      for (size_t i = 0; i < shapes.size(); ++i) {
        const at::Tensor mean = (groups[0][i] + groups[1][i] + groups[2][i]) / 3.0;
        const at::Tensor delta = global[i] - mean;
        velocity[i].mul_(mu).add_(delta);
        global[i].sub_(delta + velocity[i] * mu, lr);
      }
      MergeGroups(steps, groups);
      for (auto& group : groups)
        for (size_t i = 0; i < shapes.size(); ++i) CHECK(at::allclose(group[i], global[i], 1e-5, 1e-6));
    }
    CHECK(steps[0].state_bytes() == 8 * (12 + 5 + 8));
  }
}

TEST_CASE("outer step: a bfloat16 merge sends one flat pseudo-gradient and rounds only the update") {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(9);
  std::vector<at::Tensor> start = {at::randn({6, 5}, gen) * 10, at::randn({7}, gen) * 10};
  OuterStep a(start, Outer(1.0, 0.0, at::kBFloat16)), b(start, Outer(1.0, 0.0, at::kBFloat16));
  CHECK(a.sends_pseudo_gradient());  // plain, but not float32: θ_global is kept
  std::vector<std::vector<at::Tensor>> groups(2);
  for (int g = 0; g < 2; ++g)
    for (const at::Tensor& t : start) groups[static_cast<size_t>(g)].push_back(t + at::randn(t.sizes(), gen) * 1e-2);
  auto flat = a.Send(groups[0]);
  REQUIRE(flat.ok());
  CHECK((flat->scalar_type() == at::kBFloat16));
  CHECK(flat->dim() == 1);
  CHECK(flat->numel() == 30 + 7);  // every tensor in one buffer
  const std::vector<at::Tensor> mean = {(groups[0][0] + groups[1][0]) / 2, (groups[0][1] + groups[1][1]) / 2};
  std::vector<OuterStep> steps;
  steps.push_back(std::move(a));
  steps.push_back(std::move(b));
  MergeGroups(steps, groups);
  for (size_t i = 0; i < mean.size(); ++i) {
    // Weights of magnitude ~10 moved by ~1e-2: rounding the weights to bf16
    // would be off by up to 2^-8·10 ≈ 0.04; rounding the update, by ~1e-4.
    CHECK(at::allclose(groups[0][i], mean[i], 0, 2e-4));
    CHECK(at::equal(groups[0][i], groups[1][i]));
  }
}

TEST_CASE("outer step: stacking the groups' adapters gives rank G·r") {
  ModelConfig c;
  c.name = "test";
  c.dim = 16;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.hidden_dim = 32;
  c.vocab_size = 20;
  c.max_seq_len = 16;
  LoraAdapters mine = lora_create(c, 2, 4, 1), other = lora_create(c, 2, 4, 2);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (LoraAdapters* a : {&mine, &other})  // trained B stood in for by random values
    for (auto& layer : a->layers)
      for (LoraAdapter& ad : layer) ad.b.normal_(0.0, 0.05, gen);
  at::Tensor other_flat = lora_flatten(other);
  auto stacked = StackGroupAdapters(mine, 2, [&](at::Tensor& all, const at::Tensor& flat) {
    all.narrow(0, 0, flat.numel()).copy_(flat);
    all.narrow(0, flat.numel(), flat.numel()).copy_(other_flat);
  });
  REQUIRE(stacked.ok());
  CHECK(stacked->rank == 4);
  // ΔW of the stack = mean of the groups' ΔW.
  at::Tensor expected = (lora_delta(mine, 0, Projection::kQ) + lora_delta(other, 0, Projection::kQ)) / 2.0;
  CHECK(at::allclose(lora_delta(*stacked, 0, Projection::kQ), expected, 1e-5, 1e-6));
}

}  // namespace native
}  // namespace protocol
