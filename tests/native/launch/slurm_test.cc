// A real Slurm: a 2-task srun step whose environments go through
// ReadSlurmRank, then a 2-rank fsdp case and a 2-group share case through the
// slurm launcher. The Slurm is started outside the test (scripts/test.sh runs
// scripts/slurm-local.sh before ctest: a one-node Slurm on localhost); without
// one answering here the test is skipped (tests/support/skip.h). The parsing half of
// slurm_env is tested in slurm_env_test.cc.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/native/launch/slurm_env.h"
#include "runner/base/text.h"
#include "runner/store/store.h"
#include "skip.h"

using namespace protocol;


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

std::string ShortHostname() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host).substr(0, std::string(host).find('.'));
}

// Whether a Slurm answers here with this host as an idle node; `env` gets the
// SLURM_CONF to use (the environment's, as scripts/test.sh exports it after
// starting scripts/slurm-local.sh), `why` the reason when not.
bool SlurmReady(const std::string& short_host, std::map<std::string, std::string>* env, std::string* why) {
  if (const char* conf = std::getenv("SLURM_CONF")) (*env)["SLURM_CONF"] = conf;
  Lines info = RunBounded({"sinfo", "-h", "-N", "-n", short_host, "-o", "%t"}, 15, *env);
  if (info.result.ending == ProcessResult::Ending::kFailedToStart) {
    *why = "no Slurm here (sinfo: " + info.result.error + "); scripts/test.sh starts one with scripts/slurm-local.sh";
    return false;
  }
  if (info.result.ending != ProcessResult::Ending::kExited || info.result.exit_code != 0) {
    *why = "no Slurm answers here (sinfo: " + (info.lines.empty() ? std::string("no output") : info.lines.back()) +
           "); scripts/test.sh starts one with scripts/slurm-local.sh";
    return false;
  }
  const std::string state = info.lines.empty() ? "" : Trim(info.lines[0]);
  if (state != "idle" && state != "mix") {
    *why = "Slurm has no idle node " + short_host + " (state '" + state + "')";
    return false;
  }
  return true;
}

// SlurmctldLogFile from `scontrol show config`, or "" when it names none.
std::string SlurmctldLogFile(const std::map<std::string, std::string>& env) {
  Lines config = RunBounded({"scontrol", "show", "config"}, 15, env);
  for (const std::string& line : config.lines) {
    if (!StartsWith(line, "SlurmctldLogFile")) continue;
    size_t eq = line.find('=');
    if (eq != std::string::npos) return Trim(line.substr(eq + 1));
  }
  return "";
}

}  // namespace

TEST_CASE("slurm: srun -n 2 runs both ranks on a local Slurm, and so do the slurm launcher's cases") {
  std::string why;
  std::map<std::string, std::string> env;
  const std::string short_host = ShortHostname();
  if (!SlurmReady(short_host, &env, &why)) SKIP_TEST(why);

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
  const std::string ctld_log = SlurmctldLogFile(env);
  REQUIRE_MESSAGE(!ctld_log.empty(), "scontrol show config names no SlurmctldLogFile");
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
      "cluster:\n  launcher: slurm\n  network: here\n"
      "  networks: {here: {rate: 10gbit, env: {GLOO_SOCKET_IFNAME: lo}}}\n  nodes:\n"
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
}
