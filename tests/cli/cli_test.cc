// End-to-end tests of the `protocol` program: the real binary, real processes,
// a real SQLite file in a temporary directory.

#include <algorithm>
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli_support.h"
#include "runner/base/json.h"
#include "runner/exec/calibration.h"
#include "runner/store/store.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

namespace {

const char* kSleepPlan = R"yaml(protocol: 1
name: sleepy
title: "three slow command cases"
models:
  m: {preset: tiny}
defaults:
  model: m
  backend: command
  system: fsdp
  timeout: 60
stages:
  - name: s
    cases:
      - {id: c1, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]},
         command: {argv: [sh, -c, "sleep 0.2; echo tokens_per_second 5"]}}
      - {id: c2, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]},
         command: {argv: [sh, -c, "sleep 4"]}}
      - {id: c3, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]},
         command: {argv: [sh, -c, "exit 0"]}}
)yaml";

// How many processes run `sleep <seconds>` exactly, found by their command
// line. A process that exits while it is read reads as "" (ReadTextFile: no
// exception from a /proc file that vanished under the read).
int CountSleeping(const std::string& seconds) {
  int found = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string cmdline = testing::ReadTextFile((entry.path() / "cmdline").string());
    if (cmdline == std::string("sleep") + '\0' + seconds + '\0') ++found;
  }
  return found;
}

// Starts `protocol run PLAN --db DB` in `dir` as a child with no output; returns its pid.
pid_t StartRun(const fs::path& dir, const char* plan, const char* db) {
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(99);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(PROTOCOL_BINARY, PROTOCOL_BINARY, "run", plan, "--db", db, (char*)nullptr);
    _exit(127);
  }
  return pid;
}

// Polls `db` (up to 10 s) until run 1 has two case rows, the first ok and the
// second still running: the moment to interrupt the runner.
bool WaitForSecondCaseRunning(const fs::path& db) {
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!fs::exists(db)) continue;
    auto store = OpenStore(db.string());
    if (!store.ok()) continue;
    auto cases = (*store)->CasesOfRun(1);
    if (cases.ok() && cases->size() == 2 && (*cases)[0].status == CaseStatus::kOk &&
        (*cases)[1].status == CaseStatus::kRunning)
      return true;
  }
  return false;
}

// Writes `text` to dir/PLAN, starts `protocol run PLAN --db DB` there and
// returns the runner's pid once run 1's second case is running.
pid_t StartRunUntilSecondCase(const fs::path& dir, const std::string& text, const char* plan, const char* db) {
  WriteFile(dir / plan, text);
  const pid_t pid = StartRun(dir, plan, db);
  REQUIRE(pid > 0);
  REQUIRE(WaitForSecondCaseRunning(dir / db));
  return pid;
}

// Sends `signal` to `pid` and reaps it; returns its wait status.
int SignalAndReap(pid_t pid, int signal) {
  kill(pid, signal);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// kSleepPlan with its quiet second case (`sleep 4`) running `command` instead.
std::string SleepPlanWithQuietCommand(const std::string& command) {
  std::string plan = kSleepPlan;
  const std::string quiet = "command: {argv: [sh, -c, \"sleep 4\"]}";
  REQUIRE(plan.find(quiet) != std::string::npos);
  plan.replace(plan.find(quiet), quiet.size(), command);
  return plan;
}

// The lines of `text` (without their newlines), as a multiset: a check names
// a whole line, never a fragment any output would contain.
std::multiset<std::string> Lines(const std::string& text) {
  std::multiset<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.insert(line);
  return lines;
}

}  // namespace

TEST_CASE("cli: every shipped plan validates") {
  std::vector<std::string> args = {"validate"};
  for (const auto& entry : fs::directory_iterator(fs::path(PROTOCOL_SOURCE_DIR) / "plans"))
    if (entry.path().extension() == ".yaml") args.push_back(entry.path().string());
  REQUIRE(args.size() >= 5);  // llama70b, llama7b, methodology-commands, quickstart + validate
  Output o = Protocol(args, PROTOCOL_SOURCE_DIR);
  INFO(o.err);
  CHECK(o.exit_code == 0);
  // The plans a new user runs first on this machine say nothing is wrong with
  // them: no warning at all (a plan-level one, such as the two sides of a row on
  // different resources, included), from any working directory.
  TempDir elsewhere;
  for (const char* name : {"quickstart.yaml", "rehearsal.yaml", "rehearsal-methodology.yaml", "rehearsal-networks.yaml"}) {
    CAPTURE(name);
    Output v = Protocol({"validate", (fs::path(PROTOCOL_SOURCE_DIR) / "plans" / name).string()}, elsewhere.path);
    CHECK(v.exit_code == 0);
    CHECK(v.err.find("warning") == std::string::npos);
    CHECK(v.err == "");
  }
}

