#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_EVENTS_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_EVENTS_H_

// The worker protocol's events: each is one JSON object on one stdout line of a
// rank, with an "event" field. Every other output line is plain log text.
//
//   {"event":"step","step":3,"seconds":0.12,"loss":4.1,"tokens":512}
//   {"event":"request","index":0,"max_new_tokens":8,"prompt_tokens":5,"generated_tokens":8,"seconds":0.4,"answer":"...","token_ids":[...]}
//   {"event":"measurement","name":"eval_loss","value":3.9,"unit":"","method":"..."}
//   {"event":"measurement","name":"peak_host_rss_bytes","rank":1,...}
//                                                     a figure of the sending rank itself: the
//                                                     runner stores it as <name>_rank<r>
//   {"event":"note","text":"weights: ..."}            a method note: appended to the method of
//                                                     every figure of the case
//   {"event":"status","text":"step 3/10 loss 4.10"}
//   {"event":"bytes","within":1024,"between":0}      this rank's bytes sent (torch_compat.h)
//   {"event":"error","text":"..."}                    why the rank is about to exit non-zero
//   {"event":"heartbeat"}                             every kHeartbeatSeconds while the rank lives
//   {"event":"fact","key":"device","value":"cpu"}     what the rank runs on (records.h, namespace fact)
//   {"event":"eval","step":4,"tokens":2048,"training_seconds":1.5,"loss":5.2}
//                                                     a point of the held-out loss curve (rank 0;
//                                                     records.h EvalPoint, eval_curve.h)
//   {"event":"sample","seconds":3.0,"node":"rig1","device":"eth0","quantity":"net_sent_bytes","value":1048576}
//                                                     a reading of the rank's node (the first rank
//                                                     of each node of a multi-node case samples
//                                                     it, node_telemetry.h) at `seconds` since its
//                                                     sampler began; the runner places it on its
//                                                     own clock (telemetry.h AddArrived)
//   {"event":"rendezvous","port":41234}               rank 0's store listens on this port; the
//                                                     runner relays the line to every other
//                                                     rank's standard input (rendezvous.h)

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runner/store/records.h"

namespace protocol {
namespace native {

struct WorkerEvent {
  enum class Kind { kStep, kRequest, kMeasurement, kNote, kStatus, kBytes, kError, kHeartbeat, kFact, kEvalPoint, kRendezvous, kSample };
  Kind kind = Kind::kStatus;
  StepSample step;
  RequestSample request;
  EvalPoint eval_point;        // kEvalPoint
  TelemetrySample sample;      // kSample
  Measurement measurement;
  std::optional<int> rank;     // kMeasurement: set for a figure of this rank itself
  std::string text;            // kNote, kStatus, kError; kFact: the key
  std::string value;           // kFact
  int64_t bytes_within = 0;    // kBytes: within the rank's group (FSDP collectives)
  int64_t bytes_between = 0;   // kBytes: between groups (merges)
  int64_t bytes_between_nodes = 0;  // kBytes: of all of them, those sent to a rank on another node
  int64_t bytes_between_nodes_steps = 0;  // kBytes: of those, the ones sent during the training steps
  int port = 0;                // kRendezvous
};

// How often a rank sends a heartbeat; the supervisor calls a rank silent after
// kSilentHeartbeats of them are missing.
inline constexpr double kHeartbeatSeconds = 1.0;
inline constexpr int kSilentHeartbeats = 3;

std::string EncodeEvent(const WorkerEvent& event);  // one line, no newline
// nullopt for a line that is not an event (plain log text, or malformed).
std::optional<WorkerEvent> DecodeEvent(std::string_view line);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_EVENTS_H_
