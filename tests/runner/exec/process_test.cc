// The system process runner, with real /bin/sh children.

#include <algorithm>
#include <cerrno>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runner/base/text.h"
#include "runner/exec/process.h"
#include "test_files.h"

using namespace protocol;

namespace {

struct Captured {
  ProcessResult result;
  std::vector<std::string> lines;
};

Captured RunSh(const std::string& script, ProcessSpec spec = {}, const StopFlag* stop = nullptr) {
  StopFlag never;
  spec.argv = {"/bin/sh", "-c", script};
  Captured c;
  auto runner = MakeSystemProcessRunner();
  c.result = runner->Run(spec, stop ? *stop : never,
                         [&](std::string_view line) { c.lines.emplace_back(line); });
  return c;
}

using protocol::testing::ReadTextFile;
using protocol::testing::TempDir;

// True while `pid` is a live process (a zombie waiting for a reaper counts as dead).
bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::string stat = ReadTextFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// SIGKILL is delivered asynchronously; give it up to 2 s to land.
bool DiesSoon(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (!Alive(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// How many processes run `sleep <seconds>` exactly (found by their command line).
int CountSleeping(const std::string& seconds) {
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string cmdline = ReadTextFile((entry.path() / "cmdline").string());
    if (cmdline == std::string("sleep") + '\0' + seconds + '\0' && Alive(std::stoi(entry.path().filename()))) ++found;
  }
  return found;
}

// Polls (up to 5 s) until CountSleeping(seconds) == want; returns the last count.
int WaitForSleeping(const std::string& seconds, int want) {
  int count = CountSleeping(seconds);
  for (int i = 0; i < 250 && count != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    count = CountSleeping(seconds);
  }
  return count;
}

}  // namespace

TEST_CASE("Process: exit codes 0 and 3 are reported as exited") {
  Captured ok = RunSh("exit 0");
  CHECK(ok.result.ending == ProcessResult::Ending::kExited);
  CHECK(ok.result.exit_code == 0);
  CHECK(ok.result.error == "");

  Captured three = RunSh("exit 3");
  CHECK(three.result.ending == ProcessResult::Ending::kExited);
  CHECK(three.result.exit_code == 3);
}

TEST_CASE("Process: a child killed by a signal is reported as signaled") {
  Captured c = RunSh("kill -9 $$");
  CHECK(c.result.ending == ProcessResult::Ending::kSignaled);
  CHECK(c.result.signal == SIGKILL);
}

TEST_CASE("Process: stdout and stderr reach the callback and the log with header and footer") {
  TempDir temp("process");
  REQUIRE(!temp.path.empty());
  const std::string dir = temp.str();
  ProcessSpec spec;
  spec.log_path = dir + "/logs/deep/case.log";  // parent directories are created
  Captured c = RunSh("echo out; echo err >&2; printf 'no newline'", spec);
  REQUIRE(c.result.ending == ProcessResult::Ending::kExited);
  CHECK(c.lines == std::vector<std::string>{"out", "err", "no newline"});

  std::string log = ReadTextFile(spec.log_path);
  CHECK(log.rfind("$ /bin/sh -c 'echo out; echo err >&2; printf '\\''no newline'\\'''\n# started ", 0) ==
        0);
  CHECK(log.find("\nout\nerr\nno newline\nexit code 0 after ") != std::string::npos);
  CHECK(log.back() == '\n');

  // A second run appends to the same log.
  RunSh("echo again", spec);
  std::string appended = ReadTextFile(spec.log_path);
  CHECK(appended.rfind(log, 0) == 0);
  CHECK(appended.find("\nagain\nexit code 0 after ") != std::string::npos);
}

TEST_CASE("Process: CR LF and lone CR and LF all end lines and empty lines are kept") {
  Captured c = RunSh("printf 'a\\r\\nb\\rc\\n\\nd'");
  CHECK(c.lines == std::vector<std::string>{"a", "b", "c", "", "d"});
}

TEST_CASE("Process: a program that does not exist fails to start with the reason") {
  TempDir temp("process");
  REQUIRE(!temp.path.empty());
  const std::string dir = temp.str();
  ProcessSpec spec;
  spec.argv = {"fdsp-no-such-program", "--x"};
  spec.log_path = dir + "/case.log";
  StopFlag stop;
  auto runner = MakeSystemProcessRunner();
  ProcessResult r = runner->Run(spec, stop, nullptr);
  CHECK(r.ending == ProcessResult::Ending::kFailedToStart);
  CHECK(r.error == "cannot run 'fdsp-no-such-program': No such file or directory");
  CHECK(ReadTextFile(spec.log_path).find(
            "failed to start: cannot run 'fdsp-no-such-program': No such file or directory\n") !=
        std::string::npos);
}

TEST_CASE("Process: an empty argv fails to start") {
  StopFlag stop;
  ProcessResult r = MakeSystemProcessRunner()->Run(ProcessSpec{}, stop, nullptr);
  CHECK(r.ending == ProcessResult::Ending::kFailedToStart);
  CHECK(r.error == "empty command line");
}

TEST_CASE("Process: workdir and env are applied on top of the inherited environment") {
  TempDir temp("process");
  REQUIRE(!temp.path.empty());
  const std::string dir = temp.str();
  ::setenv("PROTOCOL_TEST_INHERITED", "kept", 1);
  ProcessSpec spec;
  spec.workdir = dir;
  spec.env = {{"PROTOCOL_TEST_VAR", "a b;$c"}, {"HOME", "/overridden"}};
  spec.log_path = dir + "/case.log";
  Captured c = RunSh("pwd; echo \"$PROTOCOL_TEST_VAR\"; echo \"$PROTOCOL_TEST_INHERITED\"; echo $HOME", spec);
  ::unsetenv("PROTOCOL_TEST_INHERITED");
  CHECK(c.result.exit_code == 0);
  CHECK(c.lines == std::vector<std::string>{dir, "a b;$c", "kept", "/overridden"});
  // The log header names the workdir and the env keys, never env values (they may be secrets).
  std::string log = ReadTextFile(spec.log_path);
  CHECK(log.find(" in " + dir + " with env HOME PROTOCOL_TEST_VAR\n") != std::string::npos);
  CHECK(log.find("/overridden\nexit code 0") != std::string::npos);
  CHECK(log.find("a b;$c") == log.rfind("a b;$c"));  // only the program's own output
}

TEST_CASE("Process: a missing workdir fails to start with the reason") {
  ProcessSpec spec;
  spec.workdir = "/nonexistent/protocol-workdir";
  Captured c = RunSh("echo never", spec);
  CHECK(c.result.ending == ProcessResult::Ending::kFailedToStart);
  CHECK(c.result.error ==
        "cannot change directory to '/nonexistent/protocol-workdir': No such file or directory");
  CHECK(c.lines.empty());
}

TEST_CASE("Process: at timeout a child ignoring SIGTERM and its grandchild are killed") {
  ProcessSpec spec;
  spec.timeout_seconds = 1.0;  // room for the shell to print both pids on a loaded machine
  spec.kill_grace_seconds = 0.2;
  // The shell ignores TERM, and so does its background sleep (ignored
  // dispositions are inherited).
  Captured c = RunSh("trap '' TERM; sleep 30 & echo $$; echo $!; wait; wait; echo not-reached", spec);
  CHECK(c.result.ending == ProcessResult::Ending::kTimedOut);
  REQUIRE(c.lines.size() == 2);
  pid_t child = std::stoi(c.lines[0]);
  pid_t grandchild = std::stoi(c.lines[1]);
  CHECK(DiesSoon(child));
  CHECK(DiesSoon(grandchild));
}

TEST_CASE("Process: a raised StopFlag ends the run as stopped and kills the group") {
  StopFlag stop;
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "sleep 30 & echo $!; wait"};
  spec.kill_grace_seconds = 0.2;
  std::atomic<bool> started{false};
  std::thread raiser([&] {
    // Raise once the child has printed its grandchild's pid (at most 5 s).
    for (int i = 0; i < 500 && !started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stop.Request();
  });
  std::vector<std::string> lines;
  ProcessResult r = MakeSystemProcessRunner()->Run(spec, stop, [&](std::string_view line) {
    lines.emplace_back(line);
    started = true;
  });
  raiser.join();
  CHECK(r.ending == ProcessResult::Ending::kStopped);
  REQUIRE(lines.size() == 1);
  CHECK(DiesSoon(std::stoi(lines[0])));
}

TEST_CASE("Process: a grandchild holding the pipe after the child exits does not hang the run") {
  // The background sleep keeps stdout open; the shell itself exits at once.
  Captured c = RunSh("sleep 30 & echo $!; exit 4");
  CHECK(c.result.ending == ProcessResult::Ending::kExited);
  CHECK(c.result.exit_code == 4);
  REQUIRE(c.lines.size() == 1);
  CHECK(DiesSoon(std::stoi(c.lines[0])));
}

TEST_CASE("Process: output a grandchild writes during the grace is still captured") {
  Captured c = RunSh("(sleep 0.1; echo late) & echo early");
  CHECK(c.result.exit_code == 0);
  CHECK(c.lines == std::vector<std::string>{"early", "late"});
}

TEST_CASE("Process: a kill -9 of the runner ends the command and everything it started") {
  // A runner process (a fork of this test) runs a command that starts two
  // grandchildren, each `sleep` with a duration no other process here uses.
  const std::string seconds = "301." + std::to_string(100 + getpid() % 900);
  pid_t runner = ::fork();
  REQUIRE(runner >= 0);
  if (runner == 0) {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", "sleep " + seconds + " & sleep " + seconds + " & wait"};
    StopFlag never;
    MakeSystemProcessRunner()->Run(spec, never, nullptr);
    ::_exit(0);
  }
  REQUIRE(WaitForSleeping(seconds, 2) == 2);
  ::kill(runner, SIGKILL);
  int status = 0;
  ::waitpid(runner, &status, 0);
  // The guardian sees its lifeline end and SIGKILLs the command's whole group.
  CHECK(WaitForSleeping(seconds, 0) == 0);
}

TEST_CASE("Process: the guardian relays the command's end: its exit code, or the signal that ended it") {
  Captured term = RunSh("kill -TERM $$");
  CHECK(term.result.ending == ProcessResult::Ending::kSignaled);
  CHECK(term.result.signal == SIGTERM);
  Captured segv = RunSh("kill -SEGV $$");
  CHECK(segv.result.ending == ProcessResult::Ending::kSignaled);
  CHECK(segv.result.signal == SIGSEGV);
  Captured code = RunSh("exit 200");
  CHECK(code.result.exit_code == 200);
  // The command itself (not the guardian) is the child of a guardian in the group the result names.
  Captured pids = RunSh("echo $$; cut -d' ' -f4 /proc/$$/stat; cut -d' ' -f5 /proc/$$/stat");
  REQUIRE(pids.lines.size() == 3);
  CHECK(std::stoi(pids.lines[1]) == pids.result.pid);
  CHECK(std::stoi(pids.lines[2]) == pids.result.pid);
  CHECK(std::stoi(pids.lines[0]) != pids.result.pid);
}

TEST_CASE("Process: a log the disk cannot take loses text, never the run, and says so") {
  // /dev/full opens for appending and fails every write with ENOSPC.
  REQUIRE(std::filesystem::is_character_file("/dev/full"));
  ProcessSpec spec;
  spec.log_path = "/dev/full";
  Captured c = RunSh("echo one; echo two", spec);
  CHECK(c.result.ending == ProcessResult::Ending::kExited);
  CHECK(c.result.exit_code == 0);
  CHECK(c.lines == std::vector<std::string>{"one", "two"});  // the case's reader saw everything
  CAPTURE(c.result.log_error);
  CHECK(c.result.log_error.rfind("/dev/full: no space left on device; ", 0) == 0);
  CHECK(EndsWith(c.result.log_error, " bytes of output not written"));

  std::vector<ProcessSpec> children(2);
  children[0].argv = {"/bin/sh", "-c", "echo zero"};
  children[1].argv = {"/bin/sh", "-c", "echo one"};
  GroupOptions options;
  options.log_path = "/dev/full";
  StopFlag never;
  GroupResult group = MakeSystemProcessRunner()->RunGroup(children, options, never, nullptr);
  CHECK(group.outcome == GroupResult::Outcome::kOk);
  CHECK(group.log_error == "/dev/full: no space left on device; 9 bytes of output not written");  // "zero\none\n"

  TempDir temp("fine");
  spec.log_path = temp.str() + "/case.log";
  CHECK(RunSh("echo fine", spec).result.log_error == "");
  CHECK(LogWriteError("x.log", ENOSPC, 3 * 1024 + 512) == "x.log: no space left on device; 3.5 KiB of output not written");
  CHECK(LogWriteError("x.log", EACCES, 7) == "x.log: cannot write: Permission denied; 7 bytes of output not written");
}

TEST_CASE("Process: RunGroup ends all children together and names the first that failed") {
  TempDir temp("group");
  REQUIRE(!temp.path.empty());
  std::vector<ProcessSpec> children(3);
  children[0].argv = {"/bin/sh", "-c", "echo zero; echo beat; sleep 30"};
  children[0].log_prefix = "[a] ";
  children[1].argv = {"/bin/sh", "-c", "sleep 0.2; echo one; exit 5"};
  children[1].log_prefix = "[b] ";
  children[2].argv = {"/bin/sh", "-c", "sleep 30"};
  GroupOptions options;
  options.log_path = temp.str() + "/group.log";
  options.kill_grace_seconds = 0.3;
  options.keep_in_log = [](std::string_view line) { return line != "beat"; };
  StopFlag never;
  std::vector<std::pair<size_t, std::string>> lines;
  GroupResult r = MakeSystemProcessRunner()->RunGroup(
      children, options, never, [&](size_t index, std::string_view line) { lines.emplace_back(index, line); });
  CHECK(r.outcome == GroupResult::Outcome::kChildFailed);
  CHECK(r.first_failed == 1);
  REQUIRE(r.children.size() == 3);
  CHECK(r.children[1].exit_code == 5);
  CHECK(r.children[0].signal == SIGTERM);
  CHECK(r.children[2].signal == SIGTERM);
  for (const ProcessResult& child : r.children) CHECK(DiesSoon(child.pid));
  CHECK(lines.size() == 3);  // "beat" reaches the callback
  const std::string log = ReadTextFile(options.log_path);
  CHECK(log.find("[a] zero\n") != std::string::npos);
  CHECK(log.find("[b] one\n") != std::string::npos);
  CHECK(log.find("beat") == std::string::npos);

  // All exit 0: kOk; a missing program: kFailedToStart, the later children not started.
  children[0].argv = {"/bin/true"};
  children[1].argv = {"/bin/true"};
  children[2].argv = {"/bin/true"};
  CHECK(MakeSystemProcessRunner()->RunGroup(children, options, never, nullptr).outcome == GroupResult::Outcome::kOk);
  children[1].argv = {"fdsp-no-such-program"};
  r = MakeSystemProcessRunner()->RunGroup(children, options, never, nullptr);
  CHECK(r.outcome == GroupResult::Outcome::kFailedToStart);
  CHECK(r.first_failed == 1);
  CHECK(r.children[1].error == "cannot run 'fdsp-no-such-program': No such file or directory");
  CHECK(r.children[2].error == "not started");
  CHECK(r.children[2].pid == 0);
}

TEST_CASE("Process: RunGroup relays a child's line to the others' standard input, and only then") {
  // Child 0 announces; children 1 and 2 read their stdin and print what came.
  std::vector<ProcessSpec> children(3);
  children[0].argv = {"/bin/sh", "-c", "echo port=41234; echo other"};
  children[1].argv = {"/bin/sh", "-c", "read -r line; echo \"heard $line\""};
  children[2].argv = {"/bin/sh", "-c", "read -r line; echo \"heard $line\""};
  GroupOptions options;
  options.timeout_seconds = 10;
  options.relay = [](size_t index, std::string_view line) {
    return index == 0 && line.rfind("port=", 0) == 0 ? std::string(line) : std::string();
  };
  StopFlag never;
  std::vector<std::pair<size_t, std::string>> lines;
  GroupResult r = MakeSystemProcessRunner()->RunGroup(
      children, options, never, [&](size_t index, std::string_view line) { lines.emplace_back(index, line); });
  CHECK(r.outcome == GroupResult::Outcome::kOk);
  CHECK(std::count(lines.begin(), lines.end(), std::make_pair(size_t{1}, std::string("heard port=41234"))) == 1);
  CHECK(std::count(lines.begin(), lines.end(), std::make_pair(size_t{2}, std::string("heard port=41234"))) == 1);
  CHECK(lines.size() == 4);  // "other" was not relayed: nobody heard it

  // Without a relay, standard input is /dev/null: `read` meets end-of-file at once.
  options.relay = nullptr;
  children[0].argv = {"/bin/sh", "-c", "if read -r line; then echo got; else echo eof; fi"};
  children.resize(1);
  lines.clear();
  r = MakeSystemProcessRunner()->RunGroup(children, options, never,
                                          [&](size_t index, std::string_view line) { lines.emplace_back(index, line); });
  CHECK(r.outcome == GroupResult::Outcome::kOk);
  CHECK(lines == std::vector<std::pair<size_t, std::string>>{{0, "eof"}});
}