TEST_CASE("cli: a malformed plan prints located errors and exits 2") {
  TempDir dir;
  WriteFile(dir.path / "bad.yaml", "protocol: 1\nname: bad\nstages:\n  - name: s\n    cases:\n"
                                   "      - {id: a, workload: pretrian, backend: fdsp, steps: 3}\n");
  Output o = Protocol({"validate", "bad.yaml"}, dir.path);
  CHECK(o.exit_code == 2);
  CHECK(o.out == "");
  CHECK(o.err ==
        "bad.yaml:6:9: case 'a' needs a model\n"
        "        - {id: a, workload: pretrian, backend: fdsp, steps: 3}\n"
        "          ^\n"
        "bad.yaml:6:27: unknown workload 'pretrian' (did you mean 'pretrain'?)\n"
        "        - {id: a, workload: pretrian, backend: fdsp, steps: 3}\n"
        "                            ^\n"
        "bad.yaml:6:46: unknown backend 'fdsp' (did you mean 'fsdp'?)\n"
        "        - {id: a, workload: pretrian, backend: fdsp, steps: 3}\n"
        "                                               ^\n"
        "protocol: bad.yaml: 3 problems\n");

  WriteFile(dir.path / "empty.yaml", "");
  CHECK(Protocol({"run", "empty.yaml"}, dir.path).exit_code == 2);
  WriteFile(dir.path / "binary.yaml", std::string("\x7f" "ELF\0\0\x01", 7));
  Output b = Protocol({"validate", "binary.yaml"}, dir.path);
  CHECK(b.exit_code == 2);
  CHECK(b.err == "binary.yaml: file is not text (binary data at byte 4)\nprotocol: binary.yaml: 1 problem\n");
  CHECK(Protocol({"validate", "missing.yaml"}, dir.path).exit_code == 2);
  CHECK(Protocol({"frobnicate"}, dir.path).exit_code == 2);
  CHECK(Protocol({"--help"}, dir.path).exit_code == 0);
}

