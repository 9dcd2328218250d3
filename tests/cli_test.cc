// End-to-end tests of the `protocol` program: the real binary, real processes,
// a real SQLite file in a temporary directory.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runner/store/store.h"

namespace fs = std::filesystem;
using namespace protocol;

namespace {

struct Output {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh directory per test, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/protocol-cli-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `protocol ARGS...` in `cwd`, capturing stdout, stderr and the exit code;
// `env` is a prefix of VAR=value assignments ("" for none).
Output Protocol(const std::vector<std::string>& args, const fs::path& cwd, const std::string& env = "") {
  std::string cmd = "cd " + Quote(cwd.string()) + " && " + env + " " + Quote(PROTOCOL_BINARY);
  for (const auto& a : args) cmd += " " + Quote(a);
  static std::atomic<int> calls{0};
  int n = calls++;
  fs::path out = fs::temp_directory_path() / ("protocol-cli-" + std::to_string(getpid()) + "-" + std::to_string(n) + ".out");
  fs::path err = out;
  err.replace_extension(".err");
  cmd += " >" + Quote(out.string()) + " 2>" + Quote(err.string()) + " </dev/null";
  int status = std::system(cmd.c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = ReadAll(out);
  o.err = ReadAll(err);
  fs::remove(out);
  fs::remove(err);
  return o;
}

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

std::vector<CaseRecord> CasesOf(const fs::path& db, int64_t run) {
  auto store = OpenStore(db.string());
  REQUIRE(store.ok());
  auto cases = (*store)->CasesOfRun(run);
  REQUIRE(cases.ok());
  return cases.value();
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

}  // namespace

TEST_CASE("cli: every shipped plan validates") {
  std::vector<std::string> args = {"validate"};
  for (const auto& entry : fs::directory_iterator(fs::path(PROTOCOL_SOURCE_DIR) / "plans"))
    if (entry.path().extension() == ".yaml") args.push_back(entry.path().string());
  REQUIRE(args.size() >= 5);  // llama70b, llama7b, methodology-commands, quickstart + validate
  Output o = Protocol(args, PROTOCOL_SOURCE_DIR);
  INFO(o.err);
  CHECK(o.exit_code == 0);
}

TEST_CASE("cli: a malformed plan prints located errors and exits 2") {
  TempDir dir;
  WriteFile(dir.path / "bad.yaml", "protocol: 1\nname: bad\nstages:\n  - name: s\n    cases:\n"
                                   "      - {id: a, workload: pretrian, backend: fdsp, steps: 3}\n");
  Output o = Protocol({"validate", "bad.yaml"}, dir.path);
  CHECK(o.exit_code == 2);
  CHECK(o.err.find("bad.yaml:6:") != std::string::npos);
  CHECK(o.err.find("did you mean 'fsdp'?") != std::string::npos);
  CHECK(o.err.find("did you mean 'pretrain'?") != std::string::npos);

  WriteFile(dir.path / "empty.yaml", "");
  CHECK(Protocol({"run", "empty.yaml"}, dir.path).exit_code == 2);
  WriteFile(dir.path / "binary.yaml", std::string("\x7f" "ELF\0\0\x01", 7));
  Output b = Protocol({"validate", "binary.yaml"}, dir.path);
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("binary.yaml") != std::string::npos);
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
  CHECK(ReadAll(cases[1].log_path).find("boom") != std::string::npos);

  Output list = Protocol({"list", "--db", "r.db"}, dir.path);
  CHECK(list.exit_code == 0);
  CHECK(list.out.find("p") != std::string::npos);
  Output show = Protocol({"show", "latest", "--db", "r.db", "--json"}, dir.path);
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("\"tokens_per_second\"") != std::string::npos);
  CHECK(Protocol({"show", "99", "--db", "r.db"}, dir.path).exit_code == 2);
  Output csv = Protocol({"export", "--db", "r.db", "--format", "csv"}, dir.path);
  CHECK(csv.exit_code == 0);
  CHECK(csv.out.find("tokens_per_second") != std::string::npos);
  Output md = Protocol({"report", "--db", "r.db", "--out", "report.md"}, dir.path);
  CHECK(md.exit_code == 0);
  CHECK(fs::exists(dir.path / "report.md"));
  Output html = Protocol({"report", "--db", "r.db", "--out", "report.html"}, dir.path);
  CHECK(html.exit_code == 0);
  std::string page = ReadAll(dir.path / "report.html");
  CHECK(page.find("<table") != std::string::npos);
  CHECK(page.find("exit code 3") != std::string::npos);  // the failure is in the report
}

TEST_CASE("cli: kill -9 during a run loses no finished case and --resume finishes the rest") {
  TempDir dir;
  WriteFile(dir.path / "sleepy.yaml", kSleepPlan);
  fs::path db = dir.path / "k.db";
  pid_t pid = StartRun(dir.path, "sleepy.yaml", "k.db");
  REQUIRE(pid > 0);
  REQUIRE(WaitForSecondCaseRunning(db));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);

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

TEST_CASE("cli: Ctrl-C stops the running case's process group, stores it interrupted, exits 1") {
  TempDir dir;
  WriteFile(dir.path / "sleepy.yaml", kSleepPlan);
  fs::path db = dir.path / "i.db";
  pid_t pid = StartRun(dir.path, "sleepy.yaml", "i.db");
  REQUIRE(pid > 0);
  REQUIRE(WaitForSecondCaseRunning(db));
  auto signalled = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(seconds < 3.5);  // did not wait for the case's `sleep 4`
  auto cases = CasesOf(db, 1);
  REQUIRE(cases.size() == 2);  // c3 never started
  CHECK(cases[1].status == CaseStatus::kInterrupted);
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
  CHECK(md.out.find("3.00") != std::string::npos);  // 90 / 30 on one node
  CHECK(md.out.find("4.00") != std::string::npos);  // 80 / 20 on two nodes
  CHECK(md.out.find("300 %") != std::string::npos);
  CHECK(md.out.find("400 %") != std::string::npos);
  CHECK(md.out.find("methodology results table (test fixture)") != std::string::npos);

  WriteFile(dir.path / "broken.yaml", "source: x\nresults:\n  - {model: m, workload: pretrain, steps: 10, "
                                      "backend: fsdp, nodes: 1, metric: wall_minutes, valeu: 3}\n");
  Output broken = Protocol({"import", "broken.yaml", "--db", "i.db"}, dir.path);
  CHECK(broken.exit_code == 2);
  CHECK(broken.err.find("broken.yaml:3:") != std::string::npos);
  CHECK(broken.err.find("did you mean 'value'?") != std::string::npos);
}

TEST_CASE("cli: the quickstart plan runs natively end to end and writes both reports") {
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  // The shipped plan as it is, with a shorter inference schedule and one thread
  // per process so the test stays quick while other tests share the cores.
  Output run = Protocol({"run", (src / "plans/quickstart.yaml").string(), "--db",
                         (dir.path / "q.db").string(), "--logs", (dir.path / "logs").string(),
                         "--set", "defaults.inference.max_new_tokens=[100, 150]", "--set",
                         "defaults.output_dir=" + (dir.path / "models/{case_id}").string()},
                        src, "OMP_NUM_THREADS=1");
  INFO(run.err);
  CHECK(run.exit_code == 0);
  auto cases = CasesOf(dir.path / "q.db", 1);
  CHECK(cases.size() == 11);
  for (const auto& c : cases) {
    INFO(c.case_id << ": " << c.reason);
    CHECK(c.status == CaseStatus::kOk);
  }
  for (const char* ext : {"md", "html"}) {
    std::string out = (dir.path / (std::string("report.") + ext)).string();
    Output rep = Protocol({"report", "--db", (dir.path / "q.db").string(), "--run", "latest", "--out", out}, src);
    CHECK(rep.exit_code == 0);
    std::string text = ReadAll(out);
    CHECK(text.find("fsdp 1 node") != std::string::npos);
    CHECK(text.find("share 2 nodes") != std::string::npos);
    CHECK(text.find("eval loss") != std::string::npos);
  }
  CHECK(ReadAll(dir.path / "report.html").find("<svg") != std::string::npos);
}

TEST_CASE("cli: the command-backend demo plan runs end to end") {
  TempDir dir;
  fs::path src = PROTOCOL_SOURCE_DIR;
  Output run = Protocol({"run", (src / "plans/demo-command.yaml").string(), "--db",
                         (dir.path / "d.db").string(), "--logs", (dir.path / "logs").string(),
                         "--set", "defaults.output_dir=" + (dir.path / "models/{case_id}").string()},
                        src);
  INFO(run.err);
  CHECK(run.exit_code == 0);
  std::string out = (dir.path / "report.md").string();
  Output rep = Protocol({"report", "--db", (dir.path / "d.db").string(), "--run", "latest",
                         "--baseline-system", "demo-baseline", "--candidate-system", "demo-share",
                         "--out", out},
                        src);
  CHECK(rep.exit_code == 0);
  CHECK(ReadAll(out).find("demo-share 1 node") != std::string::npos);
  for (const auto& c : CasesOf(dir.path / "d.db", 1)) {
    INFO(c.case_id << ": " << c.reason);
    CHECK(c.status == CaseStatus::kOk);
  }
}

TEST_CASE("cli: two-node rehearsal shows FSDP slowing over a 50 Mbit/s link, and leaves no namespace") {
  if (geteuid() != 0) {
    MESSAGE("skipped: the two-node rehearsal needs root (network namespaces)");
    return;
  }
  if (std::system("ip netns add protocol-probe-cli >/dev/null 2>&1 && ip netns del protocol-probe-cli") != 0) {
    MESSAGE("skipped: `ip netns add` does not work here");
    return;
  }
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
