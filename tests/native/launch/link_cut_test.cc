// A link cut mid-case, end to end: `protocol run` of a 2-node fsdp case on an
// emulated network (one namespace per node, cluster.emulate), the veth of node
// n1 set down while the ranks train. The case must fail within its
// collective_timeout and its reason must name the link between n0 and n1 (the
// heartbeats show both ranks alive), the rank's own Gloo error kept after it.
// Without that finding the reason was Gloo's bare "Timed out waiting ...".
// Needs CAP_NET_ADMIN + CAP_SYS_ADMIN and iproute2 (skipped otherwise).

#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "backends/native/launch/network_emulation.h"
#include "cli_support.h"
#include "runner/base/text.h"
#include "skip.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;

// The namespace of node `node` of the one emulated network alive now whose
// name ends in "-<node>"; "" when there is none yet.
std::string NodeNamespace(const std::string& node) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kNetnsRunDir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("protocol-", 0) == 0 && EndsWith(name, "-" + node)) return name;
  }
  return "";
}

}  // namespace

TEST_CASE("link cut: a 2-node case whose link goes down names the link, within its collective timeout") {
  if (Status s = CheckNetworkEmulationPrivileges(); !s.ok()) SKIP_TEST(s.message());
  if (!NodeNamespace("cutn1").empty()) SKIP_TEST("another emulated network with a node 'cutn1' is alive");
  testing::TempDir dir;
  const fs::path src = PROTOCOL_SOURCE_DIR;
  testing::WriteFile(dir.path / "plan.yaml",
                     "protocol: 1\nname: cut\n"
                     "models: {tiny: {preset: tiny, path: " + (src / "data/quickstart").string() + ", init: random}}\n"
                     "datasets: {corpus: {format: text, path: " + (src / "data/quickstart/corpus.txt").string() + "}}\n"
                     "cluster:\n  launcher: local\n  nodes:\n"
                     "    - {name: cutn0, host: localhost, gpus: 0}\n    - {name: cutn1, host: localhost, gpus: 0}\n"
                     "  emulate: {bandwidth: 1gbit}\n"
                     "stages:\n  - name: s\n    cases:\n"
                     "      - {id: cut, backend: fsdp, workload: pretrain, model: tiny, dataset: corpus, nodes: 2,\n"
                     "         steps: 100000, timeout: 2m,\n"
                     "         training: {batch_size: 2, seq_len: 16, device: cpu, threads: 1, collective_timeout: 5}}\n");
  auto run = std::async(std::launch::async, [&] {
    return testing::Protocol({"run", "plan.yaml", "--db", "cut.db", "--logs", "logs"}, dir.path);
  });
  // Wait for training (a logged step of rank 0), then take n1's link down.
  const fs::path log = dir.path / "logs/run-1/cut.log";
  bool training = false;
  for (int i = 0; i < 600 && !training; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    training = fs::exists(log) && testing::ReadAll(log).find("\"step\"") != std::string::npos;
  }
  const std::string n1 = NodeNamespace("cutn1");
  REQUIRE_MESSAGE(training, testing::ReadAll(log));
  REQUIRE(!n1.empty());
  const auto cut_at = std::chrono::steady_clock::now();
  REQUIRE(testing::Shell("ip -n " + n1 + " link set eth0 down", dir.path).exit_code == 0);
  const testing::Output o = run.get();
  const double after_cut = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count();

  CAPTURE(o.err);
  CHECK(o.exit_code == 1);
  CHECK(after_cut < 5 + 15);  // the collective timeout, then the stop of the other rank and the tear-down
  const std::vector<CaseRecord> rows = testing::CasesOf(dir.path / "cut.db", 1);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].status == CaseStatus::kFailed);
  CAPTURE(rows[0].reason);
  CHECK(rows[0].reason.find("every rank was still alive") != std::string::npos);
  const bool named = rows[0].reason.find("the link between cutn0 and cutn1 is down or stalled") != std::string::npos ||
                     rows[0].reason.find("the link between cutn1 and cutn0 is down or stalled") != std::string::npos;
  CHECK(named);
  CHECK(NodeNamespace("cutn1").empty());  // nothing left behind
}

}  // namespace protocol
