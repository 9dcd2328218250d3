#include "report/tables/model_builder.h"

#include <algorithm>

#include "report/formats/numbers.h"
#include "report/formats/svg.h"
#include "runner/base/text.h"
#include "runner/store/telemetry_figures.h"

namespace protocol {

namespace {

// A case's requests in the order of its schedule (index): the store keeps
// them in the order they finished, which multi-inference interleaves.
std::vector<const RequestSample*> InRequestOrder(const std::vector<RequestSample>& requests) {
  std::vector<const RequestSample*> out;
  for (const RequestSample& r : requests) out.push_back(&r);
  std::stable_sort(out.begin(), out.end(),
                   [](const RequestSample* a, const RequestSample* b) { return a->index < b->index; });
  return out;
}

// A series of (seconds, value) with a title per point: "12.0 s: 85.0 %".
ChartSeriesInput TimeSeries(const std::string& label, std::vector<std::pair<double, double>> points, double scale,
                            const char* unit) {
  ChartSeriesInput out;
  out.label = label;
  for (auto& [t, v] : points) {
    v *= scale;
    out.titles.push_back(fmt::format("{:.1f} s: {} {}", t, FormatDecimals(v, 1), unit));
  }
  out.points = std::move(points);
  return out;
}

}  // namespace

void ModelBuilder::AddHardware(const VerdictLine& v, const std::vector<const ReportCell*>& sides) {
  if (sides.size() != 2) return;
  std::vector<ChartSeriesInput> gpu, link;
  for (const ReportCell* cell : sides) {
    if (!cell) continue;
    for (const CellSource& src : cell->sources) {  // the side's first case that sampled
      auto it = sampled_.find({src.run_id, src.case_id, src.repeat});
      if (it == sampled_.end()) continue;
      const std::string label = fmt::format("{} (run {}, case {})", it->second.system, src.run_id, src.case_id);
      ChartSeriesInput g = TimeSeries(label, GpuUtilizationSeries(*it->second.samples), 1.0, "%");
      // One node: its interfaces carry nothing between the case's nodes.
      ChartSeriesInput l = TimeSeries(
          label, it->second.nodes > 1 ? LinkThroughputSeries(*it->second.samples) : std::vector<std::pair<double, double>>{},
          1e-6, "MB/s");
      if (!g.points.empty()) gpu.push_back(std::move(g));
      if (!l.points.empty()) link.push_back(std::move(l));
      break;
    }
  }
  if (gpu.empty() && link.empty()) return;
  HardwareRow row;
  row.compared = v.compared.empty() ? v.row + ", " + v.scope : v.compared;
  ChartAxes axes;
  axes.x_label = "seconds since the case began";
  axes.points_noun = "readings";
  axes.y_label = "GPU use, mean of the GPUs used (%)";
  if (!gpu.empty()) row.gpu = LayoutChart(gpu, axes);
  axes.y_label = "link, sent + received (MB/s)";
  if (!link.empty()) row.link = LayoutChart(link, axes);
  out_.hardware.push_back(std::move(row));
}

void ModelBuilder::BuildHistory() {
  for (const auto& [k, by_run] : history_) {
    const bool inference = k.workload == "inference";
    FigureFn get = inference ? FigureFn([](const CaseEntry& e) { return InferenceFigure(e, metric::kTokensPerSecond); })
                             : FigureFn([](const CaseEntry& e) { return WallFigure(e); });
    const double scale = inference ? 1.0 : 1.0 / 60.0;
    const std::string unit = inference ? "tokens/s" : "min";
    auto format = inference ? FormatTokensPerSecond : FormatMinutes;
    ChartSeriesInput series;
    series.label = KeyText(k);
    for (const auto& [run_id, entries] : by_run) {
      RunFigure r = MedianFigure(entries, get, scale);
      if (!r.value) continue;
      series.points.push_back({static_cast<double>(run_id), *r.value});
      series.titles.push_back(fmt::format("run {}: {} {}{}{}", run_id, format(*r.value), unit,
                                          r.extrapolated ? " *" : "",
                                          r.n > 1 ? fmt::format(" (median of {})", r.n) : ""));
    }
    if (series.points.size() < 2) continue;
    ChartAxes axes;
    axes.x_label = "run id";
    axes.y_label = inference ? "tokens per second" : "wall time (min)";
    axes.integer_x_from_data = true;
    axes.points_noun = "runs";
    HistoryChart h;
    h.identity = series.label;
    h.y_label = axes.y_label;
    h.chart = LayoutChart({series}, axes);
    out_.history.push_back(std::move(h));
  }
}

void ModelBuilder::BuildChart() {
  std::vector<ChartSeriesInput> inputs;
  for (const auto& [label, cell] : series_) {
    if (!cell || !cell->Winning()) continue;
    ChartSeriesInput in;
    in.label = label;
    for (const auto& e : *cell->Winning()) {
      for (const RequestSample* rp : InRequestOrder(e.c->requests)) {
        const RequestSample& r = *rp;
        int tokens = r.generated_tokens > 0 ? r.generated_tokens : r.max_new_tokens;
        in.points.push_back({static_cast<double>(tokens), r.seconds});
        RequestRow row;
        row.series = label;
        row.run_id = e.run->id;
        row.case_id = e.c->record.case_id;
        row.repeat = e.c->record.repeat;
        row.index = r.index;
        row.max_new_tokens = r.max_new_tokens;
        row.generated_tokens = r.generated_tokens;
        row.seconds = r.seconds;
        row.seconds_text = FormatRequestSeconds(r.seconds);
        row.answer = r.answer;
        out_.requests.push_back(std::move(row));
      }
    }
    inputs.push_back(std::move(in));
  }
  out_.chart = LayoutChart(inputs);
}

}  // namespace protocol
