// The link probe (link_probe.h): nccl-tests' bus bandwidth formula, the
// sizes and the case's largest collective, two ranks on two "nodes" over
// Gloo on threads (figures positive and sane, the budget agreed by both
// ranks, the communicator's bytes untouched), and real `protocol worker`
// ranks of a 2-node case: the figures stored, their bytes not in the case's,
// and `training.link_probe: false` storing none but a fact.
#include "dist_test_support.h"

#include <string>
#include <thread>
#include <vector>

#include "backends/native/distributed/communicator.h"
#include "backends/native/distributed/link_probe.h"
#include "backends/native/fsdp_backend.h"

namespace protocol {
namespace native {
namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

struct RankProbe {
  LinkProbeResult result;
  int64_t bytes_sent = -1, bytes_between_nodes = -1;
  int64_t bytes_after_all_reduce = -1;
  std::string error;
};

// Two ranks on threads, the group told they are on nodes "a" and "b", each
// probing with `options`; then one counted all-reduce of 24 bytes.
std::vector<RankProbe> ProbeTwoRanks(const LinkProbeOptions& options) {
  const int W = 2;
  auto stores = testing::LocalStores(W);
  std::vector<RankProbe> runs(W);
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      RankProbe& run = runs[static_cast<size_t>(r)];
      try {
        Communicator comm(compat::CommGroupCreate(stores[static_cast<size_t>(r)], r, W, false, 30000), {"a", "b"});
        run.result = ProbeLink(comm, options);
        run.bytes_sent = comm.bytes_sent();
        run.bytes_between_nodes = comm.bytes_between_nodes();
        at::Tensor t = at::ones({6});
        comm.AllReduceSum(t);
        run.bytes_after_all_reduce = comm.bytes_sent();
      } catch (const std::exception& e) {
        run.error = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

}  // namespace

TEST_CASE("link probe: bus bandwidth as nccl-tests defines it, algbw = S/t, busbw = algbw x 2(n-1)/n") {
  const AllReduceBandwidth two = AllReduceBusBandwidth(MiB, 0.001, 2);
  CHECK(two.algbw == doctest::Approx(1.048576e9));
  CHECK(two.busbw == doctest::Approx(1.048576e9));  // 2(2-1)/2 = 1
  const AllReduceBandwidth four = AllReduceBusBandwidth(MiB, 0.001, 4);
  CHECK(four.algbw == doctest::Approx(1.048576e9));
  CHECK(four.busbw == doctest::Approx(1.572864e9));  // x 1.5
  CHECK(AllReduceBusBandwidth(MiB, 0.001, 8).busbw == doctest::Approx(1.048576e9 * 1.75));
  CHECK(AllReduceBusBandwidth(MiB, 0.001, 1).busbw == 0);  // one rank: nothing crosses
}

TEST_CASE("link probe: sizes from 4 KiB up to the case's largest collective, at least 16 MiB, at most 64 MiB") {
  const std::vector<int64_t> floor = {4 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB};
  CHECK(LinkProbeSizes(0) == floor);
  CHECK(LinkProbeSizes(100 * KiB) == floor);
  CHECK(LinkProbeSizes(63 * MiB) == floor);
  std::vector<int64_t> cap = floor;
  cap.push_back(64 * MiB);
  CHECK(LinkProbeSizes(64 * MiB) == cap);
  CHECK(LinkProbeSizes(int64_t{13} << 30) == cap);
  CHECK(ProbeSizeText(4 * KiB) == "4 KiB");
  CHECK(ProbeSizeText(256 * KiB) == "256 KiB");
  CHECK(ProbeSizeText(16 * MiB) == "16 MiB");
  CHECK(ProbeSizeText(100) == "100 B");
}

TEST_CASE("link probe: the case's largest collective: its largest FSDP unit, or a share merge of a rank's shard") {
  const ModelConfig c = testing::TinyTestConfig(50, 2);  // V 50, C 32
  const int64_t head = 50 * 32 + 32;                      // lm_head and the final norm
  const int64_t layer = (c.ParameterCount() - 50 * 32 - head) / 2;
  REQUIRE(layer > head);
  CHECK(LargestCollectiveBytes(c, 4, 1, 2) == 4 * layer);
  CHECK(LargestCollectiveBytes(c, 2, 1, 2) == 2 * layer);
  // share: a merge all-reduces one rank's shard of every parameter, ⌈N/K⌉ elements.
  CHECK(LargestCollectiveBytes(c, 4, 2, 1) == 4 * c.ParameterCount());
  CHECK(LargestCollectiveBytes(c, 4, 2, 2) == 4 * ((c.ParameterCount() + 1) / 2));
  // Over 4 ranks a group's shard is smaller than one decoder layer: the unit is the largest.
  CHECK(LargestCollectiveBytes(c, 4, 2, 4) == 4 * layer);
  // Llama-2-7B's embedding in bfloat16 is far above the cap: the probe goes to 64 MiB.
  ModelConfig big = c;
  big.vocab_size = 32000;
  big.dim = 4096;
  CHECK(LargestCollectiveBytes(big, 2, 1, 8) >= 32000 * 4096 * 2);
}

TEST_CASE("link probe: 2 ranks on 2 nodes over Gloo: sane figures, the same sizes on both ranks, no bytes counted") {
  LinkProbeOptions options;
  options.sizes = LinkProbeSizes(0);
  options.timed_iterations = 3;
  const std::vector<RankProbe> runs = ProbeTwoRanks(options);
  for (int r = 0; r < 2; ++r) {
    const RankProbe& run = runs[static_cast<size_t>(r)];
    CAPTURE(r);
    INFO(run.error);
    REQUIRE(run.error.empty());
    const LinkProbeResult& p = run.result;
    CHECK(p.ranks == 2);
    CHECK(p.backend == "gloo");
    REQUIRE(p.sizes.size() == 5);  // well within 10 s on one host
    CHECK(p.stopped_before == 0);
    for (size_t i = 0; i < p.sizes.size(); ++i) {
      CHECK(p.sizes[i].bytes == options.sizes[i]);
      CHECK(p.sizes[i].seconds > 0);
      CHECK(p.sizes[i].seconds < 5);
    }
    // 16 MiB takes longer than 4 KiB; the latency is the 4 KiB time.
    CHECK(p.sizes.back().seconds > p.sizes.front().seconds);
    CHECK(p.latency_seconds() == p.sizes.front().seconds);
    CHECK(p.latency_seconds() < 0.1);
    // Localhost Gloo: more than 10 MB/s, less than 1 TB/s of bus bandwidth.
    const AllReduceBandwidth b = p.bandwidth();
    CHECK(b.busbw == doctest::Approx(AllReduceBusBandwidth(16 * MiB, p.sizes.back().seconds, 2).busbw));
    CHECK(b.busbw > 1e7);
    CHECK(b.busbw < 1e12);
    if (r == 0) MESSAGE("localhost Gloo, 2 ranks: busbw " << b.busbw / 1e9 << " GB/s at 16 MiB, latency "
                                                          << p.latency_seconds() * 1e6 << " us (4 KiB)");
    CHECK(p.seconds > 0);
    CHECK(p.seconds < kLinkProbeBudgetSeconds + 5);
    // The probe's bytes are not the case's: the communicator counted none of
    // them, and counts its own collectives as before (2(W-1)/W · 24 bytes).
    CHECK(run.bytes_sent == 0);
    CHECK(run.bytes_between_nodes == 0);
    CHECK(run.bytes_after_all_reduce == 24);
    const std::string method = p.BandwidthMethod(2);
    CHECK(method.rfind("all-reduce bus bandwidth (nccl-tests: algbw x 2(n-1)/n), n=2 ranks on 2 nodes over gloo, "
                       "sizes 4 KiB..16 MiB, 3 timed iterations each after 1 warm-up, at 16 MiB; ",
                       0) == 0);
    CHECK(EndsWith(method, " s before the first step"));
    CHECK(p.LatencyMethod(2) ==
          "time of one 4 KiB all-reduce, mean of 3 timed iterations after 1 warm-up, n=2 ranks on 2 nodes over gloo");
  }
}

TEST_CASE("link probe: a spent budget stops the sizes, on every rank alike") {
  LinkProbeOptions options;
  options.sizes = LinkProbeSizes(0);
  options.timed_iterations = 2;
  options.budget_seconds = 0;  // spent at once: the smallest size only
  const std::vector<RankProbe> runs = ProbeTwoRanks(options);
  for (const RankProbe& run : runs) {
    INFO(run.error);
    REQUIRE(run.error.empty());
    REQUIRE(run.result.sizes.size() == 1);
    CHECK(run.result.sizes[0].bytes == 4 * KiB);
    CHECK(run.result.stopped_before == 256 * KiB);
    CHECK(run.result.bandwidth().busbw > 0);
    CHECK(run.result.BandwidthMethod(2).find("size 4 KiB, 2 timed iterations each after 1 warm-up, at 4 KiB (its 0 s "
                                             "budget ended it before 256 KiB); ") != std::string::npos);
    CHECK(run.bytes_sent == 0);
    CHECK(run.bytes_after_all_reduce == 24);  // the ranks are still in step
  }
}

}  // namespace native

namespace {
using namespace dist_test;

// A 2-rank fsdp case of the mini model on 2 "nodes" of this host, `link_probe` as given.
BackendOutcome RunTwoNodes(MiniModelFixture& fx, bool link_probe, int nodes, const std::string& tag) {
  Plan plan = fx.MakePlan();
  CaseSpec spec = MiniTraining("fsdp", 2);
  spec.nodes = nodes;
  spec.training.ranks_per_node = 2 / nodes;
  spec.training.link_probe = link_probe;
  Harness h;
  auto backend = MakeNativeFsdpBackend(Options());
  const std::filesystem::path log = fx.root / (tag + ".log");
  BackendOutcome out = h.RunOk(*backend, plan, spec, "", log.string());
  return out;
}

}  // namespace

TEST_CASE("link probe: a 2-node case's ranks store the link; its bytes are not the case's; link_probe false stores a fact") {
  MiniModelFixture fx;
  const BackendOutcome on = RunTwoNodes(fx, true, 2, "on");
  const Measurement* busbw = Find(on, metric::kLinkBusBandwidth);
  const Measurement* latency = Find(on, metric::kLinkLatency);
  REQUIRE(busbw);
  REQUIRE(latency);
  CHECK(busbw->unit == "bytes/s");
  CHECK(busbw->how == Provenance::kMeasured);
  CHECK(*busbw->value > 1e7);
  CHECK(*busbw->value < 1e12);
  CHECK(busbw->method.find("all-reduce bus bandwidth (nccl-tests: algbw x 2(n-1)/n), n=2 ranks on 2 nodes over gloo, "
                           "sizes 4 KiB..16 MiB, 5 timed iterations each after 1 warm-up, at 16 MiB; ") !=
        std::string::npos);
  CHECK(latency->unit == "s");
  CHECK(*latency->value > 0);
  CHECK(*latency->value < 0.1);
  CHECK(latency->method.find("time of one 4 KiB all-reduce") != std::string::npos);
  CHECK(FactOf(on, fact::kLinkProbe) == "");
  MESSAGE("worker ranks, localhost Gloo: busbw " << *busbw->value / 1e9 << " GB/s, latency " << *latency->value * 1e6
                                                 << " us");

  // Off: no figure, a fact; and the case's bytes are the same to the byte, so the probe's were not counted.
  const BackendOutcome off = RunTwoNodes(fx, false, 2, "off");
  CHECK_FALSE(Find(off, metric::kLinkBusBandwidth));
  CHECK_FALSE(Find(off, metric::kLinkLatency));
  CHECK(FactOf(off, fact::kLinkProbe) == "off (training.link_probe: false)");
  for (const char* bytes : {metric::kBytesCommunicated, metric::kBytesBetweenNodes, metric::kBytesBetweenNodesPerStep}) {
    CAPTURE(bytes);
    REQUIRE(Find(on, bytes));
    REQUIRE(Find(off, bytes));
    CHECK(*Find(on, bytes)->value == *Find(off, bytes)->value);
  }
  CHECK(*Find(on, metric::kBytesBetweenNodes)->value > 0);

  // One node: nothing to measure, nothing said.
  const BackendOutcome one = RunTwoNodes(fx, true, 1, "one");
  CHECK_FALSE(Find(one, metric::kLinkBusBandwidth));
  CHECK(FactOf(one, fact::kLinkProbe) == "");
}

}  // namespace protocol
