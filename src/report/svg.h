#ifndef PROTOCOL_REPORT_SVG_H_
#define PROTOCOL_REPORT_SVG_H_

// Layout of the inline SVG chart (generation time against answer length): all
// geometry is computed here, in pixels, as plain numbers and strings; the HTML
// template draws it with escaped {{ }} tags only, so no markup is built from
// data anywhere.

#include <string>
#include <utility>
#include <vector>

namespace protocol {

struct ChartSeriesInput {
  std::string label;                              // legend text
  std::vector<std::pair<double, double>> points;  // (x, y) in data units
  // Marker titles, one per point; empty: "300 tokens, 7.510 s".
  std::vector<std::string> titles;
};

// Axis labels and the x axis kind.
struct ChartAxes {
  std::string x_label = "answer length (tokens)";
  std::string y_label = "generation time (s)";
  // Run ids: the x axis spans the data (not from 0), ticks on whole numbers.
  bool integer_x_from_data = false;
};

struct ChartTick {
  double pos = 0;     // pixel coordinate along the axis
  std::string label;  // "200"
};

struct ChartMarker {
  double cx = 0;
  double cy = 0;
  std::string title;  // "300 tokens, 7.51 s"
};

struct ChartSeries {
  std::string label;
  std::string color;   // "#1f77b4"
  std::string points;  // polyline points "x,y x,y ..." (sorted by x)
  std::vector<ChartMarker> markers;
  double legend_y = 0;  // pixel baseline of its legend entry
};

struct Chart {
  int width = 900;  // plot 60..540, legend from 560: room for "share 2 nodes multi-inference"
  int height = 360;
  double left = 60, top = 20, right = 540, bottom = 310;  // plot area, pixels
  double legend_x = 560;
  std::string x_label = "answer length (tokens)";
  std::string y_label = "generation time (s)";
  std::vector<ChartTick> x_ticks;
  std::vector<ChartTick> y_ticks;
  std::vector<ChartSeries> series;  // empty: no chart
};

// Lays out the series on axes from 0 to a "nice" maximum (1, 2 or 5 × 10^k
// steps, at most 6 ticks). Series without points are dropped; colours come
// from a fixed table in series order.
Chart LayoutChart(const std::vector<ChartSeriesInput>& series);
Chart LayoutChart(const std::vector<ChartSeriesInput>& series, const ChartAxes& axes);

// The smallest "nice" step (1, 2, 5 × 10^k) that covers [0, max] in at most
// `max_ticks` intervals. REQUIRES: max > 0, max_ticks >= 1.
double NiceStep(double max, int max_ticks);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_SVG_H_
