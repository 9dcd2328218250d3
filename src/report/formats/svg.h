#ifndef PROTOCOL_REPORT_FORMATS_SVG_H_
#define PROTOCOL_REPORT_FORMATS_SVG_H_

// Layout of the inline SVG chart (generation time against answer length): all
// geometry is computed here, in pixels, as plain numbers and strings; the HTML
// template draws it with escaped {{ }} tags only, so no markup is built from
// data anywhere.

#include <string>
#include <utility>
#include <vector>

#include "report/formats/chart.h"

namespace protocol {

// Lays out the series on axes from 0 to a "nice" maximum (1, 2 or 5 × 10^k
// steps, at most 6 ticks). Series without points are dropped; colours come
// from a fixed table in series order.
Chart LayoutChart(const std::vector<ChartSeriesInput>& series);
Chart LayoutChart(const std::vector<ChartSeriesInput>& series, const ChartAxes& axes);

// The smallest "nice" step (1, 2, 5 × 10^k) that covers [0, max] in at most
// `max_ticks` intervals. REQUIRES: max > 0, max_ticks >= 1.
double NiceStep(double max, int max_ticks);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_FORMATS_SVG_H_
