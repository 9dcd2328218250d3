#ifndef PROTOCOL_RUNNER_PLAN_NETWORKS_H_
#define PROTOCOL_RUNNER_PLAN_NETWORKS_H_

// The networks a plan names and the environment its native ranks get
// (docs/plan-format.md, "networks" and "env"):
//
//   cluster:
//     env: {NCCL_DEBUG: WARN}                       # every rank of every case
//     networks:
//       10G:
//         rate: 10gbit                              # nominal; the link probe checks it
//         env: {NCCL_IB_DISABLE: "1", NCCL_SOCKET_IFNAME: eth1, GLOO_SOCKET_IFNAME: eth1}
//         addresses: {rig0: 192.168.10.1, rig1: 192.168.10.2}
//         emulate: {bandwidth: 100mbit}             # a rehearsal on one host only
//     nodes:
//       - {name: rig1, host: rig1, env: {NCCL_IB_HCA: mlx5_1}}
//   ... a case: {network: 10G, env: {NCCL_ALGO: Ring, inherit: [NCCL_DEBUG_SUBSYS]}}
//
// A rank's environment is cluster.env, then its case's network's env, then its
// node's env, then the case's env, a later level's value winning (MergeEnv);
// then protocol's own variables (ProtocolVariables), which no level may set.
// `inherit` names variables passed on from the runner's own environment;
// nothing else of it reaches a remote rank (an NCCL_*, GLOO_* or TORCH_*
// variable in the runner's environment is withheld: WithheldVariables).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/plan/plan.h"
#include "runner/plan/plan_reader.h"

namespace protocol {

// Protocol's own rank variables, with why a plan cannot set them. An `env:`
// that names one is a located error.
struct ProtocolVariable {
  const char* name;
  const char* why;
};
const std::vector<ProtocolVariable>& ProtocolVariables();
const ProtocolVariable* FindProtocolVariable(const std::string& name);

// True for a variable whose value a record must not show: its name contains
// TOKEN, KEY, PASSWORD or SECRET (any case).
bool IsSecretVariable(const std::string& name);
// "NAME=value NAME2=***" in name order, secrets masked; "" for none.
std::string DescribeEnv(const std::map<std::string, std::string>& vars);

// The environment levels of one rank merged: vars of later levels win,
// inherit lists joined (each name once). Null levels are skipped.
EnvSpec MergeEnv(const EnvSpec* cluster, const EnvSpec* network, const EnvSpec* node, const EnvSpec* case_env);

// `env.vars` plus each `env.inherit` name that `runner_env` (NAME -> value)
// holds (a value the plan wrote wins over the inherited one).
std::map<std::string, std::string> ResolveEnv(const EnvSpec& env, const std::map<std::string, std::string>& runner_env);

// The names of `runner_env` (NAME -> value) that must not reach a remote rank
// unasked: NCCL_*, GLOO_* and TORCH_* variables that `env` neither sets nor
// inherits. In name order.
std::vector<std::string> WithheldVariables(const std::map<std::string, std::string>& runner_env, const EnvSpec& env);

// ---- reading (the plan parser's part) -------------------------------------

// `env:` at `node` (a map): NAME: value entries and `inherit: [NAME, ...]`.
// Names must be shell variable names and not protocol's own; reports every
// problem located and returns nullopt when there was one.
std::optional<EnvSpec> ReadEnv(NodeReader& r, const YamlNode& node);
// `emulate: {bandwidth, delay}` by the rules the run uses (ParseTcRate,
// ParseTcTime); nullopt after reporting a problem.
std::optional<NetworkEmulation> ReadEmulation(NodeReader& r, const YamlNode& node);
// `cluster.networks` into `cluster.networks`; the nodes named by `addresses`
// must be cluster nodes (read `cluster.nodes` first).
void ReadNetworks(NodeReader& r, const YamlNode& node, ClusterSpec& cluster);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_NETWORKS_H_
