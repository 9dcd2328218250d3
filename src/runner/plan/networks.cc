#include "runner/plan/networks.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "runner/base/text.h"

namespace protocol {
namespace {

const std::vector<std::string> kNetworkKeys = {"rate", "env", "addresses", "emulate"};
const std::vector<std::string> kEmulateKeys = {"bandwidth", "delay"};
// Variables of the runner's environment that configure a rank's transport or
// libtorch: a remote rank gets them only when the plan says so.
const char* const kTransportPrefixes[] = {"NCCL_", "GLOO_", "TORCH_"};

bool IsVariableName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A variable name as a key of `env:` or an item of `inherit`: a shell name,
// not protocol's own. False after reporting.
bool CheckVariableName(NodeReader& r, const YamlNode& at, const std::string& name) {
  if (!IsVariableName(name)) {
    r.Error(at, "'" + name + "' is not an environment variable name (letters, digits and '_', not starting with a digit)");
    return false;
  }
  if (const ProtocolVariable* own = FindProtocolVariable(name)) {
    r.Error(at, "env cannot set " + name + ": " + own->why);
    return false;
  }
  return true;
}

}  // namespace

const std::vector<ProtocolVariable>& ProtocolVariables() {
  static const std::vector<ProtocolVariable> table = {
      {"RANK", "protocol numbers the ranks of a case"},
      {"WORLD_SIZE", "protocol counts the ranks of a case"},
      {"LOCAL_RANK", "protocol numbers the ranks of a node"},
      {"MASTER_ADDR", "the rendezvous address is node 0's host, or its address on the case's network "
                      "(cluster.networks.<label>.addresses)"},
      {"MASTER_PORT", "rank 0's store binds a port the kernel picks and announces it"},
      {"PROTOCOL_NODE", "protocol names each rank's node"},
      {"PROTOCOL_IN_WORKER", "protocol marks its ranks with it"},
      {"OMP_NUM_THREADS", "a rank's CPU threads come from training.threads"},
  };
  return table;
}

const ProtocolVariable* FindProtocolVariable(const std::string& name) {
  for (const ProtocolVariable& v : ProtocolVariables())
    if (name == v.name) return &v;
  return nullptr;
}

bool IsSecretVariable(const std::string& name) {
  const std::string upper = Upper(name);
  for (const char* word : {"TOKEN", "KEY", "PASSWORD", "SECRET"})
    if (upper.find(word) != std::string::npos) return true;
  return false;
}

std::string DescribeEnv(const std::map<std::string, std::string>& vars) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : vars) parts.push_back(name + "=" + (IsSecretVariable(name) ? "***" : value));
  return Join(parts, " ");
}

EnvSpec MergeEnv(const EnvSpec* cluster, const EnvSpec* network, const EnvSpec* node, const EnvSpec* case_env) {
  EnvSpec merged;
  for (const EnvSpec* level : {cluster, network, node, case_env}) {
    if (!level) continue;
    for (const auto& [name, value] : level->vars) merged.vars[name] = value;
    for (const std::string& name : level->inherit)
      if (std::find(merged.inherit.begin(), merged.inherit.end(), name) == merged.inherit.end())
        merged.inherit.push_back(name);
  }
  return merged;
}

std::map<std::string, std::string> ResolveEnv(const EnvSpec& env, const std::map<std::string, std::string>& runner_env) {
  std::map<std::string, std::string> out;
  for (const std::string& name : env.inherit)
    if (auto it = runner_env.find(name); it != runner_env.end()) out[name] = it->second;
  for (const auto& [name, value] : env.vars) out[name] = value;
  return out;
}

std::vector<std::string> WithheldVariables(const std::map<std::string, std::string>& runner_env, const EnvSpec& env) {
  std::vector<std::string> out;
  for (const auto& [name, value] : runner_env) {
    bool transport = false;
    for (const char* prefix : kTransportPrefixes) transport = transport || StartsWith(name, prefix);
    if (!transport || env.vars.count(name) ||
        std::find(env.inherit.begin(), env.inherit.end(), name) != env.inherit.end())
      continue;
    out.push_back(name);
  }
  return out;
}

