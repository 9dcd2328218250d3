// The optimizer step and gradient clipping (train.h): multi-tensor AdamW equal
// to the per-tensor update it replaced, clipping as clip_grad_norm_ does
// without reading anything back, and a training step that reads the device
// exactly once (its loss and gradient norm together).
#include "native_test_support.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "backends/native/platform/torch_compat.h"
#include "backends/native/training/train.h"
#include "reference_optimizer.h"

namespace protocol {
namespace native {
namespace {

using testing::ReferenceAdamW;

// Leaf tensors of the given shapes and dtype, seeded.
std::vector<at::Tensor> Leaves(const std::vector<std::vector<int64_t>>& shapes, at::ScalarType dtype, uint64_t seed) {
  at::Generator gen = init_generator(seed);
  std::vector<at::Tensor> out;
  for (const auto& shape : shapes)
    out.push_back(at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat)).to(dtype).set_requires_grad(true));
  return out;
}

void SetGradients(std::vector<at::Tensor>& params, uint64_t seed, double scale) {
  at::Generator gen = init_generator(seed);
  for (size_t i = 0; i < params.size(); ++i) {
    if (i == 2) continue;  // one parameter without a gradient: skipped by both
    params[i].mutable_grad() = (at::randn(params[i].sizes(), gen) * scale).to(params[i].scalar_type());
  }
}

TEST_CASE("native optimizer: multi-tensor AdamW equals the per-tensor update, bit for bit") {
  at::set_num_threads(2);
  TrainOptions o;
  o.weight_decay = 0.1;
  o.fused_adamw = false;  // the multi-tensor path (the fused one: the next test)
  // Matrices (decayed), vectors (not), a parameter without gradient; float32
  // and bfloat16 (with a float32 master); and two tensors larger than half a
  // run, so that the step takes more than one run.
  const std::vector<std::vector<int64_t>> shapes = {{16, 8}, {8}, {4, 4}, {3, 5, 2}, {7}};
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(static_cast<int>(dtype));
    std::vector<at::Tensor> mine = Leaves(shapes, dtype, 1), theirs = Leaves(shapes, dtype, 1);
    AdamW optimizer(mine, o);
    ReferenceAdamW reference(theirs, o);
    for (int step = 0; step < 4; ++step) {
      SetGradients(mine, 10 + step, 1.0 + step);
      SetGradients(theirs, 10 + step, 1.0 + step);
      optimizer.step(1e-2 * (step + 1));
      reference.step(1e-2 * (step + 1));
    }
    for (size_t i = 0; i < shapes.size(); ++i) CHECK(at::equal(mine[i], theirs[i]));
  }
  SUBCASE("runs: a step over more elements than one run holds") {
    const int64_t half = kAdamwChunkElements / 2 + 1;
    std::vector<at::Tensor> mine = Leaves({{half}, {half}, {3}}, at::kFloat, 2);
    std::vector<at::Tensor> theirs = Leaves({{half}, {half}, {3}}, at::kFloat, 2);
    AdamW optimizer(mine, o);
    ReferenceAdamW reference(theirs, o);
    for (int step = 0; step < 2; ++step) {
      for (std::vector<at::Tensor>* set : {&mine, &theirs})
        for (size_t i = 0; i < set->size(); ++i)
          (*set)[i].mutable_grad() = at::full_like((*set)[i], 0.5 * static_cast<double>(i + 1 + step)).detach();
      optimizer.step(1e-3);
      reference.step(1e-3);
    }
    for (size_t i = 0; i < mine.size(); ++i) CHECK(at::equal(mine[i], theirs[i]));
  }
}

// The largest distance between a and b in units in the last place of float32
// (the spacing of b's magnitude), over their elements.
double MaxUlps(const at::Tensor& a, const at::Tensor& b, double floor = 1e-30) {
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  const at::Tensor ulp = at::pow(2.0, at::floor(at::log2(y.abs().clamp_min(floor))) - 23);
  return ((x - y).abs() / ulp).max().item<double>();
}

TEST_CASE("native optimizer: fused AdamW (one pass a tensor) stays within float32 rounding of the multi-tensor path over 10 steps") {
  REQUIRE(compat::FusedAdamWAvailable(at::kCPU));
  at::set_num_threads(2);
  TrainOptions fused_options, foreach_options;
  fused_options.weight_decay = foreach_options.weight_decay = 0.1;
  foreach_options.fused_adamw = false;
  const std::vector<std::vector<int64_t>> shapes = {{16, 8}, {8}, {4, 4}, {3, 5, 2}, {7}, {64, 32}};
  std::vector<at::Tensor> fused = Leaves(shapes, at::kFloat, 1), multi = Leaves(shapes, at::kFloat, 1);
  const std::vector<at::Tensor> start = Leaves(shapes, at::kFloat, 1);
  AdamW a(fused, fused_options), b(multi, foreach_options);
  double worst = 0, worst_near_zero = 0;
  for (int step = 0; step < 10; ++step) {
    SetGradients(fused, 20 + step, 0.5 + step);
    SetGradients(multi, 20 + step, 0.5 + step);
    a.step(1e-2);
    b.step(1e-2);
    for (size_t i = 0; i < shapes.size(); ++i) {
      worst = std::max(worst, MaxUlps(fused[i], multi[i], 0.1));
      worst_near_zero = std::max(worst_near_zero, MaxUlps(fused[i], multi[i]));
    }
  }
  // The two differ in the rounding of √v̂ (√v/√(1−β2ᵗ) against √(v/(1−β2ᵗ))): measured in float32
  // ulps of the parameter's magnitude, or of 0.1 for smaller elements (an update of lr = 1e-2
  // moves those by many of their own ulps: 256 at most here, for differences below 1e-9).
  MESSAGE(("fused against multi-tensor AdamW, 10 steps: at most " + std::to_string(worst) + " ulp (" +
           std::to_string(worst_near_zero) + " of elements' own magnitude)"));
  CHECK(worst <= 2);
  // Both moved every parameter with a gradient, and left the one without alone.
  for (size_t i = 0; i < shapes.size(); ++i) CHECK(at::equal(fused[i], start[i]) == (i == 2));
  // Weight decay reached the matrices only: with zero gradients, only they change.
  std::vector<at::Tensor> still = Leaves({{4, 4}, {4}}, at::kFloat, 3);
  const std::vector<at::Tensor> before = Leaves({{4, 4}, {4}}, at::kFloat, 3);
  AdamW c(still, fused_options);
  for (at::Tensor& p : still) p.mutable_grad() = at::zeros_like(p);
  c.step(1e-2);
  CHECK(at::allclose(still[0], before[0] * (1 - 1e-2 * 0.1)));
  CHECK(at::equal(still[1], before[1]));
}

