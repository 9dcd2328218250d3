// Named networks and the ranks' environment (networks.h): parsing with
// located errors, the merge order, inherited and withheld variables, masking,
// and the resolved plan's round trip.

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "runner/base/text.h"
#include "runner/plan/networks.h"
#include "runner/plan/plan_parser.h"

using namespace protocol;

namespace {

const std::string kPlan = R"yaml(protocol: 1
name: nets
models:
  m7: {preset: llama2-7b}
datasets:
  web: {format: text, path: /d/web.txt}
cluster:
  launcher: ssh
  network: 10G
  env: {NCCL_DEBUG: WARN, HF_TOKEN: abc}
  networks:
    80G:
      rate: 80gbit
      env: {NCCL_IB_HCA: mlx5_0}
    10G:
      rate: 10gbit
      env: {NCCL_IB_DISABLE: "1", NCCL_SOCKET_IFNAME: eth1}
      addresses: {rig0: 192.168.10.1, rig1: 192.168.10.2}
      emulate: {bandwidth: 100mbit, delay: 1ms}
  nodes:
    - {name: rig0, gpus: 8}
    - {name: rig1, gpus: 8, env: {NCCL_SOCKET_IFNAME: eth2}}
stages:
  - name: s1
    cases:
      - {id: a, workload: pretrain, backend: fsdp, model: m7, dataset: web, steps: 10, nodes: 2, network: 80G}
      - {id: b, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10, topology: "rig0:1x8 rig1:1x8",
         env: {NCCL_ALGO: Ring, inherit: [NCCL_DEBUG_SUBSYS]}}
)yaml";

std::string ErrorsOf(const PlanParseResult& r) {
  std::vector<std::string> lines;
  for (const auto& e : r.errors) lines.push_back(e.ToString());
  return Join(lines, "\n");
}

// kPlan with `from` replaced by `to` (which must occur once).
std::string Edited(const std::string& from, const std::string& to) {
  std::string text = kPlan;
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string Errors(const std::string& text) {
  PlanParseResult r = ParsePlanString(text, "p.yaml");
  return r.ok() ? "(ok)" : ErrorsOf(r);
}

}  // namespace

TEST_CASE("networks: labels, rates, addresses, emulation and env at every level are read") {
  PlanParseResult r = ParsePlanString(kPlan, "p.yaml");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const ClusterSpec& c = r.plan->cluster;
  REQUIRE(c.networks.size() == 2);
  const NetworkSpec* ten = c.FindNetwork("10G");
  REQUIRE(ten != nullptr);
  CHECK(ten->bits_per_second == 1e10);
  CHECK(ten->addresses.at("rig1") == "192.168.10.2");
  REQUIRE(ten->emulate);
  CHECK(ten->emulate->bits_per_second == 1e8);
  CHECK(c.FindNetwork("80G")->bits_per_second == 8e10);
  CHECK(c.env.vars.at("NCCL_DEBUG") == "WARN");
  CHECK(c.FindNode("rig1")->env.vars.at("NCCL_SOCKET_IFNAME") == "eth2");
  const CaseSpec* b = r.plan->FindCase("b");
  CHECK(b->network == "10G");  // the cluster's default label
  CHECK(b->env.vars.at("NCCL_ALGO") == "Ring");
  CHECK(b->env.inherit == std::vector<std::string>{"NCCL_DEBUG_SUBSYS"});

  // The resolved plan writes them back: parsing it gives the same.
  PlanParseResult again = ParsePlanString(r.plan->resolved_text, "resolved.yaml");
  INFO(r.plan->resolved_text);
  REQUIRE(again.ok());
  CHECK(again.plan->resolved_text == r.plan->resolved_text);
  CHECK(again.plan->cluster.FindNetwork("10G")->addresses == ten->addresses);
  CHECK(again.plan->FindCase("b")->env.inherit == b->env.inherit);
}

TEST_CASE("networks: the ranks' environment merges cluster, network, node, case; protocol's own cannot be set") {
  PlanParseResult r = ParsePlanString(kPlan, "p.yaml");
  REQUIRE(r.ok());
  const ClusterSpec& c = r.plan->cluster;
  const CaseSpec& b = *r.plan->FindCase("b");
  const EnvSpec rig1 = MergeEnv(&c.env, &c.FindNetwork("10G")->env, &c.FindNode("rig1")->env, &b.env);
  CHECK(rig1.vars == std::map<std::string, std::string>{{"HF_TOKEN", "abc"},
                                                        {"NCCL_ALGO", "Ring"},
                                                        {"NCCL_DEBUG", "WARN"},
                                                        {"NCCL_IB_DISABLE", "1"},
                                                        {"NCCL_SOCKET_IFNAME", "eth2"}});  // the node's wins
  CHECK(DescribeEnv(rig1.vars) ==
        "HF_TOKEN=*** NCCL_ALGO=Ring NCCL_DEBUG=WARN NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth2");

  // Inherited by name from the runner's environment; a written value wins.
  const std::map<std::string, std::string> runner = {
      {"NCCL_DEBUG_SUBSYS", "INIT"}, {"NCCL_P2P_DISABLE", "1"}, {"TORCH_SHOW_CPP_STACKTRACES", "1"},
      {"NCCL_DEBUG", "INFO"},        {"HOME", "/root"}};
  const auto resolved = ResolveEnv(rig1, runner);
  CHECK(resolved.at("NCCL_DEBUG_SUBSYS") == "INIT");
  CHECK(resolved.at("NCCL_DEBUG") == "WARN");
  CHECK(resolved.count("NCCL_P2P_DISABLE") == 0);
  // The runner's transport variables the plan did not ask for are withheld.
  CHECK(WithheldVariables(runner, rig1) == std::vector<std::string>{"NCCL_P2P_DISABLE", "TORCH_SHOW_CPP_STACKTRACES"});

  CHECK(IsSecretVariable("WANDB_API_KEY"));
  CHECK(IsSecretVariable("db_password"));
  CHECK_FALSE(IsSecretVariable("NCCL_SOCKET_IFNAME"));
}

TEST_CASE("networks: mistakes are located errors with a hint") {
  CHECK(Errors(Edited("NCCL_ALGO: Ring", "MASTER_PORT: \"29500\"")) ==
        "p.yaml:28:16: env cannot set MASTER_PORT: rank 0's store binds a port the kernel picks and announces it");
  CHECK(Errors(Edited("NCCL_DEBUG: WARN", "OMP_NUM_THREADS: \"4\"")).find(
            "env cannot set OMP_NUM_THREADS: a rank's CPU threads come from training.threads") != std::string::npos);
  CHECK(Errors(Edited("inherit: [NCCL_DEBUG_SUBSYS]", "inherit: [NCCL-DEBUG]"))
            .find("'NCCL-DEBUG' is not an environment variable name") != std::string::npos);
  CHECK(Errors(Edited("rig1: 192.168.10.2", "rig2: 192.168.10.2")) ==
        "p.yaml:18:39: unknown node 'rig2' in network '10G' addresses (cluster nodes: rig0, rig1)");
  CHECK(Errors(Edited("      rate: 80gbit\n", "")).find("network '80G' needs a nominal rate") != std::string::npos);
  CHECK(Errors(Edited("network: 80G}", "network: 80g}")) ==
        "p.yaml:26:107: case 'a': network '80g' is not one of cluster.networks (did you mean '80G'?)");
  CHECK(Errors(Edited("  network: 10G\n", "  network: 1G\n")).find(
            "cluster.network '1G' names no network of cluster.networks") != std::string::npos);
}
