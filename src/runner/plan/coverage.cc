#include "runner/plan/coverage.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "runner/base/text.h"

namespace protocol {
namespace {

bool IsTraining(const CaseSpec& c) { return c.workload != Workload::kInference && c.length.has_value(); }

std::string SystemOf(const CaseSpec& c) { return c.system.empty() ? c.backend : c.system; }

TableColumn ColumnOf(const CaseSpec& c) { return TableColumn{SystemOf(c), c.nodes, c.network, c.variant, ""}; }

const char* FillMark(CellFill fill) {
  switch (fill) {
    case CellFill::kMeasured: return "";
    case CellFill::kPrefix:
    case CellFill::kExtrapolated: return "* ";
    case CellFill::kNotProvided: return "X ";
  }
  return "";
}

// The lengths a case gives, with how.
std::vector<std::pair<Length, CellFill>> LengthsOf(const CaseSpec& c) {
  std::vector<std::pair<Length, CellFill>> out = {{*c.length, CellFill::kMeasured}};
  for (const Length& l : c.report_as)
    out.push_back({l, l.count < c.length->count ? CellFill::kPrefix : CellFill::kExtrapolated});
  for (const Length& l : c.not_provided) out.push_back({l, CellFill::kNotProvided});
  return out;
}

// Why no case of `column` gives `row`: the cases of that column and workload
// with the lengths they give.
std::string WhyEmpty(const std::vector<const CaseSpec*>& cases, const TableColumn& column, const CoverageRow& row) {
  std::vector<std::string> near;
  for (const CaseSpec* c : cases) {
    if (!(ColumnOf(*c) == column) || WorkloadName(c->workload) != row.workload) continue;
    std::vector<std::string> lengths;
    for (const auto& [l, fill] : LengthsOf(*c)) lengths.push_back(l.ToString());
    std::string text = fmt::format("{} gives {}", c->id, Join(lengths, ", "));
    if (c->length->unit != row.length.unit)
      text += fmt::format(" (a length in {} cannot give one in {})", c->length->UnitName(), row.length.UnitName());
    near.push_back(text);
  }
  if (near.empty()) return fmt::format("no {} {} case", column.label, row.workload);
  return fmt::format("no {} case gives {} ({})", column.label, row.Label(), Join(near, "; "));
}

}  // namespace

std::vector<TableColumn> TrainingColumnsOf(std::vector<TableColumn> combinations, const std::string& baseline,
                                           const std::vector<std::string>& further) {
  std::map<std::pair<std::string, int>, std::set<std::string>> networks;
  for (const TableColumn& c : combinations) networks[{c.system, c.nodes}].insert(c.network);
  // 0: the baseline, 1 + i: the i-th further baseline, after them every other system (by name).
  auto rank = [&](const std::string& system) {
    if (system == baseline) return 0;
    const auto f = std::find(further.begin(), further.end(), system);
    return f == further.end() ? static_cast<int>(further.size()) + 1 : static_cast<int>(f - further.begin()) + 1;
  };
  std::map<std::tuple<int, int, std::string, std::string, std::string>, TableColumn> ordered;
  for (TableColumn c : combinations) {
    const bool a_baseline = rank(c.system) <= static_cast<int>(further.size());
    const bool show_network = !c.network.empty() && ((a_baseline && c.nodes > 1) ||
                                                     networks[{c.system, c.nodes}].size() > 1);
    c.label = c.system + " " + NodesText(c.nodes);
    if (show_network) c.label += " (" + c.network + ")";
    if (!c.variant.empty()) c.label += " [" + c.variant + "]";
    ordered[{c.nodes, rank(c.system), c.system, c.network, c.variant}] = c;
  }
  std::vector<TableColumn> out;
  for (auto& [key, c] : ordered) out.push_back(c);
  return out;
}

std::string NodesText(int nodes) { return fmt::format("{} {}", nodes, nodes == 1 ? "node" : "nodes"); }

std::string CoverageRow::Label() const { return workload + " " + length.ToString(); }

std::vector<CoverageTable> TrainingCoverage(const Plan& plan, const std::string& baseline,
                                            const std::string& candidate, const std::vector<std::string>& further) {
  std::vector<std::string> models;
  std::map<std::string, std::vector<const CaseSpec*>> by_model;
  for (const CaseSpec* c : plan.Cases()) {
    const std::string system = SystemOf(*c);
    const bool further_baseline = std::find(further.begin(), further.end(), system) != further.end();
    if (!IsTraining(*c) || (system != baseline && system != candidate && !further_baseline)) continue;
    if (!by_model.count(c->model)) models.push_back(c->model);
    by_model[c->model].push_back(c);
  }
  std::vector<CoverageTable> tables;
  for (const std::string& model : models) {
    const std::vector<const CaseSpec*>& cases = by_model[model];
    CoverageTable t;
    t.model = model;
    std::vector<TableColumn> combinations;
    std::set<std::tuple<int, int, int64_t>> row_keys;  // workload, unit, count: the report's order
    for (const CaseSpec* c : cases) {
      combinations.push_back(ColumnOf(*c));
      for (const auto& [l, fill] : LengthsOf(*c))
        row_keys.insert({c->workload == Workload::kPretrain ? 0 : 1, static_cast<int>(l.unit), l.count});
    }
    t.columns = TrainingColumnsOf(combinations, baseline, further);
    for (const auto& [workload, unit, count] : row_keys) {
      CoverageRow row;
      row.workload = workload == 0 ? "pretrain" : "finetune";
      row.length = Length{static_cast<Length::Unit>(unit), count};
      row.cells.resize(t.columns.size());
      for (const CaseSpec* c : cases) {
        if (WorkloadName(c->workload) != row.workload) continue;
        const auto col = std::find(t.columns.begin(), t.columns.end(), ColumnOf(*c));
        CoverageCell& cell = row.cells[col - t.columns.begin()];
        for (const auto& [l, fill] : LengthsOf(*c)) {
          // The first case in plan order gives a cell; a measured figure wins over a computed one.
          if (!(l == row.length) || (cell.fill && (*cell.fill == CellFill::kMeasured || fill != CellFill::kMeasured)))
            continue;
          cell.fill = fill;
          cell.case_id = c->id;
        }
      }
      for (size_t i = 0; i < row.cells.size(); ++i)
        if (!row.cells[i].fill) row.cells[i].why_empty = WhyEmpty(cases, t.columns[i], row);
      t.rows.push_back(std::move(row));
    }
    tables.push_back(std::move(t));
  }
  return tables;
}

std::string RenderCoverage(const std::vector<CoverageTable>& tables) {
  std::string out;
  for (const CoverageTable& t : tables) {
    out += fmt::format(
        "training cells of {} (the case that fills each; * computed from its first steps or extrapolated, "
        "X declared not provided, \u2013 empty):\n",
        t.model);
    std::vector<std::vector<std::string>> grid = {{"  "}};
    for (const TableColumn& c : t.columns) grid[0].push_back(c.label);
    std::vector<std::string> empty;
    for (const CoverageRow& row : t.rows) {
      std::vector<std::string> line = {"  " + row.Label()};
      for (size_t i = 0; i < row.cells.size(); ++i) {
        const CoverageCell& cell = row.cells[i];
        line.push_back(cell.fill ? FillMark(*cell.fill) + cell.case_id : "\u2013");
        if (!cell.fill) empty.push_back(fmt::format("  empty: {}, {}: {}", row.Label(), t.columns[i].label, cell.why_empty));
      }
      grid.push_back(std::move(line));
    }
    out += AlignColumns(grid, "  ");
    for (const std::string& e : empty) out += e + "\n";
  }
  return out;
}

std::string CaseResources::Text() const {
  return fmt::format("{} {} on {}, {}", processes, processes == 1 ? "rank" : "ranks", NodesText(nodes), devices);
}

std::vector<std::pair<std::string, std::string>> UnequalSides(const Plan& plan,
                                                              const std::vector<CoverageTable>& tables,
                                                              const std::string& candidate,
                                                              const ResourcesOf& resources) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::pair<std::string, std::string>> said;  // (baseline case, candidate case)
  for (const CoverageTable& t : tables) {
    for (const CoverageRow& row : t.rows) {
      for (size_t b = 0; b < t.columns.size(); ++b) {
        const CoverageCell& base = row.cells[b];
        if (t.columns[b].system == candidate || !base.fill || *base.fill == CellFill::kNotProvided) continue;
        for (size_t c = 0; c < t.columns.size(); ++c) {
          const CoverageCell& cand = row.cells[c];
          const TableColumn& col = t.columns[c];
          if (col.system != candidate || col.nodes != t.columns[b].nodes || !cand.fill ||
              *cand.fill == CellFill::kNotProvided || !said.insert({base.case_id, cand.case_id}).second)
            continue;
          std::optional<CaseResources> x = resources(*plan.FindCase(base.case_id));
          std::optional<CaseResources> y = resources(*plan.FindCase(cand.case_id));
          if (!x || !y) continue;
          std::vector<std::string> differ;
          if (x->processes != y->processes || x->nodes != y->nodes) differ.push_back("ranks");
          if (x->devices != y->devices) differ.push_back("devices");
          if (differ.empty()) continue;
          out.push_back({cand.case_id,
                         fmt::format("{}, {}: {} (case {}) runs {}; {} (case {}) runs {}: the two sides of the "
                                     "ratio differ in {}",
                                     row.Label(), NodesText(col.nodes), t.columns[b].system, base.case_id, x->Text(),
                                     col.system, cand.case_id, y->Text(), Join(differ, " and "))});
        }
      }
    }
  }
  return out;
}

}  // namespace protocol
