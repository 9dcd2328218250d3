#include "report/tables/model_builder.h"

#include <iterator>
#include <optional>

#include "report/formats/numbers.h"
#include "runner/base/statistics.h"
#include "runner/base/text.h"
#include "runner/store/metric_table.h"

namespace protocol {

// Quality & cost, and additional metrics: the columns the metric table
// (metric_table.h) gives each, in its order (docs/report.md, "Quality & cost,
// Additional metrics").

struct ExtraSpec {
  const char* metric;
  const char* column;
  std::string (*format)(double);
  bool optional = false;  // column shown only when some row has the figure
};

namespace {

std::string (*FormatOf(ReportNumber number))(double) {
  switch (number) {
    case ReportNumber::kLoss: return FormatLoss;
    case ReportNumber::kBinaryBytes: return FormatBinaryBytes;
    case ReportNumber::kSeconds: return FormatSeconds;
    case ReportNumber::kOne: return FormatOne;
    case ReportNumber::kTwo: return FormatTwo;
    case ReportNumber::kPercent: return FormatMfu;
    case ReportNumber::kGiB: return FormatGiB;
    case ReportNumber::kCount: return FormatCount;
  }
  return FormatOne;
}

std::vector<ExtraSpec> ColumnsOf(ReportSection section) {
  std::vector<ExtraSpec> out;
  for (const MetricRow* m : ReportColumns(section))
    out.push_back({m->name, m->column, FormatOf(m->number), m->column_when_present});
  return out;
}

}  // namespace

void ModelBuilder::RememberEnergy(const CaseEntry& e) {
  if (!e.length_unit.empty()) return;  // a figure at another length: the case's own entry says it
  for (const Measurement& m : e.c->measurements)
    if (m.name == metric::kEnergyPerToken && m.value && m.length_unit.empty())
      energy_per_token_[{e.run->id, e.c->record.case_id, e.c->record.repeat}] = *m.value;
}

void ModelBuilder::FillEnergy(const std::vector<const ReportCell*>& sides, VerdictLine* v) const {
  if (sides.size() != 2 || !sides[0] || !sides[1]) return;
  // Each side's median over the cases of its cell that stored one.
  auto median = [this](const ReportCell& cell) {
    std::vector<double> values;
    for (const CellSource& src : cell.sources)
      if (auto it = energy_per_token_.find({src.run_id, src.case_id, src.repeat}); it != energy_per_token_.end())
        values.push_back(it->second);
    return Median(std::move(values));
  };
  const std::optional<double> base = median(*sides[0]);
  const std::optional<double> cand = median(*sides[1]);
  if (!base || !cand || *base <= 0) return;
  const std::string change = FormatSignedPercent((*cand - *base) / *base * 100);
  v->energy = fmt::format("energy per token {} J vs {} J for {}, {}", FormatTwo(*cand), FormatTwo(*base),
                          o_.baseline_system, change);
  v->energy_cell = fmt::format("{} vs {} J ({})", FormatTwo(*cand), FormatTwo(*base), change);
}

void ModelBuilder::BuildExtras() {
  const std::vector<ExtraSpec> quality = ColumnsOf(ReportSection::kQuality);
  const std::vector<ExtraSpec> metrics = ColumnsOf(ReportSection::kMetrics);
  BuildExtra("quality", "Quality & cost", quality.data(), quality.size());
  BuildExtra("metrics", "Additional metrics", metrics.data(), metrics.size());
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
