// The chunked cross-entropy (chunked_loss.h) against ATen's log-softmax loss,
// and the memory it holds.
#include "native_test_support.h"

#include <c10/core/GradMode.h>

#include "backends/native/training/chunked_loss.h"

namespace protocol {
namespace native {
namespace {

struct LossCase {
  at::Tensor logits, targets, weights;
};

// N rows over a vocabulary of V, seeded; every third row weighted 0 (masked).
LossCase MakeCase(int64_t N, int64_t V, at::ScalarType dtype) {
  at::manual_seed(11);
  LossCase c;
  c.logits = (at::randn({N, V}, at::kDouble) * 3).to(dtype);
  c.targets = at::randint(0, V, {N}, at::kLong);
  c.weights = at::rand({N}, at::kFloat) / 7.0;
  for (int64_t i = 0; i < N; i += 3) c.weights[i] = 0.0;
  return c;
}

// The unchunked reference: Σ w·cross_entropy over float64 logits, and its gradient.
std::pair<at::Tensor, at::Tensor> Reference(const LossCase& c) {
  at::Tensor z = c.logits.to(at::kDouble).detach().requires_grad_(true);
  at::Tensor loss = (at::cross_entropy_loss(z, c.targets, {}, at::Reduction::None) * c.weights.to(at::kDouble)).sum();
  loss.backward();
  return {loss.detach(), z.grad()};
}

std::pair<at::Tensor, at::Tensor> Chunked(const LossCase& c, int64_t chunk_elements) {
  at::Tensor z = c.logits.detach().requires_grad_(true);
  at::Tensor loss = chunked_cross_entropy(z, c.targets, c.weights, chunk_elements);
  loss.backward();
  return {loss.detach(), z.grad()};
}

TEST_CASE("chunked cross-entropy: float64 loss and gradient equal log-softmax's, one chunk or many") {
  const LossCase c = MakeCase(10, 37, at::kDouble);
  const auto [ref_loss, ref_grad] = Reference(c);
  // One chunk; 4 rows a chunk (the last of 2 rows); 1 row a chunk.
  for (int64_t chunk : {kLossChunkElements, int64_t{4 * 37}, int64_t{1}}) {
    CAPTURE(chunk);
    const auto [loss, grad] = Chunked(c, chunk);
    CHECK((loss.scalar_type() == at::kDouble));
    CHECK(std::abs(loss.item<double>() - ref_loss.item<double>()) < 1e-12);
    CHECK(at::allclose(grad, ref_grad, /*rtol=*/0, /*atol=*/1e-14));
    // Masked rows get no gradient at all.
    CHECK(at::equal(grad[0], at::zeros({37}, grad.options())));
  }
}

TEST_CASE("chunked cross-entropy: float64 gradient matches central differences") {
  const LossCase c = MakeCase(4, 6, at::kDouble);
  const auto [loss, grad] = Chunked(c, 6);
  c10::NoGradGuard no_grad;
  const double h = 1e-6;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      at::Tensor plus = c.logits.clone(), minus = c.logits.clone();
      plus[i][j] += h;
      minus[i][j] -= h;
      const double numeric = (chunked_cross_entropy(plus, c.targets, c.weights, 6).item<double>() -
                              chunked_cross_entropy(minus, c.targets, c.weights, 6).item<double>()) /
                             (2 * h);
      CHECK(std::abs(grad[i][j].item<double>() - numeric) < 1e-8);
    }
}

TEST_CASE("chunked cross-entropy: bf16 logits give a float32 loss and a bf16 gradient, one rounding from exact") {
  const LossCase c = MakeCase(12, 50, at::kBFloat16);
  const auto [ref_loss, ref_grad] = Reference(c);  // exact arithmetic on the same bf16 values
  const auto [loss, grad] = Chunked(c, 5 * 50);
  CHECK((loss.scalar_type() == at::kFloat));
  CHECK((grad.scalar_type() == at::kBFloat16));
  CHECK(std::abs(loss.item<double>() - ref_loss.item<double>()) < 1e-5 * std::abs(ref_loss.item<double>()));
  // bf16 keeps 8 significant bits: one rounding of the exact gradient is within 2^-8 of it, relative.
  const at::Tensor exact = ref_grad, error = (grad.to(at::kDouble) - exact).abs();
  CHECK(at::le(error, exact.abs() * (1.0 / 256) + 1e-7).all().item<bool>());
}

TEST_CASE("chunked cross-entropy: no tensor of the logits' size in float32, forward or backward") {
  // 64 rows over a vocabulary of 4096: the logits are 1 MiB in bf16, 2 MiB in float32.
  const int64_t N = 64, V = 4096, chunk = 8 * V;
  const LossCase c = MakeCase(N, V, at::kBFloat16);
  const int64_t bf16_bytes = N * V * 2;
  at::Tensor z = c.logits.detach().requires_grad_(true);
  int64_t largest = 0, peak = 0;
  {
    compat::CpuMemoryWatch watch;
    chunked_cross_entropy(z, c.targets, c.weights, chunk).backward();
    largest = watch.largest_bytes();
    peak = watch.peak_bytes();
  }
  // The largest block is the bf16 gradient; float32 work is one chunk of 8 rows at a time.
  CHECK(largest == bf16_bytes);
  CHECK(peak <= bf16_bytes + 2 * chunk * 4 + 64 * 1024);
  // The unchunked loss widens the whole logits to float32 (and keeps its log-softmax).
  at::Tensor y = c.logits.detach().requires_grad_(true);
  int64_t unchunked_largest = 0, unchunked_peak = 0;
  {
    compat::CpuMemoryWatch watch;
    (at::cross_entropy_loss(y.to(at::kFloat), c.targets, {}, at::Reduction::None) * c.weights).sum().backward();
    unchunked_largest = watch.largest_bytes();
    unchunked_peak = watch.peak_bytes();
  }
  CHECK(unchunked_largest == 2 * bf16_bytes);
  CHECK(unchunked_peak >= 3 * bf16_bytes);
  MESSAGE(("loss peak above its input: chunked " + std::to_string(peak) + " B, unchunked " +
           std::to_string(unchunked_peak) + " B"));
}

TEST_CASE("chunked cross-entropy: an empty batch is a zero loss") {
  const LossCase c = MakeCase(0, 9, at::kFloat);
  const auto [loss, grad] = Chunked(c, 9);
  CHECK(loss.item<double>() == 0.0);
  CHECK(grad.sizes().vec() == std::vector<int64_t>{0, 9});
}

}  // namespace
}  // namespace native
}  // namespace protocol