TEST_CASE("cli: run stores results, a failing case exits 1, report/list/show/export work") {
  TempDir dir;
  WriteFile(dir.path / "p.yaml", R"yaml(protocol: 1
name: p
title: "one ok, one failing"
models:
  m: {preset: tiny}
defaults: {model: m, backend: command, system: fsdp}
stages:
  - name: s
    cases:
      - {id: ok, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},
         command: {argv: [sh, -c, "echo tokens_per_second 42"],
                   metrics: [{name: tokens_per_second, regex: 'tokens_per_second (\S+)', unit: tokens/s}]}}
      - {id: bad, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},
         command: {argv: [sh, -c, "echo boom >&2; exit 3"]}}
)yaml");
  Output run = Protocol({"run", "p.yaml", "--db", "r.db", "--logs", "logs"}, dir.path);
  INFO(run.err);
  CHECK(run.exit_code == 1);
  auto cases = CasesOf(dir.path / "r.db", 1);
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].status == CaseStatus::kOk);
  CHECK(cases[1].status == CaseStatus::kFailed);
  CHECK(cases[1].exit_code == 3);
  CHECK(Lines(ReadAll(cases[1].log_path)).count("boom") == 1);  // the program's stderr, a line of its own

  auto store = OpenStore((dir.path / "r.db").string());
  REQUIRE(store.ok());
  const std::string started = (*store)->GetRun(1)->started_at;
  Output list = Protocol({"list", "--db", "r.db"}, dir.path);
  CHECK(list.exit_code == 0);
  CHECK(list.out == "ID  KIND  PLAN  STARTED               STATUS  CASES  OK  FAILED\n"
                    " 1  run   p     " + started + "  failed      2   1       1\n");

  Output show = Protocol({"show", "latest", "--db", "r.db", "--json"}, dir.path);
  CHECK(show.exit_code == 0);
  Json shown = Json::parse(show.out);
  CHECK(shown["id"] == 1);
  REQUIRE(shown["cases"].size() == 2);
  Json tps;
  for (const Json& m : shown["cases"][0]["measurements"])
    if (m["name"] == "tokens_per_second") tps = m;
  CHECK(tps.dump() == R"({"name":"tokens_per_second","value":42.0,"unit":"tokens/s","how":"measured","method":"parsed from output by regex","source":"","marker":"","at_length_unit":"","at_length_count":0,"rank":null})");
  CHECK(shown["cases"][1]["status"] == "failed");
  CHECK(shown["cases"][1]["reason"] == "exit code 3");

  Output csv = Protocol({"export", "--db", "r.db", "--format", "csv"}, dir.path);
  CHECK(csv.exit_code == 0);
  std::multiset<std::string> rows = Lines(csv.out);
  // header; ok: wall_seconds, tokens_per_second, contention, contention_peak; bad: wall_seconds and the two contention figures
  CHECK(rows.size() == 8);
  CHECK(rows.count("row_id,run_id,kind,plan,plan_sha256,case_id,repeat,stage,model,workload,backend,system,nodes,"
                   "topology,network,variant,length_unit,length_count,report_as_unit,report_as_count,status,reason,"
                   "exit_code,started_at,finished_at,log_path,log_sha256,name,value,unit,how,method,source,marker,"
                   "at_length_unit,at_length_count,rank\r") == 1);
  // Every column of the case: the failed case's reason and exit code, its times and log, the plan's sha256.
  const std::string plan_sha = (*store)->GetRun(1)->plan_sha256;
  auto identity = [&](const CaseRecord& c) {
    return fmt::format("{},1,run,p,{},{},0,s,m,inference,command,fsdp,1,,,,,0,,0,{},{},{},{},{},{},{},", c.row_id,
                       plan_sha, c.case_id, CaseStatusName(c.status), c.reason, *c.exit_code, c.started_at,
                       c.finished_at, c.log_path, c.log_sha256);
  };
  CHECK(plan_sha.size() == 64);
  CHECK(cases[1].log_sha256.size() == 64);
  CHECK(rows.count(identity(cases[0]) + "tokens_per_second,42,tokens/s,measured,parsed from output by regex,,,,,\r") == 1);
  const std::string bad = identity(cases[1]) + "wall_seconds,";
  CHECK(std::count_if(rows.begin(), rows.end(), [&](const std::string& row) {
          return row.rfind(bad, 0) == 0 && row.size() > bad.size() + 18 &&
                 row.compare(row.size() - 18, 18, ",s,measured,,,,,,\r") == 0;
        }) == 1);

  Output md = Protocol({"report", "--db", "r.db", "--out", "report.md"}, dir.path);
  CHECK(md.exit_code == 0);
  std::multiset<std::string> report = Lines(ReadAll(dir.path / "report.md"));
  // A real run: under a parallel test suite the case may have run contended, and its cell says so.
  CHECK(report.count("| tokens per second | 42.00 | – |") + report.count("| tokens per second | 42.00 ! | – |") ==
        1);
  CHECK(report.count("- run 1, case bad (repeat 0): failed — exit code 3") == 1);  // the failure is in the report
  Output html = Protocol({"report", "--db", "r.db", "--out", "report.html"}, dir.path);
  CHECK(html.exit_code == 0);
  CHECK(Lines(ReadAll(dir.path / "report.html")).count("<li>run 1, case bad (repeat 0): failed — exit code 3</li>") == 1);
}

