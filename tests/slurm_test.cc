// slurm_env: hostlist expansion and SLURM_* parsing on fixed maps; then a
// real one-node Slurm on localhost (scripts/slurm-local.sh) running a 2-task
// srun step whose environments go through ReadSlurmRank. The real test prints
// why and returns where Slurm cannot start (no root, no packages, no daemons).

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/native/slurm_env.h"
#include "runner/base/text.h"
#include "runner/store/store.h"

using namespace protocol;

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

namespace {

class ScriptedRunner : public ProcessRunner {
 public:
  std::vector<std::string> argv;
  std::vector<std::string> output;
  int exit_code = 0;
  ProcessResult Run(const ProcessSpec& spec, const StopFlag&, const LineCallback& on_line) override {
    argv = spec.argv;
    for (const auto& line : output) on_line(line);
    ProcessResult r;
    r.ending = ProcessResult::Ending::kExited;
    r.exit_code = exit_code;
    return r;
  }
};

}  // namespace

TEST_CASE("ExpandHostlistWithScontrol runs scontrol show hostnames") {
  ScriptedRunner runner;
  runner.output = {"rig0", "rig1", ""};
  auto r = ExpandHostlistWithScontrol(runner, "rig[0-1]");
  REQUIRE(r.ok());
  CHECK(*r == V{"rig0", "rig1"});
  CHECK(runner.argv == V{"scontrol", "show", "hostnames", "rig[0-1]"});
  runner.output = {"scontrol: error: Invalid hostlist"};
  runner.exit_code = 1;
  CHECK(ExpandHostlistWithScontrol(runner, "x[").status().message() ==
        "scontrol show hostnames 'x[' failed: scontrol: error: Invalid hostlist");
}

// ---- a real Slurm --------------------------------------------------------------

namespace {

struct Lines {
  ProcessResult result;
  std::vector<std::string> lines;
};

Lines RunBounded(std::vector<std::string> argv, double timeout, std::map<std::string, std::string> env = {}) {
  auto runner = MakeSystemProcessRunner();
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = std::move(env);
  spec.timeout_seconds = timeout;
  StopFlag never;
  Lines out;
  out.result = runner->Run(spec, never, [&](std::string_view line) { out.lines.emplace_back(line); });
  return out;
}

std::string LastLineStartingWith(const std::vector<std::string>& lines, std::string_view prefix) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (StartsWith(*it, prefix)) return *it;
  return "";
}

}  // namespace

