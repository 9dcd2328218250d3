// Launchers (local, ssh, slurm), the worker protocol's events and case file,
// and the supervisor's endings: with plain shell commands as ranks on the
// system runner, and with scripted ranks on the fake runner.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/native/launch/events.h"
#include "backends/native/launch/launcher.h"
#include "backends/native/launch/supervisor.h"
#include "backends/native/launch/worker_case.h"
#include "fake_process_runner.h"
#include "test_files.h"
#include "training_field_checks.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

LaunchRequest TwoNodes() {
  LaunchRequest r;
  r.node_hosts = {{"rig0", "10.0.0.1"}, {"rig1", "rig1.lab"}};
  r.workdir = "/work/it's here";
  for (int i = 0; i < 2; ++i) {
    RankLaunch l;
    l.rank = i;
    l.node = i == 0 ? "rig0" : "rig1";
    l.argv = {"/opt/protocol", "worker", "--case", "/r/case.json"};
    l.env = {{"RANK", std::to_string(i)}, {"MASTER_ADDR", "10.0.0.1"}};
    r.ranks.push_back(l);
  }
  return r;
}

bool Alive(int pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

using protocol::testing::FakeProcessRunner;
using protocol::testing::ReadAll;

// The runner the ranks of these tests run on: the real one.
ProcessRunner& System() {
  static std::unique_ptr<ProcessRunner> runner = MakeSystemProcessRunner();
  return *runner;
}

}  // namespace

TEST_CASE("dist launcher: the table names local, ssh and slurm") {
  CHECK(FindLauncher("local") != nullptr);
  CHECK(FindLauncher("ssh") != nullptr);
  CHECK(FindLauncher("slurm") != nullptr);
  CHECK(FindLauncher("mpirun") == nullptr);
}

TEST_CASE("dist launcher: local runs each rank's command unchanged") {
  auto out = FindLauncher("local")->make()->Prepare(TwoNodes());
  REQUIRE(out.ok());
  REQUIRE(out->size() == 2);
  CHECK((*out)[1].argv == std::vector<std::string>{"/opt/protocol", "worker", "--case", "/r/case.json"});
  CHECK((*out)[1].env.at("RANK") == "1");

  // The runner's own transport variables the plan did not ask for: --export=ALL
  // would carry them, so the step removes them before the worker starts.
  LaunchRequest withheld = TwoNodes();
  withheld.ranks[1].unset = {"NCCL_P2P_LEVEL", "TORCH_NCCL_BLOCKING_WAIT"};
  auto cleaned = FindLauncher("slurm")->make()->Prepare(withheld);
  REQUIRE(cleaned.ok());
  CHECK((*cleaned)[1].argv == std::vector<std::string>{"srun", "--nodes=1", "--ntasks=1", "--nodelist=rig1.lab",
                                                       "--export=ALL", "--kill-on-bad-exit=1",
                                                       "--chdir=/work/it's here", "env", "-u", "NCCL_P2P_LEVEL", "-u",
                                                       "TORCH_NCCL_BLOCKING_WAIT", "/opt/protocol", "worker",
                                                       "--case", "/r/case.json"});
  // ssh passes only the rank's env: nothing to remove.
  auto ssh = FindLauncher("ssh")->make()->Prepare(withheld);
  REQUIRE(ssh.ok());
  CHECK((*ssh)[1].argv.back().find("NCCL_P2P_LEVEL") == std::string::npos);
}

TEST_CASE("dist launcher: ssh quotes the whole remote command, environment inside it") {
  auto out = FindLauncher("ssh")->make()->Prepare(TwoNodes());
  REQUIRE(out.ok());
  REQUIRE(out->size() == 2);
  CHECK((*out)[1].argv ==
        std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "-T", "rig1.lab", "--",
                                 "cd '/work/it'\\''s here' && exec env 'MASTER_ADDR=10.0.0.1' 'RANK=1' "
                                 "'/opt/protocol' 'worker' '--case' '/r/case.json'"});
  CHECK((*out)[1].env.empty());
  CHECK((*out)[0].argv[4] == "10.0.0.1");
  // A plan value with shell syntax stays one quoted word.
  RankLaunch evil;
  evil.argv = {"x", "$(rm -rf /); `id`"};
  CHECK(RemoteCommand(evil, "") == "exec env 'x' '$(rm -rf /); `id`'");
}

