#include "backends/native/dist_backend.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <cstdlib>
#include <thread>
#include <map>

#include "backends/native/launch/events.h"
#include "backends/native/rank_events.h"
#include "backends/native/launch/rank_failure.h"
#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/check/native_check.h"
#include "backends/native/launch/network_emulation.h"
#include "backends/native/launch/node_telemetry.h"
#include "backends/native/launch/rendezvous.h"
#include "backends/native/launch/stragglers.h"
#include "backends/native/launch/supervisor.h"
#include "backends/native/launch/worker_case.h"
#include "runner/base/clock.h"
#include "runner/base/text.h"
#include "runner/plan/networks.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

// Set in every rank's environment; RunDistributed refuses to run where it is set.
constexpr const char* kInWorkerVariable = "PROTOCOL_IN_WORKER";

// This program's file. When it was replaced while the runner runs (a rebuild
// during a long run: the link reads "... (deleted)"), /proc/self/exe itself,
// which still opens the running binary on this host: ranks run the runner's
// own version, not a newer one, and not nothing.
std::string SelfProgram() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec || !fs::exists(p, ec)) return "/proc/self/exe";
  return p.string();
}

// Each rank's end as exit_code_rank<r> (its exit code; a signal N as 128+N,
// as a shell reports it), and the case's exit code: that of the rank whose end
// failed the case, else the largest of the ranks' (0 when all exited 0).
void AddRankExitCodes(const SuperviseResult& sr, BackendOutcome& out) {
  std::optional<int> worst;
  for (const RankEnd& r : sr.ranks) {
    if (!r.started) continue;
    const std::string how =
        r.signal ? fmt::format("rank {} (node {}) was ended by signal {} (stored as 128+{})", r.rank, r.node, r.signal, r.signal)
                 : fmt::format("rank {} (node {}) exited with code {}", r.rank, r.node, r.exit_code);
    out.measurements.push_back(
        MeasuredFigure(RankFigureName(metric::kExitCode, r.rank), r.Code(), "", how));
    if (r.rank == sr.failed_rank) worst = r.Code();
    if (sr.failed_rank < 0) worst = std::max(worst.value_or(r.Code()), r.Code());
  }
  if (worst) out.exit_code = worst;
}

}  // namespace

std::vector<std::string> CheckDistributed(const Plan& plan, const CaseSpec& spec, const DistLayout& layout) {
  std::vector<std::string> problems;
  if (!FindLauncher(plan.cluster.launcher)) {
    std::vector<std::string> names;
    for (const LauncherEntry& e : LauncherTable()) names.push_back(e.name);
    problems.push_back(fmt::format("unknown launcher '{}' (known: {})", plan.cluster.launcher, Join(names, ", ")));
  }
  if (spec.workload != Workload::kInference) {
    const int64_t per = static_cast<int64_t>(layout.world()) * spec.training.grad_accum;
    if (spec.training.batch_size % per != 0)
      problems.push_back(fmt::format(
          "batch_size {} must be divisible by ranks × grad_accum = {} × {} (each rank takes an equal slice of the global batch)",
          spec.training.batch_size, layout.world(), spec.training.grad_accum));
  }
  return problems;
}

