#ifndef PROTOCOL_RUNNER_BASE_STOP_FLAG_H_
#define PROTOCOL_RUNNER_BASE_STOP_FLAG_H_

// A request to stop, raised by Ctrl-C / SIGTERM (signals.h) or by a test, and
// polled by whoever runs long work. Request() is async-signal-safe.

#include <atomic>

namespace protocol {

class StopFlag {
 public:
  bool requested() const { return requested_.load(std::memory_order_relaxed); }
  void Request() { requested_.store(true, std::memory_order_relaxed); }
  void Reset() { requested_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> requested_{false};
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_STOP_FLAG_H_
