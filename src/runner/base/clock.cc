#include "runner/base/clock.h"

#include <chrono>
#include <ctime>

namespace protocol {
namespace {

class RealClock : public Clock {
 public:
  double NowSeconds() override { return SteadySeconds(); }
  std::string NowIso8601() override {
    std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
  }
};

}  // namespace

double SteadySeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

}  // namespace protocol
