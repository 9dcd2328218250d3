#include "runner/exec/nvidia_smi.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "runner/base/text.h"

namespace protocol {
namespace {

// The queried fields in order, and the quantity each becomes (index first).
struct Field {
  const char* query;
  const char* quantity;
  double scale;  // to the stored unit
};
const Field kFields[] = {
    {"utilization.gpu", quantity::kGpuUtilization, 1.0},
    {"memory.used", quantity::kGpuMemoryUsed, 1024.0 * 1024.0},  // MiB → bytes
    {"power.draw", quantity::kGpuPower, 1.0},
    {"clocks.sm", quantity::kGpuSmClock, 1.0},
    {"temperature.gpu", quantity::kGpuTemperature, 1.0},
};

std::optional<double> Number(std::string_view text) {
  std::string s(Trim(std::string(text)));
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::vector<std::string> NvidiaSmiArgv(double interval_seconds) {
  std::string query = "--query-gpu=index";
  for (const Field& f : kFields) query += std::string(",") + f.query;
  const long ms = std::lround(std::max(0.1, interval_seconds) * 1000);
  return {"nvidia-smi", query, "--format=csv,noheader,nounits", "-lms", std::to_string(ms)};
}

std::optional<std::vector<TelemetrySample>> ParseNvidiaSmiLine(std::string_view line) {
  const std::vector<std::string> parts = Split(std::string(line), ',');
  constexpr size_t kCount = 1 + sizeof(kFields) / sizeof(kFields[0]);
  if (parts.size() != kCount) return std::nullopt;
  const std::optional<double> index = Number(parts[0]);
  if (!index || *index < 0 || *index != std::floor(*index)) return std::nullopt;
  std::vector<TelemetrySample> out;
  bool any_unreadable = false;
  for (size_t i = 1; i < kCount; ++i) {
    const std::string field = Trim(parts[i]);
    const std::optional<double> v = Number(field);
    if (!v) {
      // "[N/A]", "[Not Supported]": this GPU does not report the field.
      if (field.empty() || field.front() != '[') any_unreadable = true;
      continue;
    }
    TelemetrySample s;
    s.device = "gpu" + std::to_string(static_cast<long>(*index));
    s.quantity = kFields[i - 1].quantity;
    s.value = *v * kFields[i - 1].scale;
    out.push_back(std::move(s));
  }
  if (any_unreadable) return std::nullopt;
  return out;
}

}  // namespace protocol
