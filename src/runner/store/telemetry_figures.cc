#include "runner/store/telemetry_figures.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "runner/base/text.h"

namespace protocol {
namespace {

using Series = std::vector<std::pair<double, double>>;  // (seconds, value), by time

struct Gpu {
  Series utilization, power;
  double memory_peak = -1;
  bool busy = false;
};

Measurement Figure(const char* name, double value, const char* unit, std::string method) {
  Measurement m;
  m.name = name;
  m.value = value;
  m.unit = unit;
  m.method = std::move(method);
  return m;
}

// ∫ P dt by the trapezoid rule over time-ordered samples.
double Trapezoid(const Series& s) {
  double joules = 0;
  for (size_t i = 1; i < s.size(); ++i) joules += (s[i].second + s[i - 1].second) / 2 * (s[i].first - s[i - 1].first);
  return joules;
}

void GpuFigures(const std::vector<TelemetrySample>& samples, const TelemetryWork& work, std::vector<Measurement>& out) {
  std::map<std::pair<std::string, std::string>, Gpu> gpus;  // by (node, device)
  for (const TelemetrySample& s : samples) {
    if (s.quantity == quantity::kGpuUtilization) {
      Gpu& g = gpus[{s.node, s.device}];
      g.utilization.emplace_back(s.seconds, s.value);
      g.busy = g.busy || s.value > 0;
    } else if (s.quantity == quantity::kGpuPower) {
      gpus[{s.node, s.device}].power.emplace_back(s.seconds, s.value);
    } else if (s.quantity == quantity::kGpuMemoryUsed) {
      Gpu& g = gpus[{s.node, s.device}];
      g.memory_peak = std::max(g.memory_peak, s.value);
    }
  }
  int used = 0;
  double sum = 0, peak = 0, memory = -1, joules = 0;
  size_t count = 0, readings = 0;
  bool energy = false;
  double from = 0, to = 0;
  for (auto& [key, g] : gpus) {
    if (!g.busy) continue;
    ++used;
    for (const auto& [t, u] : g.utilization) {
      sum += u;
      peak = std::max(peak, u);
      ++count;
    }
    memory = std::max(memory, g.memory_peak);
    std::stable_sort(g.power.begin(), g.power.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (g.power.size() >= 2) {
      from = energy ? std::min(from, g.power.front().first) : g.power.front().first;
      to = energy ? std::max(to, g.power.back().first) : g.power.back().first;
      energy = true;
      joules += Trapezoid(g.power);
      readings += g.power.size();
    }
  }
  if (used == 0) return;
  const std::string of = fmt::format("{} GPU{} used (busy in at least one sample) of {} sampled", used,
                                     used == 1 ? "" : "s", gpus.size());
  out.push_back(Figure(metric::kGpuUtilizationMean, sum / static_cast<double>(count), "%",
                       fmt::format("mean of {} nvidia-smi utilization.gpu readings of the {}", count, of)));
  out.push_back(Figure(metric::kGpuUtilizationPeak, peak, "%",
                       fmt::format("largest nvidia-smi utilization.gpu reading of the {}", of)));
  if (memory >= 0)
    out.push_back(Figure(metric::kGpuMemoryPeakDriver, memory, "bytes",
                         fmt::format("largest nvidia-smi memory.used of one of the {} (the driver's view: "
                                     "the CUDA context and the allocator's cache included)",
                                     of)));
  if (!energy) return;
  const std::string how = fmt::format(
      "nvidia-smi power.draw of the {}, integrated by the trapezoid rule over {}–{} s ({} readings)", of,
      FormatFigure(from), FormatFigure(to), readings);
  out.push_back(Figure(metric::kEnergy, joules, "J", how));
  if (work.tokens > 0)
    out.push_back(Figure(metric::kEnergyPerToken, joules / static_cast<double>(work.tokens), "J/token",
                         fmt::format("energy over {} tokens: {}", work.tokens, how)));
  if (work.steps > 0)
    out.push_back(Figure(metric::kEnergyPerStep, joules / static_cast<double>(work.steps), "J/step",
                         fmt::format("energy over {} steps: {}", work.steps, how)));
}

// One node's interfaces: their bytes since the case began (sent + received,
// every interface's latest value) at each time one of them was read.
struct NodeLink {
  std::vector<double> times;
  std::vector<double> totals;
  double sent = 0, received = 0;  // each interface's last value, summed
};

std::map<std::string, NodeLink> NodeLinks(const std::vector<TelemetrySample>& samples,
                                          std::set<std::string>* interfaces = nullptr) {
  // node → (device, quantity) → seconds → bytes since the case began
  std::map<std::string, std::map<std::pair<std::string, bool>, std::map<double, double>>> nodes;
  for (const TelemetrySample& s : samples) {
    const bool sent = s.quantity == quantity::kNetSent;
    if (!sent && s.quantity != quantity::kNetReceived) continue;
    nodes[s.node][{s.device, sent}][s.seconds] = s.value;
    if (interfaces) interfaces->insert(s.node.empty() ? s.device : s.node + ":" + s.device);
  }
  std::map<std::string, NodeLink> out;
  for (const auto& [node, counters] : nodes) {
    NodeLink& link = out[node];
    std::set<double> times;
    for (const auto& [key, series] : counters) {
      for (const auto& [t, v] : series) times.insert(t);
      (key.second ? link.sent : link.received) += series.rbegin()->second;
    }
    link.times.assign(times.begin(), times.end());
    link.totals.assign(link.times.size(), 0);
    // Each counter's latest value at each time (0 before its first reading).
    for (const auto& [key, series] : counters) {
      auto next = series.begin();
      double value = 0;
      for (size_t i = 0; i < link.times.size(); ++i) {
        for (; next != series.end() && next->first <= link.times[i]; ++next) value = next->second;
        link.totals[i] += value;
      }
    }
  }
  return out;
}

// (interval end, bytes per second over the interval) of one node; intervals
// under half the median one are left out (a closing reading a few
// milliseconds after the one before would read as a burst).
std::vector<std::pair<double, double>> Rates(const NodeLink& link) {
  std::vector<std::pair<double, double>> out;
  if (link.times.size() < 2) return out;
  std::vector<double> gaps;
  for (size_t i = 1; i < link.times.size(); ++i) gaps.push_back(link.times[i] - link.times[i - 1]);
  std::vector<double> sorted = gaps;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double median = sorted[sorted.size() / 2];
  for (size_t i = 1; i < link.times.size(); ++i)
    if (gaps[i - 1] > 0 && gaps[i - 1] >= 0.5 * median)
      out.emplace_back(link.times[i], (link.totals[i] - link.totals[i - 1]) / gaps[i - 1]);
  return out;
}

// The node that moved the most bytes; null when none has two readings.
const NodeLink* BusiestNode(const std::map<std::string, NodeLink>& links) {
  const NodeLink* busiest = nullptr;
  for (const auto& [node, link] : links)
    if (link.times.size() >= 2 && (!busiest || link.sent + link.received > busiest->sent + busiest->received))
      busiest = &link;
  return busiest;
}

// The samples the link is read from: the nodes' own, read by each node's
// first rank (node_telemetry.h). The runner's host's interfaces carry other
// traffic besides (and none of the case's where its nodes are one host).
std::vector<TelemetrySample> LinkSamples(const std::vector<TelemetrySample>& samples) {
  std::vector<TelemetrySample> out;
  for (const TelemetrySample& s : samples)
    if (!s.node.empty()) out.push_back(s);
  return out;
}

void LinkFigures(const std::vector<TelemetrySample>& all, const TelemetryWork& work, std::vector<Measurement>& out) {
  if (work.nodes < 2) return;  // one node: its interfaces carry no traffic between the case's nodes
  const std::vector<TelemetrySample> samples = LinkSamples(all);
  std::set<std::string> interfaces;
  const std::map<std::string, NodeLink> links = NodeLinks(samples, &interfaces);
  if (links.empty()) return;
  double sent = 0, received = 0, mean = 0, peak = 0;
  for (const auto& [node, link] : links) {
    sent += link.sent;
    received += link.received;
    if (link.times.size() < 2 || link.times.back() <= link.times.front()) continue;
    mean = std::max(mean, (link.sent + link.received) / (link.times.back() - link.times.front()));
    for (const auto& [t, rate] : Rates(link)) peak = std::max(peak, rate);
  }
  const std::string which = fmt::format("{} (/proc/net/dev, loopback left out; read by each node's first rank)",
                                        Join(std::vector<std::string>(interfaces.begin(), interfaces.end()), ", "));
  out.push_back(Figure(metric::kLinkBytesSent, sent, "bytes", "bytes sent while the case ran on " + which));
  out.push_back(Figure(metric::kLinkBytesReceived, received, "bytes", "bytes received while the case ran on " + which));
  out.push_back(Figure(metric::kLinkThroughputMean, mean, "bytes/s",
                       "bytes sent and received over the sampled span, the busiest node's, on " + which));
  out.push_back(Figure(metric::kLinkThroughputPeak, peak, "bytes/s",
                       "bytes sent and received in the busiest interval between readings, the busiest node's, on " +
                           which));
}

}  // namespace

std::vector<Measurement> TelemetryFigures(const std::vector<TelemetrySample>& samples, const TelemetryWork& work) {
  std::vector<Measurement> out;
  GpuFigures(samples, work, out);
  LinkFigures(samples, work, out);
  return out;
}

std::vector<std::pair<double, double>> GpuUtilizationSeries(const std::vector<TelemetrySample>& samples) {
  std::set<std::pair<std::string, std::string>> busy;
  for (const TelemetrySample& s : samples)
    if (s.quantity == quantity::kGpuUtilization && s.value > 0) busy.insert({s.node, s.device});
  std::map<double, std::pair<double, int>> at;  // seconds → (sum, count)
  for (const TelemetrySample& s : samples) {
    if (s.quantity != quantity::kGpuUtilization || !busy.count({s.node, s.device})) continue;
    at[s.seconds].first += s.value;
    ++at[s.seconds].second;
  }
  std::vector<std::pair<double, double>> out;
  for (const auto& [t, sum] : at) out.emplace_back(t, sum.first / sum.second);
  return out;
}

std::vector<std::pair<double, double>> LinkThroughputSeries(const std::vector<TelemetrySample>& samples) {
  const std::map<std::string, NodeLink> links = NodeLinks(LinkSamples(samples));
  const NodeLink* busiest = BusiestNode(links);
  return busiest ? Rates(*busiest) : std::vector<std::pair<double, double>>{};
}

}  // namespace protocol