TEST_CASE("dist launcher: ssh and slurm need a host for every node") {
  LaunchRequest r = TwoNodes();
  r.node_hosts.erase("rig1");
  auto out = FindLauncher("ssh")->make()->Prepare(r);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message() == "rank 1: node 'rig1' has no host in the plan's cluster (cluster.nodes[].host)");
}

TEST_CASE("dist launcher: slurm makes one srun step per rank on its node") {
  auto out = FindLauncher("slurm")->make()->Prepare(TwoNodes());
  REQUIRE(out.ok());
  CHECK((*out)[1].argv == std::vector<std::string>{"srun", "--nodes=1", "--ntasks=1", "--nodelist=rig1.lab",
                                                   "--export=ALL", "--kill-on-bad-exit=1",
                                                   "--chdir=/work/it's here", "/opt/protocol", "worker", "--case",
                                                   "/r/case.json"});
  CHECK((*out)[1].env.at("RANK") == "1");
}

TEST_CASE("dist events: every kind survives encode and decode; plain text is not an event") {
  WorkerEvent step;
  step.kind = WorkerEvent::Kind::kStep;
  step.step.step = 3;
  step.step.seconds = 0.25;
  step.step.loss = 4.5;
  step.step.tokens = 64;
  CHECK(EncodeEvent(step) == R"({"event":"step","step":3,"seconds":0.25,"loss":4.5,"tokens":64})");
  auto back = DecodeEvent(EncodeEvent(step));
  REQUIRE(back);
  CHECK(back->kind == WorkerEvent::Kind::kStep);
  CHECK(back->step.step == 3);
  CHECK(*back->step.loss == 4.5);
  CHECK(*back->step.tokens == 64);

  WorkerEvent req;
  req.kind = WorkerEvent::Kind::kRequest;
  req.request.index = 7;
  req.request.max_new_tokens = 9;
  req.request.generated_tokens = 9;
  req.request.prompt_tokens = 4;
  req.request.seconds = 1.5;
  req.request.answer = "Europa \"has\"\nan ocean";
  back = DecodeEvent(EncodeEvent(req));
  REQUIRE(back);
  CHECK(back->request.index == 7);
  CHECK(back->request.answer == "Europa \"has\"\nan ocean");
  CHECK(back->request.token_ids == std::nullopt);  // none sent, none read
  req.request.token_ids = std::vector<int>{1, 0, 31999};
  CHECK(EncodeEvent(req).find(R"("token_ids":[1,0,31999])") != std::string::npos);
  back = DecodeEvent(EncodeEvent(req));
  REQUIRE(back);
  CHECK(back->request.token_ids == std::vector<int>{1, 0, 31999});
  CHECK(EncodeEvent(req).find('\n') == std::string::npos);

  WorkerEvent bytes;
  bytes.kind = WorkerEvent::Kind::kBytes;
  bytes.bytes_within = 1024;
  bytes.bytes_between = 5;
  back = DecodeEvent(EncodeEvent(bytes));
  REQUIRE(back);
  CHECK(back->bytes_within == 1024);
  CHECK(back->bytes_between == 5);

  WorkerEvent m;
  m.kind = WorkerEvent::Kind::kMeasurement;
  m.measurement.name = "eval_loss";
  m.measurement.value = 3.25;
  m.measurement.method = "held out";
  back = DecodeEvent(EncodeEvent(m));
  REQUIRE(back);
  CHECK(back->measurement.name == "eval_loss");
  CHECK(*back->measurement.value == 3.25);
  CHECK(back->measurement.method == "held out");

  CHECK_FALSE(DecodeEvent("step 3/10 loss 4.1"));
  CHECK_FALSE(DecodeEvent("{not json"));
  CHECK_FALSE(DecodeEvent(R"({"event":"dance"})"));
  CHECK_FALSE(DecodeEvent(R"({"event":"step"})"));  // fields missing
}

