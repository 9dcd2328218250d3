#include "backends/native/distributed/link_probe.h"

#include <algorithm>

#include "runner/base/clock.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

// The mean seconds of one all-reduce of `buffer` over `group`: a barrier, one
// warm-up, then `iterations` back to back, the device synchronised before
// each read of the clock. *after_warm_up: the clock just after the warm-up.
double TimeAllReduce(compat::CommGroup& group, at::Tensor& buffer, int iterations, const at::Device& device,
                     double* after_warm_up) {
  compat::Barrier(group);
  compat::AllReduceSum(group, buffer);
  compat::DeviceSynchronize(device);
  const double t0 = SteadySeconds();
  *after_warm_up = t0;
  for (int i = 0; i < iterations; ++i) compat::AllReduceSum(group, buffer);
  compat::DeviceSynchronize(device);
  return (SteadySeconds() - t0) / static_cast<double>(iterations);
}

// Rank 0's decision, the same on every rank: whether `go` (rank 0's) holds.
bool Agree(compat::CommGroup& group, bool go, const at::Device& device) {
  at::Tensor flag = at::full({1}, go ? 1.0f : 0.0f, at::TensorOptions().dtype(at::kFloat).device(device));
  compat::Broadcast(group, flag, 0);
  return compat::ReadToHost(flag)[0] > 0.5;
}

}  // namespace

AllReduceBandwidth AllReduceBusBandwidth(int64_t bytes, double seconds, int ranks) {
  AllReduceBandwidth b;
  b.algbw = static_cast<double>(bytes) / seconds;
  const double n = static_cast<double>(ranks);
  b.busbw = b.algbw * 2.0 * (n - 1.0) / n;
  return b;
}

std::vector<int64_t> LinkProbeSizes(int64_t largest_collective_bytes) {
  const int64_t top = std::clamp(largest_collective_bytes, kLinkProbeFloorBytes, kLinkProbeCapBytes);
  std::vector<int64_t> sizes = {kLinkProbeSmallestBytes};
  for (int64_t s = kLinkProbeSecondBytes; s <= top; s *= 4) sizes.push_back(s);
  return sizes;
}

int64_t LargestCollectiveBytes(const ModelConfig& config, int64_t element_bytes, int groups, int group_size) {
  const int64_t all = config.ParameterCount();
  const int64_t embedding = config.EmbeddingParameterCount();
  const int64_t head = embedding + config.dim;  // the untied lm_head and the final norm
  const int64_t layer = config.n_layers > 0 ? (all - embedding - head) / config.n_layers : 0;
  int64_t largest = std::max({embedding, head, layer});
  if (groups > 1) {
    const int64_t k = std::max(1, group_size);
    largest = std::max(largest, (all + k - 1) / k);
  }
  return largest * element_bytes;
}

AllReduceBandwidth LinkProbeResult::bandwidth() const {
  const LinkProbeSize& top = sizes.back();
  return AllReduceBusBandwidth(top.bytes, top.seconds, ranks);
}

std::string LinkProbeResult::BandwidthMethod(int nodes) const {
  const std::string range = sizes.size() == 1 ? ProbeSizeText(sizes.front().bytes)
                                              : ProbeSizeText(sizes.front().bytes) + ".." +
                                                    ProbeSizeText(sizes.back().bytes);
  std::string method = fmt::format(
      "all-reduce bus bandwidth (nccl-tests: algbw x 2(n-1)/n), n={} ranks on {} nodes over {}, size{} {}, {} timed "
      "iteration{} each after 1 warm-up, at {}",
      ranks, nodes, backend, sizes.size() == 1 ? "" : "s", range, timed_iterations, timed_iterations == 1 ? "" : "s",
      ProbeSizeText(sizes.back().bytes));
  if (stopped_before > 0)
    method += fmt::format(" (its {:g} s budget ended it before {})", budget_seconds, ProbeSizeText(stopped_before));
  return method + fmt::format("; {:.2f} s before the first step", seconds);
}

std::string LinkProbeResult::LatencyMethod(int nodes) const {
  return fmt::format("time of one {} all-reduce, mean of {} timed iteration{} after 1 warm-up, n={} ranks on {} nodes "
                     "over {}",
                     ProbeSizeText(sizes.front().bytes), timed_iterations, timed_iterations == 1 ? "" : "s", ranks,
                     nodes, backend);
}

LinkProbeResult ProbeLink(Communicator& comm, const LinkProbeOptions& options) {
  compat::CommGroup& group = comm.group();  // not comm's collectives: they would count the bytes
  const double start = SteadySeconds();
  LinkProbeResult r;
  r.ranks = comm.size();
  r.timed_iterations = options.timed_iterations;
  r.budget_seconds = options.budget_seconds;
  r.backend = compat::CommBackendName(group);
  const at::TensorOptions floats = at::TensorOptions().dtype(at::kFloat).device(options.device);
  double budget_start = 0;
  for (size_t i = 0; i < options.sizes.size(); ++i) {
    const int64_t bytes = options.sizes[i];
    at::Tensor buffer = at::zeros({bytes / 4}, floats);
    double after_warm_up = 0;
    const double seconds = TimeAllReduce(group, buffer, options.timed_iterations, options.device, &after_warm_up);
    if (i == 0) budget_start = after_warm_up;
    r.sizes.push_back({bytes, seconds});
    if (i + 1 == options.sizes.size()) break;
    // The next size's warm-up and timed iterations, at this size's time scaled by size.
    const double next = static_cast<double>(options.timed_iterations + 1) * seconds *
                        static_cast<double>(options.sizes[i + 1]) / static_cast<double>(bytes);
    const bool go = SteadySeconds() - budget_start + next <= options.budget_seconds;
    if (!Agree(group, go, options.device)) {
      r.stopped_before = options.sizes[i + 1];
      break;
    }
  }
  r.seconds = SteadySeconds() - start;
  return r;
}

std::string ProbeSizeText(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace native
}  // namespace protocol
