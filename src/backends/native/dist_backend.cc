#include "backends/native/dist_backend.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <cstdlib>
#include <thread>

#include "backends/native/events.h"
#include "backends/native/memory_estimate.h"
#include "backends/native/network_emulation.h"
#include "backends/native/stragglers.h"
#include "backends/native/supervisor.h"
#include "backends/native/worker_case.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

// Set in every rank's environment; RunDistributed refuses to run where it is set.
constexpr const char* kInWorkerVariable = "PROTOCOL_IN_WORKER";

std::string SelfProgram() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : p.string();
}

const NodeSpec* FindNode(const Plan& plan, const std::string& name) {
  for (const NodeSpec& n : plan.cluster.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

// The memory figures every rank reports about itself: <base>_rank<r>.
const char* const kPerRankFigures[] = {metric::kPeakHostRss, metric::kPeakHostRssAboveBaseline, metric::kPeakDeviceMemory};
// Per-rank step figures the workers send (stragglers.h), named the same way.
const char* const kRankStepFigures[] = {metric::kStepSecondsMean, metric::kRankStepSecondsSpread,
                                        metric::kRankWorkSecondsMean};

// The base of a per-rank figure's name among `bases` ("peak_host_rss_bytes" of
// "peak_host_rss_bytes_rank1"); empty for any other name.
template <size_t N>
std::string PerRankBase(const std::string& name, const char* const (&bases)[N]) {
  for (const char* base : bases)
    if (StartsWith(name, std::string(base) + "_rank")) return base;
  return "";
}

double SteadyNow() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
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
        MeasuredFigure(fmt::format("{}_rank{}", metric::kExitCode, r.rank), r.Code(), "", how));
    if (r.rank == sr.failed_rank) worst = r.Code();
    if (sr.failed_rank < 0) worst = std::max(worst.value_or(r.Code()), r.Code());
  }
  if (worst) out.exit_code = worst;
}

// The rank whose heartbeat stopped first, when it stopped more than
// kSilentHeartbeats beats before `now`: "rank 1 (node n0) sent no heartbeat for
// the last 21.3 s before the case failed (one every 1 s)"; "" when every rank
// beat until the end.
std::string SilentRank(const std::map<int, double>& last_beat, const std::vector<RankLaunch>& ranks, double now) {
  const RankLaunch* silent = nullptr;
  double oldest = now - kSilentHeartbeats * kHeartbeatSeconds;
  for (const RankLaunch& l : ranks) {
    auto it = last_beat.find(l.rank);
    if (it != last_beat.end() && it->second < oldest) {
      oldest = it->second;
      silent = &l;
    }
  }
  if (!silent) return "";
  return fmt::format("rank {} (node {}) sent no heartbeat for the last {:.1f} s before the case failed (one every {:g} s)",
                     silent->rank, silent->node, now - oldest, kHeartbeatSeconds);
}

}  // namespace

Result<int> FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::IoError("cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  if (port <= 0) return Status::IoError("cannot find a free TCP port for the rendezvous");
  return port;
}

int ThreadsPerRank(const TrainingSettings& training, int ranks_on_host) {
  int64_t total = training.threads;
  if (total <= 0) {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    total = omp && std::atoi(omp) > 0 ? std::atoi(omp) : static_cast<int64_t>(std::thread::hardware_concurrency());
  }
  return static_cast<int>(std::max<int64_t>(1, total / std::max(1, ranks_on_host)));
}

Result<DistLayout> FsdpLayout(const Plan& plan, const CaseSpec& spec) {
  DistLayout l;
  for (int n = 0; n < spec.nodes; ++n) {
    std::string name = fmt::format("node{}", n), host = "localhost";
    int gpus = 0;
    if (static_cast<size_t>(n) < plan.cluster.nodes.size()) {
      const NodeSpec& node = plan.cluster.nodes[static_cast<size_t>(n)];
      name = node.name;
      host = node.host.empty() ? "localhost" : node.host;
      gpus = node.gpus;
    } else if (!plan.cluster.nodes.empty()) {
      return Status::InvalidArgument(fmt::format("the case needs {} nodes but the cluster lists {}", spec.nodes,
                                                 plan.cluster.nodes.size()));
    }
    const int ranks = spec.training.ranks_per_node > 0 ? spec.training.ranks_per_node : std::max(1, gpus);
    for (int r = 0; r < ranks; ++r) l.rank_nodes.push_back(name);
    l.node_hosts[name] = host;
  }
  l.groups = 1;
  l.group_size = static_cast<int>(l.rank_nodes.size());
  return l;
}