TEST_CASE("dist case file: round trip, and a layout that does not add up is refused") {
  WorkerCase c;
  c.role = NativeRole::kShare;
  c.case_id = "2.2.1.1";
  c.workload = Workload::kFinetune;
  c.model_name = "tiny";
  c.model_preset = "tiny";
  c.model_path = "/m";
  c.dataset_format = "dolly";
  c.dataset_path = "/d.jsonl";
  c.training = protocol::testing::ChangedSettings();  // every row of training_fields.h off its default
  c.quantization = Quantization::kNf4;
  c.steps = 12;
  c.inference.max_new_tokens = {1, 2};
  c.inference.decode_step = DecodeStepChoice::kDevice;
  c.groups = 2;
  c.group_size = 1;
  c.rank_nodes = {"rig0", "rig1"};
  auto back = DecodeWorkerCase(EncodeWorkerCase(c));
  REQUIRE(back.ok());
  CHECK(back->role == NativeRole::kShare);
  CHECK(back->workload == Workload::kFinetune);
  CHECK(back->quantization == Quantization::kNf4);
  CHECK(protocol::testing::DifferentFields(c.training, back->training).empty());
  CHECK(back->steps == 12);
  CHECK(back->inference.max_new_tokens == std::vector<int>{1, 2});
  CHECK(back->inference.decode_step == DecodeStepChoice::kDevice);
  CHECK(back->rank_nodes == std::vector<std::string>{"rig0", "rig1"});
  c.rank_nodes = {"rig0"};
  auto bad = DecodeWorkerCase(EncodeWorkerCase(c));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "case file: groups, group_size and rank_nodes disagree");
}

namespace {
RankLaunch Sh(int rank, const std::string& node, const std::string& script) {
  RankLaunch l;
  l.rank = rank;
  l.node = node;
  l.argv = {"/bin/sh", "-c", script};
  return l;
}
}  // namespace

TEST_CASE("dist supervisor: all ranks exit 0; output is prefixed in the log and handed over") {
  const fs::path log = fs::temp_directory_path() / ("protocol_sup_" + std::to_string(getpid()) + ".log");
  fs::remove(log);
  SuperviseOptions o;
  o.log_path = log.string();
  StopFlag stop;
  std::vector<std::pair<int, std::string>> lines;
  SuperviseResult r = Supervise(System(), {Sh(0, "rig0", "echo hello"), Sh(1, "rig1", "echo world; echo $RANK_X")}, o, stop,
                                [&](int rank, std::string_view line) { lines.emplace_back(rank, std::string(line)); });
  CHECK(r.outcome == SuperviseResult::Outcome::kOk);
  CHECK(r.reason == "");
  const std::string text = ReadAll(log);
  CHECK(text.find("[rank 0] hello\n") != std::string::npos);
  CHECK(text.find("[rank 1] world\n") != std::string::npos);
  CHECK(lines.size() == 3);
  fs::remove(log);
}

TEST_CASE("dist supervisor: a rank exiting non-zero stops the others, named with its node") {
  StopFlag stop;
  SuperviseOptions o;
  o.kill_grace_seconds = 0.5;
  SuperviseResult r = Supervise(System(), {Sh(0, "rig0", "sleep 30"), Sh(1, "rig1", "sleep 0.2; exit 3")}, o, stop, nullptr);
  CHECK(r.outcome == SuperviseResult::Outcome::kRankFailed);
  CHECK(r.reason == "rank 1 (node rig1) exited with code 3");
  CHECK(r.failed_rank == 1);
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[1].Code() == 3);
  CHECK(r.ranks[0].Code() == 128 + SIGTERM);
  CHECK(r.ranks[0].signal == SIGTERM);  // stopped, not waited for: its `sleep 30` never ended by itself
  for (const RankEnd& e : r.ranks) CHECK_FALSE(Alive(e.pid));
}

TEST_CASE("dist supervisor: kill -9 of one rank ends the case; a rank ignoring SIGTERM is SIGKILLed; nothing survives") {
  StopFlag stop;
  SuperviseOptions o;
  o.kill_grace_seconds = 0.3;
  // Rank 0 ignores SIGTERM and starts a grandchild; rank 1 kills itself with signal 9.
  SuperviseResult r = Supervise(System(), {Sh(0, "rig0", "trap '' TERM; sleep 30 & wait; wait"), Sh(1, "rig1", "sleep 0.2; kill -9 $$")},
                                o, stop, nullptr);
  CHECK(r.outcome == SuperviseResult::Outcome::kRankFailed);
  CHECK(r.reason == "rank 1 (node rig1) was killed by signal 9");
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[0].signal == SIGKILL);
  for (const RankEnd& e : r.ranks) CHECK_FALSE(Alive(e.pid));
  CHECK_FALSE(Alive(r.ranks[0].pid));
}

