// EmulatedNetwork: namespaces, veth links, a bridge for N > 2, tc qdiscs.
// Every step is one `ip` or `tc` command run through the ProcessRunner (no
// shell), recorded in commands() and, when it fails, returned as a Status with
// the command line and its output.

#include "backends/native/launch/network_emulation.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "runner/base/log.h"
#include "runner/base/placeholders.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

namespace fs = std::filesystem;

// netem keeps packets for `delay`; at link speed that is rate * delay bytes,
// so its queue must hold far more than netem's default 1000 packets.
constexpr int kNetemLimitPackets = 100000;
// tbf: the queue may hold this much time at the shaped rate before dropping.
constexpr const char* kTbfLatency = "100ms";
// tbf bucket: the larger of this and 2 ms at the shaped rate. tbf splits GSO
// packets larger than the bucket, so a small bucket keeps the rate exact.
constexpr double kMinBurstBytes = 16384;
constexpr double kBurstSeconds = 0.002;

std::atomic<int> g_network_seq{0};

#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    if (Status _s = (expr); !_s.ok()) return _s;   \
  } while (0)

const std::regex& StaleNameRegex() {
  static const std::regex re(R"(^(protocol-([0-9]+)-([0-9]+))-.+$)");
  return re;
}

// "ip link add eth0 ..." for messages: arguments with spaces quoted.
std::string CommandLine(const std::vector<std::string>& argv) {
  std::vector<std::string> parts;
  for (const auto& a : argv) parts.push_back(a.find_first_of(" \t'\"") == std::string::npos && !a.empty() ? a : ShellQuote(a));
  return Join(parts, " ");
}

// The start time of `pid` (field 22 of /proc/<pid>/stat, clock ticks since
// boot), or "" when the process does not exist.
std::string ProcessStartTime(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string stat = ss.str();
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return "";
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  // After "pid (comm)" come fields 3, 4, ...; the start time is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return "";
  }
  return field;
}

bool ProcessExists(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// Runs one command to its end; OK on exit code 0, else IoError with the
// command and its output.
Status RunCommand(ProcessRunner& runner, const std::vector<std::string>& argv, double timeout) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.timeout_seconds = timeout;
  std::vector<std::string> lines;
  StopFlag never;  // a Ctrl-C must not leave half a network: set-up and tear-down run to their end
  ProcessResult r = runner.Run(spec, never, [&](std::string_view line) { lines.emplace_back(line); });
  if (r.ending == ProcessResult::Ending::kExited && r.exit_code == 0) return Status::Ok();
  std::string why;
  switch (r.ending) {
    case ProcessResult::Ending::kExited: why = fmt::format("exit code {}", r.exit_code); break;
    case ProcessResult::Ending::kSignaled: why = fmt::format("killed by signal {}", r.signal); break;
    case ProcessResult::Ending::kTimedOut: why = fmt::format("timed out after {} s", timeout); break;
    case ProcessResult::Ending::kStopped: why = "stopped"; break;
    case ProcessResult::Ending::kFailedToStart: why = r.error; break;
  }
  std::string output = Trim(Join(lines, "\n"));
  std::string message = fmt::format("network emulation: `{}` failed ({})", CommandLine(argv), why);
  if (!output.empty()) message += ": " + output;
  bool uses_netem = std::find(argv.begin(), argv.end(), "netem") != argv.end();
  if (uses_netem && output.find("qdisc kind is unknown") != std::string::npos) {
    message += " (this kernel has no sch_netem, which the delay needs: `modprobe sch_netem`, or drop cluster.emulate.delay)";
  }
  return Status::IoError(message);
}

bool ValidNodeName(const std::string& name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

}  // namespace

Status CheckNetworkEmulationPrivileges() {
  // CapEff in /proc/self/status: a hex mask; CAP_NET_ADMIN = 12, CAP_SYS_ADMIN = 21.
  std::ifstream in("/proc/self/status");
  std::string line;
  uint64_t effective = 0;
  bool found = false;
  while (std::getline(in, line)) {
    if (StartsWith(line, "CapEff:")) {
      effective = std::strtoull(Trim(line.substr(7)).c_str(), nullptr, 16);
      found = true;
    }
  }
  if (!found) effective = (::geteuid() == 0) ? ~uint64_t{0} : 0;
  const uint64_t needed = (uint64_t{1} << 12) | (uint64_t{1} << 21);
  if ((effective & needed) != needed) return Status::InvalidArgument(std::string(kNeedsRootMessage));
  return Status::Ok();
}

