// The compat adapter's attention over grouped key/value heads: equal to
// attention written out in float64 with each query head reading its key/value
// head (h / rep, looked up by index here, not by repeat_interleave), in the
// forward and in the gradients, causal, masked and unmasked, whether this
// libtorch takes the heads grouped or the adapter repeats them.
#include "native_test_support.h"

#include <doctest/doctest.h>

#include <limits>
#include <optional>

#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

// softmax(q·kᵀ/√HD + mask)·v in float64, query head h on key/value head h / rep.
at::Tensor ReferenceAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal,
                              const std::optional<at::Tensor>& mask) {
  const int64_t NH = q.size(1), NKV = k.size(1), rep = NH / NKV, T = q.size(2), S = k.size(2);
  at::Tensor heads = at::arange(NH, at::kLong).div(rep, "floor");
  at::Tensor kd = k.to(at::kDouble).index_select(1, heads), vd = v.to(at::kDouble).index_select(1, heads);
  at::Tensor scores = at::matmul(q.to(at::kDouble), kd.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
  at::Tensor allowed = is_causal ? at::ones({T, S}, at::kBool).tril() : mask ? *mask : at::ones({T, S}, at::kBool);
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), vd);
}

struct Inputs {
  at::Tensor q, k, v;
};

Inputs RandomInputs(int64_t nh, int64_t nkv, int64_t t, int64_t s, uint64_t seed) {
  at::manual_seed(seed);
  Inputs in;
  in.q = at::randn({2, nh, t, 16}, at::kFloat).requires_grad_(true);
  in.k = at::randn({2, nkv, s, 16}, at::kFloat).requires_grad_(true);
  in.v = at::randn({2, nkv, s, 16}, at::kFloat).requires_grad_(true);
  return in;
}

double MaxAbs(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST_CASE("compat attention: grouped key/value heads equal the float64 reference, forward and gradients") {
  struct Case {
    const char* name;
    int64_t nh, nkv, t, s;
    bool causal;
    bool masked;
  };
  const Case cases[] = {
      {"causal, 8 query heads on 2", 8, 2, 12, 12, true, false},
      {"causal, 6 on 6 (no groups)", 6, 6, 12, 12, false, false},
      {"a chunk after a cached prefix (mask), 8 on 4", 8, 4, 5, 13, false, true},
      {"unmasked, 4 on 1", 4, 1, 7, 9, false, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Inputs in = RandomInputs(c.nh, c.nkv, c.t, c.s, 11);
    std::optional<at::Tensor> mask;
    if (c.masked) {
      at::Tensor qpos = at::arange(c.s - c.t, c.s, at::kLong).unsqueeze(1);
      mask = at::arange(0, c.s, at::kLong).unsqueeze(0).le(qpos);
    }
    at::Tensor got = compat::ScaledDotProductAttention(in.q, in.k, in.v, c.causal, mask);
    REQUIRE(got.sizes() == in.q.sizes());
    at::Tensor ref = ReferenceAttention(in.q, in.k, in.v, c.causal, mask);
    CHECK(MaxAbs(got, ref) < 1e-5);

    // Gradients: each key/value head sums over the query heads that read it.
    at::Tensor weights = at::randn(got.sizes(), at::kFloat);
    (got * weights).sum().backward();
    const at::Tensor grads[3] = {in.q.grad(), in.k.grad(), in.v.grad()};
    Inputs dq{in.q.detach().to(at::kDouble).requires_grad_(true), in.k.detach().to(at::kDouble).requires_grad_(true),
              in.v.detach().to(at::kDouble).requires_grad_(true)};
    at::Tensor ref64 = ReferenceAttention(dq.q, dq.k, dq.v, c.causal, mask);
    (ref64 * weights.to(at::kDouble)).sum().backward();
    const at::Tensor ref_grads[3] = {dq.q.grad(), dq.k.grad(), dq.v.grad()};
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(MaxAbs(grads[i], ref_grads[i]) < 1e-4);
    }
  }
}

TEST_CASE("compat attention: grouped heads read nothing back to the host, forward or backward") {
  // libtorch 1.13's repeat_interleave read its repeats' sum back twice a call; the heads are
  // now repeated by a copy of a broadcast view.
  for (const bool causal : {true, false}) {
    CAPTURE(causal);
    Inputs in = RandomInputs(8, 2, 6, 6, 5);
    at::Tensor out;
    CHECK(testing::ScalarReadsIn([&] { out = compat::ScaledDotProductAttention(in.q, in.k, in.v, causal, {}); }) == 0);
    CHECK(testing::ScalarReadsIn([&] { out.sum().backward(); }) == 0);
    REQUIRE(in.k.grad().defined());
  }
  // The counter sees a read inside another op: 1.13's repeat_interleave, the former path.
  if (compat::TorchVersion().rfind("1.", 0) == 0) {
    const at::Tensor x = at::arange(6, at::kFloat).view({1, 2, 3, 1});
    CHECK(testing::ScalarReadsIn([&] { (void)x.repeat_interleave(2, -3); }) > 0);
  }
}

TEST_CASE("compat attention: equal heads are never called grouped; the kernel named is one libtorch has") {
  Inputs same = RandomInputs(4, 4, 8, 8, 3);
  CHECK_FALSE(compat::SdpaTakesGroupedHeads(same.q, same.k, same.v, true));
  Inputs grouped = RandomInputs(8, 2, 8, 8, 3);
  const bool takes = compat::SdpaTakesGroupedHeads(grouped.q, grouped.k, grouped.v, true);
  const std::string backend = compat::SdpaBackendFor(grouped.q, grouped.k, grouped.v, true);
  MESSAGE("libtorch " << compat::TorchVersion() << ": grouped heads taken as they are: " << takes
                     << ", kernel: " << backend);
  // Taken grouped only onto a fused kernel; 1.13 writes attention out over repeated heads.
  if (takes) CHECK((backend == "flash" || backend == "efficient"));
  if (compat::TorchVersion().rfind("1.", 0) == 0) {
    CHECK_FALSE(takes);
    CHECK(backend == "math");
  }
}

}  // namespace
}  // namespace native
}  // namespace protocol
