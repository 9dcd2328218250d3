#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_TRAINING_SINK_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_TRAINING_SINK_H_

// Where a training case (case_training.h) sends what it has to say: its
// events (the worker protocol's, launch/events.h: steps, held-out points,
// figures of the case and of the rank, facts, notes, status lines) and the
// lines of its log. A rank process writes them on its standard output for
// the runner (worker.cc); the one-process backend hands the same events to
// the runner's own collector in-process (fsdp_backend.cc), so both paths turn
// one set of events into one set of figures (rank_events.h).

#include <optional>
#include <string>
#include <utility>

#include "backends/native/launch/events.h"

namespace protocol {
namespace native {

class TrainingSink {
 public:
  virtual ~TrainingSink() = default;
  virtual void Event(const WorkerEvent& event) = 0;
  virtual void Line(const std::string& text) = 0;

  // A figure of the case (`rank` unset) or of that rank itself (stored as
  // <name>_rank<r>).
  void Figure(Measurement m, std::optional<int> rank = std::nullopt) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kMeasurement;
    e.measurement = std::move(m);
    e.rank = rank;
    Event(e);
  }
  void Fact(const std::string& key, const std::string& value) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kFact;
    e.text = key;
    e.value = value;
    Event(e);
  }
  // Appended to the method of every figure of the case.
  void Note(const std::string& text) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kNote;
    e.text = text;
    Event(e);
  }
  void Status(const std::string& text) {
    WorkerEvent e;
    e.kind = WorkerEvent::Kind::kStatus;
    e.text = text;
    Event(e);
  }
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_TRAINING_SINK_H_