namespace {

// The case file the ranks read (worker_case.h): beside the case log, or a
// temporary file removed when this object goes.
class CaseFile {
 public:
  CaseFile(fs::path path, bool temporary) : path_(std::move(path)), temporary_(temporary) {}
  CaseFile(const CaseFile&) = delete;
  CaseFile& operator=(const CaseFile&) = delete;
  ~CaseFile() {
    std::error_code ec;
    if (temporary_) fs::remove(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool temporary_;
};

Result<std::unique_ptr<CaseFile>> WriteCaseFile(const BackendContext& ctx, NativeRole role, const DistLayout& layout) {
  std::error_code ec;
  const fs::path case_path = ctx.log_path.empty() ? fs::temp_directory_path() / fmt::format("protocol-{}-{}-{}.case.json",
                                                                                            ::getpid(), ctx.spec.id,
                                                                                            ctx.repeat)
                                                  : fs::absolute(fs::path(ctx.log_path).replace_extension(".case.json"));
  fs::create_directories(case_path.parent_path(), ec);
  if (Status s = WriteWorkerCase(case_path.string(), WorkerCaseOf(ctx, role, layout)); !s.ok()) return s;
  return std::make_unique<CaseFile>(case_path, ctx.log_path.empty());
}

// The network a case runs on (cluster.networks), when its ranks span nodes
// and its label names one; nullptr otherwise.
const NetworkSpec* CaseNetwork(const BackendContext& ctx, const DistLayout& layout) {
  return layout.nodes() > 1 ? ctx.plan.cluster.FindNetwork(ctx.spec.network) : nullptr;
}

// The runner's own environment, NAME -> value.
std::map<std::string, std::string> RunnerEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

// The environment levels of a rank on `node` (networks.h MergeEnv).
EnvSpec PlanEnvOf(const BackendContext& ctx, const NetworkSpec* network, const std::string& node_name) {
  const NodeSpec* node = ctx.plan.cluster.FindNode(node_name);
  return MergeEnv(&ctx.plan.cluster.env, network ? &network->env : nullptr, node ? &node->env : nullptr,
                  &ctx.spec.env);
}

// One worker command per rank, through the plan's launcher. Each rank's
// environment: the plan's levels (networks.h MergeEnv: cluster, network, node,
// case), then protocol's own variables.
Result<std::vector<RankLaunch>> PrepareLaunches(const BackendContext& ctx, const DistLayout& layout,
                                                const std::string& program, const std::string& case_path,
                                                const std::string& workdir) {
  const std::string first_node = layout.rank_nodes.front();
  const NetworkSpec* network = CaseNetwork(ctx, layout);
  // Rendezvous at node 0's address on the case's network, else at its host.
  const std::string master = network && network->addresses.count(first_node) ? network->addresses.at(first_node)
                             : layout.node_hosts.count(first_node) && layout.node_hosts.at(first_node) != "localhost"
                                 ? layout.node_hosts.at(first_node)
                                 : "127.0.0.1";
  const std::map<std::string, std::string> runner_env = RunnerEnvironment();
  // Ranks per HOST: two plan nodes on one host (both "localhost") share its cores.
  auto host_of = [&](const std::string& node) {
    auto it = layout.node_hosts.find(node);
    return it == layout.node_hosts.end() ? std::string("localhost") : it->second;
  };
  std::map<std::string, int> per_host;
  for (const std::string& n : layout.rank_nodes) ++per_host[host_of(n)];
  LaunchRequest request;
  request.node_hosts = layout.node_hosts;
  request.workdir = workdir;
  std::map<std::string, int> local_index;
  // Each node's hardware is read by its first rank (node_telemetry.h) where the nodes have links of
  // their own: other hosts, or the namespaces of an emulated network; nodes that are one host talk
  // over its loopback, and the runner samples that host. Their GPUs too where the launcher puts them
  // on another host than the runner's.
  std::set<std::string> hosts;
  for (const std::string& n : layout.rank_nodes) hosts.insert(host_of(n));
  const NetworkSpec* case_network = CaseNetwork(ctx, layout);
  const bool emulated = (case_network && case_network->emulate) || ctx.plan.cluster.emulate.has_value();
  const int nodes = hosts.size() > 1 || emulated
                        ? static_cast<int>(std::set<std::string>(layout.rank_nodes.begin(), layout.rank_nodes.end()).size())
                        : 1;
  const bool remote_gpus = ctx.plan.cluster.launcher != "local";
  for (int r = 0; r < layout.world(); ++r) {
    RankLaunch l;
    l.rank = r;
    l.node = layout.rank_nodes[static_cast<size_t>(r)];
    l.argv = {program, "worker", "--case", case_path};
    const EnvSpec env = PlanEnvOf(ctx, network, l.node);
    l.unset = WithheldVariables(runner_env, env);
    l.env = ResolveEnv(env, runner_env);
    // Protocol's own (the parser refuses them in an env:).
    const std::map<std::string, std::string> own = {
        {"RANK", std::to_string(r)},
        {"WORLD_SIZE", std::to_string(layout.world())},
        {"LOCAL_RANK", std::to_string(local_index[l.node]++)},
        {"MASTER_ADDR", master},
        // Rank 0's store binds a port the kernel picks and announces it (rendezvous.h):
        // no port is chosen here and bound later, where something else could take it.
        {"MASTER_PORT", std::to_string(kAnnouncedPort)},
        {"PROTOCOL_NODE", l.node},
        {kInWorkerVariable, "1"}};
    for (const auto& [name, value] : own) l.env[name] = value;
    for (const auto& [name, value] :
         NodeTelemetryEnv(ctx.plan.telemetry.interval_seconds, nodes, local_index[l.node] - 1, remote_gpus))
      l.env[name] = value;
    // glibc's malloc is left as PyTorch users run it: its dynamic mmap
    // threshold keeps large freed blocks on the heap for reuse. A fixed small
    // threshold (MALLOC_MMAP_THRESHOLD_=65536) makes a rank's RSS follow what
    // it holds, for memory measurements (bench/fsdp_memory.sh sets it), but
    // maps and faults in every large tensor anew: a tiny-preset training step
    // took 5 times as long (docs/performance.md). The runner's environment,
    // which every rank inherits, may set it.
    // Ranks sharing a CPU host share its threads (training.threads, ThreadsPerRank).
    l.env["OMP_NUM_THREADS"] = std::to_string(ThreadsPerRank(ctx.spec.training, per_host[host_of(l.node)]));
    request.ranks.push_back(std::move(l));
  }
  const LauncherEntry* entry = FindLauncher(ctx.plan.cluster.launcher);
  if (!entry) return Status::InvalidArgument(fmt::format("unknown launcher '{}'", ctx.plan.cluster.launcher));
  return entry->make()->Prepare(request);
}

// Two-node rehearsal on one host (cluster.emulate, docs/rehearsal.md): each
// plan node becomes a network namespace joined by shaped veth links; ranks
// run inside their node's namespace and Gloo binds to its interface, so
// traffic between nodes crosses the shaped link while ranks of one node talk
// locally. The network lives as long as the result (the caller keeps it until
// every rank has ended, also on failure). nullptr where nothing is emulated.
Result<std::unique_ptr<EmulatedNetwork>> EmulateNetwork(BackendContext& ctx, const DistLayout& layout,
                                                        std::vector<RankLaunch>& launches) {
  const Plan& plan = ctx.plan;
  // The case's network's own emulated link, else the cluster's.
  const NetworkSpec* named = CaseNetwork(ctx, layout);
  const std::optional<NetworkEmulation>& emulate = named && named->emulate ? named->emulate : plan.cluster.emulate;
  if (!emulate) return std::unique_ptr<EmulatedNetwork>();
  std::vector<std::string> nodes;
  for (const std::string& n : layout.rank_nodes)
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  if (nodes.size() < 2) return std::unique_ptr<EmulatedNetwork>();
  auto created = EmulatedNetwork::Create(nodes, *emulate);
  if (!created.ok()) return Status::InvalidArgument("network emulation: " + created.status().message());
  std::unique_ptr<EmulatedNetwork> network = std::move(created).value();
  const auto& emulated = network->nodes();
  for (RankLaunch& l : launches) {
    size_t index = static_cast<size_t>(std::find(nodes.begin(), nodes.end(), l.node) - nodes.begin());
    l.argv = network->Wrap(index, l.argv);
    l.env["MASTER_ADDR"] = emulated[0].address;
    l.env["GLOO_SOCKET_IFNAME"] = emulated[index].device;
  }
  ctx.events.OnStatusLine(fmt::format("emulated network{}: {} nodes, {} {}",
                                      named ? " '" + named->name + "'" : std::string(), nodes.size(),
                                      emulate->bandwidth, emulate->delay));
  return network;
}

// What the ranks ran on, for the record (a failed case too): the network's
// label and nominal rate, and the environment the plan gave the ranks (secrets
// masked), per node where the nodes' differ.
void AddNetworkFacts(const BackendContext& ctx, const DistLayout& layout, BackendOutcome& out) {
  const NetworkSpec* network = CaseNetwork(ctx, layout);
  if (network) {
    out.facts.push_back({fact::kNetwork, network->name});
    out.facts.push_back({fact::kNetworkRate, fmt::format("{}", network->bits_per_second)});
  }
  const std::map<std::string, std::string> runner_env = RunnerEnvironment();
  std::map<std::string, std::string> per_node;  // node -> its ranks' plan environment
  for (const std::string& node : layout.rank_nodes)
    per_node.emplace(node, DescribeEnv(ResolveEnv(PlanEnvOf(ctx, network, node), runner_env)));
  std::set<std::string> distinct;
  for (const auto& [node, text] : per_node) distinct.insert(text);
  std::string text;
  if (distinct.size() == 1) {
    text = *distinct.begin();
  } else {
    std::vector<std::string> parts;
    for (const auto& [node, vars] : per_node) parts.push_back(node + ": " + (vars.empty() ? "(none)" : vars));
    text = Join(parts, "; ");
  }
  if (!text.empty()) out.facts.push_back({fact::kRankEnv, text});
}

// The case's result once every rank has ended: a failure (why, in the
// operator's words: rank_failure.h, with each rank's exit code) or the
// figures the ranks reported.
BackendOutcome OutcomeOf(const BackendContext& ctx, NativeRole role, const DistLayout& layout,
                         const SuperviseResult& sr, const RankEventCollector& collector,
                         const std::vector<RankLaunch>& launches, const std::string& program, double ended) {
  switch (sr.outcome) {
    case SuperviseResult::Outcome::kOk:
      break;
    case SuperviseResult::Outcome::kTimedOut:
    case SuperviseResult::Outcome::kStopped: {
      std::string reason = sr.reason;
      if (std::string silent = SilentRank(layout.rank_nodes, collector.last_beats(), ended); !silent.empty())
        reason += "; " + silent;
      BackendOutcome stopped = FailedOutcome(
          sr.outcome == SuperviseResult::Outcome::kTimedOut ? CaseStatus::kTimeout : CaseStatus::kInterrupted, reason);
      AddRankExitCodes(sr, stopped);
      return stopped;
    }
    default: {
      RankFailure f;
      f.rank_nodes = layout.rank_nodes;
      f.last_beats = collector.last_beats();
      f.ended = ended;
      f.failed_rank = sr.failed_rank;
      for (const RankEnd& r : sr.ranks)
        if (r.rank == sr.failed_rank) f.failed_signal = r.signal;
      f.failed_error = collector.ErrorOf(sr.failed_rank);
      f.reason = sr.reason;
      if (f.failed_signal == SIGKILL || IsOutOfMemoryError(f.failed_error))  // the findings that name it
        f.expected_memory = native_case_expected_memory(ctx.plan, ctx.spec, role);
      BackendOutcome failed = FailedOutcome(CaseStatus::kFailed, ExplainRankFailure(f));
      AddRankExitCodes(sr, failed);
      return failed;
    }
  }
  // Every rank that ends its work says so ("bytes"); exit 0 without it is not a result.
  for (const RankLaunch& l : launches)
    if (!collector.Reported(l.rank))
      return FailedOutcome(CaseStatus::kFailed,
                           fmt::format("rank {} (node {}) exited with code 0 without reporting the end of its work (no "
                                       "\"bytes\" event): is '{}' the protocol program with the `worker` subcommand?",
                                       l.rank, l.node, program));
  BackendOutcome out;
  out.facts.push_back({fact::kRanks, std::to_string(layout.world())});
  for (const auto& f : collector.facts()) out.facts.push_back(f);
  out.measurements = collector.RankZeroFigures();
  AddRankExitCodes(sr, out);
  collector.AddCaseFigures(layout, ctx.spec.workload,
                           ctx.spec.workload == Workload::kInference ? DecodeStepMethodWords(ctx.spec.inference.decode_step)
                                                                     : "",
                           out);
  return out;
}

}  // namespace

WorkerCase WorkerCaseOf(const BackendContext& ctx, NativeRole role, const DistLayout& layout) {
  const CaseSpec& spec = ctx.spec;
  const Plan& plan = ctx.plan;
  WorkerCase wc;
  wc.role = role;
  wc.case_id = spec.id;
  wc.plan_file = plan.file;
  wc.plan_text = plan.resolved_text;
  wc.workload = spec.workload;
  const ModelSpec& ms = plan.models.at(spec.model);
  wc.model_name = ms.name;
  wc.model_preset = ms.preset;
  wc.model_path = ms.path.empty() ? "" : fs::absolute(plan.ResolvePath(ms.path)).lexically_normal().string();
  wc.quantization = ms.quantization;
  wc.double_quant = ms.double_quant;
  wc.init_random = ms.init_random;
  if (spec.workload != Workload::kInference) {
    const DatasetSpec& ds = plan.datasets.at(spec.dataset);
    wc.dataset_format = ds.format;
    wc.dataset_column = ds.column;
    wc.dataset_path = fs::absolute(plan.ResolvePath(ds.path)).lexically_normal().string();
    if (spec.length->unit == Length::Unit::kSteps) wc.steps = spec.length->count;
    else wc.epochs = spec.length->count;
  }
  wc.training = spec.training;
  wc.training.checkpoint_every = native_case_checkpointing(plan, spec, role).every;  // `auto` resolved
  wc.warmup_steps = spec.warmup_steps;
  wc.inference = spec.inference;
  wc.output_dir = ctx.output_dir.empty() ? "" : fs::absolute(ctx.output_dir).string();
  wc.groups = layout.groups;
  wc.group_size = layout.group_size;
  wc.rank_nodes = layout.rank_nodes;
  return wc;
}

BackendOutcome RunDistributed(BackendContext& ctx, NativeRole role, const DistLayout& layout,
                              const DistOptions& options) {
  // A rank never starts ranks: were the worker program not `protocol` (a test
  // binary run as /proc/self/exe), each rank would start ranks of its own.
  if (const char* inside = std::getenv(kInWorkerVariable); inside && *inside)
    return FailedOutcome(CaseStatus::kFailed,
                         fmt::format("this process is a rank of a distributed case ({} is set); a rank never starts ranks",
                                     kInWorkerVariable));
  auto case_file = WriteCaseFile(ctx, role, layout);
  if (!case_file.ok()) return FailedOutcome(CaseStatus::kFailed, case_file.status().message());
  const std::string program = options.worker_program.empty() ? SelfProgram() : options.worker_program;
  std::error_code ec;
  const std::string workdir = fs::current_path(ec).string();
  auto launches = PrepareLaunches(ctx, layout, program, (*case_file)->path().string(), workdir);
  if (!launches.ok()) return FailedOutcome(CaseStatus::kFailed, launches.status().message());
  // The emulated network (if any) lives until every rank has ended: it is
  // destroyed after Supervise returns, also on failure.
  auto network = EmulateNetwork(ctx, layout, *launches);
  if (!network.ok()) return FailedOutcome(CaseStatus::kFailed, network.status().message());
  if (options.wrap) {
    if (Status s = options.wrap(*launches); !s.ok()) return FailedOutcome(CaseStatus::kFailed, s.message());
  }

  // ---- supervise, turning events into results -------------------------------------------
  RankEventCollector collector(ctx.events);
  SuperviseOptions so;
  so.keep_in_log = [](std::string_view line) {
    auto e = DecodeEvent(line);
    return !e || e->kind != WorkerEvent::Kind::kHeartbeat;
  };
  so.log_path = ctx.log_path;
  so.workdir = workdir;
  so.timeout_seconds = ctx.spec.timeout_seconds;
  so.kill_grace_seconds = options.kill_grace_seconds;
  SuperviseResult sr = Supervise(ctx.processes, *launches, so, ctx.stop, [&](int rank, std::string_view line) {
    if (auto e = DecodeEvent(line)) collector.Add(rank, *e, SteadySeconds());
  });
  BackendOutcome out = OutcomeOf(ctx, role, layout, sr, collector, *launches, program, SteadySeconds());
  AddNetworkFacts(ctx, layout, out);
  return out;
}

}  // namespace native
}  // namespace protocol
