#include "runner/exec/cpu_meter.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "runner/base/text.h"
#include "runner/exec/extrapolate.h"

namespace protocol {
namespace {

double MonotonicSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The "cpu" line of /proc/stat: busy ticks of every core, and the core count.
bool ReadMachineTicks(long long* busy_ticks, int* cores) {
  std::ifstream in("/proc/stat");
  if (!in) return false;
  std::string line;
  bool found = false;
  int count = 0;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                steal = 0;
      fields >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
      if (!fields && !fields.eof()) return false;
      *busy_ticks = user + nice + system + irq + softirq + steal;
      found = true;
    } else if (line.rfind("cpu", 0) == 0) {
      ++count;
    }
  }
  *cores = std::max(1, count);
  return found;
}

struct ProcessTicks {
  long long parent = 0;
  long long ticks = 0;  // utime + stime + cutime + cstime
};

// /proc/<pid>/stat: fields after the command name, which is in parentheses
// and may hold spaces; state is field 3, ppid 4, utime..cstime 14..17.
bool ReadProcessTicks(const std::string& pid, ProcessTicks* out) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return false;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string state;
  long long value = 0;
  fields >> state >> out->parent;
  for (int field = 5; field <= 13; ++field) fields >> value;
  long long utime = 0, stime = 0, cutime = 0, cstime = 0;
  fields >> utime >> stime >> cutime >> cstime;
  if (!fields) return false;
  out->ticks = utime + stime + cutime + cstime;
  return true;
}

// Σ ticks over this process and every live process below it.
long long OwnTreeTicks() {
  std::map<long long, ProcessTicks> processes;
  if (DIR* dir = opendir("/proc")) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      ProcessTicks p;
      if (ReadProcessTicks(name, &p)) processes[std::atoll(name.c_str())] = p;
    }
    closedir(dir);
  }
  std::multimap<long long, long long> children;  // parent → child
  for (const auto& [pid, p] : processes) children.emplace(p.parent, pid);
  long long total = 0;
  std::vector<long long> pending = {static_cast<long long>(getpid())};
  while (!pending.empty()) {
    const long long pid = pending.back();
    pending.pop_back();
    if (auto it = processes.find(pid); it != processes.end()) total += it->second.ticks;
    auto [first, last] = children.equal_range(pid);
    for (auto it = first; it != last; ++it) pending.push_back(it->second);
  }
  return total;
}

}  // namespace

std::optional<CpuReading> ProcCpuMeter::Read() {
  static const double tick_seconds = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  long long busy = 0;
  int cores = 1;
  if (!ReadMachineTicks(&busy, &cores)) return std::nullopt;
  CpuReading r;
  r.at_seconds = MonotonicSeconds();
  r.busy_seconds = static_cast<double>(busy) * tick_seconds;
  r.own_seconds = static_cast<double>(OwnTreeTicks()) * tick_seconds;
  r.cores = cores;
  return r;
}

std::optional<double> OthersShare(const CpuReading& from, const CpuReading& to) {
  const double elapsed = to.at_seconds - from.at_seconds;
  if (elapsed <= 0 || to.cores <= 0) return std::nullopt;
  const double others = (to.busy_seconds - from.busy_seconds) - (to.own_seconds - from.own_seconds);
  return std::clamp(others / (to.cores * elapsed), 0.0, 1.0);
}

ContentionSampler::ContentionSampler(CpuMeter& meter, double interval_seconds)
    : meter_(meter), interval_seconds_(interval_seconds) {
  Take();
  thread_ = std::thread([this] { Loop(); });
}

ContentionSampler::~ContentionSampler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ContentionSampler::Take() {
  std::optional<CpuReading> r = meter_.Read();
  if (!r) return;
  std::lock_guard<std::mutex> lock(mutex_);
  readings_.push_back(*r);
}

void ContentionSampler::Loop() {
  const auto interval = std::chrono::duration<double>(interval_seconds_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    Take();
    lock.lock();
  }
}

std::vector<Measurement> ContentionSampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  Take();

  std::lock_guard<std::mutex> lock(mutex_);
  if (readings_.size() < 2) return {};
  std::optional<double> whole = OthersShare(readings_.front(), readings_.back());
  if (!whole) return {};
  // The peak skips a closing interval much shorter than the others: a few
  // milliseconds of someone else's work would read as a large share.
  double peak = *whole;
  for (size_t i = 1; i < readings_.size(); ++i) {
    const double span = readings_[i].at_seconds - readings_[i - 1].at_seconds;
    if (span < 0.5 * interval_seconds_) continue;
    if (std::optional<double> share = OthersShare(readings_[i - 1], readings_[i]))
      peak = std::max(peak, *share);
  }
  const double seconds = readings_.back().at_seconds - readings_.front().at_seconds;
  const std::string how = fmt::format(
      "CPU time of processes outside the case over {} cores: /proc/stat busy time minus the "
      "case's process tree, read every {} s ({} readings over {} s)",
      readings_.back().cores, FormatFigure(interval_seconds_), readings_.size(), FormatFigure(seconds));
  Measurement mean;
  mean.name = metric::kContention;
  mean.value = *whole;
  mean.unit = "fraction";
  mean.method = "whole case: " + how;
  Measurement top = mean;
  top.name = metric::kContentionPeak;
  top.value = peak;
  top.method = "largest interval: " + how;
  return {mean, top};
}

}  // namespace protocol