TEST_CASE("cli: kill -9 during a run loses no finished case and --resume finishes the rest") {
  TempDir dir;
  fs::path db = dir.path / "k.db";
  SignalAndReap(StartRunUntilSecondCase(dir.path, kSleepPlan, "sleepy.yaml", "k.db"), SIGKILL);

  auto integrity = CheckStoreIntegrity(db.string());
  REQUIRE(integrity.ok());
  CHECK(integrity.value());
  auto before = CasesOf(db, 1);
  REQUIRE(before.size() == 2);
  CHECK(before[0].status == CaseStatus::kOk);
  CHECK(before[1].status == CaseStatus::kRunning);

  Output resumed = Protocol({"run", "sleepy.yaml", "--db", "k.db", "--resume", "1"}, dir.path);
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  auto after = CasesOf(db, 1);
  int ok = 0, interrupted = 0;
  for (const auto& c : after) {
    if (c.status == CaseStatus::kOk) ++ok;
    if (c.status == CaseStatus::kInterrupted) ++interrupted;
  }
  CHECK(ok == 3);           // c1 from before, c2 and c3 from the resume
  CHECK(interrupted == 1);  // the c2 attempt the kill cut short, kept as data
}

TEST_CASE("cli: --resume refuses a run whose runner is still alive on this host") {
  TempDir dir;
  fs::path db = dir.path / "a.db";
  const pid_t pid = StartRunUntilSecondCase(dir.path, kSleepPlan, "sleepy.yaml", "a.db");
  Output twice = Protocol({"run", "sleepy.yaml", "--db", "a.db", "--resume", "1"}, dir.path);
  CHECK(twice.exit_code != 0);
  CHECK(twice.err.find(fmt::format("run 1 is still running here: its runner, process {}, is alive", pid)) !=
        std::string::npos);
  CHECK(CasesOf(db, 1).size() == 2);  // nothing was started twice
  SignalAndReap(pid, SIGKILL);
  Output resumed = Protocol({"run", "sleepy.yaml", "--db", "a.db", "--resume", "1"}, dir.path);
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("cli: kill -9 of the runner during a quiet command case leaves the command not running") {
  TempDir dir;
  // A quiet second case: `sleep` with a duration no other process here uses, found again by its command line.
  const std::string marker = std::to_string(40 + getpid() % 1000) + ".125";
  const std::string plan = SleepPlanWithQuietCommand("command: {argv: [sleep, \"" + marker + "\"]}");
  const pid_t pid = StartRunUntilSecondCase(dir.path, plan, "quiet.yaml", "q.db");
  auto sleeping = [&marker] { return CountSleeping(marker); };
  for (int i = 0; i < 100 && sleeping() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(sleeping() == 1);  // the command runs
  SignalAndReap(pid, SIGKILL);
  int left = 1;
  for (int i = 0; i < 100 && (left = sleeping()) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(left == 0);  // its guardian ended it with the runner
}

TEST_CASE("cli: kill -9 of the runner ends what the command case started, grandchildren included") {
  TempDir dir;
  // The quiet second case starts two background sleeps (grandchildren of the runner) and waits;
  // each sleeps for a duration no other process here uses, found again by its command line.
  const std::string marker = "301." + std::to_string(100 + getpid() % 900);
  const std::string plan =
      SleepPlanWithQuietCommand("command: {argv: [sh, -c, \"sleep " + marker + " & sleep " + marker + " & wait\"]}");
  const pid_t pid = StartRunUntilSecondCase(dir.path, plan, "forks.yaml", "f.db");
  auto sleeping = [&marker] { return CountSleeping(marker); };
  for (int i = 0; i < 100 && sleeping() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(sleeping() == 2);  // both grandchildren run
  SignalAndReap(pid, SIGKILL);
  int left = 2;
  for (int i = 0; i < 150 && (left = sleeping()) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(left == 0);  // the guardian saw its lifeline end and killed the case's process group
}

TEST_CASE("cli: Ctrl-C stops the running case's process group, stores it interrupted, exits 1") {
  TempDir dir;
  fs::path db = dir.path / "i.db";
  const int status = SignalAndReap(StartRunUntilSecondCase(dir.path, kSleepPlan, "sleepy.yaml", "i.db"), SIGINT);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  auto cases = CasesOf(db, 1);
  REQUIRE(cases.size() == 2);  // c3 never started
  // c2's `sleep 4` was stopped, not waited for: it would have ended ok.
  CHECK(cases[1].status == CaseStatus::kInterrupted);
  CHECK(cases[1].reason == "stopped by request (Ctrl-C / SIGTERM); process group killed");
  auto store = OpenStore(db.string());
  REQUIRE(store.ok());
  auto run = (*store)->GetRun(1);
  REQUIRE(run.ok());
  CHECK(run->status == "interrupted");
}

TEST_CASE("cli: two runs writing one database at once both succeed and lose nothing") {
  TempDir dir;
  WriteFile(dir.path / "fast.yaml", R"yaml(protocol: 1
name: fast
title: "many quick cases"
models:
  m: {preset: tiny}
defaults: {model: m, backend: command, system: fsdp}
stages:
  - name: s
    cases:
      - {id: a1, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: [true]}}
      - {id: a2, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: [true]}}
      - {id: a3, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: [true]}}
      - {id: a4, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: [true]}}
      - {id: a5, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: [true]}}
      - {id: a6, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: [true]}}
)yaml");
  Output first, second;
  std::thread other([&] { second = Protocol({"run", "fast.yaml", "--db", "c.db", "--logs", "l2"}, dir.path); });
  first = Protocol({"run", "fast.yaml", "--db", "c.db", "--logs", "l1"}, dir.path);
  other.join();
  INFO(first.err << second.err);
  CHECK(first.exit_code == 0);
  CHECK(second.exit_code == 0);
  auto store = OpenStore((dir.path / "c.db").string());
  REQUIRE(store.ok());
  auto runs = (*store)->ListRuns();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 2);
  for (const auto& run : runs.value()) {
    auto cases = (*store)->CasesOfRun(run.id);
    REQUIRE(cases.ok());
    CHECK(cases->size() == 6);
    for (const auto& c : cases.value()) CHECK(c.status == CaseStatus::kOk);
  }
}

