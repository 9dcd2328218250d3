#include "backends/native/launch/launcher.h"

#include "runner/base/placeholders.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

// Ranks run on this host, as they are.
class LocalLauncher : public Launcher {
 public:
  Result<std::vector<RankLaunch>> Prepare(const LaunchRequest& request) const override { return request.ranks; }
};

Result<std::string> HostOf(const LaunchRequest& request, const RankLaunch& rank) {
  auto it = request.node_hosts.find(rank.node);
  if (it == request.node_hosts.end() || it->second.empty())
    return Status::InvalidArgument(
        fmt::format("rank {}: node '{}' has no host in the plan's cluster (cluster.nodes[].host)", rank.rank, rank.node));
  return it->second;
}

// One launch per rank, made by `launch(rank, host)` with the host of the
// rank's node; stops at the first rank whose node has no host.
template <typename LaunchOnHost>
Result<std::vector<RankLaunch>> ForEachRankOnHost(const LaunchRequest& request, LaunchOnHost launch) {
  std::vector<RankLaunch> out;
  for (const RankLaunch& rank : request.ranks) {
    auto host = HostOf(request, rank);
    if (!host.ok()) return host.status();
    out.push_back(launch(rank, *host));
  }
  return out;
}

// `ssh -o BatchMode=yes -T HOST -- 'cd DIR && exec env ... worker ...'`. The
// environment travels inside the quoted remote command (sshd drops most
// variables); -T: no terminal, so the remote process ends when ssh is killed.
class SshLauncher : public Launcher {
 public:
  Result<std::vector<RankLaunch>> Prepare(const LaunchRequest& request) const override {
    return ForEachRankOnHost(request, [&](const RankLaunch& rank, const std::string& host) {
      RankLaunch l;
      l.rank = rank.rank;
      l.node = rank.node;
      l.argv = {"ssh", "-o", "BatchMode=yes", "-T", host, "--", RemoteCommand(rank, request.workdir)};
      return l;
    });
  }
};

// Inside a Slurm allocation: one `srun` step per rank on its node's host.
class SlurmLauncher : public Launcher {
 public:
  Result<std::vector<RankLaunch>> Prepare(const LaunchRequest& request) const override {
    return ForEachRankOnHost(request, [&](const RankLaunch& rank, const std::string& host) {
      RankLaunch l = rank;
      std::vector<std::string> argv = {"srun", "--nodes=1", "--ntasks=1", "--nodelist=" + host, "--export=ALL",
                                       "--kill-on-bad-exit=1"};
      if (!request.workdir.empty()) argv.push_back("--chdir=" + request.workdir);
      if (!rank.unset.empty()) {  // --export=ALL would carry them to the node
        argv.push_back("env");
        for (const std::string& name : rank.unset) argv.insert(argv.end(), {"-u", name});
      }
      argv.insert(argv.end(), rank.argv.begin(), rank.argv.end());
      l.argv = std::move(argv);
      return l;
    });
  }
};

template <typename T>
std::unique_ptr<Launcher> Make() {
  return std::make_unique<T>();
}

}  // namespace

std::string RemoteCommand(const RankLaunch& rank, const std::string& workdir) {
  std::vector<std::string> parts;
  if (!workdir.empty()) parts.push_back("cd " + ShellQuote(workdir) + " &&");
  parts.push_back("exec env");
  for (const auto& [key, value] : rank.env) parts.push_back(ShellQuote(key + "=" + value));
  for (const std::string& arg : rank.argv) parts.push_back(ShellQuote(arg));
  return Join(parts, " ");
}

const std::vector<LauncherEntry>& LauncherTable() {
  static const std::vector<LauncherEntry> table = {
      {"local", "every rank a process on this host", &Make<LocalLauncher>},
      {"ssh", "each rank started on its node's host through the system ssh client", &Make<SshLauncher>},
      {"slurm", "each rank an srun step on its node, inside an allocation", &Make<SlurmLauncher>},
  };
  return table;
}

const LauncherEntry* FindLauncher(const std::string& name) {
  for (const LauncherEntry& e : LauncherTable())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace native
}  // namespace protocol
