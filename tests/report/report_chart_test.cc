// The charts at nightly scale (formats/svg.h): every point is drawn, and
// where points are denser than the pixels their tooltips share one marker per
// pixel column, so that an HTML report of a long history stays small.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report/formats/report_json.h"
#include "report/formats/svg.h"
#include "report/render.h"
#include "report/report_data.h"
#include "report_fixtures.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

using namespace report_test;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST_CASE("report chart: a series denser than the pixels keeps every point and shares tooltips per pixel column") {
  // 2000 runs over the 480 px of the plot: about 4 runs per pixel column.
  ChartSeriesInput in;
  in.label = "pretrain 12 steps fsdp 1 node";
  for (int run = 1; run <= 2000; ++run) {
    in.points.push_back({static_cast<double>(run), 10.0 + (run % 7)});
    in.titles.push_back(fmt::format("run {}: {} min", run, 10 + run % 7));
  }
  ChartAxes axes;
  axes.integer_x_from_data = true;
  axes.points_noun = "runs";
  Chart c = LayoutChart({in}, axes);
  REQUIRE(c.series.size() == 1);
  const ChartSeries& s = c.series[0];
  // Every point is a dot (no two share a pixel to 0.1 here: x steps are 0.24 px).
  CHECK(Count(s.dots, "M") == 2000);
  CHECK(Count(s.dots, "h0") == 2000);
  // One marker per pixel column, standing for every point of it.
  CHECK(s.markers.size() <= 482);
  int points = 0;
  for (const ChartMarker& m : s.markers) {
    points += m.count;
    CHECK(m.count > 1);
    CHECK(m.width > 0);
    CHECK(m.width <= 5.0);
    CHECK(m.height >= 5.0);
  }
  CHECK(points == 2000);
  const ChartMarker& first = s.markers.front();
  CHECK(first.title.rfind(fmt::format("{} runs, run 1: 11 min to run {}: ", first.count, first.count), 0) == 0);
  CHECK(first.title.find("; lowest run ") != std::string::npos);
  CHECK(first.title.find("; highest run ") != std::string::npos);
  // Neighbouring columns tile the plot without overlapping.
  for (size_t i = 1; i < s.markers.size(); ++i)
    CHECK(s.markers[i - 1].x + s.markers[i - 1].width <= s.markers[i].x + 1e-9);
}

TEST_CASE("report chart: points of one pixel column with one x value keep a marker each") {
  Chart c = LayoutChart({{"a", {{100, 1}, {100, 2}, {200, 3}}, {}}});
  REQUIRE(c.series.size() == 1);
  REQUIRE(c.series[0].markers.size() == 3);
  for (const ChartMarker& m : c.series[0].markers) CHECK(m.count == 1);
  CHECK(c.series[0].dots == "M300.0,213.3h0M300.0,116.7h0M540.0,20.0h0");
}

TEST_CASE("report chart: an HTML history of 3000 runs draws one path per series, not an element per run") {
  std::vector<ReportRunInput> runs;
  for (int run = 1; run <= 3000; ++run)
    runs.push_back(RunWith(MakeRun(run), {TrainCase("t.1", "m", "pretrain", "fsdp", 1, "", "steps", 100,
                                                    600.0 + run % 13)}));
  ReportData data = Compute(runs);
  REQUIRE(data.models.size() == 1);
  REQUIRE(data.models[0].history.size() == 1);
  auto html = RenderTemplate(ReadFileText(PROTOCOL_SOURCE_DIR "/templates/report.html.mustache").value(),
                             "report.html.mustache", ReportView(data), Escape::kHtml);
  REQUIRE(html.ok());
  CHECK(Count(*html, "<path d=\"M") == 1);
  CHECK(Count(*html, "<circle ") + Count(*html, "<rect x=") <= 482 + 1);  // markers, and the legend's rect
  CHECK(html->find("one tooltip covers a pixel column") != std::string::npos);  // the chart says so
  CHECK(html->find("pretrain 100 steps fsdp 1 node: ") != std::string::npos);
  CHECK(html->size() < 250000);  // an element and a tooltip per run made it 360 kB
}

}  // namespace
}  // namespace protocol
