#ifndef PROTOCOL_RUNNER_STORE_TELEMETRY_FIGURES_H_
#define PROTOCOL_RUNNER_STORE_TELEMETRY_FIGURES_H_

// The figures of a case's hardware samples (telemetry.h), each with its
// method (records.h, namespace metric; docs/runner.md "Sampling"):
//
//   GPUs used      the GPUs busy (utilization > 0) in at least one sample;
//                  without one, no GPU figure (the case ran elsewhere)
//   utilization    mean and largest of their utilization samples, in %
//   memory         the largest memory.used of one of them (the driver's view)
//   energy E       Σ over them of ∫ power dt, trapezoid rule over each GPU's
//                  samples: Σ_i (P_i + P_{i+1}) / 2 · (t_{i+1} − t_i), in J
//   per token      E / tokens (training tokens, or generated tokens)
//   per step       E / steps
//   link           (cases on more than one node) from the nodes' own samples
//                  only (node_telemetry.h; the runner's host's interfaces
//                  carry other traffic); per node, Σ over its interfaces (loopback left out) of the
//                  bytes sent and received while the case ran; the mean
//                  throughput is (sent + received) / the node's sampled span,
//                  the peak the largest such rate over one interval between
//                  readings (intervals under half the median one skipped);
//                  over nodes, bytes are summed and rates are the busiest node's

#include <cstdint>
#include <utility>
#include <vector>

#include "runner/store/records.h"

namespace protocol {

// The work a case did, for the per-token and per-step figures.
struct TelemetryWork {
  int64_t tokens = 0;  // training tokens (Σ of the steps') or generated tokens; 0: unknown
  int64_t steps = 0;   // training steps; 0: none
  int nodes = 1;       // the case's nodes: link figures only for more than one
};

std::vector<Measurement> TelemetryFigures(const std::vector<TelemetrySample>& samples, const TelemetryWork& work);

// The series the report draws (seconds since the case began, value):
//   GPU utilization   the mean over the GPUs used of the readings at each
//                     time, in %; empty without a busy GPU
//   link throughput   the busiest node's bytes sent and received per second
//                     over each interval between readings, at the interval's
//                     end (intervals as for the peak above); empty without
//                     two readings of an interface
std::vector<std::pair<double, double>> GpuUtilizationSeries(const std::vector<TelemetrySample>& samples);
std::vector<std::pair<double, double>> LinkThroughputSeries(const std::vector<TelemetrySample>& samples);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_TELEMETRY_FIGURES_H_
