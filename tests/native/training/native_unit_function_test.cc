// unit_apply (unit_function.h): a unit as one autograd node — recomputed in
// backward, or keeping its graph while its gathered parameters' storage is
// freed and refilled — gives exactly the gradients of plain autograd.
#include "native_test_support.h"

#include <c10/core/GradMode.h>

#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/unit_function.h"

namespace protocol {
namespace native {
namespace {

// y = tanh(x·W1ᵀ)·W2ᵀ: a unit with two parameters and saved activations.
at::Tensor TwoLayer(const at::Tensor& x, const std::vector<at::Tensor>& p) {
  return at::linear(at::tanh(at::linear(x, p[0])), p[1]);
}

// An FSDP-like unit in one process: the parameters live flattened in `master`
// (a leaf, the node's input); Gather copies them into a fresh buffer; Free and
// Refill release and refill that buffer's storage; the gradient of `master`
// is the flattened gradient of the gathered parameters.
struct FlatParameters : UnitParameters {
  at::Tensor master;
  std::vector<std::vector<int64_t>> shapes;
  int gathers = 0, frees = 0, refills = 0;
  int64_t bytes_after_free = -1;

  std::vector<at::Tensor> Inputs() override { return {master}; }
  UnitTensors Gather(UnitPass) override {
    ++gathers;
    const bool trainable = at::GradMode::is_enabled();
    UnitTensors t;
    t.buffer = master.detach().clone();
    int64_t offset = 0;
    for (const auto& shape : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      at::Tensor p = t.buffer.narrow(0, offset, n).view(shape).detach();
      if (trainable) p.requires_grad_(true);
      t.params.push_back(p);
      offset += n;
    }
    return t;
  }
  void Free(UnitTensors& t) override {
    ++frees;
    compat::StorageFree(t.buffer);
    bytes_after_free = compat::StorageBytes(t.buffer);
  }
  void Refill(UnitTensors& t) override {
    ++refills;
    c10::NoGradGuard no_grad;
    compat::StorageRefill(t.buffer).copy_(master.detach());  // through a fresh alias
  }
  std::vector<at::Tensor> ReduceGradients(UnitTensors& t) override {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& p : t.params) flat.push_back(p.grad().reshape({-1}));
    t = {};
    return {at::cat(flat)};
  }
};

struct Reference {
  at::Tensor x, w1, w2, g_out;
};

Reference MakeReference() {
  at::manual_seed(5);
  return {at::randn({3, 4}), at::randn({6, 4}), at::randn({2, 6}), at::randn({3, 2})};
}

}  // namespace

TEST_CASE("native unit function: kRecompute computes twice and equals plain autograd; leaves collect their .grad") {
  Reference r = MakeReference();
  at::Tensor x = r.x.clone().requires_grad_(true), w1 = r.w1.clone().requires_grad_(true),
             w2 = r.w2.clone().requires_grad_(true);
  (TwoLayer(x, {w1, w2}) * r.g_out).sum().backward();

  at::Tensor x2 = r.x.clone().requires_grad_(true), v1 = r.w1.clone().requires_grad_(true),
             v2 = r.w2.clone().requires_grad_(true);
  int calls = 0;
  auto compute = [&calls](const at::Tensor& h, const std::vector<at::Tensor>& p) {
    ++calls;
    return TwoLayer(h, p);
  };
  at::Tensor y = unit_apply(compute, x2, std::make_shared<LocalParameters>(std::vector<at::Tensor>{v1, v2}),
                            UnitMode::kRecompute);
  CHECK(calls == 1);
  CHECK(y.requires_grad());
  (y * r.g_out).sum().backward();
  CHECK(calls == 2);  // the forward again, in backward
  CHECK(at::allclose(x2.grad(), x.grad(), 0, 1e-6));
  CHECK(at::allclose(v1.grad(), w1.grad(), 0, 1e-6));
  CHECK(at::allclose(v2.grad(), w2.grad(), 0, 1e-6));
}

TEST_CASE("native unit function: kKeepGraph frees the gathered storage after forward, refills it, and equals plain autograd") {
  Reference r = MakeReference();
  at::Tensor x = r.x.clone().requires_grad_(true), w1 = r.w1.clone().requires_grad_(true),
             w2 = r.w2.clone().requires_grad_(true);
  (TwoLayer(x, {w1, w2}) * r.g_out).sum().backward();

  auto params = std::make_shared<FlatParameters>();
  params->master = at::cat({r.w1.reshape({-1}), r.w2.reshape({-1})}).requires_grad_(true);
  params->shapes = {{6, 4}, {2, 6}};
  at::Tensor x2 = r.x.clone().requires_grad_(true);
  int calls = 0;
  auto compute = [&calls](const at::Tensor& h, const std::vector<at::Tensor>& p) {
    ++calls;
    return TwoLayer(h, p);
  };
  at::Tensor y = unit_apply(compute, x2, params, UnitMode::kKeepGraph);
  CHECK(params->gathers == 1);
  CHECK(params->frees == 1);
  CHECK(params->bytes_after_free == 0);  // the parameters' memory is gone while the graph waits
  (y * r.g_out).sum().backward();        // no version-counter error: the refill wrote through an alias
  CHECK(calls == 1);                     // the kept graph, not a recomputation
  CHECK(params->refills == 1);
  CHECK(params->gathers == 1);
  CHECK(at::allclose(x2.grad(), x.grad(), 0, 1e-6));
  at::Tensor expected = at::cat({w1.grad().reshape({-1}), w2.grad().reshape({-1})});
  REQUIRE(params->master.grad().defined());
  CHECK(at::allclose(params->master.grad(), expected, 0, 1e-6));

  // A second micro-batch accumulates into the same gradient (as FSDP's slice does).
  at::Tensor y2 = unit_apply(compute, r.x.clone().requires_grad_(true), params, UnitMode::kRecompute);
  (y2 * r.g_out).sum().backward();
  CHECK(params->gathers == 3);  // the recomputing unit gathers in forward and again in backward
  CHECK(at::allclose(params->master.grad(), 2 * expected, 0, 1e-6));
}

TEST_CASE("native unit function: without grad mode a unit only gathers and computes; tokens in get a backward too") {
  Reference r = MakeReference();
  auto params = std::make_shared<FlatParameters>();
  params->master = at::cat({r.w1.reshape({-1}), r.w2.reshape({-1})}).requires_grad_(true);
  params->shapes = {{6, 4}, {2, 6}};
  {
    c10::NoGradGuard no_grad;
    at::Tensor y = unit_apply(TwoLayer, r.x, params, UnitMode::kKeepGraph);
    CHECK_FALSE(y.requires_grad());
    CHECK(params->gathers == 1);
    CHECK(params->frees == 0);
    CHECK(at::allclose(y, TwoLayer(r.x, {r.w1, r.w2}), 0, 1e-6));
  }
  // An integer input (the embedding's tokens): no dL/dx, but the parameters' gradient arrives.
  auto embed = std::make_shared<FlatParameters>();
  embed->master = r.w1.reshape({-1}).clone().requires_grad_(true);
  embed->shapes = {{6, 4}};
  at::Tensor tokens = at::tensor({0, 5, 5}, at::kLong);
  auto lookup = [](const at::Tensor& t, const std::vector<at::Tensor>& p) { return at::embedding(p[0], t); };
  at::Tensor e = unit_apply(lookup, tokens, embed, UnitMode::kKeepGraph);
  e.sum().backward();
  REQUIRE(embed->master.grad().defined());
  at::Tensor rows = embed->master.grad().view({6, 4}).sum(1);  // 4 per lookup: one row once, another twice
  CHECK(rows[0].item<double>() == 4);
  CHECK(rows[5].item<double>() == 8);
  CHECK(rows[1].item<double>() == 0);
}

}  // namespace native
}  // namespace protocol
