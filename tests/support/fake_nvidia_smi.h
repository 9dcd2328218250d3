#ifndef PROTOCOL_TESTS_FAKE_NVIDIA_SMI_H_
#define PROTOCOL_TESTS_FAKE_NVIDIA_SMI_H_

// A script named nvidia-smi, first on PATH while the object lives, that
// prints scripted readings the way `nvidia-smi --query-gpu=... -lms N` does:
// its lines, then a sleep of N ms, forever, until it is killed (Printed()
// counts the rounds, so that a test waits for readings, not for time). Each start
// appends its pid to `pids` (so that a test can check it was stopped). With
// `exit_code` set it prints the lines once and exits with it instead (a
// driver that cannot be reached). The GPUs' readings carry no time: the
// sampler stamps each line as it arrives.

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include <string>
#include <vector>

#include "test_files.h"

namespace protocol::testing {

class FakeNvidiaSmi {
 public:
  FakeNvidiaSmi(const std::vector<std::string>& lines, int exit_code = -1) : dir_("fake-nvidia-smi") {
    std::string script = "#!/bin/sh\necho $$ >> '" + pids_path() + "'\nms=1000\nwhile [ $# -gt 0 ]; do\n"
                         "  if [ \"$1\" = -lms ]; then ms=$2; fi\n  shift\ndone\n";
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    WriteFile(dir_.path / "lines", text);
    const std::string print = "  cat '" + (dir_.path / "lines").string() + "'\n  echo x >> '" +
                              (dir_.path / "printed").string() + "'\n";
    if (exit_code >= 0) {
      script += "{\n" + print + "}\nexit " + std::to_string(exit_code) + "\n";
    } else {
      script += "while :; do\n" + print + "  sleep $(awk \"BEGIN{print $ms/1000}\")\ndone\n";
    }
    const std::string path = (dir_.path / "nvidia-smi").string();
    WriteFile(path, script);
    ::chmod(path.c_str(), 0755);
    const char* old = ::getenv("PATH");
    old_path_ = old ? old : "";
    ::setenv("PATH", (dir_.path.string() + ":" + old_path_).c_str(), 1);
  }
  ~FakeNvidiaSmi() { ::setenv("PATH", old_path_.c_str(), 1); }
  FakeNvidiaSmi(const FakeNvidiaSmi&) = delete;
  FakeNvidiaSmi& operator=(const FakeNvidiaSmi&) = delete;

  std::string pids_path() const { return (dir_.path / "pids").string(); }
  // How many times the lines were printed so far.
  int Printed() const {
    const std::string text = ReadTextFile((dir_.path / "printed").string());
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  // Waits (at most 20 s) until the lines were printed `n` times; false when they were not.
  bool WaitPrinted(int n) const {
    for (int i = 0; i < 2000 && Printed() < n; ++i) ::usleep(10000);
    return Printed() >= n;
  }
  // The pids of every start so far.
  std::vector<int> Pids() const {
    std::vector<int> out;
    std::istringstream in(ReadTextFile(pids_path()));
    for (int pid; in >> pid;) out.push_back(pid);
    return out;
  }

 private:
  TempDir dir_;
  std::string old_path_;
};

// Whether process `pid` still runs (a zombie counts as gone).
inline bool ProcessAlive(int pid) {
  const std::string stat = ReadTextFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_FAKE_NVIDIA_SMI_H_