TEST_CASE("native optimizer: clipping scales to max_norm on the device and returns the norm before") {
  std::vector<at::Tensor> params = Leaves({{32, 4}, {17}, {5}, {2, 3}}, at::kFloat, 3);
  SetGradients(params, 4, 3.0);
  double sum_sq = 0;
  for (const at::Tensor& p : params)
    if (p.grad().defined()) sum_sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
  const double expected = std::sqrt(sum_sq);
  std::vector<at::Tensor> before;
  for (const at::Tensor& p : params) before.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());

  SUBCASE("below max_norm: every gradient's bits unchanged") {
    const int64_t reads = compat::HostReads();
    const at::Tensor norm = grad_clip_norm(params, expected * 2);
    CHECK(compat::HostReads() == reads);  // nothing read back
    CHECK((norm.scalar_type() == at::kDouble));
    CHECK(compat::ReadToHost(norm)[0] == doctest::Approx(expected).epsilon(1e-6));
    for (size_t i = 0; i < params.size(); ++i)
      if (before[i].defined()) CHECK(at::equal(params[i].grad(), before[i]));
  }
  SUBCASE("above: scaled by max_norm / (norm + 1e-6)") {
    const double max_norm = expected / 4;
    const at::Tensor norm = grad_clip_norm(params, max_norm);
    CHECK(compat::ReadToHost(norm)[0] == doctest::Approx(expected).epsilon(1e-6));
    double after = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!before[i].defined()) continue;
      CHECK(at::allclose(params[i].grad(), before[i] * (max_norm / (expected + 1e-6)), 1e-6, 1e-7));
      after += params[i].grad().to(at::kDouble).pow(2).sum().item<double>();
    }
    CHECK(std::sqrt(after) == doctest::Approx(max_norm).epsilon(1e-5));
  }
  SUBCASE("bfloat16 gradients: the norm is accumulated in float32, not rounded to bf16") {
    std::vector<at::Tensor> grads;
    for (const at::Tensor& b : before)
      if (b.defined()) grads.push_back(b.to(at::kBFloat16));
    double bf16_sum_sq = 0;
    for (const at::Tensor& g : grads) bf16_sum_sq += g.to(at::kDouble).pow(2).sum().item<double>();
    const at::Tensor norm = clip_gradients(grads, 0);
    CHECK(compat::ReadToHost(norm)[0] == doctest::Approx(std::sqrt(bf16_sum_sq)).epsilon(1e-6));
  }
}

TEST_CASE("native optimizer: a training step reads the device once: loss and gradient norm together") {
  at::set_num_threads(2);
  const ModelConfig c = testing::TinyTestConfig(64);
  Model m = model_create(c, at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 5);
  std::vector<Sequence> seqs;
  for (int s = 0; s < 4; ++s) {
    Sequence q;
    for (int t = 0; t < 9; ++t) q.tokens.push_back((s * 7 + t * 3) % 64);
    q.mask.assign(8, 1);
    seqs.push_back(q);
  }
  std::vector<const Sequence*> batch;
  for (const Sequence& s : seqs) batch.push_back(&s);
  TrainOptions o;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.grad_clip = 0.5;
  AdamW optimizer(model_trainable(m), o);
  for (int step = 0; step < 3; ++step) {
    const int64_t reads = compat::HostReads();
    StepStats s;
    // And no op inside the step reads a scalar back (grouped attention's heads included), but
    // libtorch's CPU fused AdamW, which reads its host step counts.
    CHECK(testing::ScalarReadsIn([&] { s = train_step(m, optimizer, batch, o, 1e-3); }, testing::CpuFusedAdamW()) == 0);
    CHECK(compat::HostReads() - reads == 1);
    CHECK(std::isfinite(s.loss));
    CHECK(s.grad_norm > 0);
  }
  const int64_t reads = compat::HostReads();
  CHECK(eval_loss(m, seqs, 2).has_value());
  CHECK(compat::HostReads() - reads == 1);
}

}  // namespace
}  // namespace native
}  // namespace protocol