TEST_CASE("cli: importing methodology-style figures renders baseline/share coefficients") {
  TempDir dir;
  WriteFile(dir.path / "published.yaml", R"yaml(source: "methodology results table (test fixture)"
results:
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: fsdp, nodes: 1, metric: wall_minutes, value: 90}
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: share, nodes: 1, metric: wall_minutes, value: 30}
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: fsdp, nodes: 2, network: 80G, metric: wall_minutes, value: 80}
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: share, nodes: 2, network: 10G, metric: wall_minutes, value: 20}
)yaml");
  Output imported = Protocol({"import", "published.yaml", "--db", "i.db"}, dir.path);
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  Output md = Protocol({"report", "--db", "i.db", "--format", "md"}, dir.path);
  REQUIRE(md.exit_code == 0);
  std::multiset<std::string> lines = Lines(md.out);
  // 90 / 30 on one node, 80 / 20 on two.
  CHECK(lines.count("| pretrain 1000 steps | 3.00 | 1 | 4.00 | 1 |") == 1);
  CHECK(lines.count("- share is 3.00× faster than fsdp on 1 node (300 %) for pretrain 1000 steps; fsdp figure "
                    "imported, share figure imported; no interval (fewer than 3 repeats).") == 1);
  CHECK(lines.count("- share is 4.00× faster than fsdp on 2 nodes (400 %) for pretrain 1000 steps (fsdp over 80G, "
                    "share over 10G); fsdp figure imported, share figure imported; no interval (fewer than 3 "
                    "repeats).") == 1);
  CHECK(lines.count("- Training (minutes) / pretrain 1000 steps / fsdp 1 node: imported from methodology results "
                    "table (test fixture) (run 1, case import-1: 90.0 min)") == 1);

  WriteFile(dir.path / "broken.yaml", "source: x\nresults:\n  - {model: m, workload: pretrain, steps: 10, "
                                      "backend: fsdp, nodes: 1, metric: wall_minutes, valeu: 3}\n");
  Output broken = Protocol({"import", "broken.yaml", "--db", "i.db"}, dir.path);
  CHECK(broken.exit_code == 2);
  CHECK(broken.err ==
        "broken.yaml:3:5: a result needs 'value' (or marker: not-provided)\n"
        "    - {model: m, workload: pretrain, steps: 10, backend: fsdp, nodes: 1, metric: wall_minutes, valeu: 3}\n"
        "      ^\n"
        "broken.yaml:3:94: unknown key 'valeu' (did you mean 'value'?)\n"
        "    - {model: m, workload: pretrain, steps: 10, backend: fsdp, nodes: 1, metric: wall_minutes, valeu: 3}\n"
        "                                                                                               ^\n"
        "protocol: broken.yaml: 2 problems\n");
}