Result<DistLayout> ShareLayout(const Plan& plan, const CaseSpec& spec) {
  if (spec.topology.empty()) return Status::InvalidArgument("the share backend needs a topology (node:GxK ...)");
  DistLayout l;
  l.group_size = spec.topology.parts[0].ranks_per_group;
  l.groups = 0;
  for (const TopologyPart& p : spec.topology.parts) {
    if (p.ranks_per_group != l.group_size)
      return Status::InvalidArgument(fmt::format(
          "topology '{}': every group must have the same number of ranks (K), got {} and {}", spec.topology.ToString(),
          l.group_size, p.ranks_per_group));
    for (int i = 0; i < p.groups * p.ranks_per_group; ++i) l.rank_nodes.push_back(p.node);
    l.groups += p.groups;
    const NodeSpec* node = FindNode(plan, p.node);
    l.node_hosts[p.node] = node && !node->host.empty() ? node->host : "localhost";
  }
  return l;
}

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

BackendOutcome RunDistributed(BackendContext& ctx, NativeRole role, const DistLayout& layout,
                              const DistOptions& options) {
  const CaseSpec& spec = ctx.spec;
  const Plan& plan = ctx.plan;
  // A rank never starts ranks: were the worker program not `protocol` (a test
  // binary run as /proc/self/exe), each rank would start ranks of its own.
  if (const char* inside = std::getenv(kInWorkerVariable); inside && *inside)
    return FailedOutcome(CaseStatus::kFailed,
                fmt::format("this process is a rank of a distributed case ({} is set); a rank never starts ranks",
                            kInWorkerVariable));
  // ---- the case file --------------------------------------------------------
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
    wc.dataset_path = fs::absolute(plan.ResolvePath(ds.path)).lexically_normal().string();
    if (spec.length->unit == Length::Unit::kSteps) wc.steps = spec.length->count;
    else wc.epochs = spec.length->count;
  }
  wc.training = spec.training;
  wc.warmup_steps = spec.warmup_steps;
  wc.inference = spec.inference;
  wc.output_dir = ctx.output_dir.empty() ? "" : fs::absolute(ctx.output_dir).string();
  wc.groups = layout.groups;
  wc.group_size = layout.group_size;
  wc.rank_nodes = layout.rank_nodes;
  std::error_code ec;
  const fs::path case_path =
      ctx.log_path.empty()
          ? fs::temp_directory_path() / fmt::format("protocol-{}-{}-{}.case.json", ::getpid(), spec.id, ctx.repeat)
          : fs::absolute(fs::path(ctx.log_path).replace_extension(".case.json"));
  fs::create_directories(case_path.parent_path(), ec);
  if (Status s = WriteWorkerCase(case_path.string(), wc); !s.ok()) return FailedOutcome(CaseStatus::kFailed, s.message());
  struct Cleanup {
    fs::path p;
    bool temp;
    ~Cleanup() {
      std::error_code e;
      if (temp) fs::remove(p, e);
    }
  } cleanup{case_path, ctx.log_path.empty()};

  // ---- one worker command per rank --------------------------------------------------
  auto port = FreeTcpPort();
  if (!port.ok()) return FailedOutcome(CaseStatus::kFailed, port.status().message());
  const std::string first_node = layout.rank_nodes.front();
  const std::string master = layout.node_hosts.count(first_node) && layout.node_hosts.at(first_node) != "localhost"
                                 ? layout.node_hosts.at(first_node)
                                 : "127.0.0.1";
  const std::string program = options.worker_program.empty() ? SelfProgram() : options.worker_program;
  // Ranks per HOST: two plan nodes on one host (both "localhost") share its cores.
  auto host_of = [&](const std::string& node) {
    auto it = layout.node_hosts.find(node);
    return it == layout.node_hosts.end() ? std::string("localhost") : it->second;
  };
  std::map<std::string, int> per_host;
  for (const std::string& n : layout.rank_nodes) ++per_host[host_of(n)];
  LaunchRequest request;
  request.node_hosts = layout.node_hosts;
  request.workdir = fs::current_path(ec).string();
  std::map<std::string, int> local_index;
  for (int r = 0; r < layout.world(); ++r) {
    RankLaunch l;
    l.rank = r;
    l.node = layout.rank_nodes[static_cast<size_t>(r)];
    l.argv = {program, "worker", "--case", case_path.string()};
    l.env = {{"RANK", std::to_string(r)},
             {"WORLD_SIZE", std::to_string(layout.world())},
             {"LOCAL_RANK", std::to_string(local_index[l.node]++)},
             {"MASTER_ADDR", master},
             {"MASTER_PORT", std::to_string(*port)},
             {"PROTOCOL_NODE", l.node},
             {kInWorkerVariable, "1"}};
    // glibc's malloc otherwise raises its mmap threshold as large blocks are
    // freed and keeps later ones on the heap, which it rarely returns: with a
    // fixed threshold, the gathered units FSDP frees go back to the system and
    // a rank's RSS follows what it holds (unless the user set it).
    if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) l.env["MALLOC_MMAP_THRESHOLD_"] = "65536";
    // Ranks sharing a CPU host share its threads (training.threads, ThreadsPerRank).
    l.env["OMP_NUM_THREADS"] = std::to_string(ThreadsPerRank(spec.training, per_host[host_of(l.node)]));
    request.ranks.push_back(std::move(l));
  }
  const LauncherEntry* entry = FindLauncher(plan.cluster.launcher);
  if (!entry) return FailedOutcome(CaseStatus::kFailed, fmt::format("unknown launcher '{}'", plan.cluster.launcher));
  auto launches = entry->make()->Prepare(request);
  if (!launches.ok()) return FailedOutcome(CaseStatus::kFailed, launches.status().message());
  // Two-node rehearsal on one host (cluster.emulate, docs/rehearsal.md): each
  // plan node becomes a network namespace joined by shaped veth links; ranks
  // run inside their node's namespace and Gloo binds to its interface, so
  // traffic between nodes crosses the shaped link while ranks of one node talk
  // locally. The network lives until every rank has ended (it is destroyed
  // after Supervise returns, also on failure).
  std::unique_ptr<EmulatedNetwork> network;
  if (plan.cluster.emulate) {
    std::vector<std::string> nodes;
    for (const std::string& n : layout.rank_nodes)
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
    if (nodes.size() >= 2) {
      auto created = EmulatedNetwork::Create(nodes, *plan.cluster.emulate);
      if (!created.ok())
        return FailedOutcome(CaseStatus::kFailed, "network emulation: " + created.status().message());
      network = std::move(created).value();
      const auto& emulated = network->nodes();
      for (RankLaunch& l : *launches) {
        size_t index = static_cast<size_t>(std::find(nodes.begin(), nodes.end(), l.node) - nodes.begin());
        l.argv = network->Wrap(index, l.argv);
        l.env["MASTER_ADDR"] = emulated[0].address;
        l.env["GLOO_SOCKET_IFNAME"] = emulated[index].device;
      }
      ctx.events.OnStatusLine(fmt::format("emulated network: {} nodes, {} {}", nodes.size(),
                                          plan.cluster.emulate->bandwidth, plan.cluster.emulate->delay));
    }
  }
  if (options.wrap) {
    if (Status s = options.wrap(*launches); !s.ok()) return FailedOutcome(CaseStatus::kFailed, s.message());
  }

  // ---- supervise, turning events into results -------------------------------------------
  BackendOutcome out;
  out.facts.push_back({fact::kRanks, std::to_string(layout.world())});
  std::map<int, std::string> errors;  // rank → its error event
  std::vector<Measurement> rank0;
  std::map<std::string, std::map<int, Measurement>> per_rank;  // base name -> rank -> its figure
  std::vector<std::pair<int, double>> group_evals;  // (rank, loss)
  std::vector<double> replica_seconds;
  std::string weights_note;
  int64_t within = 0, between = 0;
  int64_t generated = 0, requests = 0, steps_seen = 0;
  int bytes_reports = 0;
  std::set<int> reported;  // ranks that sent their "bytes" event, the last of a finished rank
  std::map<int, double> last_beat;  // rank → when its last heartbeat arrived (steady clock)
  std::map<int, RankStepTimes> step_times;
  std::vector<Measurement> rank_step_figures;
  SuperviseOptions so;
  so.keep_in_log = [](std::string_view line) {
    auto e = DecodeEvent(line);
    return !e || e->kind != WorkerEvent::Kind::kHeartbeat;
  };
  so.log_path = ctx.log_path;
  so.workdir = request.workdir;
  so.timeout_seconds = spec.timeout_seconds;
  so.kill_grace_seconds = options.kill_grace_seconds;
  SuperviseResult sr = Supervise(ctx.processes, *launches, so, ctx.stop, [&](int rank, std::string_view line) {
    auto e = DecodeEvent(line);
    if (!e) return;
    switch (e->kind) {
      case WorkerEvent::Kind::kStep:
        ++steps_seen;
        ctx.events.OnStep(e->step);
        ctx.events.OnStatusLine(fmt::format("step {} loss {:.2f}", e->step.step, e->step.loss.value_or(0)));
        break;
      case WorkerEvent::Kind::kRequest:
        ++requests;
        generated += e->request.generated_tokens;
        ctx.events.OnRequest(e->request);
        ctx.events.OnStatusLine(fmt::format("request {}: {} tokens in {:.2f} s", e->request.index + 1,
                                            e->request.generated_tokens, e->request.seconds));
        break;
      case WorkerEvent::Kind::kMeasurement:
        if (e->measurement.name == "group_eval_loss" && e->measurement.value)
          group_evals.emplace_back(rank, *e->measurement.value);
        else if (e->measurement.name == "replica_seconds" && e->measurement.value)
          replica_seconds.push_back(*e->measurement.value);
        else if (std::string base = PerRankBase(e->measurement.name, kPerRankFigures); !base.empty())
          per_rank[base][rank] = e->measurement;
        else if (std::string step_base = PerRankBase(e->measurement.name, kRankStepFigures);
                 !step_base.empty() && e->measurement.value) {
          RankStepTimes& t = step_times[rank];
          t.rank = rank;
          if (step_base == metric::kStepSecondsMean) t.step_mean = *e->measurement.value;
          else if (step_base == metric::kRankStepSecondsSpread) t.step_spread = *e->measurement.value;
          else t.work_mean = *e->measurement.value;
          rank_step_figures.push_back(e->measurement);
        }
        else if (rank == 0)
          rank0.push_back(e->measurement);
        break;
      case WorkerEvent::Kind::kStatus:
        if (StartsWith(e->text, "weights: ")) weights_note = e->text;
        else ctx.events.OnStatusLine(e->text);
        break;
      case WorkerEvent::Kind::kBytes:
        within += e->bytes_within;
        between += e->bytes_between;
        ++bytes_reports;
        reported.insert(rank);
        break;
      case WorkerEvent::Kind::kError:
        errors[rank] = e->text;
        break;
      case WorkerEvent::Kind::kHeartbeat:
        last_beat[rank] = SteadyNow();
        break;
      case WorkerEvent::Kind::kFact:  // rank 0 speaks for the case (every rank runs the same setup)
        if (rank == 0) out.facts.push_back({e->text, e->value});
        break;
    }
  });
  const double ended = SteadyNow();

  switch (sr.outcome) {
    case SuperviseResult::Outcome::kOk:
      break;
    case SuperviseResult::Outcome::kTimedOut:
    case SuperviseResult::Outcome::kStopped: {
      std::string reason = sr.reason;
      if (std::string silent = SilentRank(last_beat, *launches, ended); !silent.empty()) reason += "; " + silent;
      BackendOutcome stopped = FailedOutcome(
          sr.outcome == SuperviseResult::Outcome::kTimedOut ? CaseStatus::kTimeout : CaseStatus::kInterrupted, reason);
      AddRankExitCodes(sr, stopped);
      return stopped;
    }
    default: {
      std::string reason = sr.reason;
      // "rank 1 (node rig1) exited with code 1: <its error event>"
      if (errors.count(sr.failed_rank)) reason += ": " + errors[sr.failed_rank];
      // A peer that timed out in a collective names the rank it waited for
      // only by its silence: the rank whose heartbeat stopped first comes first.
      if (std::string silent = SilentRank(last_beat, *launches, ended); !silent.empty())
        reason = silent + "; then " + reason;
      BackendOutcome failed = FailedOutcome(CaseStatus::kFailed, reason);
      AddRankExitCodes(sr, failed);
      return failed;
    }
  }

  // Every rank that ends its work says so ("bytes"); exit 0 without it is not a result.
  for (const RankLaunch& l : *launches)
    if (!reported.count(l.rank))
      return FailedOutcome(CaseStatus::kFailed,
                  fmt::format("rank {} (node {}) exited with code 0 without reporting the end of its work (no \"bytes\" "
                              "event): is '{}' the protocol program with the `worker` subcommand?",
                              l.rank, l.node, program));

  // ---- measurements ------------------------------------------------------------------
  out.measurements = rank0;
  AddRankExitCodes(sr, out);
  const int world = layout.world();
  if (spec.workload == Workload::kInference) {
    if (!replica_seconds.empty()) {
      const double wall = *std::max_element(replica_seconds.begin(), replica_seconds.end());
      const std::string how = fmt::format(
          "{} requests over {} replica(s) of {} rank(s) in parallel (round-robin); time = the slowest replica's, from a common barrier",
          requests, layout.groups, layout.group_size);
      out.measurements.push_back(MeasuredFigure(metric::kTotalGenerationSeconds, wall, "s", how));
      out.measurements.push_back(MeasuredFigure(metric::kGeneratedTokens, static_cast<double>(generated), "tokens", how));
      if (generated > 0 && wall > 0) {
        out.measurements.push_back(MeasuredFigure(metric::kSecondsPerToken, wall / static_cast<double>(generated), "s/token", how));
        out.measurements.push_back(MeasuredFigure(metric::kTokensPerSecond, static_cast<double>(generated) / wall, "tokens/s",
                                           how + " (aggregate)"));
      }
    }
  } else {
    if (!group_evals.empty()) {
      auto best = std::min_element(group_evals.begin(), group_evals.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
      std::vector<std::string> all;
      for (const auto& [rank, loss] : group_evals) all.push_back(fmt::format("group {}: {:.4f}", rank / layout.group_size, loss));
      out.measurements.push_back(MeasuredFigure(metric::kBestGroupEvalLoss, best->second, "",
                                         fmt::format("lowest held-out loss of a single group before the merge ({})",
                                                     Join(all, ", "))));
    }
  }
  // Training only: inference replicas issue no tensor collectives (barriers
  // only, which are not counted), so a 0 there would claim more than is known.
  if (bytes_reports == world && spec.workload != Workload::kInference) {
    const int64_t steps = std::max<int64_t>(1, steps_seen);
    const std::string how = fmt::format(
        "sum over {} ranks of the bytes each rank sent in the collectives it issued, counted as ring-algorithm volume "
        "(all-gather (W-1)·shard, reduce-scatter (W-1)/W·n, all-reduce 2(W-1)/W·n; with Gloo before libtorch 2.6 "
        "the reduce-scatter is an all-reduce); within groups {} ({} per step), between groups {}",
        world, FormatBytes(within), FormatBytes(within / steps), FormatBytes(between));
    out.measurements.push_back(MeasuredFigure(metric::kBytesCommunicated, static_cast<double>(within + between), "bytes", how));
    out.measurements.push_back(MeasuredFigure("bytes_within_groups", static_cast<double>(within), "bytes",
                                       "FSDP collectives inside each group; see bytes_communicated"));
    out.measurements.push_back(MeasuredFigure("bytes_between_groups", static_cast<double>(between), "bytes",
                                       "merges across groups; see bytes_communicated"));
  }
  // Per-rank memory: every rank's own figure, and the largest as the case's.
  for (const char* base : kPerRankFigures) {
    auto it = per_rank.find(base);
    if (it == per_rank.end()) continue;
    const Measurement* largest = nullptr;
    int largest_rank = 0;
    for (const auto& [rank, m] : it->second) {
      out.measurements.push_back(m);
      if (m.value && (!largest || *m.value > *largest->value)) {
        largest = &m;
        largest_rank = rank;
      }
    }
    if (largest && static_cast<int>(it->second.size()) == world)
      out.measurements.push_back(MeasuredFigure(base, *largest->value, largest->unit,
                                                fmt::format("largest over the {} ranks of {}_rank<r> (rank {}: {})", world,
                                                            base, largest_rank, largest->method)));
  }
  // Per-rank step times, and the stragglers among them (stragglers.h).
  if (!step_times.empty()) {
    for (Measurement& m : rank_step_figures) out.measurements.push_back(std::move(m));
    std::vector<RankStepTimes> times;
    for (auto& [rank, t] : step_times) {
      t.node = layout.rank_nodes[static_cast<size_t>(rank)];
      times.push_back(t);
    }
    const std::vector<Straggler> stragglers = FindStragglers(times, layout.group_size);
    std::vector<std::string> named;
    for (const Straggler& st : stragglers) named.push_back(DescribeStraggler(st));
    out.measurements.push_back(MeasuredFigure(
        metric::kStragglers, static_cast<double>(stragglers.size()), "ranks",
        fmt::format("ranks whose own work per step (step time minus time in collectives) exceeds their group's median "
                    "by more than {:g}%, of {} ranks{}{}",
                    kStragglerFraction * 100, times.size(), stragglers.empty() ? ": none" : ": ", Join(named, "; "))));
  }
  if (!weights_note.empty())
    for (Measurement& m : out.measurements) m.method = m.method.empty() ? weights_note : m.method + "; " + weights_note;
  return out;
}

}  // namespace native
}  // namespace protocol