std::optional<EnvSpec> ReadEnv(NodeReader& r, const YamlNode& node) {
  if (!r.ExpectMap(node, "env")) return std::nullopt;
  EnvSpec env;
  env.where = r.Where(node);
  bool ok = true;
  for (const auto& [key, value] : node.entries) {
    if (key.scalar == "inherit") {
      if (!r.ExpectSequence(value, "inherit")) {
        ok = false;
        continue;
      }
      for (const YamlNode& item : value.items) {
        std::optional<std::string> name = r.String(item, "inherit");
        if (!name || !CheckVariableName(r, item, *name)) {
          ok = false;
          continue;
        }
        env.inherit.push_back(*name);
      }
      continue;
    }
    if (!CheckVariableName(r, key, key.scalar)) {
      ok = false;
      continue;
    }
    if (std::optional<std::string> v = r.String(value, key.scalar)) env.vars[key.scalar] = *v;
    else ok = false;
  }
  if (!ok) return std::nullopt;
  return env;
}

std::optional<NetworkEmulation> ReadEmulation(NodeReader& r, const YamlNode& n) {
  if (!r.ExpectMap(n, "emulate")) return std::nullopt;
  r.CheckKeys(n, kEmulateKeys);
  NetworkEmulation e;
  bool ok = true;
  auto read = [&](const char* key, auto parse, std::string* text, double* value) {
    const YamlNode* v = n.Find(key);
    if (!v) return;
    std::optional<std::string> written = r.String(*v, key);
    if (!written) {
      ok = false;
      return;
    }
    Result<double> parsed = parse(*written);
    if (!parsed.ok()) {
      r.Error(*v, parsed.status().message());
      ok = false;
      return;
    }
    *text = *written;
    *value = *parsed;
  };
  if (!n.Find("bandwidth")) {
    r.Error(n, "emulate needs a bandwidth (e.g. bandwidth: 100mbit)");
    ok = false;
  }
  read("bandwidth", ParseTcRate, &e.bandwidth, &e.bits_per_second);
  read("delay", ParseTcTime, &e.delay, &e.delay_seconds);
  if (!ok) return std::nullopt;
  return e;
}

void ReadNetworks(NodeReader& r, const YamlNode& node, ClusterSpec& cluster) {
  if (!r.ExpectMap(node, "networks")) return;
  for (const auto& [key, value] : node.entries) {
    if (!r.ExpectMap(value, key.scalar)) continue;
    r.CheckKeys(value, kNetworkKeys);
    NetworkSpec net;
    net.name = key.scalar;
    net.where = r.Where(key);
    if (const YamlNode* rate = value.Find("rate")) {
      if (std::optional<std::string> text = r.String(*rate, "rate")) {
        Result<double> bits = ParseTcRate(*text);
        if (bits.ok()) {
          net.rate = *text;
          net.bits_per_second = *bits;
        } else {
          r.Error(*rate, bits.status().message());
        }
      }
    } else {
      r.Error(key, "network '" + net.name + "' needs a nominal rate (e.g. rate: 10gbit), which the link probe checks");
    }
    if (const YamlNode* env = value.Find("env")) {
      if (auto e = ReadEnv(r, *env)) net.env = *e;
    }
    if (const YamlNode* addresses = value.Find("addresses"); addresses && r.ExpectMap(*addresses, "addresses")) {
      for (const auto& [node_name, address] : addresses->entries) {
        if (!cluster.FindNode(node_name.scalar)) {
          std::vector<std::string> names;
          for (const NodeSpec& n : cluster.nodes) names.push_back(n.name);
          r.Error(node_name, "unknown node '" + node_name.scalar + "' in network '" + net.name + "' addresses",
                  names.empty() ? "the cluster has no nodes" : "cluster nodes: " + Join(names, ", "));
          continue;
        }
        if (std::optional<std::string> a = r.String(address, node_name.scalar); a && !a->empty())
          net.addresses[node_name.scalar] = *a;
      }
    }
    if (const YamlNode* emulate = value.Find("emulate")) {
      if (auto e = ReadEmulation(r, *emulate)) net.emulate = *e;
    }
    // Kept also when a part of it was wrong (each problem is reported where it
    // is): the cases that name it are not told that it does not exist.
    cluster.networks[net.name] = net;
  }
}

}  // namespace protocol
