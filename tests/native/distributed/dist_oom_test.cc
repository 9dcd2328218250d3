// A rank that the kernel's out-of-memory killer ends is a finding, not a
// mystery: rank 1 of a 2-rank fsdp case runs in a memory cgroup of its own
// limited to 8 MiB (cgroup v1 memory.limit_in_bytes, or v2 memory.max), below
// what a rank's own memory takes (64 MiB was not: the libraries' pages were
// already charged to the runner's cgroup), so the kernel kills it with
// SIGKILL while it loads.
// The case's reason names the rank, the signal, the out-of-memory killer and
// the case's memory estimate; the cgroup's own oom_kill counter confirms the
// kernel did it. Skipped where no memory cgroup can be made.
#include "dist_test_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backends/native/fsdp_backend.h"
#include "skip.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using namespace dist_test;

constexpr int64_t kLimitBytes = 8 << 20;

// A child memory cgroup of this process's own, limited to kLimitBytes.
struct MemoryCgroup {
  fs::path dir;
  std::string limit_file;  // memory.limit_in_bytes (v1) or memory.max (v2)
  std::string error;       // why it could not be made ("" when it was)

  MemoryCgroup() {
    std::ifstream in("/proc/self/cgroup");
    std::string line, v1, v2;
    while (std::getline(in, line)) {
      const size_t a = line.find(':'), b = line.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
      if (controllers == "memory") v1 = path;
      if (controllers.empty()) v2 = path;
    }
    const std::string name = "protocol-oom-" + std::to_string(::getpid());
    if (!v1.empty() && fs::exists("/sys/fs/cgroup/memory" + v1)) {
      dir = fs::path("/sys/fs/cgroup/memory" + v1) / name;
      limit_file = "memory.limit_in_bytes";
    } else if (!v2.empty() && fs::exists("/sys/fs/cgroup" + v2 + "/memory.max")) {
      dir = fs::path("/sys/fs/cgroup" + v2) / name;
      limit_file = "memory.max";
    } else {
      error = "no memory cgroup controller is mounted here";
      return;
    }
    std::error_code ec;
    if (!fs::create_directory(dir, ec)) {
      error = "cannot make a memory cgroup (" + dir.string() + "): " + ec.message();
      dir.clear();
      return;
    }
    std::ofstream limit(dir / limit_file);
    limit << kLimitBytes;
    limit.close();
    if (!limit) error = "cannot limit a memory cgroup's memory";
  }
  ~MemoryCgroup() {
    std::error_code ec;
    if (!dir.empty()) fs::remove(dir, ec);  // rmdir: empty once its process has died
  }
  // The kernel's count of processes it killed for this cgroup's limit.
  int64_t OomKills() const {
    for (const char* file : {"memory.oom_control", "memory.events"}) {
      std::ifstream in(dir / file);
      std::string key;
      int64_t value = 0;
      while (in >> key >> value)
        if (key == "oom_kill") return value;
    }
    return -1;
  }
};

}  // namespace

TEST_CASE("dist oom: a rank the kernel's out-of-memory killer ends is named, with the case's memory estimate") {
  MemoryCgroup cgroup;
  if (!cgroup.error.empty()) SKIP_TEST(cgroup.error);
  MiniModelFixture fx;
  Plan plan = fx.MakePlan();
  CaseSpec spec = MiniTraining("fsdp", 3);
  spec.training.ranks_per_node = 2;
  native::DistOptions o = Options();
  // Rank 1 joins the limited cgroup, then becomes the worker (exec keeps the pid).
  o.wrap = [&](std::vector<native::RankLaunch>& launches) {
    for (native::RankLaunch& l : launches) {
      if (l.rank != 1) continue;
      std::vector<std::string> argv = {"/bin/sh", "-c",
                                       "echo $$ > " + (cgroup.dir / "cgroup.procs").string() + " && exec \"$@\"", "sh"};
      argv.insert(argv.end(), l.argv.begin(), l.argv.end());
      l.argv = argv;
    }
    return Status::Ok();
  };
  Harness h;
  auto backend = MakeNativeFsdpBackend(o);
  BackendOutcome out = h.Run(*backend, plan, spec, "", (fx.root / "oom.log").string());
  INFO(out.reason);
  CHECK(out.status == CaseStatus::kFailed);
  CHECK(cgroup.OomKills() == 1);  // the kernel killed it, for the cgroup's limit
  CHECK(out.reason.rfind("rank 1 (node node0) was killed by signal 9 (SIGKILL), which protocol did not send: most "
                         "often the kernel's out-of-memory killer",
                         0) == 0);
  CHECK(out.reason.find("the memory estimate expected ") != std::string::npos);
  CHECK(out.exit_code == 128 + 9);
}

}  // namespace protocol
