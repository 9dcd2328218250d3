// slurm_env: hostlist expansion and SLURM_* parsing on fixed maps, and
// scontrol through a scripted process runner. The real Slurm is in
// slurm_test.cc.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/native/launch/slurm_env.h"
#include "fake_process_runner.h"
#include "runner/base/text.h"

using namespace protocol;
using protocol::testing::FakeProcessRunner;

namespace {

std::vector<std::string> Hosts(std::string_view list) {
  auto r = ExpandHostlist(list);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return *r;
}

using V = std::vector<std::string>;

EnvironmentMap TwoNodeEnv() {
  return {{"SLURM_PROCID", "5"},        {"SLURM_NTASKS", "8"},    {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "1"},        {"SLURM_JOB_ID", "4242"}, {"SLURM_JOB_NODELIST", "rig[0-1]"},
          {"SLURM_NODELIST", "ignored"}};
}

}  // namespace

TEST_CASE("ExpandHostlist expands Slurm hostlists") {
  CHECK(Hosts("rig0") == V{"rig0"});
  CHECK(Hosts("rig[0-2,5]") == V{"rig0", "rig1", "rig2", "rig5"});
  CHECK(Hosts("n[08-10],gpu-a") == V{"n08", "n09", "n10", "gpu-a"});
  CHECK(Hosts("r[1-2]n[1-2]") == V{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(Hosts("a,b[3],c-[1-2].lan") == V{"a", "b3", "c-1.lan", "c-2.lan"});
  CHECK(ExpandHostlist("rig[0-2").status().message() == "bad hostlist 'rig[0-2': unbalanced brackets");
  CHECK(ExpandHostlist("rig[2-1]").status().message() == "bad hostlist 'rig[2-1]': bad range '2-1'");
  CHECK(ExpandHostlist("rig[a]").status().message() == "bad hostlist 'rig[a]': bad range 'a'");
  CHECK(ExpandHostlist("a,,b").status().message() == "bad hostlist 'a,,b': empty name");
  CHECK(ExpandHostlist("n[0-99999]").status().message() == "bad hostlist 'n[0-99999]': more than 65536 hosts");
}

TEST_CASE("ReadSlurmRank reads rank, world, local rank and the master node") {
  auto r = ReadSlurmRank(TwoNodeEnv());
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->rank == 5);
  CHECK(r->world == 8);
  CHECK(r->local_rank == 1);
  CHECK(r->node_rank == 1);
  CHECK(r->hosts == V{"rig0", "rig1"});
  CHECK(r->master == "rig0");
  CHECK(r->job_id == "4242");
}

TEST_CASE("ReadSlurmRank falls back to the older variable names") {
  EnvironmentMap env = {{"SLURM_PROCID", "0"}, {"SLURM_NPROCS", "2"}, {"SLURM_LOCALID", "0"},
                        {"SLURM_NODELIST", "gpu07"}, {"SLURM_JOBID", "17"}};
  auto r = ReadSlurmRank(env);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->world == 2);
  CHECK(r->node_rank == 0);
  CHECK(r->master == "gpu07");
  CHECK(r->job_id == "17");
}

TEST_CASE("ReadSlurmRank names the missing or contradicting variable") {
  auto without = [](const char* name) {
    EnvironmentMap env = TwoNodeEnv();
    env.erase(name);
    return ReadSlurmRank(env).status().message();
  };
  CHECK(without("SLURM_PROCID") == "SLURM_PROCID is not set (not inside an srun step?)");
  CHECK(without("SLURM_NTASKS") == "SLURM_NTASKS is not set (not inside an srun step?)");
  CHECK(without("SLURM_LOCALID") == "SLURM_LOCALID is not set (not inside an srun step?)");
  EnvironmentMap env = TwoNodeEnv();
  env.erase("SLURM_JOB_NODELIST");
  env.erase("SLURM_NODELIST");
  CHECK(ReadSlurmRank(env).status().message() == "SLURM_JOB_NODELIST is not set (not inside a Slurm job?)");
  env = TwoNodeEnv();
  env["SLURM_PROCID"] = "8";
  CHECK(ReadSlurmRank(env).status().message() == "SLURM_PROCID=8 is not below SLURM_NTASKS=8");
  env = TwoNodeEnv();
  env["SLURM_LOCALID"] = "-1";
  CHECK(ReadSlurmRank(env).status().message() == "SLURM_LOCALID='-1' is not a non-negative integer");
  env = TwoNodeEnv();
  env["SLURM_JOB_NODELIST"] = "rig[0-";
  CHECK(ReadSlurmRank(env).status().message() == "bad hostlist 'rig[0-': unbalanced brackets");
}

TEST_CASE("ReadSlurmRank uses the given hostlist expander") {
  std::string asked;
  HostlistExpander expander = [&](std::string_view list) -> Result<std::vector<std::string>> {
    asked = std::string(list);
    return std::vector<std::string>{"head", "tail"};
  };
  auto r = ReadSlurmRank(TwoNodeEnv(), expander);
  REQUIRE(r.ok());
  CHECK(asked == "rig[0-1]");
  CHECK(r->master == "head");
}

TEST_CASE("ExpandHostlistWithScontrol runs scontrol show hostnames") {
  FakeProcessRunner runner;
  runner.lines = {"rig0", "rig1", ""};
  runner.result = FakeProcessRunner::Exited(0);
  auto r = ExpandHostlistWithScontrol(runner, "rig[0-1]");
  REQUIRE(r.ok());
  CHECK(*r == V{"rig0", "rig1"});
  CHECK(runner.seen.argv == V{"scontrol", "show", "hostnames", "rig[0-1]"});
  runner.lines = {"scontrol: error: Invalid hostlist"};
  runner.result.exit_code = 1;
  CHECK(ExpandHostlistWithScontrol(runner, "x[").status().message() ==
        "scontrol show hostnames 'x[' failed: scontrol: error: Invalid hostlist");
}
