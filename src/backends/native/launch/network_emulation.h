#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_NETWORK_EMULATION_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_NETWORK_EMULATION_H_

// A two-node (or N-node) rehearsal on one host: one Linux network namespace
// per plan node, joined by veth links shaped with tc, so that ranks started
// "on different nodes" talk over a link of the plan's `cluster.emulate`
// bandwidth and delay (docs/rehearsal.md). Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN).
//
// Topology (all of it inside namespaces this object creates; the host's
// interfaces, addresses and routes are never touched):
//   2 nodes   node0:eth0 <-- veth --> node1:eth0
//   N > 2     nodeI:eth0 <-- veth --> sw:pI, every pI a port of bridge sw:br0
// Node i has address 10.77.0.(i+1)/24 on its eth0 and its own loopback up.
//
// Shaping (tc, egress qdiscs; `tc` can only shape what leaves an interface):
//   - every node's eth0: rate `bandwidth` (tbf) and one-way `delay` (netem);
//     traffic i -> j thus sees the bandwidth and the delay once each way, and
//     a round trip costs 2 x delay;
//   - N > 2 only: every switch port pI: rate `bandwidth`, no delay (the
//     receiving node's downlink: several senders share one node's bandwidth).
//   bandwidth "": no rate limit; delay "": no netem qdisc. netem needs the
//   kernel's sch_netem; where it is missing, Create fails and says so.
//
// Names: namespaces are "<prefix>-<node>" and "<prefix>-sw", with prefix
// "protocol-<pid>-<seq>". A marker file <marker_dir>/<prefix> records the
// owner's pid and start time, so RemoveStaleNetworks (and
// scripts/netns-cleanup.sh) can remove what a dead process left behind.
//
// Seam for the launcher (src/backends/native/launch/launcher.h, RankLaunch):
//   auto net = EmulatedNetwork::Create(node_names, *plan.cluster.emulate);
//   for each RankLaunch r: r.argv = net->Wrap(index of r.node, r.argv);
//   the master address is net->nodes()[0].address (10.77.0.1);
//   keep `net` alive until every rank has ended, then let it go out of scope
//   (or call Teardown() to see its Status).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runner/base/status.h"
#include "runner/exec/process.h"
#include "runner/plan/plan.h"

namespace protocol {

struct EmulatedNode {
  std::string name;     // the plan's node name, e.g. "rig0"
  std::string netns;    // namespace name, e.g. "protocol-4711-0-rig0"
  std::string address;  // IPv4 address inside the namespace, e.g. "10.77.0.1"
  std::string device;   // the node's interface inside its namespace: "eth0"
};

struct NetworkEmulationOptions {
  // Runs `ip` and `tc`. nullptr: the system process runner. Not owned; must
  // outlive the network.
  ProcessRunner* runner = nullptr;
  // Namespace name prefix. Empty: "protocol-<pid>-<seq>" (unique per process
  // and per network).
  std::string prefix;
  // Where the owner marker is written. Empty: no marker.
  std::string marker_dir = "/run/protocol-netem";
  // false only for tests with a fake runner.
  bool check_privileges = true;
  // Deadline for each ip/tc command.
  double command_timeout_seconds = 20;
};

// The message Create returns without the privileges.
inline constexpr std::string_view kNeedsRootMessage =
    "network emulation needs root (CAP_NET_ADMIN): run as root or drop cluster.emulate";

// Owns the namespaces of one emulated network. Destroying it tears them down.
// Not copyable. Thread-compatible (one thread at a time).
class EmulatedNetwork {
 public:
  // Creates one namespace per entry of `nodes`, joined and shaped as
  // described above, at shape.bits_per_second and shape.delay_seconds (the
  // plan's, read by ParseTcRate / ParseTcTime, plan.h). InvalidArgument,
  // before anything is created, without the privileges (kNeedsRootMessage),
  // for fewer than 2 or more than 253 nodes, names not unique or not
  // [A-Za-z0-9._-]+ or "sw". IoError naming the failing command and its
  // output when an ip/tc command fails, after removing everything created so far.
  static Result<std::unique_ptr<EmulatedNetwork>> Create(const std::vector<std::string>& nodes,
                                                         const NetworkEmulation& shape,
                                                         const NetworkEmulationOptions& options = {});

  ~EmulatedNetwork();
  EmulatedNetwork(const EmulatedNetwork&) = delete;
  EmulatedNetwork& operator=(const EmulatedNetwork&) = delete;

  const std::vector<EmulatedNode>& nodes() const { return nodes_; }
  const std::string& prefix() const { return prefix_; }

  // The argv that runs `argv` inside node `node`'s namespace:
  // {"ip", "netns", "exec", <netns>, argv...}. `ip netns exec` execs the
  // program (same pid), so process groups and signals work as without it.
  // REQUIRES: node < nodes().size().
  std::vector<std::string> Wrap(size_t node, const std::vector<std::string>& argv) const;

  // Deletes every namespace (and so every link and qdisc in it) and the
  // marker. Idempotent: a second call does nothing and returns OK. Processes
  // still running inside a namespace keep it alive, unnamed, until they end:
  // end the ranks first. Returns the first failure, after trying everything.
  Status Teardown();

  // Every command run so far, for diagnostics ("ip netns add protocol-1-0-a").
  const std::vector<std::string>& commands() const { return commands_; }

 private:
  EmulatedNetwork() = default;
  Status Run(const std::vector<std::string>& argv);
  Status Build(const std::vector<std::string>& names, const NetworkEmulation& shape);
  Status Shape(const std::string& netns, const std::string& device, const NetworkEmulation& shape,
               bool with_delay);

  std::unique_ptr<ProcessRunner> owned_runner_;
  ProcessRunner* runner_ = nullptr;
  NetworkEmulationOptions options_;
  std::string prefix_;
  std::vector<EmulatedNode> nodes_;
  std::vector<std::string> namespaces_;  // created so far, switch included
  std::string marker_path_;
  std::vector<std::string> commands_;
};

// OK when this process may create namespaces and shape links (effective
// CAP_NET_ADMIN and CAP_SYS_ADMIN); otherwise InvalidArgument(kNeedsRootMessage).
Status CheckNetworkEmulationPrivileges();

// Where `ip netns` keeps its named namespaces.
inline constexpr const char* kNetnsRunDir = "/run/netns";

// Removes the namespaces named "protocol-<pid>-<seq>-..." whose owner is gone
// (owners are looked up in this process's pid namespace):
// <pid> is not a live process, or it is but started at another time than the
// marker recorded (the pid was reused). Returns the namespaces removed.
// `netns_dir` and `marker_dir` are parameters for tests.
Result<std::vector<std::string>> RemoveStaleNetworks(ProcessRunner* runner = nullptr,
                                                     const std::string& netns_dir = kNetnsRunDir,
                                                     const std::string& marker_dir = "/run/protocol-netem");

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_NETWORK_EMULATION_H_
