#include "backends/native/platform/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace protocol {
namespace native {
namespace {

std::vector<ProfileRow> ByTotalTime(const std::map<std::string, ProfileRow>& rows) {
  std::vector<ProfileRow> sorted;
  sorted.reserve(rows.size());
  for (const auto& [name, row] : rows) sorted.push_back(row);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  return sorted;
}

void Add(std::map<std::string, ProfileRow>& rows, const compat::ProfiledSpan& span) {
  ProfileRow& row = rows[span.name];
  row.name = span.name;
  ++row.calls;
  row.seconds += static_cast<double>(span.duration_ns) * 1e-9;
}

std::string Cut(const std::string& name) {
  constexpr size_t kWidest = 100;
  return name.size() <= kWidest ? name : name.substr(0, kWidest - 3) + "...";
}

}  // namespace

ProfileSummary SummarizeProfile(const std::vector<compat::ProfiledSpan>& spans, double window_seconds) {
  ProfileSummary summary;
  summary.window_seconds = window_seconds;
  std::vector<const compat::ProfiledSpan*> device, host;
  for (const compat::ProfiledSpan& span : spans) (span.on_device ? device : host).push_back(&span);
  // Earliest first; of two that start together the longer first (the caller before its callee).
  auto order = [](const compat::ProfiledSpan* a, const compat::ProfiledSpan* b) {
    if (a->lane != b->lane) return a->lane < b->lane;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->duration_ns > b->duration_ns;
  };

  std::map<std::string, ProfileRow> device_rows;
  std::vector<std::pair<int64_t, int64_t>> intervals;  // all streams together: busy is a union
  for (const compat::ProfiledSpan* span : device) {
    Add(device_rows, *span);
    intervals.emplace_back(span->start_ns, span->start_ns + span->duration_ns);
  }
  std::sort(intervals.begin(), intervals.end());
  int64_t busy_ns = 0, covered_to = 0;
  bool any = false;
  for (const auto& [start, end] : intervals) {
    const int64_t from = any ? std::max(start, covered_to) : start;
    if (end > from) busy_ns += end - from;
    covered_to = any ? std::max(covered_to, end) : end;
    any = true;
  }
  summary.device_busy_seconds = static_cast<double>(busy_ns) * 1e-9;
  summary.device = ByTotalTime(device_rows);

  // Self time: a span's duration less its direct children's on the same thread (the ops it
  // called), found with a stack of the spans still open at each start.
  std::sort(host.begin(), host.end(), order);
  std::map<std::string, ProfileRow> host_rows;
  struct Open {
    const compat::ProfiledSpan* span;
    int64_t children_ns;
  };
  std::vector<Open> open;
  auto close = [&](const Open& o) {
    compat::ProfiledSpan self = *o.span;
    self.duration_ns = std::max<int64_t>(0, o.span->duration_ns - o.children_ns);
    Add(host_rows, self);
  };
  for (const compat::ProfiledSpan* span : host) {
    while (!open.empty() && (open.back().span->lane != span->lane ||
                             open.back().span->start_ns + open.back().span->duration_ns <= span->start_ns)) {
      close(open.back());
      open.pop_back();
    }
    if (!open.empty()) open.back().children_ns += span->duration_ns;
    open.push_back({span, 0});
  }
  while (!open.empty()) {
    close(open.back());
    open.pop_back();
  }
  summary.host = ByTotalTime(host_rows);
  return summary;
}

std::string FormatProfile(const ProfileSummary& summary, size_t rows, double per, const std::string& unit) {
  std::string out;
  char line[512];
  const double units = per > 0 ? per : 1;
  const double window = summary.window_seconds;
  auto share = [&](double seconds) { return window > 0 ? 100 * seconds / window : 0.0; };
  std::snprintf(line, sizeof line, "profile: %.4g %s(s) in %.3f s; device busy %.3f s (%.0f %% of the window)\n", units,
                unit.c_str(), window, summary.device_busy_seconds, share(summary.device_busy_seconds));
  out += line;
  auto table = [&](const std::vector<ProfileRow>& side, const char* side_label, const char* name_label) {
    if (side.empty()) return;
    std::snprintf(line, sizeof line, "  %-7s %10s %7s %8s  %s\n", side_label, ("ms/" + unit).c_str(), "share", "calls",
                  name_label);
    out += line;
    for (size_t i = 0; i < side.size() && i < rows; ++i) {
      std::snprintf(line, sizeof line, "  %-7s %10.3f %6.1f%% %8lld  %s\n", "", 1e3 * side[i].seconds / units,
                    share(side[i].seconds), static_cast<long long>(side[i].calls), Cut(side[i].name).c_str());
      out += line;
    }
    if (side.size() > rows) {
      double rest = 0;
      for (size_t i = rows; i < side.size(); ++i) rest += side[i].seconds;
      std::snprintf(line, sizeof line, "  %-7s %10.3f %6.1f%% %8s  (%zu more)\n", "", 1e3 * rest / units, share(rest),
                    "", side.size() - rows);
      out += line;
    }
  };
  table(summary.device, "device", "kernel");
  if (summary.device.empty()) out += "  device: no kernel recorded (a CPU run, or a libtorch without Kineto and CUPTI)\n";
  table(summary.host, "host", "op (self time)");
  return out;
}

}  // namespace native
}  // namespace protocol
