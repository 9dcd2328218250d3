#include "report/formats/numbers.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "runner/base/text.h"

namespace protocol {

namespace {

// `v` rounded half away from zero to `decimals` decimals (fmt alone rounds
// a binary tie to even: 0.125 → "0.12").
std::string Fixed(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return fmt::format("{:.{}f}", std::round(v * scale) / scale, decimals);
}

}  // namespace

std::string FormatDecimals(double v, int decimals) {
  if (v != 0 && std::fabs(v) < 1) {
    int significant = 2 - static_cast<int>(std::floor(std::log10(std::fabs(v))));
    decimals = std::max(decimals, std::min(significant, 12));
  }
  return Fixed(v, decimals);
}

std::string FormatMinutes(double minutes) { return FormatDecimals(minutes, 1); }
std::string FormatSeconds(double s) { return FormatDecimals(s, 1); }
std::string FormatSecondsPerToken(double s) { return FormatDecimals(s, 4); }
std::string FormatTokensPerSecond(double t) { return FormatDecimals(t, 2); }
std::string FormatLoss(double v) { return FormatDecimals(v, 4); }
std::string FormatGiB(double bytes) { return FormatDecimals(bytes / (1024.0 * 1024.0 * 1024.0), 2); }

std::string FormatBinaryBytes(double bytes) {
  const char* const units[] = {"KiB", "MiB", "GiB"};
  if (std::fabs(bytes) < 1024) return Fixed(bytes, 0) + " B";
  double v = bytes;
  for (size_t i = 0; i < std::size(units); ++i) {
    v /= 1024;
    if (std::fabs(v) < 1024 || i + 1 == std::size(units)) return FormatDecimals(v, 2) + " " + units[i];
  }
  return "";  // unreachable
}

std::string FormatOne(double v) { return FormatDecimals(v, 1); }
std::string FormatTwo(double v) { return FormatDecimals(v, 2); }
std::string FormatMfu(double v) { return FormatDecimals(v * 100, 1); }
std::string FormatCount(double v) { return Fixed(v, 0); }
std::string FormatRequestSeconds(double s) { return FormatDecimals(s, 3); }
std::string FormatSignedPercent(double percent) {
  return (percent > 0 ? "+" : "") + FormatDecimals(percent, 1) + " %";
}
std::string FormatRatio(double ratio) { return Fixed(ratio, 2); }
std::string FormatPercent(double ratio) { return fmt::format("{}", std::llround(ratio * 100)); }

}  // namespace protocol
