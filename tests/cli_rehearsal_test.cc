// The two-node rehearsal plan (plans/rehearsal.yaml) through the real binary:
// two "nodes" are network namespaces joined by a veth link, unshaped and then
// shaped to 50 Mbit/s. Needs CAP_NET_ADMIN and working `ip netns`; without
// them the test is skipped (tests/skip.h).

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/native/network_emulation.h"
#include "cli_support.h"
#include "runner/store/store.h"
#include "skip.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

TEST_CASE("cli: two-node rehearsal shows FSDP slowing over a 50 Mbit/s link, and leaves no namespace") {
  if (Status s = CheckNetworkEmulationPrivileges(); !s.ok()) SKIP_TEST(s.message());
  if (std::system("ip netns add protocol-probe-cli >/dev/null 2>&1 && ip netns del protocol-probe-cli") != 0)
    SKIP_TEST("`ip netns add` does not work here");
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  std::string db = (dir.path / "r.db").string();
  std::vector<std::string> common = {"run", (src / "plans/rehearsal.yaml").string(), "--db", db,
                                     "--logs", (dir.path / "logs").string(), "--set",
                                     "defaults.output_dir=" + (dir.path / "models/{case_id}").string(),
                                     "--set", "stages[stage1].cases[r.1].steps=3", "--set",
                                     "stages[stage2].cases[r.2].steps=3"};
  Output unshaped = Protocol(common, src, "OMP_NUM_THREADS=1");
  INFO(unshaped.err);
  REQUIRE(unshaped.exit_code == 0);
  std::vector<std::string> shaped_args = common;
  for (const char* s : {"cluster.network=50mbit", "cluster.emulate.bandwidth=50mbit"}) {
    shaped_args.push_back("--set");
    shaped_args.push_back(s);
  }
  Output shaped = Protocol(shaped_args, src, "OMP_NUM_THREADS=1");
  INFO(shaped.err);
  REQUIRE(shaped.exit_code == 0);

  auto store = OpenStore(db);
  REQUIRE(store.ok());
  auto wall = [&](int64_t run, const std::string& case_id) {
    for (const auto& c : CasesOf(db, run)) {
      if (c.case_id != case_id) continue;
      for (const auto& m : (*store)->MeasurementsOfCase(c.row_id).value())
        if (m.name == "wall_seconds" && m.how == Provenance::kMeasured) return *m.value;
    }
    return -1.0;
  };
  // FSDP moves every layer's parameters and gradients across the link each step
  // (about 70 MiB per rank here); at 50 Mbit/s that costs over 10 s.
  CHECK(wall(2, "r.1") > 1.5 * wall(1, "r.1"));
  for (const auto& c : CasesOf(db, 2)) CHECK(c.network == "50mbit");
  Output md = Protocol({"report", "--db", db}, src);
  CHECK(md.out.find("fsdp 2 nodes (50mbit)") != std::string::npos);
  CHECK(md.out.find("fsdp 2 nodes (unshaped)") != std::string::npos);
  // Every namespace this test's runs made is gone.
  std::string namespaces;
  if (FILE* p = popen("ip netns list", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, p)) namespaces += line;
    pclose(p);
  }
  CHECK(namespaces.find("protocol-") == std::string::npos);
}
