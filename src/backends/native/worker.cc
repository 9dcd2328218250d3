#include "backends/native/worker.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "backends/native/case/case_device.h"
#include "backends/native/case/case_setup.h"
#include "backends/native/case/case_training.h"
#include "backends/native/case/training_sink.h"
#include "backends/native/inference_model.h"
#include "backends/native/inference_request.h"
#include "backends/native/launch/events.h"
#include "backends/native/launch/node_telemetry.h"
#include "backends/native/distributed/link_probe.h"
#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/model/model.h"
#include "backends/native/distributed/process_group.h"
#include "backends/native/distributed/sharding.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/launch/rendezvous.h"
#include "backends/native/launch/worker_case.h"
#include "runner/base/clock.h"
#include "runner/base/text.h"
#include "runner/exec/backend.h"  // MeasuredFigure

namespace protocol {
namespace native {
namespace {

// stdout carries whole lines from two threads (the work and the heartbeat).
std::mutex& OutputMutex() {
  static std::mutex m;
  return m;
}

void Emit(const WorkerEvent& e) {
  const std::string line = EncodeEvent(e);
  std::lock_guard<std::mutex> lock(OutputMutex());
  std::cout << line << std::endl;
}

template <typename... Args>
void Log(fmt::format_string<Args...> f, Args&&... args) {
  const std::string line = fmt::format(f, std::forward<Args>(args)...);
  std::lock_guard<std::mutex> lock(OutputMutex());
  std::cout << line << std::endl;
}

// This rank's sink (training_sink.h): events and log lines on its standard
// output, read by the runner's supervisor. Every event of the rank goes
// through it; rank 0's facts speak for the case.
class StdoutSink : public TrainingSink {
 public:
  void Event(const WorkerEvent& e) override { Emit(e); }
  void Line(const std::string& text) override { Log("{}", text); }
};
StdoutSink& Out() {
  static StdoutSink sink;
  return sink;
}

// A heartbeat event every kHeartbeatSeconds from a thread of its own, while the
// object lives: the supervisor sees which rank went silent first (a hung or
// stopped process) when a collective times out on its peers.
class Heartbeat {
 public:
  Heartbeat() : thread_([this] { Beat(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void Beat() {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kHeartbeat;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      Emit(e);
      wake_.wait_for(lock, std::chrono::duration<double>(kHeartbeatSeconds), [this] { return done_; });
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// How the FSDP of each group shards and communicates: facts of the case.
void EmitShardingFacts(const WorkerCase& wc, at::ScalarType compute_dtype, const ProcessGroups& g) {
  const int S = g.shard_comm->size();
  const std::string sharding =
      g.replicas > 1 ? fmt::format("hybrid: {} rank(s) per node x {} nodes (sharded within a node, replicated across)",
                                   S, g.replicas)
                     : fmt::format("full over {} rank(s){}", S,
                                   wc.training.sharding != Sharding::kFull
                                       ? fmt::format(" ({} on one node)", StrategyOf(wc.training.sharding).name)
                                       : "");
  const std::pair<const char*, std::string> facts[] = {
      {fact::kSharding, sharding},
      {fact::kPrefetch, wc.training.prefetch ? "on" : "off"},
      {fact::kReduceDtype, compat::DtypeName(ResolveReduceDtype(wc.training.reduce_dtype, compute_dtype))}};
  std::vector<std::pair<const char*, std::string>> all(std::begin(facts), std::end(facts));
  if (g.groups > 1) {  // share: what a merge sends and where its state lives (outer_step.h)
    const TrainingSettings& t = wc.training;
    const at::ScalarType merge = ResolveReduceDtype(t.merge_dtype, compute_dtype);
    const bool pseudo = SendsPseudoGradient(t.outer_lr, t.outer_momentum, merge);
    all.emplace_back(fact::kMerge,
                     fmt::format("one flat {} all-reduce of {}; outer state {}", compat::DtypeName(merge),
                                 pseudo ? "the pseudo-gradient" : "the parameters (plain averaging)",
                                 pseudo ? (t.outer_state == OuterState::kHost ? "on the host" : "on the device")
                                        : "none"));
  }
  for (const auto& [key, value] : all) Out().Fact(key, value);
}

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- inference -----------------------------------------------------------------

// The replica leader's model: on CUDA placed over the GPUs of its group's ranks
// on its node (local ranks l0, l0+1, ..., mod the node's GPUs; placement.h),
// in NF4 for a 4-bit model. Loads in the compute dtype, then quantizes.
Model LoadReplica(const WorkerCase& wc, CaseSetup& s, const ProcessGroups& g, const DistEnv& env) {
  std::vector<at::Device> devices = {s.device};
  if (s.device.is_cuda()) {
    const size_t first = static_cast<size_t>(g.group * g.group_size);
    int on_node = 0;
    for (int j = 0; j < g.group_size; ++j)
      if (wc.rank_nodes[first + static_cast<size_t>(j)] == wc.rank_nodes[first]) ++on_node;
    const int gpus = std::max(1, static_cast<int>(at::getNumGPUs()));
    for (int j = 1; j < on_node; ++j)
      devices.push_back(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>((env.local_rank + j) % gpus)));
  }
  auto loaded = LoadInferenceModel(wc, s, devices);  // notes the weights and the 4-bit serving
  if (!loaded.ok()) throw Failure(loaded.status().message());
  const LayerPlacement& placement = loaded->placement;
  if (placement.devices > 1)
    Log("worker: replica {}: model placed over {} GPUs from {} (balanced: decoder layers {} per device)", g.group,
        placement.devices, devices.front().str(), DeviceLayersText(placement));
  return std::move(loaded->model);
}

// Replica g (its leader; the other ranks of the group wait) serves requests
// g, g+G, g+2G, ... of the schedule.
int RunInference(const WorkerCase& wc, CaseSetup& s, ProcessGroups& g, const DistEnv& env) {
  const bool leader = g.group_rank == 0;
  std::optional<Model> model;
  std::vector<int> prompt;
  DecodeBuckets buckets;
  const RequestDecoding decoding = RequestDecodingOf(wc.inference, &buckets);
  if (leader) {
    model = LoadReplica(wc, s, g, env);
    prompt = PromptTokens(*s.tokenizer, wc.inference.prompt);
    // Before the barrier that starts the clock: the check is not timed.
    if (decoding.step != DecodeStep::kHostPosition) {
      auto checked = CheckDecodeStep(*model, prompt, decoding.step);
      if (!checked.ok()) throw Failure(checked.status().message());
      Log("worker: replica {}: decode check (decode_step {}): {}", g.group, NameOf(wc.inference.decode_step),
          checked->text);
      // Rank 0 (replica 0's leader) speaks for the case's facts; another replica whose tokens part says so
      // on every figure of the case.
      if (g.rank == 0) Out().Fact(fact::kDecodeCheck, checked->text);
      else if (!checked->equal) Out().Note(fmt::format("replica {}'s decode check: {}", g.group, checked->text));
    }
  }
  g.world_comm->Barrier();
  const double start = SteadySeconds();
  int64_t generated = 0;
  int served = 0;
  double busy = 0;
  const auto& schedule = wc.inference.max_new_tokens;
  if (leader) {
    for (size_t i = static_cast<size_t>(g.group); i < schedule.size(); i += static_cast<size_t>(g.groups)) {
      auto request = ServeRequest(*model, *s.tokenizer, prompt, static_cast<int>(i), schedule[i], decoding, s.device,
                                  SteadySeconds, nullptr);
      if (!request.ok()) throw Failure(request.status().message());
      WorkerEvent e;
      e.kind = WorkerEvent::Kind::kRequest;
      e.request = request->sample;
      Emit(e);
      generated += e.request.generated_tokens;
      busy += e.request.seconds;
      ++served;
    }
    const double elapsed = SteadySeconds() - start;
    Out().Figure(MeasuredFigure(
        "replica_seconds", elapsed, "s",
        fmt::format("replica {}: {} request(s), {} tokens, {:.3f} s generating", g.group, served, generated, busy)));
    if (!s.method_note.empty() && g.rank == 0) Log("worker: {}", s.method_note);
  }
  g.world_comm->Barrier();
  return 0;
}

// The link between the case's nodes, measured before anything of the case
// crosses it (link_probe.h) on the world group, which spans every node; rank
// 0 stores its bus bandwidth and latency. Nothing on one node; with
// training.link_probe false, a fact that says it was not measured.
// `cuda_groups`: the groups are NCCL's, so the probe's buffers live on the device.
void ProbeCaseLink(const WorkerCase& wc, const CaseSetup& s, ProcessGroups& g, bool cuda_groups) {
  const int nodes = static_cast<int>(std::set<std::string>(wc.rank_nodes.begin(), wc.rank_nodes.end()).size());
  if (nodes < 2) return;
  if (!wc.training.link_probe) {
    if (g.rank == 0) Out().Fact(fact::kLinkProbe, "off (training.link_probe: false)");
    return;
  }
  const int64_t largest = wc.workload == Workload::kInference
                              ? 0  // inference sends no tensors between ranks
                              : LargestCollectiveBytes(s.config, static_cast<int64_t>(c10::elementSize(s.dtype)),
                                                       wc.groups, wc.group_size);
  LinkProbeOptions options;
  options.sizes = LinkProbeSizes(largest);
  options.device = cuda_groups ? s.device : at::Device(at::kCPU);
  const LinkProbeResult probe = ProbeLink(*g.world_comm, options);
  if (g.rank != 0) return;
  Out().Figure(MeasuredFigure(metric::kLinkBusBandwidth, probe.bandwidth().busbw, "bytes/s", probe.BandwidthMethod(nodes)));
  Out().Figure(MeasuredFigure(metric::kLinkLatency, probe.latency_seconds(), "s", probe.LatencyMethod(nodes)));
  Log("worker: link between {} nodes: {:.3g} GB/s bus bandwidth at {}, latency {:.0f} us ({:.2f} s)", nodes,
      probe.bandwidth().busbw / 1e9, ProbeSizeText(probe.sizes.back().bytes), probe.latency_seconds() * 1e6,
      probe.seconds);
}

}  // namespace

int RunWorker(const std::string& case_path) {
  auto wc = ReadWorkerCase(case_path);
  if (!wc.ok()) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kError;
    e.text = wc.status().message();
    Emit(e);
    return 2;
  }
  auto env = DistEnvFromEnvironment();
  if (!env.ok() || env->world != wc->world()) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kError;
    e.text = !env.ok() ? env.status().message()
                       : fmt::format("WORLD_SIZE {} disagrees with the case file's {} ranks", env->world, wc->world());
    Emit(e);
    return 2;
  }
  try {
    auto resolved = ResolveCaseSetup(*wc, env->local_rank);
    if (!resolved.ok()) throw Failure(resolved.status().message());
    CaseSetup& s = *resolved;
    // OMP_NUM_THREADS is set by the launch (ThreadsPerRank); without it, one thread.
    if (s.device.is_cpu()) {
      const char* omp = std::getenv("OMP_NUM_THREADS");
      at::set_num_threads(omp && std::atoi(omp) > 0 ? std::atoi(omp) : 1);
    }
    if (env->rank == 0) {
      Log("worker: case {} ({} {}), {} rank(s) = {} group(s) x {}, device {}, libtorch {}", wc->case_id, NameOf(wc->role),
          WorkloadName(wc->workload), wc->world(), wc->groups, wc->group_size, s.device.str(), compat::TorchVersion());
      for (const auto& [key, value] : CaseFacts(at::get_num_threads(),
                                                s.device.is_cuda() ? "cuda (one GPU per rank)" : s.device.str(),
                                                s.device, s.dtype, wc->workload, wc->inference.decode_step))
        Out().Fact(key, value);
    }
    // Inference issues barriers only: Gloo groups, which also allow replicas that share a GPU
    // (NCCL refuses two ranks of one group on one device).
    GroupsRequest request;
    request.groups = wc->groups;
    request.group_size = wc->group_size;
    request.rank_nodes = wc->rank_nodes;
    request.sharding = wc->workload != Workload::kInference ? wc->training.sharding : Sharding::kFull;
    request.cuda = s.device.is_cuda() && wc->workload != Workload::kInference;
    request.timeout_seconds = wc->training.collective_timeout;
    if (std::string problem = ShardingLayoutProblem(request.sharding, request.groups, request.group_size,
                                                    request.rank_nodes);
        !problem.empty())
      throw Failure(fmt::format("sharding: {}: {}", StrategyOf(request.sharding).name, problem));
    Heartbeat heartbeat;
    // A node's first rank reads its node's hardware for the runner (node_telemetry.h).
    const char* node = std::getenv("PROTOCOL_NODE");
    NodeTelemetry node_telemetry(node ? node : "", [](const TelemetrySample& sample) {
      WorkerEvent e;
      e.kind = WorkerEvent::Kind::kSample;
      e.sample = sample;
      Emit(e);
    });
    PortExchange exchange;  // MASTER_PORT=0 (rendezvous.h): announced on stdout, read from stdin
    exchange.announce = [](int port) {
      std::lock_guard<std::mutex> lock(OutputMutex());
      std::cout << RendezvousLine(port) << std::endl;
    };
    exchange.await = [](double timeout_seconds) { return ReadAnnouncedPort(STDIN_FILENO, timeout_seconds); };
    ProcessGroups g = ConnectGroups(*env, request, exchange);
    if (env->rank == 0 && wc->workload != Workload::kInference) EmitShardingFacts(*wc, s.dtype, g);
    ProbeCaseLink(*wc, s, g, request.cuda);
    int code = 0;
    int64_t steps_between_nodes = 0;
    if (wc->workload == Workload::kInference) {
      code = RunInference(*wc, s, g, *env);
    } else {
      // No stop between steps: the supervisor stops and times out every rank at once.
      CaseTraining training(*wc, s, g, Out(), SystemClock(), /*stop=*/nullptr);
      training.Run();
      steps_between_nodes = training.steps_between_nodes();
    }
    WorkerEvent bytes;
    bytes.kind = WorkerEvent::Kind::kBytes;
    bytes.bytes_within = g.bytes_within();
    bytes.bytes_between = g.bytes_between();
    bytes.bytes_between_nodes = g.bytes_between_nodes();
    bytes.bytes_between_nodes_steps = steps_between_nodes;
    Emit(bytes);
    // Appended to the method of every figure of the case (training: CaseTraining sends it).
    if (wc->workload == Workload::kInference && !s.method_note.empty() && env->rank == 0) Out().Note(s.method_note);
    return code;
  } catch (const std::exception& ex) {  // Failure, c10::Error (a lost peer, a collective timeout)
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kError;
    std::string what = ex.what();
    e.text = what.substr(0, what.find('\n'));
    Emit(e);
    return 1;
  }
}

}  // namespace native
}  // namespace protocol
