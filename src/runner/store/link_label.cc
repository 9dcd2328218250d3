#include "runner/store/link_label.h"

#include <cstdlib>

#include "runner/base/text.h"

namespace protocol {
namespace {

// "1.17 GB/s", "850 MB/s", "12.3 kB/s".
std::string BytesRateText(double bytes_per_second) {
  if (bytes_per_second >= 1e9) return fmt::format("{:.3g} GB/s", bytes_per_second / 1e9);
  if (bytes_per_second >= 1e6) return fmt::format("{:.3g} MB/s", bytes_per_second / 1e6);
  return fmt::format("{:.3g} kB/s", bytes_per_second / 1e3);
}

// "85 µs", "1.25 ms", "2.1 s".
std::string LatencyText(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.0f} µs", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
  return fmt::format("{:.3g} s", seconds);
}

}  // namespace

std::optional<double> CaseLink::MeasuredOverNominal() const {
  if (!busbw_bytes_per_second || !nominal_bits_per_second || *nominal_bits_per_second <= 0) return std::nullopt;
  return *busbw_bytes_per_second * 8 / *nominal_bits_per_second;
}

bool CaseLink::OffLabel() const {
  const std::optional<double> ratio = MeasuredOverNominal();
  return ratio && (*ratio > metric::kLinkLabelFactor || *ratio * metric::kLinkLabelFactor < 1);
}

CaseLink LinkOfCase(const std::vector<Measurement>& measurements,
                    const std::vector<std::pair<std::string, std::string>>& facts) {
  CaseLink link;
  for (const Measurement& m : measurements) {
    if (!m.length_unit.empty() || !m.value) continue;
    if (m.name == metric::kLinkBusBandwidth) link.busbw_bytes_per_second = *m.value;
    if (m.name == metric::kLinkLatency) link.latency_seconds = *m.value;
  }
  for (const auto& [key, value] : facts) {
    if (key == fact::kNetwork) link.network = value;
    if (key == fact::kNetworkRate) {
      char* end = nullptr;
      const double bits = std::strtod(value.c_str(), &end);
      if (end != value.c_str() && *end == '\0' && bits > 0) link.nominal_bits_per_second = bits;
    }
  }
  return link;
}

std::string GbitText(double bits_per_second) {
  const double gbit = bits_per_second / 1e9;
  return (gbit >= 10 ? fmt::format("{:.0f}", gbit) : fmt::format("{:.2g}", gbit)) + " Gbit/s";
}

std::string LinkText(const CaseLink& link) {
  if (!link.measured()) return "";
  std::string text = fmt::format("{} bus bandwidth ({})", BytesRateText(*link.busbw_bytes_per_second),
                                 GbitText(*link.busbw_bytes_per_second * 8));
  if (link.latency_seconds) text += ", latency " + LatencyText(*link.latency_seconds);
  return text;
}

std::string LinkLabelRatioText(const CaseLink& link) {
  const double ratio = *link.MeasuredOverNominal();
  return ratio < 1 ? fmt::format("{:.3g}x slower", 1 / ratio) : fmt::format("{:.3g}x faster", ratio);
}

std::string LinkBesideLabel(const CaseLink& link) {
  std::string text = LinkText(link);
  if (text.empty() || !link.nominal_bits_per_second) return text;
  text += fmt::format("; its network '{}' is nominally {}", link.network, GbitText(*link.nominal_bits_per_second));
  if (link.OffLabel()) text += "; link ≠ label: " + LinkLabelRatioText(link);
  return text;
}

std::string LinkLabelWarning(const CaseLink& link) {
  if (!link.OffLabel()) return "";
  return fmt::format("link measured {} bus bandwidth, its network '{}' is nominally {} ({})",
                     GbitText(*link.busbw_bytes_per_second * 8), link.network, GbitText(*link.nominal_bits_per_second),
                     LinkLabelRatioText(link));
}

}  // namespace protocol
