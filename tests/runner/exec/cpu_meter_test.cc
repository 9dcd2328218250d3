#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "fake_cpu_meter.h"
#include "runner/exec/cpu_meter.h"

using namespace protocol;

namespace {

const Measurement* Find(const std::vector<Measurement>& ms, const std::string& name) {
  for (const Measurement& m : ms)
    if (m.name == name) return &m;
  return nullptr;
}

// Burns CPU on this thread for `seconds` of its own CPU time.
void Burn(double seconds) {
  timespec start{}, now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  volatile double x = 0;
  do {
    for (int i = 0; i < 100000; ++i) x = x + i * 1e-9;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) * 1e-9 < seconds);
}

// A busy loop outside this process's tree: forked twice, the middle process
// exits at once, so the loop is reparented away from us. Returns its pid.
pid_t StartOutsideBusyLoop() {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t middle = fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {
    setsid();
    const pid_t loop = fork();
    if (loop == 0) {
      close(fds[0]);
      close(fds[1]);
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
    (void)!write(fds[1], &loop, sizeof loop);
    _exit(0);
  }
  pid_t loop = -1;
  close(fds[1]);
  REQUIRE(read(fds[0], &loop, sizeof loop) == static_cast<ssize_t>(sizeof loop));
  close(fds[0]);
  waitpid(middle, nullptr, 0);
  return loop;
}

}  // namespace

TEST_CASE("OthersShare: busy time not spent by the case, over every core's time") {
  CpuReading from{10, 100, 40, 2};
  CpuReading to{20, 118, 48, 2};  // 18 s busy of 20 core-seconds; 8 of them ours
  REQUIRE(OthersShare(from, to).has_value());
  CHECK(*OthersShare(from, to) == doctest::Approx(0.5));  // (18 − 8) / (2 × 10)
  // Our own work only: nobody else.
  CHECK(*OthersShare(from, CpuReading{20, 108, 48, 2}) == doctest::Approx(0.0));
  // Reaped children counted late can make own exceed busy: clamped at 0.
  CHECK(*OthersShare(from, CpuReading{20, 101, 48, 2}) == doctest::Approx(0.0));
  CHECK_FALSE(OthersShare(from, from).has_value());
}

TEST_CASE("ContentionSampler stores the whole-case share and the busiest interval") {
  // Readings at 0, 1, 2, 3 s on 2 cores: others take 0, 2, 0 core-seconds per interval.
  ScriptedCpuMeter meter({{0, 0, 0, 2}, {1, 1, 1, 2}, {2, 4, 2, 2}, {3, 5, 3, 2}});
  ContentionSampler sampler(meter, 0.01);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the thread reads the rest
  std::vector<Measurement> figures = sampler.Stop();
  const Measurement* whole = Find(figures, metric::kContention);
  const Measurement* peak = Find(figures, metric::kContentionPeak);
  REQUIRE(whole);
  REQUIRE(peak);
  CHECK(*whole->value == doctest::Approx(2.0 / 6.0));  // 2 of 6 core-seconds
  CHECK(whole->unit == "fraction");
  CHECK(whole->how == Provenance::kMeasured);
  CHECK(whole->method.find("/proc/stat") != std::string::npos);
  CHECK(*peak->value >= doctest::Approx(1.0));  // the interval 1→2 s: 2 of 2 core-seconds
}

TEST_CASE("ContentionSampler stores nothing when the counters cannot be read") {
  ScriptedCpuMeter meter({});
  ContentionSampler sampler(meter, 0.01);
  CHECK(sampler.Stop().empty());
}

TEST_CASE("ContendedShare: from the documented threshold on, and only when measured") {
  Measurement m;
  m.name = metric::kContention;
  m.value = metric::kContendedShare - 0.01;
  CHECK_FALSE(ContendedShare({m}).has_value());
  m.value = metric::kContendedShare;
  CHECK(ContendedShare({m}).has_value());
  CHECK_FALSE(ContendedShare({}).has_value());
}

TEST_CASE("ProcCpuMeter counts this process and its children as the case, not as others") {
  ProcCpuMeter meter;
  std::optional<CpuReading> before = meter.Read();
  if (!before) {
    MESSAGE("no /proc/stat here: nothing to read");
    return;
  }
  CHECK(before->cores >= 1);
  Burn(0.3);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Burn(0.3);
    _exit(0);
  }
  waitpid(child, nullptr, 0);
  std::optional<CpuReading> after = meter.Read();
  REQUIRE(after);
  // Our burn and the reaped child's: at least 0.6 s less the counters' tick.
  CHECK(after->own_seconds - before->own_seconds >= 0.55);
  CHECK(after->busy_seconds - before->busy_seconds >= 0.55);
}

TEST_CASE("ProcCpuMeter: a busy loop outside the process tree is others' work") {
  ProcCpuMeter meter;
  std::optional<CpuReading> before = meter.Read();
  if (!before) {
    MESSAGE("no /proc/stat here: nothing to read");
    return;
  }
  const pid_t loop = StartOutsideBusyLoop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::optional<CpuReading> after = meter.Read();
  kill(loop, SIGKILL);
  REQUIRE(after);
  // The loop ran on one core for ~1.5 s while this process slept.
  const double others = (after->busy_seconds - before->busy_seconds) -
                        (after->own_seconds - before->own_seconds);
  CHECK(others >= 1.0);
  CHECK(after->own_seconds - before->own_seconds < 0.5);
}
