#ifndef PROTOCOL_TESTS_FAKE_PROCESS_RUNNER_H_
#define PROTOCOL_TESTS_FAKE_PROCESS_RUNNER_H_

// The one fake ProcessRunner of the tests: it starts nothing. It records every
// process it is asked to start (Run and each child of RunGroup, in order) and
// plays a script for each: the lines the process prints and how it ends.
//
// By default a process "fails to start" with kNothingScripted, so a test that
// expects no process at all fails loudly if one is started. Set `result` (and
// `lines`) for every process, or `script` to decide per process, e.g. one rank
// of a group failing:
//   runner.script = [](const ProcessSpec& p) {
//     return p.env.at("RANK") == "1" ? FakeProcessRunner::Ends(3) : FakeProcessRunner::Ends(0);
//   };
//
// RunGroup follows process.h GroupResult: the group ends kOk when every child
// exits 0; otherwise the first child (in order) that was killed, else the
// first that exited non-zero, else the first that failed to start, is named.
// Children after one that failed to start are "not started". A raised
// StopFlag ends the group kStopped before anything is played.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runner/exec/process.h"

namespace protocol::testing {

class FakeProcessRunner : public ProcessRunner {
 public:
  static constexpr const char* kNothingScripted = "no process is started in this test";

  // What one process does.
  struct Script {
    std::vector<std::string> lines;
    ProcessResult result;
  };

  // A process that prints `lines` and exits with `code`.
  static Script Ends(int code, std::vector<std::string> lines = {}) {
    Script s;
    s.lines = std::move(lines);
    s.result = Exited(code);
    return s;
  }
  static ProcessResult Exited(int code) {
    ProcessResult r;
    r.ending = ProcessResult::Ending::kExited;
    r.exit_code = code;
    return r;
  }
  static ProcessResult Signaled(int signal) {
    ProcessResult r;
    r.ending = ProcessResult::Ending::kSignaled;
    r.signal = signal;
    return r;
  }

  FakeProcessRunner() { result.error = kNothingScripted; }

  // The script of every process when `script` is not set.
  std::vector<std::string> lines;
  ProcessResult result;
  // When set: the script of each process, from its spec.
  std::function<Script(const ProcessSpec&)> script;

  // What was asked.
  ProcessSpec seen;                   // the last process
  std::vector<ProcessSpec> started;   // every process, in start order
  int calls = 0;                      // Run calls
  std::vector<GroupOptions> groups;   // the options of each RunGroup call
  // Every process's command line, its argv joined with spaces.
  std::vector<std::string> commands() const {
    std::vector<std::string> out;
    for (const ProcessSpec& p : started) {
      std::string line;
      for (const auto& arg : p.argv) line += (line.empty() ? "" : " ") + arg;
      out.push_back(line);
    }
    return out;
  }

  ProcessResult Run(const ProcessSpec& spec, const StopFlag&, const LineCallback& on_line) override {
    ++calls;
    Script s = Play(spec);
    if (on_line)
      for (const auto& line : s.lines) on_line(line);
    return s.result;
  }

  GroupResult RunGroup(const std::vector<ProcessSpec>& children, const GroupOptions& options, const StopFlag& stop,
                       const GroupLineCallback& on_line) override {
    groups.push_back(options);
    GroupResult group;
    if (stop.requested()) {
      group.outcome = GroupResult::Outcome::kStopped;
      for (const ProcessSpec& child : children) {
        seen = child;
        started.push_back(child);
        group.children.push_back(Signaled(15));
      }
      return group;
    }
    int killed = -1, failed = -1, not_started = -1;
    for (size_t i = 0; i < children.size(); ++i) {
      if (not_started >= 0) {
        ProcessResult r;
        r.error = "not started";
        group.children.push_back(r);
        continue;
      }
      Script s = Play(children[i]);
      if (on_line)
        for (const auto& line : s.lines) on_line(i, line);
      const int index = static_cast<int>(i);
      switch (s.result.ending) {
        case ProcessResult::Ending::kExited:
          if (s.result.exit_code != 0 && failed < 0) failed = index;
          break;
        case ProcessResult::Ending::kFailedToStart:
          not_started = index;
          break;
        default:
          if (killed < 0) killed = index;
      }
      if (s.result.ending != ProcessResult::Ending::kFailedToStart && s.result.pid == 0)
        s.result.pid = kFirstFakePid + index;
      group.children.push_back(s.result);
    }
    group.first_failed = killed >= 0 ? killed : failed >= 0 ? failed : not_started;
    if (killed >= 0 || failed >= 0) group.outcome = GroupResult::Outcome::kChildFailed;
    else if (not_started >= 0) group.outcome = GroupResult::Outcome::kFailedToStart;
    return group;
  }

 private:
  static constexpr int kFirstFakePid = 1 << 23;  // above the kernel's pid limit (4194304): never a live process

  Script Play(const ProcessSpec& spec) {
    seen = spec;
    started.push_back(spec);
    if (script) return script(spec);
    return Script{lines, result};
  }
};

// A real (system) runner that also keeps what it was asked and the lines it
// delivered: for tests of how a backend builds its command line.
class CapturingProcessRunner : public ProcessRunner {
 public:
  ProcessSpec seen;                // the last process
  std::vector<std::string> lines;  // every line delivered, in order

  ProcessResult Run(const ProcessSpec& spec, const StopFlag& stop, const LineCallback& on_line) override {
    seen = spec;
    return real_->Run(spec, stop, [&](std::string_view line) {
      lines.emplace_back(line);
      if (on_line) on_line(line);
    });
  }
  GroupResult RunGroup(const std::vector<ProcessSpec>& children, const GroupOptions& options, const StopFlag& stop,
                       const GroupLineCallback& on_line) override {
    if (!children.empty()) seen = children.back();
    return real_->RunGroup(children, options, stop, [&](size_t index, std::string_view line) {
      lines.emplace_back(line);
      if (on_line) on_line(index, line);
    });
  }

 private:
  std::unique_ptr<ProcessRunner> real_ = MakeSystemProcessRunner();
};

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_FAKE_PROCESS_RUNNER_H_
