#include "report/svg.h"

#include <algorithm>
#include <cmath>

#include "runner/text.h"

namespace protocol {

namespace {

// Colour-blind-friendly palette (Okabe–Ito), cycled in series order.
const char* const kColors[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                               "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

std::string TickLabel(double v) {
  if (v == std::floor(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}

}  // namespace

double NiceStep(double max, int max_ticks) {
  double raw = max / max_ticks;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    double step = m * magnitude;
    if (step * max_ticks >= max * (1 - 1e-12)) return step;
  }
  return 10 * magnitude;
}

Chart LayoutChart(const std::vector<ChartSeriesInput>& series) {
  Chart chart;
  double max_x = 0, max_y = 0;
  std::vector<const ChartSeriesInput*> drawn;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    drawn.push_back(&s);
    for (const auto& [x, y] : s.points) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  }
  if (drawn.empty()) return chart;
  if (max_x <= 0) max_x = 1;
  if (max_y <= 0) max_y = 1;
  const int kTicks = 5;
  double x_step = NiceStep(max_x, kTicks);
  double y_step = NiceStep(max_y, kTicks);
  double x_max = std::ceil(max_x / x_step - 1e-9) * x_step;
  double y_max = std::ceil(max_y / y_step - 1e-9) * y_step;
  auto px = [&](double x) { return chart.left + (chart.right - chart.left) * x / x_max; };
  auto py = [&](double y) { return chart.bottom - (chart.bottom - chart.top) * y / y_max; };
  for (int i = 0; i * x_step <= x_max + x_step * 1e-9; ++i) {
    chart.x_ticks.push_back({px(i * x_step), TickLabel(i * x_step)});
  }
  for (int i = 0; i * y_step <= y_max + y_step * 1e-9; ++i) {
    chart.y_ticks.push_back({py(i * y_step), TickLabel(i * y_step)});
  }
  for (size_t i = 0; i < drawn.size(); ++i) {
    ChartSeries out;
    out.label = drawn[i]->label;
    out.color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    out.legend_y = chart.top + 10 + 18.0 * static_cast<double>(i);
    auto points = drawn[i]->points;
    std::stable_sort(points.begin(), points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> coords;
    for (const auto& [x, y] : points) {
      double cx = px(x), cy = py(y);
      coords.push_back(fmt::format("{:.1f},{:.1f}", cx, cy));
      out.markers.push_back({std::round(cx * 10) / 10, std::round(cy * 10) / 10,
                             fmt::format("{} tokens, {:.3f} s", TickLabel(x), y)});
    }
    out.points = Join(coords, " ");
    chart.series.push_back(std::move(out));
  }
  return chart;
}

}  // namespace protocol
