// throughput.h: the timed steps after the warm-up and the figures from them,
// computed here by hand.
#include <doctest/doctest.h>

#include <string>

#include "backends/native/case/throughput.h"

namespace protocol {
namespace native {
namespace {

const Measurement* Find(const std::vector<Measurement>& ms, const std::string& name) {
  for (const Measurement& m : ms)
    if (m.name == name) return &m;
  return nullptr;
}

ModelConfig Tiny() {
  ModelConfig c;
  c.name = "tiny";
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.hidden_dim = 128;
  c.vocab_size = 100;
  c.max_seq_len = 32;
  return c;
}

}  // namespace

TEST_CASE("timed steps: the warm-up steps are left out, unless the case has no others") {
  TimedSteps t(2, 5);
  CHECK_FALSE(t.Add(0, 9.0, 100));
  CHECK_FALSE(t.Add(1, 9.0, 100));
  CHECK(t.Add(2, 1.0, 100));
  CHECK(t.Add(3, 1.5, 100));
  CHECK(t.Add(4, 1.5, 100));
  CHECK(t.count() == 3);
  CHECK(t.seconds() == 4.0);
  CHECK(t.tokens() == 300);
  TimedSteps short_case(3, 2);  // no more steps than warm-up: every step is timed
  CHECK(short_case.Add(0, 1.0, 10));
  CHECK(short_case.Add(1, 1.0, 10));
}

TEST_CASE("throughput: one process on CPU: tokens/s and tgs, no FLOP figures") {
  TimedSteps t(1, 3);
  t.Add(0, 5.0, 400);
  t.Add(1, 2.0, 400);
  t.Add(2, 2.0, 400);
  ThroughputScope scope;
  scope.device_text = "cpu";
  const std::vector<Measurement> ms = ThroughputFigures(t, scope);
  REQUIRE(ms.size() == 2);
  CHECK(*Find(ms, metric::kTrainTokensPerSecond)->value == 200.0);  // 800 tokens / 4 s
  CHECK(Find(ms, metric::kTrainTokensPerSecond)->method ==
        "800 tokens over 2 steps after 1 warm-up step(s), one process on cpu");
  CHECK(*Find(ms, metric::kTgs)->value == 200.0);
  CHECK(Find(ms, metric::kTgs)->method == "800 tokens over 2 steps after 1 warm-up step(s), one process on cpu (per process: CPU)");
  CHECK(ThroughputFigures(TimedSteps(0, 0), scope).empty());
}

TEST_CASE("throughput: ranks on CUDA: per-device tgs, PaLM TFLOP/s and MFU by hand") {
  TimedSteps t(0, 2);
  t.Add(0, 1.0, 4000);
  t.Add(1, 1.0, 4000);
  ThroughputScope scope;
  scope.one_process = false;
  scope.ranks = 4;
  scope.device_text = "cuda";
  scope.cuda = true;
  scope.config = Tiny();
  scope.seq_len = 16;
  scope.device_name = "NVIDIA H100 80GB HBM3";
  const std::vector<Measurement> ms = ThroughputFigures(t, scope);
  REQUIRE(ms.size() == 4);
  CHECK(*Find(ms, metric::kTrainTokensPerSecond)->value == 4000.0);
  CHECK(*Find(ms, metric::kTgs)->value == 1000.0);  // 4000 / 4 ranks
  const std::string how = "8000 tokens over 2 steps after 0 warm-up step(s), rank 0's step times, 4 ranks on cuda";
  CHECK(Find(ms, metric::kTgs)->method == how + " / ranks (one device each)");
  // N − N_emb: per layer 4·64² (attention) + 3·64·128 (MLP) + 2·64 (norms); final norm 64; head 100·64.
  const double n = 2 * (4.0 * 64 * 64 + 3.0 * 64 * 128 + 2 * 64) + 64 + 100.0 * 64;
  const double flops = 6 * n + 12.0 * 2 * 4 * 16 * 16;  // 6(N−N_emb) + 12·L·H·Q·T
  CHECK(*Find(ms, metric::kTflops)->value == doctest::Approx(flops * 1000.0 / 1e12));
  CHECK(Find(ms, metric::kTflops)->method ==
        "6(N-N_emb)+12·L·H·Q·T FLOPs/token (PaLM) × tokens/s per device (" + how + " / ranks)");
  CHECK(*Find(ms, metric::kMfu)->value == doctest::Approx(flops * 1000.0 / 1e12 / 989.0));
  CHECK(Find(ms, metric::kMfu)->method == "tflops per device / 989 TFLOP/s dense bf16 peak of 'NVIDIA H100 80GB HBM3'");

  scope.frozen_base = true;  // a 4-bit base: no weight gradients, 4(N−N_emb)
  const std::vector<Measurement> frozen = ThroughputFigures(t, scope);
  CHECK(*Find(frozen, metric::kTflops)->value == doctest::Approx((flops - 2 * n) * 1000.0 / 1e12));
}

}  // namespace native
}  // namespace protocol
