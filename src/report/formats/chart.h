#ifndef PROTOCOL_REPORT_FORMATS_CHART_H_
#define PROTOCOL_REPORT_FORMATS_CHART_H_

// An inline SVG chart as data: its series as given (ChartSeriesInput,
// ChartAxes) and as laid out in pixels (Chart: ticks, dots, markers, legend).
// The report model holds charts (report_data.h); svg.h lays them out.

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
  // The y axis spans the data's range on nice ticks (not from 0): a held-out
  // loss curve, whose differences are small beside the loss itself.
  bool y_from_data = false;
  // What a point is, in the title of a marker shared by several ("20 runs, …").
  std::string points_noun = "points";
};

struct ChartTick {
  double pos = 0;     // pixel coordinate along the axis
  std::string label;  // "200"
};

// A hover target with a tooltip (the points themselves are drawn by
// ChartSeries::dots). One per point, but where points are denser than the
// pixels: the points of different x that fall in one pixel column share one
// marker, a rectangle over the column spanning them, whose title names how
// many they are, the first, the last, the lowest and the highest. Repeats of
// one x (a column with one x value) keep a marker each.
struct ChartMarker {
  double cx = 0;  // a point's centre; a column's: its x and the middle of its span
  double cy = 0;
  std::string title;  // "300 tokens, 7.51 s"; a column's: "20 points, … to …; lowest …; highest …"
  int count = 1;      // points it stands for
  // count > 1: the column's rectangle in pixels (it tiles the plot's width
  // with its neighbours, at most 5 px wide, and spans its points' y ± 2.5).
  double x = 0, y = 0, width = 0, height = 0;
};

struct ChartSeries {
  std::string label;
  std::string color;   // "#1f77b4"
  std::string points;  // polyline points "x,y x,y ..." (sorted by x)
  // Every point as a dot: an SVG path of zero-length segments "Mx,yh0..."
  // drawn with round caps (sorted by x; a dot repeating the one before it,
  // the same pixel to 0.1, is written once).
  std::string dots;
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

}  // namespace protocol

#endif  // PROTOCOL_REPORT_FORMATS_CHART_H_
