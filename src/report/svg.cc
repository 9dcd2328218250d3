#include "report/svg.h"

#include <algorithm>
#include <cmath>

#include "runner/base/text.h"

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

Chart LayoutChart(const std::vector<ChartSeriesInput>& series) { return LayoutChart(series, ChartAxes()); }

Chart LayoutChart(const std::vector<ChartSeriesInput>& series, const ChartAxes& axes) {
  Chart chart;
  chart.x_label = axes.x_label;
  chart.y_label = axes.y_label;
  double max_x = 0, max_y = 0;
  double min_x = 0;
  bool first = true;
  std::vector<const ChartSeriesInput*> drawn;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    drawn.push_back(&s);
    for (const auto& [x, y] : s.points) {
      min_x = first ? x : std::min(min_x, x);
      max_x = first ? x : std::max(max_x, x);
      max_y = std::max(max_y, y);
      first = false;
    }
  }
  if (drawn.empty()) return chart;
  if (max_y <= 0) max_y = 1;
  const int kTicks = 5;
  double x_step = 0, x_min = 0, x_max = 0;
  if (axes.integer_x_from_data) {
    x_step = std::max(1.0, NiceStep(std::max(max_x - min_x, 1.0), kTicks));
    x_min = std::floor(min_x / x_step) * x_step;
    x_max = std::ceil(max_x / x_step - 1e-9) * x_step;
    if (x_max <= x_min) x_max = x_min + x_step;
  } else {
    if (max_x <= 0) max_x = 1;
    x_step = NiceStep(max_x, kTicks);
    x_max = std::ceil(max_x / x_step - 1e-9) * x_step;
  }
  double y_step = NiceStep(max_y, kTicks);
  double y_max = std::ceil(max_y / y_step - 1e-9) * y_step;
  auto px = [&](double x) { return chart.left + (chart.right - chart.left) * (x - x_min) / (x_max - x_min); };
  auto py = [&](double y) { return chart.bottom - (chart.bottom - chart.top) * y / y_max; };
  for (int i = 0; x_min + i * x_step <= x_max + x_step * 1e-9; ++i) {
    chart.x_ticks.push_back({px(x_min + i * x_step), TickLabel(x_min + i * x_step)});
  }
  for (int i = 0; i * y_step <= y_max + y_step * 1e-9; ++i) {
    chart.y_ticks.push_back({py(i * y_step), TickLabel(i * y_step)});
  }
  for (size_t i = 0; i < drawn.size(); ++i) {
    ChartSeries out;
    out.label = drawn[i]->label;
    out.color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    out.legend_y = chart.top + 10 + 18.0 * static_cast<double>(i);
    const auto& in = *drawn[i];
    std::vector<size_t> order(in.points.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return in.points[a].first < in.points[b].first; });
    // Every point is a marker; the line joins the median y of each distinct x,
    // so repeats of one answer length do not zig-zag the line.
    std::vector<std::string> coords;
    for (size_t first = 0; first < order.size();) {
      size_t last = first;
      while (last < order.size() && in.points[order[last]].first == in.points[order[first]].first) ++last;
      std::vector<double> ys;
      for (size_t j = first; j < last; ++j) ys.push_back(in.points[order[j]].second);
      std::sort(ys.begin(), ys.end());
      double median = ys.size() % 2 ? ys[ys.size() / 2] : (ys[ys.size() / 2 - 1] + ys[ys.size() / 2]) / 2;
      coords.push_back(fmt::format("{:.1f},{:.1f}", px(in.points[order[first]].first), py(median)));
      first = last;
    }
    for (size_t k : order) {
      const auto& [x, y] = in.points[k];
      double cx = px(x), cy = py(y);
      out.markers.push_back({std::round(cx * 10) / 10, std::round(cy * 10) / 10,
                             k < in.titles.size() ? in.titles[k]
                                                  : fmt::format("{} tokens, {:.3f} s", TickLabel(x), y)});
    }
    out.points = Join(coords, " ");
    chart.series.push_back(std::move(out));
  }
  return chart;
}

}  // namespace protocol
