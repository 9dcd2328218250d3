#ifndef PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_LINK_PROBE_H_
#define PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_LINK_PROBE_H_

// The link between a case's nodes, measured by its ranks before the first
// step (training.link_probe; docs/distributed.md, "The link, measured before
// each case"): a short all-reduce benchmark on the case's own process group,
// the way nccl-tests' all_reduce_perf measures one, so that a case labelled
// `network: 10G` records what its link actually carried.
//
// For each size S (bytes of the buffer every rank all-reduces): a barrier,
// one warm-up all-reduce, then `timed_iterations` all-reduces back to back,
// the device synchronised before the clock is read; t = their mean time.
// Bandwidth as nccl-tests defines it (doc/PERFORMANCE.md, "Bus bandwidth",
// AllReduce), over n ranks:
//   algbw = S / t
//   busbw = algbw · 2(n−1)/n
// busbw is comparable to the bandwidth of the slowest link the ring crosses,
// whatever n is (a ring all-reduce sends 2(n−1)/n·S bytes over each link).
// The probe reports busbw at the largest size measured and, as the latency,
// t of the smallest size.
//
// Sizes: 4 KiB, 256 KiB, then ×4 up to the largest such size not above the
// case's largest collective, but at least 16 MiB (below that a TCP
// all-reduce mostly measures latency) and at most 64 MiB. The smallest size
// is always measured; a further one only while rank 0's time since the first
// warm-up (NCCL's set-up, which the case would pay at its first collective
// anyway, is left out) plus that size's predicted cost (its warm-up and timed
// iterations at the previous size's time, scaled by size) stays within
// `budget_seconds`: rank 0 decides and broadcasts, so every rank runs the same
// collectives.
//
// The collectives go straight to the communicator's group (compat), past the
// Communicator's byte counters: the probe's bytes are not the case's
// (bytes_communicated, bytes_between_nodes). It runs before the first step,
// so no step time holds it either.

#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/distributed/communicator.h"
#include "backends/native/model/model_config.h"

namespace protocol {
namespace native {

// nccl-tests' bandwidths of one all-reduce (doc/PERFORMANCE.md), bytes/s.
struct AllReduceBandwidth {
  double algbw = 0;  // S / t
  double busbw = 0;  // algbw · 2(n−1)/n
};
// REQUIRES: bytes > 0, seconds > 0, ranks >= 1 (1 rank: busbw 0, nothing crosses).
AllReduceBandwidth AllReduceBusBandwidth(int64_t bytes, double seconds, int ranks);

inline constexpr int64_t kLinkProbeSmallestBytes = int64_t{4} << 10;   // 4 KiB
inline constexpr int64_t kLinkProbeSecondBytes = int64_t{256} << 10;   // 256 KiB
inline constexpr int64_t kLinkProbeFloorBytes = int64_t{16} << 20;     // 16 MiB
inline constexpr int64_t kLinkProbeCapBytes = int64_t{64} << 20;       // 64 MiB
inline constexpr double kLinkProbeBudgetSeconds = 10;

// The sizes the probe measures for a case whose largest collective is
// `largest_collective_bytes` (0: none known, e.g. inference): 4 KiB, 256 KiB,
// 1 MiB, 4 MiB, 16 MiB and, for a collective of 64 MiB or more, 64 MiB.
std::vector<int64_t> LinkProbeSizes(int64_t largest_collective_bytes);

// About the largest collective a training case issues, in bytes: the largest
// FSDP unit gathered whole (the embedding, the head with its norm, or one
// decoder layer) at `element_bytes` each; with several groups (share), also a
// merge's flat all-reduce of one rank's shard of the parameters
// (N / group_size elements).
int64_t LargestCollectiveBytes(const ModelConfig& config, int64_t element_bytes, int groups, int group_size);

struct LinkProbeOptions {
  std::vector<int64_t> sizes;  // ascending (LinkProbeSizes); REQUIRES: not empty
  int timed_iterations = 5;    // REQUIRES: >= 1
  double budget_seconds = kLinkProbeBudgetSeconds;
  at::Device device = at::kCPU;  // where the buffers live: the group's (NCCL: this rank's GPU)
};

// One size measured: the mean seconds of one all-reduce of `bytes`.
struct LinkProbeSize {
  int64_t bytes = 0;
  double seconds = 0;
};

struct LinkProbeResult {
  int ranks = 0;                     // n: the group's ranks
  int timed_iterations = 0;
  std::vector<LinkProbeSize> sizes;  // those measured, ascending; never empty
  int64_t stopped_before = 0;        // the first size the budget left out; 0 when every size was measured
  double budget_seconds = 0;         // options.budget_seconds
  double seconds = 0;                // this rank's wall time of the whole probe, set-up included
  std::string backend;               // "gloo" | "nccl"

  // At the largest size measured.
  AllReduceBandwidth bandwidth() const;
  // t of the smallest size.
  double latency_seconds() const { return sizes.front().seconds; }
  // What was done, for the figures' method texts, e.g. "all-reduce bus
  // bandwidth (nccl-tests: algbw x 2(n-1)/n), n=2 ranks on 2 nodes over
  // gloo, sizes 4 KiB..16 MiB, 5 timed iterations each after 1 warm-up, at
  // 16 MiB; 0.41 s before the first step".
  std::string BandwidthMethod(int nodes) const;
  // "time of one 4 KiB all-reduce, mean of 5 timed iterations after 1
  // warm-up, n=2 ranks on 2 nodes over gloo".
  std::string LatencyMethod(int nodes) const;
};

// Runs the probe on `comm`'s group (see above). Collective: every rank of the
// group calls it with the same sizes and iterations. Counts nothing in
// `comm`'s bytes. Throws c10::Error when a collective fails (a lost peer, the
// group's timeout).
LinkProbeResult ProbeLink(Communicator& comm, const LinkProbeOptions& options);

// "4 KiB", "256 KiB", "16 MiB": a probe size in binary units.
std::string ProbeSizeText(int64_t bytes);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_DISTRIBUTED_LINK_PROBE_H_
