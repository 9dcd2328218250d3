#include "report/tables/model_builder.h"

#include <iterator>

#include "report/formats/numbers.h"

namespace protocol {

// Quality & cost, and additional metrics: name, column header, scale, format.
// Share-protocol measurements the report reads by name (docs/report.md,
// "Quality & cost, Additional metrics").

struct ExtraSpec {
  const char* metric;
  const char* column;
  std::string (*format)(double);
  bool optional = false;  // column shown only when some row has the figure
};
// Held-out loss first, so that a speed-up is read next to it.
const ExtraSpec kQuality[] = {
    {metric::kEvalLoss, "eval loss", FormatLoss},
    {metric::kBestGroupEvalLoss, "best group eval loss", FormatLoss, true},
    {metric::kFinalLoss, "final loss", FormatLoss},
    {metric::kBytesCommunicated, "bytes communicated", FormatBinaryBytes},
    // Multi-node cases: the part of bytes communicated that crossed between nodes.
    {metric::kBytesBetweenNodes, "bytes between nodes", FormatBinaryBytes, true},
    {metric::kMergeSeconds, "merge time (s)", FormatSeconds, true},
};
const ExtraSpec kMetrics[] = {
    {metric::kTgs, "TGS (tokens/GPU/s)", FormatOne},
    {metric::kTflops, "TFLOP/s per device", FormatOne},
    {metric::kMfu, "MFU (%)", FormatMfu},
    // Distributed training: the share of communication time computation hid (comm_hidden_share × 100).
    {metric::kCommHiddenShare, "communication hidden (%)", FormatMfu, true},
    {metric::kSamplesPerSecond, "samples/s", FormatTwo},
    {metric::kPeakDeviceMemory, "peak device memory (GiB)", FormatGiB},
    {metric::kPeakHostRss, "peak host RSS (GiB)", FormatGiB},
    {metric::kStragglers, "stragglers (ranks)", FormatCount, true},  // distributed training (stragglers.h)
};

void ModelBuilder::BuildExtras() {
  BuildExtra("quality", "Quality & cost", kQuality, std::size(kQuality));
  BuildExtra("metrics", "Additional metrics", kMetrics, std::size(kMetrics));
}

void ModelBuilder::BuildExtra(const char* id, const char* title, const ExtraSpec* all_specs, size_t n_all) {
  ReportTable t;
  t.id = id;
  t.title = title;
  std::vector<ExtraSpec> specs;
  for (size_t i = 0; i < n_all; ++i) {
    bool present = !all_specs[i].optional;
    std::string name = all_specs[i].metric;
    for (const auto& p : placed_) {
      if (present) break;
      present = Resolve(p.cell, [name](const CaseEntry& e) { return NamedFigure(e, name); }, 1.0, "",
                        all_specs[i].format)
                    .any;
    }
    if (present) specs.push_back(all_specs[i]);
  }
  const size_t n = specs.size();
  for (size_t i = 0; i < n; ++i) t.columns.push_back(specs[i].column);
  for (const auto& p : placed_) {
    ReportRow row{p.row_label + " — " + p.column_label, "", {}};
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
      std::string name = specs[i].metric;
      ResolvedCell r = Resolve(p.cell, [name](const CaseEntry& e) { return NamedFigure(e, name); }, 1.0, "",
                           specs[i].format);
      if (!r.any) {
        r = ResolvedCell();
        r.marker = kDash;
      }
      any = any || r.any;
      row.cells.push_back(ValueCell(specs[i].column, r, specs[i].format));
    }
    if (any) t.rows.push_back(std::move(row));
  }
  if (!t.rows.empty()) out_.tables.push_back(std::move(t));
}

}  // namespace protocol