TEST_CASE("dist supervisor: the case timeout and the stop flag end every rank") {
  StopFlag stop;
  SuperviseOptions o;
  o.timeout_seconds = 0.3;
  o.kill_grace_seconds = 0.2;
  SuperviseResult r = Supervise(System(), {Sh(0, "rig0", "sleep 30"), Sh(1, "rig0", "sleep 30")}, o, stop, nullptr);
  CHECK(r.outcome == SuperviseResult::Outcome::kTimedOut);
  CHECK(r.reason == "exceeded the case's timeout of 0.3 s; every rank was stopped");
  for (const RankEnd& e : r.ranks) CHECK_FALSE(Alive(e.pid));

  stop.Request();
  o.timeout_seconds = 0;
  r = Supervise(System(), {Sh(0, "rig0", "sleep 30")}, o, stop, nullptr);
  CHECK(r.outcome == SuperviseResult::Outcome::kStopped);
  CHECK(r.reason == "stopped by request; every rank was stopped");
}

TEST_CASE("dist supervisor on the fake runner: it sees every rank's process and one rank fails as scripted") {
  RankLaunch r0 = Sh(0, "rig0", "train");
  r0.env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  RankLaunch r1 = Sh(1, "rig1", "train");
  r1.env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}};
  FakeProcessRunner runner;
  runner.script = [](const ProcessSpec& p) {
    return p.env.at("RANK") == "1" ? FakeProcessRunner::Ends(3, {"out of memory"}) : FakeProcessRunner::Ends(0);
  };
  SuperviseOptions o;
  o.log_path = "/r/case.log";
  o.workdir = "/r";
  o.timeout_seconds = 60;
  o.kill_grace_seconds = 2;
  StopFlag stop;
  std::vector<std::pair<int, std::string>> lines;
  SuperviseResult r = Supervise(runner, {r0, r1}, o, stop, [&](int rank, std::string_view line) {
    lines.emplace_back(rank, std::string(line));
  });
  REQUIRE(runner.started.size() == 2);
  CHECK(runner.started[0].argv == r0.argv);
  CHECK(runner.started[1].env == r1.env);
  CHECK(runner.started[1].workdir == "/r");
  CHECK(runner.started[0].log_prefix == "[rank 0] ");
  CHECK(runner.started[1].log_prefix == "[rank 1] ");
  REQUIRE(runner.groups.size() == 1);
  CHECK(runner.groups[0].log_path == "/r/case.log");
  CHECK(runner.groups[0].timeout_seconds == 60);
  CHECK(runner.groups[0].kill_grace_seconds == 2);
  CHECK(r.outcome == SuperviseResult::Outcome::kRankFailed);
  CHECK(r.reason == "rank 1 (node rig1) exited with code 3");
  CHECK(r.failed_rank == 1);
  CHECK(lines == std::vector<std::pair<int, std::string>>{{1, "out of memory"}});
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[1].Code() == 3);
  CHECK(r.ranks[0].Code() == 0);

  // A rank killed by a signal is named before one that exited non-zero; one that never started says why.
  runner.script = [](const ProcessSpec& p) {
    if (p.env.at("RANK") == "0") return FakeProcessRunner::Ends(1);
    FakeProcessRunner::Script killed;
    killed.result = FakeProcessRunner::Signaled(9);
    return killed;
  };
  r = Supervise(runner, {r0, r1}, o, stop, nullptr);
  CHECK(r.reason == "rank 1 (node rig1) was killed by signal 9");
  runner.script = nullptr;
  runner.result.error = "cannot run 'train': No such file or directory";
  r = Supervise(runner, {r0, r1}, o, stop, nullptr);
  CHECK(r.outcome == SuperviseResult::Outcome::kFailedToStart);
  CHECK(r.reason == "rank 0 (node rig0) failed to start: cannot run 'train': No such file or directory");
  CHECK_FALSE(r.ranks[0].started);
}

TEST_CASE("dist supervisor: a rank whose program does not exist fails to start, named") {
  StopFlag stop;
  SuperviseOptions o;
  o.kill_grace_seconds = 0.3;
  RankLaunch missing;
  missing.rank = 1;
  missing.node = "rig1";
  missing.argv = {"protocol-no-such-worker"};
  SuperviseResult r = Supervise(System(), {Sh(0, "rig0", "sleep 30"), missing}, o, stop, nullptr);
  CHECK(r.outcome == SuperviseResult::Outcome::kFailedToStart);
  CHECK(r.reason == "rank 1 (node rig1) failed to start: cannot run 'protocol-no-such-worker': No such file or directory");
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[0].signal == SIGTERM);  // the started rank was stopped
  CHECK_FALSE(r.ranks[1].started);
  CHECK_FALSE(Alive(r.ranks[0].pid));
}

}  // namespace native
}  // namespace protocol
