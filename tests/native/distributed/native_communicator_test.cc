// Communicator (communicator.h): two ranks on threads over Gloo; each
// collective's result and the bytes the rank counts, by the ring formulas.
#include "native_test_support.h"

#include <string>
#include <thread>
#include <vector>

#include "backends/native/distributed/communicator.h"
#include "backends/native/dist_backend.h"

namespace protocol {
namespace native {
namespace {

struct RankRun {
  std::vector<int64_t> bytes_after;  // bytes_sent() after each collective
  at::Tensor all_reduced, gathered, scattered, broadcast;
  std::string error;
};

}  // namespace

TEST_CASE("communicator: results of the collectives and the bytes this rank sent") {
  const int W = 2;
  auto stores = testing::LocalStores(W);
  std::vector<RankRun> runs(W);
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      RankRun& run = runs[static_cast<size_t>(r)];
      try {
        Communicator comm(compat::CommGroupCreate(stores[static_cast<size_t>(r)], r, W, false, 30000));
        if (comm.size() != W) throw std::runtime_error("the group has " + std::to_string(comm.size()) + " ranks");
        run.all_reduced = at::full({6}, static_cast<float>(r + 1));  // 24 bytes
        comm.AllReduceSum(run.all_reduced);
        run.bytes_after.push_back(comm.bytes_sent());
        run.gathered = at::empty({6});
        comm.AllGather(run.gathered, at::full({3}, static_cast<float>(r)));  // a shard of 12 bytes
        run.bytes_after.push_back(comm.bytes_sent());
        at::Tensor full = at::arange(8, at::TensorOptions().dtype(at::kFloat));  // 32 bytes
        run.scattered = at::empty({4});
        comm.ReduceScatterSum(run.scattered, full);
        run.bytes_after.push_back(comm.bytes_sent());
        run.broadcast = at::full({4}, static_cast<float>(r + 10));  // 16 bytes
        comm.Broadcast(run.broadcast, 0);
        run.bytes_after.push_back(comm.bytes_sent());
        comm.Barrier();
        run.bytes_after.push_back(comm.bytes_sent());
      } catch (const std::exception& e) {
        run.error = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // all-reduce 2(W−1)/W·24 = 24; all-gather (W−1)·12 = 12; reduce-scatter on
  // Gloo an all-reduce, 2(W−1)/W·32 = 32 (NCCL's would send (W−1)/W·32 = 16).
  const int64_t scatter = 32;
  for (int r = 0; r < W; ++r) {
    const RankRun& run = runs[static_cast<size_t>(r)];
    INFO(run.error);
    REQUIRE(run.error.empty());
    CHECK(at::equal(run.all_reduced, at::full({6}, 3.0f)));
    CHECK(at::equal(run.gathered, at::cat({at::zeros({3}), at::ones({3})})));
    CHECK(at::equal(run.scattered, at::arange(8, at::TensorOptions().dtype(at::kFloat)).narrow(0, 4 * r, 4) * 2));
    CHECK(at::equal(run.broadcast, at::full({4}, 10.0f)));
    REQUIRE(run.bytes_after.size() == 5);
    CHECK(run.bytes_after[0] == 24);
    CHECK(run.bytes_after[1] == 24 + 12);
    CHECK(run.bytes_after[2] == 24 + 12 + scatter);
    // Broadcast over a ring: every rank but the root's predecessor forwards the 16 bytes.
    CHECK(run.bytes_after[3] == 24 + 12 + scatter + (r == (0 + W - 1) % W ? 0 : 16));
    CHECK(run.bytes_after[4] == run.bytes_after[3]);  // a barrier sends no counted bytes
  }
}

}  // namespace native
}  // namespace protocol
