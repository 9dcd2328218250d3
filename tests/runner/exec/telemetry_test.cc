// The hardware sampler (telemetry.h) with a scripted nvidia-smi on PATH and
// scripted interface counters: what it stores, what it says when the tool is
// missing or failing, and that nvidia-smi never outlives the case or the
// runner.

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "fake_cpu_meter.h"
#include "fake_nvidia_smi.h"
#include "runner/exec/process.h"
#include "runner/exec/telemetry.h"

using namespace protocol;
using protocol::testing::FakeNvidiaSmi;
using protocol::testing::ProcessAlive;

namespace {

// Interface counters that grow by `step` bytes each way per reading.
class GrowingNetMeter : public NetMeter {
 public:
  explicit GrowingNetMeter(uint64_t step) : step_(step) {}
  std::optional<std::vector<InterfaceCounters>> Read() override {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t n = reads_++;
    return std::vector<InterfaceCounters>{{"lo", 1, 1}, {"eth0", 100 + n * step_, 200 + n * step_}};
  }

 private:
  std::mutex mutex_;
  const uint64_t step_;
  uint64_t reads_ = 0;
};

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

size_t CountOf(const std::vector<TelemetrySample>& samples, const std::string& device, const std::string& quantity) {
  size_t n = 0;
  for (const TelemetrySample& s : samples) n += s.device == device && s.quantity == quantity;
  return n;
}

// Waits up to 3 s for every pid to end.
bool AllEnd(const std::vector<int>& pids) {
  for (int i = 0; i < 300; ++i) {
    bool alive = false;
    for (int pid : pids) alive = alive || ProcessAlive(pid);
    if (!alive) return true;
    Sleep(0.01);
  }
  return false;
}

}  // namespace

TEST_CASE("telemetry: the GPUs' lines, the interfaces and the CPU are sampled from start to stop") {
  FakeNvidiaSmi smi({"0, 80, 2048, 300.00, 1500, 55", "1, 0, 100, 60.00, 300, 30"});
  auto processes = MakeSystemProcessRunner();
  GrowingNetMeter net(1000);
  ScriptedCpuMeter cpu({{0, 0, 0, 2}, {1, 1, 0, 2}, {2, 3, 0, 2}});
  TelemetrySampler sampler({processes.get(), &net, &cpu}, 0.1);
  REQUIRE(smi.WaitPrinted(4));
  Sleep(0.35);  // at least three more interface readings
  std::vector<TelemetrySample> all = sampler.TakePending();
  TelemetrySampler::Ending end = sampler.Stop();
  all.insert(all.end(), end.samples.begin(), end.samples.end());

  CHECK(end.gpu_problem.empty());
  CHECK(end.description ==
        "gpus: gpu0, gpu1 (nvidia-smi every 0.1 s); network: eth0 (/proc/net/dev every 0.1 s, loopback left out); "
        "cpu (/proc/stat every 0.1 s)");
  CHECK(CountOf(all, "gpu0", quantity::kGpuPower) >= 3);
  CHECK(CountOf(all, "gpu1", quantity::kGpuUtilization) >= 3);
  CHECK(CountOf(all, "lo", quantity::kNetSent) == 0);
  CHECK(CountOf(all, "eth0", quantity::kNetSent) >= 4);  // the start's zero, every interval, the stop
  CHECK(CountOf(all, "cpu", quantity::kCpuBusy) >= 2);
  for (const TelemetrySample& s : all) {
    CHECK(s.node.empty());
    CHECK(s.seconds >= 0);
    CHECK(s.seconds < 30);
    if (s.device == "gpu0" && s.quantity == quantity::kGpuPower) CHECK(s.value == 300.0);
    if (s.device == "gpu0" && s.quantity == quantity::kGpuMemoryUsed) CHECK(s.value == 2048.0 * 1024 * 1024);
    if (s.quantity == quantity::kCpuBusy) CHECK((s.value == 0.5 || s.value == 1.0));
  }
  // The eth0 series counts from the start: 0, then 1000 more per reading.
  double last_sent = -1;
  for (const TelemetrySample& s : all)
    if (s.device == "eth0" && s.quantity == quantity::kNetSent) {
      CHECK(s.value > last_sent);
      last_sent = s.value;
    }
  CHECK(AllEnd(smi.Pids()));
}

TEST_CASE("telemetry: no nvidia-smi, or one that fails, leaves the GPUs out with the reason") {
  auto processes = MakeSystemProcessRunner();
  SUBCASE("missing") {
    const char* old = ::getenv("PATH");
    const std::string saved = old ? old : "";
    protocol::testing::TempDir empty("no-nvidia-smi");
    ::setenv("PATH", empty.path.c_str(), 1);
    TelemetrySampler sampler({processes.get(), nullptr, nullptr}, 0.1);
    Sleep(0.2);
    TelemetrySampler::Ending end = sampler.Stop();
    ::setenv("PATH", saved.c_str(), 1);
    CHECK(end.samples.empty());
    CHECK(end.gpu_problem.find("nvidia-smi") != std::string::npos);
    CHECK(end.description == "gpus: not sampled (" + end.gpu_problem + ")");
  }
  SUBCASE("failing") {
    FakeNvidiaSmi smi({"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}, 9);
    TelemetrySampler sampler({processes.get(), nullptr, nullptr}, 0.1);
    Sleep(0.3);
    TelemetrySampler::Ending end = sampler.Stop();
    CHECK(end.samples.empty());
    CHECK(end.gpu_problem ==
          "nvidia-smi exited with code 9 (NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
          "driver.)");
  }
}

TEST_CASE("telemetry: nvidia-smi dies with a runner killed -9") {
  FakeNvidiaSmi smi({"0, 80, 2048, 300.00, 1500, 55"});
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto processes = MakeSystemProcessRunner();
    TelemetrySampler sampler({processes.get(), nullptr, nullptr}, 0.1);
    Sleep(30);
    _exit(0);
  }
  std::vector<int> pids;
  for (int i = 0; i < 300 && pids.empty(); ++i) {
    Sleep(0.01);
    pids = smi.Pids();
  }
  REQUIRE(pids.size() == 1);
  CHECK(ProcessAlive(pids[0]));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(AllEnd(pids));
}

TEST_CASE("telemetry: another node's readings keep their own spacing, placed on this clock at their first arrival") {
  TelemetrySampler sampler({}, 0.1);
  sampler.AddArrived({5.0, "rig1", "eth0", quantity::kNetSent, 0});
  sampler.AddArrived({5.0, "rig1", "eth0", quantity::kNetReceived, 0});
  Sleep(0.05);
  sampler.AddArrived({6.0, "rig1", "eth0", quantity::kNetSent, 1000});
  TelemetrySampler::Ending end = sampler.Stop();
  REQUIRE(end.samples.size() == 3);
  CHECK(end.samples[0].seconds == end.samples[1].seconds);  // one reading, one time
  CHECK(end.samples[2].seconds - end.samples[0].seconds == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(end.samples[0].seconds >= 0);
  CHECK(end.samples[0].seconds < 5.0);  // on this sampler's clock, not the sender's
  CHECK(end.description == "nodes: rig1:eth0 (read by each node's first rank)");
}