// The pretrain row on 1 node of the quickstart (qn.1.1 fsdp, qn.2.1 share):
// each side's stored held-out curve has at least 5 points, with training
// seconds that leave the evaluations out; the speed-up at equal quality the
// report gives is the one computed here by hand from the stored curves: the
// target is fsdp's last point, each side's time the first crossing,
// interpolated linearly between the points around it.
static void CheckEqualQualityByHand(const fs::path& db, const fs::path& src) {
  auto opened = OpenStore(db.string());
  REQUIRE(opened.ok());
  Store& store = **opened;
  std::map<std::string, std::vector<EvalPoint>> curves;
  std::map<std::string, std::map<std::string, double>> figures;
  for (const CaseRecord& c : CasesOf(db, 1)) {
    auto curve = store.EvalCurveOfCase(c.row_id);
    REQUIRE(curve.ok());
    curves[c.case_id] = *curve;
    auto ms = store.MeasurementsOfCase(c.row_id);
    REQUIRE(ms.ok());
    for (const Measurement& m : *ms)
      if (m.value && m.length_unit.empty()) figures[c.case_id][m.name] = *m.value;
  }
  for (const char* id : {"qn.1.1", "qn.1.2", "qn.1.2-hybrid", "qn.1.3", "qn.1.4", "qn.2.1", "qn.2.2", "qn.2.3", "qn.2.4"}) {
    INFO(id);
    const std::vector<EvalPoint>& curve = curves[id];
    REQUIRE(curve.size() >= 5);
    CHECK(curve.front().step == 0);
    CHECK(curve.front().training_seconds == 0);
    // The last point is the case's held-out loss, after all its training time and before its evaluations'.
    CHECK(curve.back().loss == doctest::Approx(figures[id]["eval_loss"]));
    REQUIRE(figures[id].count("eval_seconds"));
    CHECK(figures[id]["eval_seconds"] > 0);
    CHECK(curve.back().training_seconds + figures[id]["eval_seconds"] < figures[id]["wall_seconds"]);
  }
  auto crossing = [](const std::vector<EvalPoint>& c, double target) -> std::optional<double> {
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i].loss > target) continue;
      if (i == 0) return c[i].training_seconds;
      const double f = (c[i - 1].loss - target) / (c[i - 1].loss - c[i].loss);
      return c[i - 1].training_seconds + f * (c[i].training_seconds - c[i - 1].training_seconds);
    }
    return std::nullopt;
  };
  const double target = curves["qn.1.1"].back().loss;
  const std::optional<double> fsdp = crossing(curves["qn.1.1"], target);
  const std::optional<double> share = crossing(curves["qn.2.1"], target);
  REQUIRE(fsdp);
  const fs::path json = db.parent_path() / "report.json";
  Output rep = Protocol({"report", "--db", db.string(), "--run", "latest", "--out", json.string()}, src);
  REQUIRE(rep.exit_code == 0);
  const Json report = Json::parse(ReadAll(json));
  std::optional<Json> row;
  for (const Json& r : report["models"][0]["equal_quality"])
    if (r["row"] == "pretrain 12 steps" && r["scope"] == "1 node") row = r;
  REQUIRE(row);
  INFO(row->dump());
  CHECK((*row)["target"] == fmt::format("{:.4f} (fsdp's at step 12)", target));
  if (share && *share > 0) {
    CHECK((*row)["ratio"] == fmt::format("{:.2f}", *fsdp / *share));
  } else {
    CHECK((*row)["ratio"] == "–");
  }
}

