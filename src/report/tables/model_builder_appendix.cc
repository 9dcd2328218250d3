#include "report/tables/model_builder.h"

#include "report/tables/ratios.h"

namespace protocol {

void ModelBuilder::BuildAppendix() {
  for (const auto& t : out_.tables) {
    for (const auto& row : t.rows) {
      for (const auto& cell : row.cells) {
        // Quality, metrics and scaling cells (and most of the baselines
        // table's) repeat figures of the main tables' cells.
        if (cell.origin.empty() || RepeatsFigure(t, cell)) continue;
        out_.appendix.push_back({t.title, row.label, cell.column, cell.origin});
      }
    }
  }
}

void ModelBuilder::BuildProvenance() {
  for (const auto& t : out_.tables) {
    if (t.id == "scaling") continue;  // its cells repeat training and metrics cells
    for (const auto& row : t.rows) {
      for (const auto& cell : row.cells) {
        // The baselines table: only a further baseline's time is its own figure.
        if (t.id == "baselines" && RepeatsFigure(t, cell)) continue;
        for (const auto& src : cell.sources) out_.provenance.push_back({t.title, row.label, cell.column, src});
      }
    }
  }
}

void ModelBuilder::BuildRatios() {
  for (const auto& t : out_.tables) {
    for (const auto* block : {&t.rows, &t.efficiency}) {
      for (const auto& row : *block) {
        for (const auto& cell : row.cells) {
          if (cell.numerator_run_id == 0 && cell.denominator_run_id == 0) continue;
          RatioEntry e;
          e.table = t.title;
          e.row = row.label;
          e.column = cell.column;
          e.text = cell.text;
          e.numerator_run_id = cell.numerator_run_id;
          e.denominator_run_id = cell.denominator_run_id;
          e.note = !cell.refused.empty() ? cell.refused
                   : cell.numerator_run_id != cell.denominator_run_id ? kDifferentRunsText
                                                                       : "same run";
          out_.ratios.push_back(std::move(e));
        }
      }
    }
  }
}

}  // namespace protocol
