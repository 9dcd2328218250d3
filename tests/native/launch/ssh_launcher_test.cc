// The ssh launcher through a real sshd on localhost: a 2-node fsdp case whose
// nodes are two ssh host aliases of this machine. Each rank's environment is
// recorded where sshd runs it (an `env` shim first on the session's PATH: the
// remote command is `cd DIR && exec env VARS... worker`), so the test sees what
// the rank got: the network's env from the plan, the rendezvous at node 0's
// address on that network, and not the runner's own NCCL_* variable.
// Needs root, sshd (openssh-server) and ssh; skipped otherwise, with the reason.

#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "cli_support.h"
#include "skip.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;

// sshd on 127.0.0.1:port with its own host key, accepting `user_key`; stopped on scope exit.
class LocalSshd {
 public:
  explicit LocalSshd(const fs::path& dir) : dir_(dir) {
    if (::geteuid() != 0) {
      error_ = "sshd needs root here";
      return;
    }
    if (!fs::exists("/usr/sbin/sshd") || testing::Shell("command -v ssh ssh-keygen", dir).exit_code != 0) {
      error_ = "no sshd or ssh (Debian: openssh-server, openssh-client)";
      return;
    }
    fs::create_directories("/run/sshd");  // sshd's privilege separation directory
    const testing::Output keys = testing::Shell(
        "ssh-keygen -q -t ed25519 -N '' -f host_key && ssh-keygen -q -t ed25519 -N '' -f user_key && "
        "cp user_key.pub authorized_keys && chmod 600 authorized_keys",
        dir);
    if (keys.exit_code != 0) {
      error_ = "ssh-keygen failed: " + keys.err;
      return;
    }
    // A port of its own: a few tries from a pid-derived one (sshd cannot take port 0).
    for (int attempt = 0; attempt < 8 && !started_; ++attempt) {
      port_ = 20000 + static_cast<int>((::getpid() * 7 + attempt * 613) % 30000);
      fs::remove(dir / "sshd.pid");
      testing::WriteFile(dir / "sshd_config",
                         "Port " + std::to_string(port_) + "\nListenAddress 127.0.0.1\nHostKey " +
                             (dir / "host_key").string() + "\nAuthorizedKeysFile " +
                             (dir / "authorized_keys").string() + "\nPidFile " + (dir / "sshd.pid").string() +
                             "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                             "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nMaxStartups 50\n"
                             "SetEnv PATH=" + (dir / "shim").string() + ":/usr/bin:/bin\n");
      // sshd forks into the background before it binds the port, and writes
      // its pid file once the port is bound: it listens when the file exists.
      // One that could not bind (the port taken by another process) exits
      // without writing it, and the next port is tried.
      if (testing::Shell("/usr/sbin/sshd -f sshd_config -E sshd.log", dir).exit_code != 0) continue;
      for (int i = 0; i < 200 && !started_; ++i) {
        started_ = fs::exists(dir / "sshd.pid");
        if (!started_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (!started_) error_ = "sshd could not start: " + testing::ReadAll(dir / "sshd.log");
  }
  ~LocalSshd() {
    if (started_) testing::Shell("kill $(cat sshd.pid)", dir_);
  }
  const std::string& error() const { return error_; }
  int port() const { return port_; }

 private:
  fs::path dir_;
  std::string error_;
  int port_ = 0;
  bool started_ = false;
};

}  // namespace

TEST_CASE("ssh launcher: a 2-node case through a real sshd; the ranks get the plan's env, not the runner's") {
  testing::TempDir dir;
  LocalSshd sshd(dir.path);
  if (!sshd.error().empty()) SKIP_TEST(sshd.error());
  // The session's `env`: records what the rank is given, then runs it as env(1) would.
  fs::create_directories(dir.path / "shim");
  testing::WriteFile(dir.path / "shim/env",
                     "#!/bin/sh\nwhile [ $# -gt 0 ]; do case \"$1\" in *=*) export \"$1\"; shift;; *) break;; esac; "
                     "done\n/usr/bin/env > " + (dir.path / "rank-").string() + "$RANK.env\nexec \"$@\"\n");
  // The runner's ssh: the system client with this test's host aliases.
  fs::create_directories(dir.path / "bin");
  testing::WriteFile(dir.path / "ssh_config",
                     "Host node-a node-b\n  HostName 127.0.0.1\n  Port " + std::to_string(sshd.port()) +
                         "\n  User root\n  IdentityFile " + (dir.path / "user_key").string() +
                         "\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n");
  testing::WriteFile(dir.path / "bin/ssh",
                     "#!/bin/sh\nexec /usr/bin/ssh -F " + (dir.path / "ssh_config").string() + " \"$@\"\n");
  REQUIRE(testing::Shell("chmod +x shim/env bin/ssh", dir.path).exit_code == 0);

  const fs::path src = PROTOCOL_SOURCE_DIR;
  testing::WriteFile(dir.path / "plan.yaml",
                     "protocol: 1\nname: over-ssh\n"
                     "models: {tiny: {preset: tiny, path: " + (src / "data/quickstart").string() + ", init: random}}\n"
                     "datasets: {corpus: {format: text, path: " + (src / "data/quickstart/corpus.txt").string() + "}}\n"
                     "cluster:\n  launcher: ssh\n  network: here\n"
                     "  networks:\n    here:\n      rate: 10gbit\n"
                     "      env: {PROTOCOL_SSH_TEST: through ssh, GLOO_SOCKET_IFNAME: lo}\n"
                     "      addresses: {n0: 127.0.0.1, n1: 127.0.0.1}\n"
                     "  nodes:\n    - {name: n0, host: node-a, gpus: 0}\n    - {name: n1, host: node-b, gpus: 0}\n"
                     "stages:\n  - name: s\n    cases:\n"
                     "      - {id: s.1, backend: fsdp, workload: pretrain, model: tiny, dataset: corpus, nodes: 2,\n"
                     "         steps: 1, timeout: 120,\n"
                     "         training: {batch_size: 2, seq_len: 16, device: cpu, threads: 1, collective_timeout: 60}}\n");
  const testing::Output run =
      testing::Protocol({"run", "plan.yaml", "--db", "s.db", "--logs", "logs"}, dir.path,
                        "PATH=" + (dir.path / "bin").string() + ":$PATH NCCL_P2P_LEVEL=NVL");
  INFO(run.err);
  INFO(testing::ReadAll(dir.path / "logs/run-1/s.1.log"));
  REQUIRE(run.exit_code == 0);
  for (const char* rank : {"0", "1"}) {
    CAPTURE(rank);
    const std::string env = testing::ReadAll(dir.path / (std::string("rank-") + rank + ".env"));
    CHECK(env.find("\nPROTOCOL_SSH_TEST=through ssh\n") != std::string::npos);
    CHECK(env.find("\nGLOO_SOCKET_IFNAME=lo\n") != std::string::npos);
    CHECK(env.find("\nMASTER_ADDR=127.0.0.1\n") != std::string::npos);  // node 0's address on the network
    CHECK(env.find("NCCL_P2P_LEVEL") == std::string::npos);            // the runner's own stays home
  }
}

}  // namespace protocol