// The quick start's time estimate against its measured wall time, case by
// case (docs/performance.md, "Time estimate"): within [0.5, 2] of it, the
// band `run` flags outside of, unless the two are within kStartJitterSeconds
// of each other; and the checked cases' sum within the band, with no slack.
// The slack: a case of about a second is mostly the start of its rank
// processes, which a busy disk or scheduler can stretch by half a second
// without taking CPU time (the contention figure does not see it); the sum
// still catches an estimate that is off on every case. A case that ran
// contended (other processes took a fifth of the CPU or more) is not checked:
// its time says more about the machine's load than about the estimate; nor is
// any case when this host's calibration (beside the database) was measured
// while the machine was that busy: its rates are low. A run where no case
// could be checked says so.
constexpr double kStartJitterSeconds = 0.75;
void CheckQuickstartEstimates(const fs::path& db) {
  auto calibration = ReadCalibration(CalibrationPathFor(db.string()), ThisHost());
  REQUIRE(calibration.ok());
  REQUIRE(calibration->has_value());
  if (CalibrationContended(**calibration)) {
    MESSAGE("the calibration was measured on a busy machine (" << CalibrationContentionNote(**calibration)
                                                               << "): the estimate's band was not checked");
    return;
  }
  auto store = OpenStore(db.string());
  REQUIRE(store.ok());
  int checked = 0;
  double expected_sum = 0, measured_sum = 0;
  for (const auto& c : CasesOf(db, 1)) {
    CAPTURE(c.case_id);
    double expected = 0, measured = 0, contention = 0;
    std::string method;
    for (const auto& m : (*store)->MeasurementsOfCase(c.row_id).value()) {
      if (m.name == metric::kExpectedWallSeconds && m.how == Provenance::kEstimated) {
        expected = *m.value;
        method = m.method;
      }
      if (m.name == metric::kWallSeconds && m.how == Provenance::kMeasured && m.length_unit.empty()) measured = *m.value;
      if (m.name == metric::kContention && m.value) contention = *m.value;
    }
    REQUIRE(expected > 0);
    CHECK(method.find("calibrated on this host") != std::string::npos);
    INFO("expected " << expected << " s, measured " << measured << " s, contention " << contention << ": " << method);
    if (contention >= metric::kContendedShare) continue;
    ++checked;
    expected_sum += expected;
    measured_sum += measured;
    if (std::abs(measured - expected) < kStartJitterSeconds) continue;
    CHECK(measured / expected >= metric::kEstimateBandLow);
    CHECK(measured / expected <= metric::kEstimateBandHigh);
  }
  if (checked == 0) {
    MESSAGE("every quick start case ran contended: the estimate's band was not checked");
    return;
  }
  INFO("the " << checked << " uncontended cases: expected " << expected_sum << " s, measured " << measured_sum << " s");
  CHECK(measured_sum / expected_sum >= metric::kEstimateBandLow);
  CHECK(measured_sum / expected_sum <= metric::kEstimateBandHigh);
}