TEST_CASE("slurm: srun -n 2 runs both ranks on a local Slurm, and so do the slurm launcher's cases") {
  // Starting (and, as root on a fresh machine, installing) takes a while the
  // first time; every step is bounded.
  const std::string script = std::string(PROTOCOL_SOURCE_DIR) + "/scripts/slurm-local.sh";
  Lines setup = RunBounded({"bash", script}, 420);
  bool ran = setup.result.ending == ProcessResult::Ending::kExited;
  std::string conf_line = LastLineStartingWith(setup.lines, "SLURM_CONF=");
  if (!ran || setup.result.exit_code != 0 || conf_line.empty()) {
    std::string why = LastLineStartingWith(setup.lines, "slurm-local: ");
    if (why.empty()) why = ran ? "scripts/slurm-local.sh failed without a reason" : "scripts/slurm-local.sh did not finish";
    MESSAGE("skipped: " << why);
    return;
  }
  bool started_here = !LastLineStartingWith(setup.lines, "slurm-local: started").empty();
  std::map<std::string, std::string> env = {{"SLURM_CONF", conf_line.substr(std::string("SLURM_CONF=").size())}};

  // --label prefixes every line with the task's rank: "1: SLURM_PROCID=1".
  Lines step = RunBounded({"srun", "-n", "2", "-t", "1", "--immediate=30", "--label", "env"}, 90, env);
  CHECK(step.result.ending == ProcessResult::Ending::kExited);
  CHECK(step.result.exit_code == 0);
  std::map<int, EnvironmentMap> envs;
  for (const std::string& line : step.lines) {
    size_t colon = line.find(": ");
    size_t eq = line.find('=');
    if (colon == std::string::npos || eq == std::string::npos || eq < colon) continue;
    int task = std::atoi(Trim(line.substr(0, colon)).c_str());
    envs[task][line.substr(colon + 2, eq - colon - 2)] = line.substr(eq + 1);
  }
  if (step.result.exit_code != 0) MESSAGE("srun said: " << Join(step.lines, "\n"));
  REQUIRE(envs.size() == 2);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string short_host = std::string(host).substr(0, std::string(host).find('.'));
  std::set<int> ranks;
  for (const auto& [task, task_env] : envs) {
    auto rank = ReadSlurmRank(task_env);
    REQUIRE_MESSAGE(rank.ok(), rank.status().message());
    CHECK(rank->rank == task);
    CHECK(rank->world == 2);
    CHECK(rank->local_rank == task);  // one node: local rank = rank
    CHECK(rank->master == short_host);
    CHECK_FALSE(rank->job_id.empty());
    ranks.insert(rank->rank);
  }
  CHECK(ranks == std::set<int>{0, 1});

  // A 2-rank fsdp case and a 2-group share case through the slurm launcher:
  // each rank an srun step. Slurm's own log must show the completed jobs.
  const std::string conf = env["SLURM_CONF"];
  const std::string ctld_log = conf.substr(0, conf.rfind('/')) + "/log/slurmctld.log";
  auto completed_jobs = [&] {
    std::ifstream in(ctld_log);
    std::string line;
    int n = 0;
    while (std::getline(in, line))
      if (line.find("_job_complete: JobId=") != std::string::npos && line.find("WEXITSTATUS 0") != std::string::npos) ++n;
    return n;
  };
  const int jobs_before = completed_jobs();
  char dir_template[] = "/tmp/protocol-slurm-case-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string source = PROTOCOL_SOURCE_DIR;
  std::ofstream(dir + "/slurm.yaml") << "protocol: 1\nname: slurm-case\ntitle: \"through the slurm launcher\"\n"
      "models:\n  tiny: {preset: tiny, path: " << source << "/data/quickstart}\n"
      "datasets:\n  corpus: {format: text, path: " << source << "/data/quickstart/corpus.txt}\n"
      "cluster:\n  launcher: slurm\n  nodes:\n"
      "    - {name: n0, host: " << short_host << ", gpus: 0}\n"
      "    - {name: n1, host: " << short_host << ", gpus: 0}\n"
      "defaults:\n  model: tiny\n  dataset: corpus\n  workload: pretrain\n  timeout: 120\n"
      "  output_dir: " << dir << "/models/{case_id}\n"
      "  training: {batch_size: 4, seq_len: 32, seed: 1, device: cpu, ranks_per_node: 1, collective_timeout: 60}\n"
      "stages:\n  - name: s\n    cases:\n"
      "      - {id: s.1, backend: fsdp, nodes: 2, steps: 2}\n"
      "      - {id: s.2, backend: share, topology: \"n0:1x1 n1:1x1\", steps: 2}\n";
  std::map<std::string, std::string> run_env = env;
  run_env["OMP_NUM_THREADS"] = "1";
  Lines run = RunBounded({PROTOCOL_BINARY, "run", dir + "/slurm.yaml", "--db", dir + "/s.db", "--logs", dir + "/logs"},
                         240, run_env);
  if (run.result.exit_code != 0) MESSAGE("protocol run said: " << Join(run.lines, "\n"));
  CHECK(run.result.ending == ProcessResult::Ending::kExited);
  CHECK(run.result.exit_code == 0);
  auto store = OpenStore(dir + "/s.db");
  REQUIRE(store.ok());
  auto cases = (*store)->CasesOfRun(1);
  REQUIRE(cases.ok());
  REQUIRE(cases->size() == 2);
  for (const auto& c : cases.value()) {
    INFO(c.case_id << ": " << c.reason);
    CHECK(c.status == CaseStatus::kOk);
  }
  CHECK(completed_jobs() - jobs_before >= 4);  // 2 ranks × 2 cases, each an srun step that exited 0
  std::filesystem::remove_all(dir);
  if (started_here) RunBounded({"bash", script, "stop"}, 30);
}
