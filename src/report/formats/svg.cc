#include "report/formats/svg.h"

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

double Round1(double v) { return std::round(v * 10) / 10; }

// Appends "x,y" (pixels, 1 decimal) to `out` unless it repeats the last
// coordinate appended (`last`), with `separator` before it when `out` is not
// empty. A repeat is the same pixel to 0.1: leaving it out hides nothing.
void AppendCoordinate(double x, double y, const char* prefix, const char* suffix, std::string* last,
                      std::string* out) {
  std::string coordinate = fmt::format("{:.1f},{:.1f}", x, y);
  if (coordinate == *last) return;
  out->append(prefix).append(coordinate).append(suffix);
  *last = std::move(coordinate);
}

// The tooltip of a pixel column that several points share (ChartMarker):
// `titles` in x order; `low` and `high` index the lowest and highest point.
std::string ColumnTitle(const std::vector<const std::string*>& titles, size_t low, size_t high,
                        const std::string& noun) {
  return fmt::format("{} {}, {} to {}; lowest {}; highest {}", titles.size(), noun, *titles.front(), *titles.back(),
                     *titles[low], *titles[high]);
}

// A point's position and tooltip, in x order.
struct PlacedPoint {
  double x = 0, y = 0;    // data units
  double cx = 0, cy = 0;  // pixels
  std::string title;
};

// The markers of points (x order): one per point, but one per pixel column
// for a column holding points of several x values (ChartMarker).
std::vector<ChartMarker> Markers(const std::vector<PlacedPoint>& points, const std::string& noun) {
  std::vector<std::pair<size_t, size_t>> columns;  // [first, last) of each pixel column
  for (size_t first = 0; first < points.size();) {
    size_t last = first;
    const long column = std::lround(points[first].cx);
    while (last < points.size() && std::lround(points[last].cx) == column) ++last;
    columns.push_back({first, last});
    first = last;
  }
  std::vector<ChartMarker> out;
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto [first, last] = columns[c];
    if (points[first].x == points[last - 1].x) {  // one x value: a marker per point
      for (size_t k = first; k < last; ++k)
        out.push_back({Round1(points[k].cx), Round1(points[k].cy), points[k].title});
      continue;
    }
    const double centre = static_cast<double>(std::lround(points[first].cx));
    double left = centre - 2.5, right = centre + 2.5;
    if (c > 0) left = std::max(left, (centre + std::lround(points[columns[c - 1].first].cx)) / 2.0);
    if (c + 1 < columns.size()) right = std::min(right, (centre + std::lround(points[columns[c + 1].first].cx)) / 2.0);
    size_t low = first, high = first;
    std::vector<const std::string*> titles;
    for (size_t k = first; k < last; ++k) {
      if (points[k].y < points[low].y) low = k;
      if (points[k].y > points[high].y) high = k;
      titles.push_back(&points[k].title);
    }
    ChartMarker m;
    m.count = static_cast<int>(last - first);
    m.cx = centre;
    m.cy = Round1((points[low].cy + points[high].cy) / 2);
    m.title = ColumnTitle(titles, low - first, high - first, noun);
    m.x = Round1(left);
    m.width = Round1(right - left);
    m.y = Round1(points[high].cy - 2.5);  // higher values are higher up: smaller pixel y
    m.height = Round1(points[low].cy - points[high].cy + 5);
    out.push_back(std::move(m));
  }
  return out;
}

// The polyline, dots and markers of one series; px and py map data to pixels.
template <typename Px, typename Py>
void LayoutSeries(const ChartSeriesInput& in, const ChartAxes& axes, const Px& px, const Py& py, ChartSeries* out) {
  std::vector<size_t> order(in.points.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return in.points[a].first < in.points[b].first; });
  // The line joins the median y of each distinct x, so repeats of one answer
  // length do not zig-zag the line.
  std::string last;
  for (size_t first = 0; first < order.size();) {
    size_t end = first;
    while (end < order.size() && in.points[order[end]].first == in.points[order[first]].first) ++end;
    std::vector<double> ys;
    for (size_t j = first; j < end; ++j) ys.push_back(in.points[order[j]].second);
    std::sort(ys.begin(), ys.end());
    double median = ys.size() % 2 ? ys[ys.size() / 2] : (ys[ys.size() / 2 - 1] + ys[ys.size() / 2]) / 2;
    AppendCoordinate(px(in.points[order[first]].first), py(median), out->points.empty() ? "" : " ", "", &last,
                     &out->points);
    first = end;
  }
  std::vector<PlacedPoint> placed;
  placed.reserve(order.size());
  last.clear();
  for (size_t k : order) {
    const auto& [x, y] = in.points[k];
    PlacedPoint p{x, y, px(x), py(y),
                  k < in.titles.size() ? in.titles[k] : fmt::format("{} tokens, {:.3f} s", TickLabel(x), y)};
    AppendCoordinate(p.cx, p.cy, "M", "h0", &last, &out->dots);
    placed.push_back(std::move(p));
  }
  out->markers = Markers(placed, axes.points_noun);
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
  double min_x = 0, min_y = 0;
  bool first = true;
  std::vector<const ChartSeriesInput*> drawn;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    drawn.push_back(&s);
    for (const auto& [x, y] : s.points) {
      min_x = first ? x : std::min(min_x, x);
      max_x = first ? x : std::max(max_x, x);
      min_y = first ? y : std::min(min_y, y);
      max_y = first ? y : std::max(max_y, y);
      first = false;
    }
  }
  if (drawn.empty()) return chart;
  if (!axes.y_from_data) max_y = std::max(max_y, 0.0);
  if (!axes.y_from_data && max_y <= 0) max_y = 1;
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
  double y_step = 0, y_min = 0, y_max = 0;
  if (axes.y_from_data) {
    const double span = max_y - min_y > 0 ? max_y - min_y : std::max(std::fabs(max_y) * 0.01, 1e-6);
    y_step = NiceStep(span, kTicks);
    y_min = std::floor(min_y / y_step + 1e-9) * y_step;
    y_max = std::ceil(max_y / y_step - 1e-9) * y_step;
    if (y_max <= y_min) y_max = y_min + y_step;
  } else {
    y_step = NiceStep(max_y, kTicks);
    y_max = std::ceil(max_y / y_step - 1e-9) * y_step;
  }
  auto px = [&](double x) { return chart.left + (chart.right - chart.left) * (x - x_min) / (x_max - x_min); };
  auto py = [&](double y) { return chart.bottom - (chart.bottom - chart.top) * (y - y_min) / (y_max - y_min); };
  for (int i = 0; x_min + i * x_step <= x_max + x_step * 1e-9; ++i) {
    chart.x_ticks.push_back({px(x_min + i * x_step), TickLabel(x_min + i * x_step)});
  }
  for (int i = 0; y_min + i * y_step <= y_max + y_step * 1e-9; ++i) {
    const double y = y_min + i * y_step;
    chart.y_ticks.push_back({py(y), TickLabel(std::fabs(y) < y_step * 1e-9 ? 0.0 : y)});
  }
  for (size_t i = 0; i < drawn.size(); ++i) {
    ChartSeries out;
    out.label = drawn[i]->label;
    out.color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    out.legend_y = chart.top + 10 + 18.0 * static_cast<double>(i);
    LayoutSeries(*drawn[i], axes, px, py, &out);
    chart.series.push_back(std::move(out));
  }
  return chart;
}

}  // namespace protocol