TEST_CASE("cli: the quickstart plan runs natively end to end and writes both reports") {
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  // A fresh machine: no calibration.json beside the database, so the first
  // run measures this host's CPU figures for the time estimate and stores them.
  REQUIRE_FALSE(fs::exists(dir.path / "calibration.json"));
  // The shipped plan as it is, with a shorter inference schedule and one thread
  // per process so the test stays quick while other tests share the cores.
  Output run = Protocol({"run", (src / "plans/quickstart.yaml").string(), "--db",
                         (dir.path / "q.db").string(), "--logs", (dir.path / "logs").string(),
                         "--set", "defaults.inference.max_new_tokens=[100, 150]", "--set",
                         "defaults.output_dir=" + (dir.path / "models/{case_id}").string()},
                        src, "OMP_NUM_THREADS=1");
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.err.find((dir.path / "calibration.json").string() +
                     " has no CPU figures for this host: measuring them for the time estimate") != std::string::npos);
  CHECK(fs::exists(dir.path / "calibration.json"));
  auto cases = CasesOf(dir.path / "q.db", 1);
  CHECK(cases.size() == 12);
  for (const auto& c : cases) {
    INFO(c.case_id << ": " << c.reason);
    CHECK(c.status == CaseStatus::kOk);
  }
  for (const char* ext : {"md", "html"}) {
    std::string out = (dir.path / (std::string("report.") + ext)).string();
    Output rep = Protocol({"report", "--db", (dir.path / "q.db").string(), "--run", "latest", "--out", out}, src);
    CHECK(rep.exit_code == 0);
  }
  // The finetune and inference cases start from the model qn.1.1 saved (model
  // tiny-trained, from_case): real weights, so none of their figures carries
  // the random-weights caveat.
  {
    auto store = OpenStore((dir.path / "q.db").string());
    REQUIRE(store.ok());
    for (const auto& c : cases) {
      if (c.workload == "pretrain") continue;
      CAPTURE(c.case_id);
      auto ms = (*store)->MeasurementsOfCase(c.row_id);
      REQUIRE(ms.ok());
      CHECK_FALSE(ms->empty());
      for (const Measurement& m : *ms) CHECK(m.method.find(metric::kRandomWeightsNote) == std::string::npos);
    }
  }
  // Every system and node count has its column, in each model's section (the
  // pretrained tiny, and tiny-trained: the finetunes and inference); the quality table is there.
  std::multiset<std::string> md = Lines(ReadAll(dir.path / "report.md"));
  CHECK(md.count("## tiny") == 1);
  CHECK(md.count("## tiny-trained") == 1);
  CHECK(md.count("| | fsdp 1 node | share 1 node | fsdp 2 nodes | share 2 nodes |") == 2);
  CHECK(md.count("| | eval loss | best group eval loss | final loss | bytes communicated | bytes between nodes | "
                 "merge time (s) |") == 2);
  // The hybrid-sharded baseline is set against share beside fsdp, in a table of its own.
  CHECK(md.count("### share against each baseline") == 1);
  CHECK(md.count("| | fsdp (min) | fsdp / share | fsdp bytes between nodes | fsdp-hybrid (min) | fsdp-hybrid / share | "
                 "fsdp-hybrid bytes between nodes | share (min) | share bytes between nodes |") == 1);
  for (const std::string& line : md) CHECK(line.find("fsdp-hybrid 2 nodes: newest ok result") == std::string::npos);
  CHECK(md.count("### Inference, single-stream") == 1);
  // Every case stored its expected wall time (calibrated on this host), and the report sets it beside the
  // measured one.
  CHECK(md.count("### Expected against measured wall time (s)") == 2);
  CheckQuickstartEstimates(dir.path / "q.db");
  // The HTML report draws the generation-time chart of the inference cases.
  CHECK(ReadAll(dir.path / "report.html")
            .find("<svg width=\"900\" height=\"360\" viewBox=\"0 0 900 360\" role=\"img\" "
                  "aria-label=\"generation time (s) against answer length (tokens)\">") != std::string::npos);
  // And one chart of held-out loss against training time per compared training row.
  CHECK(ReadAll(dir.path / "report.html").find("aria-label=\"held-out loss against training time (s)\"") !=
        std::string::npos);
  CHECK(md.count("### Speed-up at equal quality") == 2);
  CheckEqualQualityByHand(dir.path / "q.db", src);
}

TEST_CASE("cli: a run whose program file is replaced midway still starts its ranks (from the running binary)") {
  // A rebuild during a long run removes the file the runner was started from.
  // Its ranks must still start: they run the runner's own binary.
  TempDir dir;
  const fs::path bin = dir.path / "bin";
  fs::create_directories(bin);
  for (const char* name : {"protocol", "protocol-native"})
    fs::copy_file(fs::path(PROTOCOL_BINARY).parent_path() / name, bin / name);
  fs::path src = PROTOCOL_SOURCE_DIR;
  WriteFile(dir.path / "plan.yaml",
            "protocol: 1\nname: swap\n"
            "models: {tiny: {preset: tiny, path: " + (src / "data/quickstart").string() + ", init: random}}\n"
            "datasets: {corpus: {format: text, path: " + (src / "data/quickstart/corpus.txt").string() + "}}\n"
            "stages:\n  - name: s\n    cases:\n"
            "      - {id: wait, backend: command, system: fsdp, workload: inference, model: tiny,\n"
            "         inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: [sleep, '2']}}\n"
            "      - {id: ranks, backend: fsdp, workload: pretrain, model: tiny, dataset: corpus, steps: 2,\n"
            "         training: {batch_size: 4, seq_len: 16, device: cpu, ranks_per_node: 2}}\n");
  const std::string cmd = "cd " + ShellQuote(dir.path.string()) + " && (" + ShellQuote((bin / "protocol").string()) +
                          " run plan.yaml --db q.db >out.txt 2>&1 &) && sleep 1 && rm " +
                          ShellQuote((bin / "protocol-native").string()) + " && sleep 12";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto cases = CasesOf(dir.path / "q.db", 1);
  REQUIRE(cases.size() == 2);
  INFO(ReadAll(dir.path / "out.txt"));
  INFO(cases[1].reason);
  CHECK(cases[1].case_id == "ranks");
  CHECK(cases[1].status == CaseStatus::kOk);
}