Result<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(const std::vector<std::string>& nodes,
                                                                 const NetworkEmulation& shape,
                                                                 const NetworkEmulationOptions& options) {
  if (options.check_privileges) {
    if (Status s = CheckNetworkEmulationPrivileges(); !s.ok()) return s;
  }
  if (nodes.size() < 2 || nodes.size() > 253) {
    return Status::InvalidArgument(
        fmt::format("network emulation needs 2 to 253 nodes, got {}", nodes.size()));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!ValidNodeName(nodes[i])) {
      return Status::InvalidArgument(fmt::format("network emulation: bad node name '{}'", nodes[i]));
    }
    if (nodes[i] == "sw") {
      return Status::InvalidArgument("network emulation: node name 'sw' is reserved for the switch");
    }
    if (std::find(nodes.begin(), nodes.begin() + i, nodes[i]) != nodes.begin() + i) {
      return Status::InvalidArgument(fmt::format("network emulation: duplicate node name '{}'", nodes[i]));
    }
  }

  std::unique_ptr<EmulatedNetwork> net(new EmulatedNetwork());
  net->options_ = options;
  if (options.runner) {
    net->runner_ = options.runner;
  } else {
    net->owned_runner_ = MakeSystemProcessRunner();
    net->runner_ = net->owned_runner_.get();
  }
  net->prefix_ = !options.prefix.empty()
                     ? options.prefix
                     : fmt::format("protocol-{}-{}", ::getpid(), g_network_seq.fetch_add(1));

  // The marker goes first, so that even a crash half-way leaves enough for
  // RemoveStaleNetworks to recognise the leftovers as ours and dead.
  if (!options.marker_dir.empty()) {
    std::error_code ec;
    fs::create_directories(options.marker_dir, ec);
    std::string path = (fs::path(options.marker_dir) / net->prefix_).string();
    std::ofstream out(path);
    out << ::getpid() << " " << ProcessStartTime(::getpid()) << "\n";
    if (!out) return Status::IoError(fmt::format("network emulation: cannot write marker {}", path));
    net->marker_path_ = path;
  }

  if (Status s = net->Build(nodes, shape); !s.ok()) {
    net->Teardown();  // the first failure is the one worth reporting
    return s;
  }
  return net;
}

EmulatedNetwork::~EmulatedNetwork() {
  Status s = Teardown();
  if (!s.ok()) spdlog::warn("{}", s.message());
}

Status EmulatedNetwork::Run(const std::vector<std::string>& argv) {
  commands_.push_back(CommandLine(argv));
  return RunCommand(*runner_, argv, options_.command_timeout_seconds);
}

Status EmulatedNetwork::Build(const std::vector<std::string>& names, const NetworkEmulation& shape) {
  const std::string kDevice = "eth0";
  for (size_t i = 0; i < names.size(); ++i) {
    EmulatedNode node;
    node.name = names[i];
    node.netns = prefix_ + "-" + names[i];
    node.address = fmt::format("10.77.0.{}", i + 1);
    node.device = kDevice;
    RETURN_IF_ERROR(Run({"ip", "netns", "add", node.netns}));
    namespaces_.push_back(node.netns);
    RETURN_IF_ERROR(Run({"ip", "-n", node.netns, "link", "set", "lo", "up"}));
    nodes_.push_back(node);
  }

  const std::string sw = prefix_ + "-sw";
  if (nodes_.size() == 2) {
    RETURN_IF_ERROR(Run({"ip", "link", "add", kDevice, "netns", nodes_[0].netns, "type", "veth", "peer", "name",
                         kDevice, "netns", nodes_[1].netns}));
  } else {
    RETURN_IF_ERROR(Run({"ip", "netns", "add", sw}));
    namespaces_.push_back(sw);
    RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "add", "br0", "type", "bridge"}));
    RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "set", "br0", "up"}));
    for (size_t i = 0; i < nodes_.size(); ++i) {
      std::string port = fmt::format("p{}", i);
      RETURN_IF_ERROR(Run({"ip", "link", "add", kDevice, "netns", nodes_[i].netns, "type", "veth", "peer", "name",
                           port, "netns", sw}));
      RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "set", port, "master", "br0"}));
      RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "set", port, "up"}));
    }
  }
  for (const EmulatedNode& node : nodes_) {
    RETURN_IF_ERROR(Run({"ip", "-n", node.netns, "addr", "add", node.address + "/24", "dev", node.device}));
    RETURN_IF_ERROR(Run({"ip", "-n", node.netns, "link", "set", node.device, "up"}));
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    RETURN_IF_ERROR(Shape(nodes_[i].netns, nodes_[i].device, shape, /*with_delay=*/true));
    if (nodes_.size() > 2) RETURN_IF_ERROR(Shape(sw, fmt::format("p{}", i), shape, /*with_delay=*/false));
  }
  return Status::Ok();
}

