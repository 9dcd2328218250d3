// The environment a plan gives the ranks of a distributed case (networks.h):
// cluster, network, node and case levels merged in that order, `inherit`
// passed on from the runner's environment, the runner's other transport
// variables withheld, protocol's own variables last, the rendezvous at node
// 0's address on the case's network; and what ran recorded as facts, secrets
// masked. First at the launch seam, then inside real ranks.

#include "dist_test_support.h"  // first: libtorch's CHECK, then doctest's (native_test_support.h)

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backends/native/dist_backend.h"
#include "backends/native/fsdp_backend.h"
#include "test_files.h"

namespace protocol {
namespace {

using dist_test::FactOf;
using dist_test::Harness;
using dist_test::LocalNode;
using dist_test::MiniModelFixture;
using dist_test::MiniTraining;
using dist_test::Options;

// Two plan nodes on this host, a network "slow" with its env and n0's address
// on it, env at every level, and a 2-node fsdp case on that network.
struct EnvCase {
  MiniModelFixture fx;
  Plan plan = fx.MakePlan();
  CaseSpec spec = MiniTraining("fsdp", 2);
  EnvCase() {
    plan.cluster.nodes = {LocalNode("n0"), LocalNode("n1")};
    plan.cluster.nodes[1].env.vars = {{"LEVEL", "node n1"}};
    plan.cluster.env.vars = {{"LEVEL", "cluster"}, {"HF_TOKEN", "hf_abc"}};
    NetworkSpec slow;
    slow.name = "slow";
    slow.rate = "100mbit";
    slow.bits_per_second = 1e8;
    slow.env.vars = {{"NCCL_SOCKET_IFNAME", "lo"}};
    slow.addresses = {{"n0", "127.0.0.1"}};
    plan.cluster.networks["slow"] = slow;
    spec.nodes = 2;
    spec.network = "slow";
    spec.training.ranks_per_node = 1;
    spec.env.vars = {{"CASE_ONLY", "case"}};
    spec.env.inherit = {"PROTOCOL_TEST_INHERITED"};
    ::setenv("PROTOCOL_TEST_INHERITED", "from the runner", 1);
    ::setenv("NCCL_P2P_LEVEL", "NVL", 1);  // the runner's own, not asked for
  }
  ~EnvCase() {
    ::unsetenv("PROTOCOL_TEST_INHERITED");
    ::unsetenv("NCCL_P2P_LEVEL");
  }
};

}  // namespace

TEST_CASE("dist env: the levels merge in order, inherit by name, the runner's transport variables withheld") {
  EnvCase c;
  native::DistOptions o = Options();
  std::vector<native::RankLaunch> seen;
  o.wrap = [&](std::vector<native::RankLaunch>& launches) {
    seen = launches;
    return Status::InvalidArgument("stopped at the wrap seam");
  };
  Harness h;
  auto backend = MakeNativeFsdpBackend(o);
  h.Run(*backend, c.plan, c.spec, "", "");
  REQUIRE(seen.size() == 2);
  for (const native::RankLaunch& l : seen) {
    CAPTURE(l.rank);
    CHECK(l.env.at("LEVEL") == (l.rank == 0 ? "cluster" : "node n1"));  // the node's level over the cluster's
    CHECK(l.env.at("CASE_ONLY") == "case");
    CHECK(l.env.at("NCCL_SOCKET_IFNAME") == "lo");  // the network's
    CHECK(l.env.at("PROTOCOL_TEST_INHERITED") == "from the runner");
    CHECK(l.env.count("NCCL_P2P_LEVEL") == 0);
    CHECK(l.unset == std::vector<std::string>{"NCCL_P2P_LEVEL"});
    CHECK(l.env.at("MASTER_ADDR") == "127.0.0.1");  // n0's address on the network
    CHECK(l.env.at("RANK") == std::to_string(l.rank));
  }
}

TEST_CASE("dist env: real ranks get it, and the case records the network and the environment, secrets masked") {
  EnvCase c;
  testing::TempDir dir;
  native::DistOptions o = Options();
  // Each rank writes what it got, then becomes the worker (exec keeps its pid and streams).
  o.wrap = [&](std::vector<native::RankLaunch>& launches) {
    for (native::RankLaunch& l : launches) {
      const std::string file = (dir.path / ("rank" + std::to_string(l.rank))).string();
      std::vector<std::string> argv = {
          "/bin/sh", "-c",
          "printf '%s|%s|%s|%s' \"$LEVEL\" \"$CASE_ONLY\" \"$PROTOCOL_TEST_INHERITED\" \"$HF_TOKEN\" > " +
              testing::ShellQuote(file) + "; exec \"$@\"",
          "sh"};
      argv.insert(argv.end(), l.argv.begin(), l.argv.end());
      l.argv = argv;
    }
    return Status::Ok();
  };
  Harness h;
  auto backend = MakeNativeFsdpBackend(o);
  BackendOutcome out = h.Run(*backend, c.plan, c.spec, "", "");
  INFO(out.reason);
  REQUIRE(out.status == CaseStatus::kOk);
  CHECK(testing::ReadAll(dir.path / "rank0") == "cluster|case|from the runner|hf_abc");
  CHECK(testing::ReadAll(dir.path / "rank1") == "node n1|case|from the runner|hf_abc");
  CHECK(FactOf(out, fact::kNetwork) == "slow");
  CHECK(FactOf(out, fact::kNetworkRate) == "100000000");
  CHECK(FactOf(out, fact::kRankEnv) ==
        "n0: CASE_ONLY=case HF_TOKEN=*** LEVEL=cluster NCCL_SOCKET_IFNAME=lo PROTOCOL_TEST_INHERITED=from the runner; "
        "n1: CASE_ONLY=case HF_TOKEN=*** LEVEL=node n1 NCCL_SOCKET_IFNAME=lo PROTOCOL_TEST_INHERITED=from the runner");
}

}  // namespace protocol
