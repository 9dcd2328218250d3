#ifndef PROTOCOL_TESTS_FAKE_CLOCK_H_
#define PROTOCOL_TESTS_FAKE_CLOCK_H_

// A Clock that moves only when told: Advance(seconds). NowIso8601 is derived
// from the same time (origin 2026-01-01T00:00:00Z), so records are exact too.

#include <cstdio>
#include <string>

#include "runner/base/clock.h"

namespace protocol {

class FakeClock : public Clock {
 public:
  double NowSeconds() override { return now_; }
  std::string NowIso8601() override {
    long total = static_cast<long>(now_);
    long days = total / 86400, rest = total % 86400;
    char buf[40];
    std::snprintf(buf, sizeof buf, "2026-01-%02ldT%02ld:%02ld:%02ldZ", 1 + days % 31, rest / 3600,
                  rest / 60 % 60, rest % 60);
    return buf;
  }
  void Advance(double seconds) { now_ += seconds; }
  void Set(double seconds) { now_ = seconds; }

 private:
  double now_ = 0;
};

}  // namespace protocol

#endif  // PROTOCOL_TESTS_FAKE_CLOCK_H_