Status EmulatedNetwork::Shape(const std::string& netns, const std::string& device, const NetworkEmulation& shape,
                              bool with_delay) {
  // Rates and times go to tc in its base units (bit, us), as the plan's parser read them.
  std::vector<std::string> tbf;
  if (!shape.bandwidth.empty()) {
    const double bits = shape.bits_per_second;
    double burst = std::max(kMinBurstBytes, bits / 8 * kBurstSeconds);
    tbf = {"tbf",
           "rate",
           fmt::format("{}bit", static_cast<uint64_t>(std::llround(bits))),
           "burst",
           fmt::format("{}", static_cast<uint64_t>(std::llround(burst))),
           "latency",
           kTbfLatency};
  }
  std::vector<std::string> base = {"tc", "-n", netns, "qdisc", "add", "dev", device};
  auto with = [&](std::vector<std::string> tail) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), tail.begin(), tail.end());
    return argv;
  };
  if (with_delay && !shape.delay.empty()) {
    std::string us = fmt::format("{}us", static_cast<uint64_t>(std::llround(shape.delay_seconds * 1e6)));
    if (Status s = Run(with({"root", "handle", "1:", "netem", "delay", us, "limit",
                             std::to_string(kNetemLimitPackets)}));
        !s.ok()) {
      return s;
    }
    if (!tbf.empty()) {
      std::vector<std::string> tail = {"parent", "1:1", "handle", "10:"};
      tail.insert(tail.end(), tbf.begin(), tbf.end());
      return Run(with(tail));
    }
    return Status::Ok();
  }
  if (!tbf.empty()) {
    std::vector<std::string> tail = {"root", "handle", "1:"};
    tail.insert(tail.end(), tbf.begin(), tbf.end());
    return Run(with(tail));
  }
  return Status::Ok();
}

std::vector<std::string> EmulatedNetwork::Wrap(size_t node, const std::vector<std::string>& argv) const {
  std::vector<std::string> wrapped = {"ip", "netns", "exec", nodes_.at(node).netns};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

Status EmulatedNetwork::Teardown() {
  Status first;
  // Deleting a namespace deletes every interface in it; a veth pair dies with
  // either end, and the qdiscs with their interfaces.
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    Status s = Run({"ip", "netns", "delete", *it});
    if (!s.ok() && s.message().find("No such file or directory") == std::string::npos && first.ok()) first = s;
  }
  namespaces_.clear();
  if (!marker_path_.empty()) {
    std::error_code ec;
    fs::remove(marker_path_, ec);
    marker_path_.clear();
  }
  return first;
}

Result<std::vector<std::string>> RemoveStaleNetworks(ProcessRunner* runner, const std::string& netns_dir,
                                                     const std::string& marker_dir) {
  std::unique_ptr<ProcessRunner> owned;
  if (!runner) {
    owned = MakeSystemProcessRunner();
    runner = owned.get();
  }
  // prefix -> its namespaces, sorted for a stable order.
  std::map<std::string, std::vector<std::string>> by_prefix;
  std::map<std::string, long> owner;
  auto note = [&](const std::string& name, bool is_namespace) {
    std::smatch m;
    std::string candidate = is_namespace ? name : name + "-marker";
    if (!std::regex_match(candidate, m, StaleNameRegex())) return;
    by_prefix[m[1].str()];
    if (is_namespace) by_prefix[m[1].str()].push_back(name);
    owner[m[1].str()] = std::stol(m[2].str());
  };
  std::error_code ec;
  if (fs::is_directory(netns_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(netns_dir, ec)) note(entry.path().filename().string(), true);
  }
  if (!marker_dir.empty() && fs::is_directory(marker_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(marker_dir, ec)) note(entry.path().filename().string(), false);
  }

  std::vector<std::string> removed;
  Status first;
  for (auto& [prefix, namespaces] : by_prefix) {
    long pid = owner[prefix];
    bool alive = ProcessExists(pid);
    std::string marker = marker_dir.empty() ? "" : (fs::path(marker_dir) / prefix).string();
    if (alive && !marker.empty()) {
      std::ifstream in(marker);
      long recorded_pid = 0;
      std::string recorded_start;
      if (in >> recorded_pid >> recorded_start) alive = (recorded_start == ProcessStartTime(pid));
    }
    if (alive) continue;
    std::sort(namespaces.begin(), namespaces.end());
    for (const std::string& ns : namespaces) {
      Status s = RunCommand(*runner, {"ip", "netns", "delete", ns}, 20);
      if (s.ok()) {
        removed.push_back(ns);
      } else if (first.ok()) {
        first = s;
      }
    }
    if (!marker.empty()) fs::remove(marker, ec);
  }
  if (!first.ok()) return first;
  return removed;
}

}  // namespace protocol
