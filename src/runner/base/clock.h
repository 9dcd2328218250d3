#ifndef PROTOCOL_RUNNER_BASE_CLOCK_H_
#define PROTOCOL_RUNNER_BASE_CLOCK_H_

// Time, behind an interface so tests can use a fake clock.

#include <string>

namespace protocol {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic seconds since an arbitrary origin (steady_clock): use for durations.
  virtual double NowSeconds() = 0;
  // Wall-clock time as ISO 8601 UTC, e.g. "2026-11-21T08:23:38Z": use for records.
  virtual std::string NowIso8601() = 0;
};

// The real clocks (steady_clock and system_clock).
Clock& SystemClock();

// SystemClock().NowSeconds() without the interface: monotonic seconds since an
// arbitrary origin, for code that times itself with no Clock to take (a
// worker process, a link probe, a child's deadline).
double SteadySeconds();

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_CLOCK_H_
