// The share protocol's merge (outer_step.h): one outer step against numbers
// computed by hand, with the averaging across groups faked in process.
#include "native_test_support.h"

#include <ATen/CPUGeneratorImpl.h>

#include "backends/native/distributed/outer_step.h"

namespace protocol {
namespace native {
namespace {

at::Tensor Values(std::initializer_list<float> v) { return at::tensor(std::vector<float>(v)); }

// Two groups: this one's tensor and a fixed one of the other group.
OuterStep::Average AverageWith(at::Tensor other) {
  return [other](at::Tensor& t) { t.add_(other).div_(2.0); };
}

// The groups' mean is `mean`, whatever this group holds.
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
  OuterStep step(params, 1.0, 0.0);
  CHECK(step.plain());
  params[0].copy_(Values({3, 4}));  // this group trained to θ = (3, 4)
  REQUIRE(step.Merge(params, AverageWith(Values({5, 8}))).ok());
  CheckValues(params[0], {4, 6});  // (3+5)/2, (4+8)/2
}

TEST_CASE("outer step: outer lr 0.5 moves θ_global half-way to the mean") {
  std::vector<at::Tensor> params = {Values({1, 2})};  // θ_global = (1, 2)
  OuterStep step(params, 0.5, 0.0);
  CHECK_FALSE(step.plain());
  params[0].copy_(Values({3, 4}));
  REQUIRE(step.Merge(params, AverageWith(Values({5, 8}))).ok());
  // mean (4, 6); Δ = θ_global − mean = (−3, −4); θ_global = (1, 2) − 0.5·(−3, −4) = (2.5, 4)
  CheckValues(params[0], {2.5, 4});
}

TEST_CASE("outer step: Nesterov momentum over two merges") {
  std::vector<at::Tensor> params = {Values({1})};  // θ_global = 1
  OuterStep step(params, 0.5, 0.5);
  // Merge 1: mean 3, Δ = 1 − 3 = −2; v = 0.5·0 + (−2) = −2;
  //          θ_global = 1 − 0.5·(−2 + 0.5·(−2)) = 1 + 1.5 = 2.5
  REQUIRE(step.Merge(params, MeanIs(Values({3}))).ok());
  CheckValues(params[0], {2.5});
  // Merge 2: mean 2, Δ = 2.5 − 2 = 0.5; v = 0.5·(−2) + 0.5 = −0.5;
  //          θ_global = 2.5 − 0.5·(0.5 + 0.5·(−0.5)) = 2.5 − 0.125 = 2.375
  params[0].fill_(7);  // what the group trained to does not matter past the mean
  REQUIRE(step.Merge(params, MeanIs(Values({2}))).ok());
  CheckValues(params[0], {2.375});
}

TEST_CASE("outer step: a count or a shape that differs from the start is an error, not a crash") {
  std::vector<at::Tensor> start = {Values({1, 2}), Values({3})};
  OuterStep step(start, 0.7, 0.9);
  std::vector<at::Tensor> fewer = {Values({1, 2})};
  Status s = step.Merge(fewer, MeanIs(Values({0, 0})));
  CHECK(s.message() == "merge of 1 tensors, but the outer step was set up for 2");
  std::vector<at::Tensor> reshaped = {Values({1, 2, 3}), Values({3})};
  s = step.Merge(reshaped, MeanIs(Values({0, 0, 0})));
  CHECK(s.message() == "merged tensor 0 has shape [3], expected [2]");
  std::vector<at::Tensor> same = {Values({1, 2}), Values({3})};
  s = step.Merge(same, [](at::Tensor& t) { t = at::zeros({5}); });
  CHECK(s.message() == "the average of tensor 0 has shape [5], expected [2]");
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
