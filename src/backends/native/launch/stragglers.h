#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_STRAGGLERS_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_STRAGGLERS_H_

// Stragglers among the ranks of a distributed training case.
//
// In synchronous training every rank's step takes as long as the slowest
// rank's: the others wait for it inside the collectives. So a rank is judged
// by its own work per step, its step time minus its time in collectives
// (compat::CommExposedSeconds): a straggler works longest and waits least.
//
// A rank is a straggler when its mean work per step exceeds the median of its
// group's ranks (itself included; FSDP: one group of every rank; share: each
// group of group_size ranks) by more than kStragglerFraction.

#include <string>
#include <vector>

namespace protocol {
namespace native {

inline constexpr double kStragglerFraction = 0.25;

struct RankStepTimes {
  int rank = 0;
  std::string node;
  double step_mean = 0;    // s, wall time per timed step
  double step_spread = 0;  // s, standard deviation of those
  double work_mean = 0;    // s, per step, outside collectives
};

struct Straggler {
  int rank = 0;
  std::string node;
  double work_mean = 0;
  double group_median = 0;
};

// Ranks whose work_mean > (1 + fraction) · median of their group's work_mean,
// in rank order. Groups are ranks g·group_size .. (g+1)·group_size−1; a group
// with one rank has no straggler.
std::vector<Straggler> FindStragglers(const std::vector<RankStepTimes>& ranks, int group_size,
                                      double fraction = kStragglerFraction);

// "rank 1 (node n0): 0.412 s of own work per step, 2.10× its group's median 0.196 s"
std::string DescribeStraggler(const Straggler& s);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_STRAGGLERS_H_
