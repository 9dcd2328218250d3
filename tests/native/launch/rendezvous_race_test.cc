// The rendezvous port cannot be lost (launch/rendezvous.h): four `protocol
// run`s of a 2-rank case at once, in a network namespace of their own whose
// ephemeral port range is 64 ports wide, so that ports taken by different
// runs collide often; three rounds, each in a fresh namespace (no TIME-WAIT
// left from the round before). One run needs fewer than 8 ports at its peak
// and leaves 6 or 7 in TIME-WAIT, so 64 is room enough for four. A port
// chosen, released and bound later by rank 0's store was taken in between in
// 3 of the first 4 runs here (a rank joined another run's store, or waited
// for a port nobody served); a port the store binds itself cannot be taken.
// Every case must end ok. Needs CAP_NET_ADMIN and iproute2 (skipped otherwise).

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "backends/native/launch/network_emulation.h"
#include "cli_support.h"
#include "skip.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using testing::Shell;

constexpr int kRunsAtOnce = 4;
constexpr int kRounds = 3;

// Makes the namespace `ns` with a narrow port range; why it cannot ("" when it could).
std::string MakeNarrowNamespace(const std::string& ns) {
  if (Status s = CheckNetworkEmulationPrivileges(); !s.ok()) return s.message();
  const testing::Output made = Shell("ip netns add " + ns + " && ip -n " + ns + " link set lo up && ip netns exec " +
                                         ns + " sysctl -q -w net.ipv4.ip_local_port_range='40000 40063'",
                                     fs::temp_directory_path());
  if (made.exit_code != 0) {
    Shell("ip netns del " + ns + " 2>/dev/null", fs::temp_directory_path());
    return "cannot make a network namespace with a narrow port range: " + made.err;
  }
  return "";
}

}  // namespace

TEST_CASE("rendezvous: concurrent 2-rank runs in a 64-port range all end ok") {
  const std::string ns = "protocol-rdv-" + std::to_string(::getpid());
  if (std::string why = MakeNarrowNamespace(ns); !why.empty()) SKIP_TEST(why);
  Shell("ip netns del " + ns, fs::temp_directory_path());
  testing::TempDir dir;
  const fs::path src = PROTOCOL_SOURCE_DIR;
  testing::WriteFile(dir.path / "plan.yaml",
                     "protocol: 1\nname: race\n"
                     "models: {tiny: {preset: tiny, path: " + (src / "data/quickstart").string() + ", init: random}}\n"
                     "datasets: {corpus: {format: text, path: " + (src / "data/quickstart/corpus.txt").string() + "}}\n"
                     "stages:\n  - name: s\n    cases:\n"
                     "      - {id: two, backend: fsdp, workload: pretrain, model: tiny, dataset: corpus, steps: 1,\n"
                     "         training: {batch_size: 2, seq_len: 16, device: cpu, ranks_per_node: 2, threads: 2,\n"
                     "                    collective_timeout: 30}}\n");
  int failed = 0;
  std::string failures;
  for (int round = 0; round < kRounds; ++round) {
    REQUIRE(MakeNarrowNamespace(ns).empty());
    // Every run at once inside the namespace; each writes its exit code beside its output.
    std::string script = "for i in $(seq " + std::to_string(kRunsAtOnce) + "); do (" +
                         testing::ShellQuote(PROTOCOL_BINARY) +
                         " run plan.yaml --db r" + std::to_string(round) + "-$i.db --logs logs" + std::to_string(round) +
                         "-$i --log-level quiet >out" + std::to_string(round) + "-$i 2>&1; echo $? >rc" +
                         std::to_string(round) + "-$i) & done; wait";
    const testing::Output o = Shell("ip netns exec " + ns + " sh -c " + testing::ShellQuote(script), dir.path);
    CHECK(o.exit_code == 0);
    Shell("ip netns del " + ns, fs::temp_directory_path());
    for (int i = 1; i <= kRunsAtOnce; ++i) {
      const std::string tag = std::to_string(round) + "-" + std::to_string(i);
      const std::string rc = testing::ReadAll(dir.path / ("rc" + tag));
      if (rc != "0\n") {
        ++failed;
        failures += "run " + tag + " exited " + rc + testing::ReadAll(dir.path / ("out" + tag)) + "\n";
      }
    }
  }
  INFO(failures);
  CHECK(failed == 0);
}

}  // namespace protocol
