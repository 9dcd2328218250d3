#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_LAUNCHER_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_LAUNCHER_H_

// Launchers: how the rank processes of a distributed case are started on
// their nodes. A registry (table) of launchers by the plan's
// `cluster.launcher` name: local | ssh | slurm.
//
// The seam (docs/distributed.md): the backend builds one RankLaunch per rank —
// the worker command as it must run ON THE NODE (argv) and the variables it
// needs (env: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...).
// Launcher::Prepare turns those into what THIS host runs to start each rank
// (local: unchanged; ssh: the system ssh client with a quoted remote command;
// slurm: srun). Whatever comes out may be wrapped once more per node before the
// supervisor (supervisor.h) starts it, e.g. `ip netns exec NS <argv>` for the
// emulated two-node network: wrapping only prepends to argv and adds to env.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/base/status.h"

namespace protocol {
namespace native {

struct RankLaunch {
  int rank = 0;
  std::string node;                        // the node's name in the plan, e.g. "rig1"
  std::vector<std::string> argv;           // argv[0] searched in PATH; never through a local shell
  std::map<std::string, std::string> env;  // set on top of the inherited environment
  // Variables of the runner's environment the rank must not get (networks.h
  // WithheldVariables): removed where a launcher would pass the runner's
  // environment on (slurm's --export=ALL); ssh passes only `env`, and a local
  // rank is on the runner's own host.
  std::vector<std::string> unset;
};

struct LaunchRequest {
  std::vector<RankLaunch> ranks;                  // the worker command of each rank, as run on its node
  std::map<std::string, std::string> node_hosts;  // node name → host name or address
  std::string workdir;                            // the worker's working directory on its node
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // The processes to start on this host, one per rank, in rank order.
  // Returns kInvalidArgument when a rank's node has no host (ssh, slurm).
  virtual Result<std::vector<RankLaunch>> Prepare(const LaunchRequest& request) const = 0;
};

struct LauncherEntry {
  const char* name;     // as in plans: cluster.launcher
  const char* summary;  // one line for docs
  std::unique_ptr<Launcher> (*make)();
};
const std::vector<LauncherEntry>& LauncherTable();
const LauncherEntry* FindLauncher(const std::string& name);  // nullptr when unknown

// The remote command line of one rank, for a POSIX shell on its node:
//   cd 'DIR' && exec env 'K=V' ... 'argv0' 'argv1' ...
// Every plan-derived string is single-quoted (ShellQuote); nothing is interpolated.
std::string RemoteCommand(const RankLaunch& rank, const std::string& workdir);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_LAUNCHER_H_
