#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_NODE_TELEMETRY_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_NODE_TELEMETRY_H_

// A multi-node case's other nodes, sampled as the runner samples its own host
// (telemetry.h): the first rank of each node reads its node's interfaces
// (its own network namespace's, where the nodes are emulated) and, on a node
// that is not the runner's host, its GPUs; every reading goes to the runner
// as a sample event (events.h), which stamps its time on arrival.
//
// The backend asks for it in the rank's environment:
//   PROTOCOL_TELEMETRY_INTERVAL  seconds between readings (plan telemetry.interval); unset or 0: off
//   PROTOCOL_TELEMETRY_GPUS      "1": read the GPUs too (the node is another host)

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/store/records.h"

namespace protocol {
namespace native {

inline constexpr const char* kTelemetryIntervalVariable = "PROTOCOL_TELEMETRY_INTERVAL";
inline constexpr const char* kTelemetryGpusVariable = "PROTOCOL_TELEMETRY_GPUS";

// The variables for a rank: none unless it is its node's first rank in a
// case of more than one node with sampling on.
std::map<std::string, std::string> NodeTelemetryEnv(double interval_seconds, int nodes, int local_rank,
                                                    bool gpus);

class NodeTelemetry {
 public:
  // Samples node `node` while the object lives when the environment asks
  // for it (else does nothing), handing each reading, named with the node,
  // to `send`.
  NodeTelemetry(const std::string& node, std::function<void(const TelemetrySample&)> send);
  ~NodeTelemetry();
  NodeTelemetry(const NodeTelemetry&) = delete;
  NodeTelemetry& operator=(const NodeTelemetry&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_NODE_TELEMETRY_H_
