// SLURM_* variables -> SlurmRank, and Slurm hostlist expansion.

#include "backends/native/launch/slurm_env.h"

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <limits>

#include "runner/base/text.h"

extern char** environ;

namespace protocol {
namespace {

constexpr size_t kMaxHosts = 65536;

// A non-negative decimal integer, or nullopt.
std::optional<long> ParseCount(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// Splits at commas that are not inside brackets.
Result<std::vector<std::string>> SplitTopLevel(std::string_view text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) break;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
      continue;
    }
    current += c;
  }
  if (depth != 0) return Status::InvalidArgument(fmt::format("bad hostlist '{}': unbalanced brackets", text));
  parts.push_back(current);
  return parts;
}

// "0-2,5,08-10" -> "0" "1" "2" "5" "08" "09" "10" (the width of a range's
// first bound is kept as zero padding).
Result<std::vector<std::string>> ExpandRanges(std::string_view whole, std::string_view ranges) {
  std::vector<std::string> out;
  for (const std::string& item : Split(ranges, ',')) {
    size_t dash = item.find('-');
    std::string lo_text = item.substr(0, dash);
    std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    auto lo = ParseCount(lo_text);
    auto hi = ParseCount(hi_text);
    if (!lo || !hi || *hi < *lo) {
      return Status::InvalidArgument(fmt::format("bad hostlist '{}': bad range '{}'", whole, item));
    }
    if (static_cast<size_t>(*hi - *lo) + out.size() >= kMaxHosts) {
      return Status::InvalidArgument(fmt::format("bad hostlist '{}': more than {} hosts", whole, kMaxHosts));
    }
    for (long v = *lo; v <= *hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo_text.size()) digits.insert(0, lo_text.size() - digits.size(), '0');
      out.push_back(digits);
    }
  }
  return out;
}

std::optional<std::string> Get(const EnvironmentMap& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view hostlist) {
  auto parts = SplitTopLevel(hostlist);
  if (!parts.ok()) return parts.status();
  std::vector<std::string> hosts;
  for (const std::string& part : *parts) {
    if (part.empty()) return Status::InvalidArgument(fmt::format("bad hostlist '{}': empty name", hostlist));
    // Names so far, each extended by every literal and bracket group in turn.
    std::vector<std::string> names = {""};
    size_t pos = 0;
    while (pos < part.size()) {
      size_t open = part.find('[', pos);
      std::string literal = part.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
      for (auto& n : names) n += literal;
      if (open == std::string::npos) break;
      size_t close = part.find(']', open);
      if (close == std::string::npos) {
        return Status::InvalidArgument(fmt::format("bad hostlist '{}': unbalanced brackets", hostlist));
      }
      auto values = ExpandRanges(hostlist, std::string_view(part).substr(open + 1, close - open - 1));
      if (!values.ok()) return values.status();
      if (names.size() * values->size() + hosts.size() > kMaxHosts) {
        return Status::InvalidArgument(fmt::format("bad hostlist '{}': more than {} hosts", hostlist, kMaxHosts));
      }
      std::vector<std::string> next;
      for (const auto& n : names)
        for (const auto& v : *values) next.push_back(n + v);
      names = std::move(next);
      pos = close + 1;
    }
    hosts.insert(hosts.end(), names.begin(), names.end());
  }
  return hosts;
}

Result<std::vector<std::string>> ExpandHostlistWithScontrol(ProcessRunner& runner, std::string_view hostlist) {
  ProcessSpec spec;
  spec.argv = {"scontrol", "show", "hostnames", std::string(hostlist)};
  spec.timeout_seconds = 10;
  std::vector<std::string> lines;
  StopFlag never;
  ProcessResult r = runner.Run(spec, never, [&](std::string_view line) { lines.emplace_back(line); });
  if (r.ending != ProcessResult::Ending::kExited || r.exit_code != 0) {
    std::string why = r.ending == ProcessResult::Ending::kFailedToStart ? r.error : Join(lines, "\n");
    return Status::InvalidArgument(fmt::format("scontrol show hostnames '{}' failed: {}", hostlist, Trim(why)));
  }
  std::vector<std::string> hosts;
  for (const auto& line : lines) {
    std::string host = Trim(line);
    if (!host.empty()) hosts.push_back(host);
  }
  return hosts;
}

Result<SlurmRank> ReadSlurmRank(const EnvironmentMap& env, const HostlistExpander& expand) {
  auto number = [&](std::initializer_list<const char*> names, long* out) -> Status {
    for (const char* name : names) {
      if (auto v = Get(env, name)) {
        auto n = ParseCount(*v);
        if (!n) return Status::InvalidArgument(fmt::format("{}='{}' is not a non-negative integer", name, *v));
        *out = *n;
        return Status::Ok();
      }
    }
    return Status::InvalidArgument(fmt::format("{} is not set (not inside an srun step?)", *names.begin()));
  };
  long rank = 0, world = 0, local = 0, node = 0;
  if (Status s = number({"SLURM_PROCID"}, &rank); !s.ok()) return s;
  if (Status s = number({"SLURM_NTASKS", "SLURM_NPROCS"}, &world); !s.ok()) return s;
  if (Status s = number({"SLURM_LOCALID"}, &local); !s.ok()) return s;
  if (Get(env, "SLURM_NODEID")) {
    if (Status s = number({"SLURM_NODEID"}, &node); !s.ok()) return s;
  }
  if (world < 1) return Status::InvalidArgument("SLURM_NTASKS=0: a job step has at least one task");
  if (rank >= world) {
    return Status::InvalidArgument(fmt::format("SLURM_PROCID={} is not below SLURM_NTASKS={}", rank, world));
  }
  auto nodelist = Get(env, "SLURM_JOB_NODELIST");
  if (!nodelist) nodelist = Get(env, "SLURM_NODELIST");
  if (!nodelist) return Status::InvalidArgument("SLURM_JOB_NODELIST is not set (not inside a Slurm job?)");
  auto hosts = expand ? expand(*nodelist) : ExpandHostlist(*nodelist);
  if (!hosts.ok()) return hosts.status();
  if (hosts->empty()) return Status::InvalidArgument(fmt::format("SLURM_JOB_NODELIST='{}' names no host", *nodelist));

  SlurmRank out;
  out.rank = static_cast<int>(rank);
  out.world = static_cast<int>(world);
  out.local_rank = static_cast<int>(local);
  out.node_rank = static_cast<int>(node);
  out.hosts = std::move(hosts).value();
  out.master = out.hosts.front();
  if (auto id = Get(env, "SLURM_JOB_ID")) out.job_id = *id;
  else if (auto id2 = Get(env, "SLURM_JOBID")) out.job_id = *id2;
  return out;
}

EnvironmentMap CurrentEnvironment() {
  EnvironmentMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

}  // namespace protocol
