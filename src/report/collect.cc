#include "report/collect.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

#include "report/tables/cell_key.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// The case rows a report shows (step 2 of collect.h), by run.
using RowsByRun = std::map<int64_t, std::set<int64_t>>;

// `lengths`: the wall_seconds figures of each case row, whose lengths give
// the cells beyond the case's own (cell_key.h KeysOf).
template <typename Cases>  // a vector or a deque of CaseRecord
RowsByRun ShownRows(const Cases& cases,
                    const std::map<int64_t, std::vector<Measurement>>& lengths) {
  auto keys = [&lengths](const CaseRecord& c) {
    auto it = lengths.find(c.row_id);
    return c.status == CaseStatus::kOk && it != lengths.end() ? KeysOf(c, it->second)
                                                              : std::vector<CellKey>{KeyOf(c)};
  };
  std::map<std::pair<std::string, CellKey>, int64_t> newest_ok;  // (model, cell) → run
  for (const CaseRecord& c : cases) {
    if (c.status != CaseStatus::kOk) continue;
    for (const CellKey& k : keys(c)) {
      int64_t& run = newest_ok[{c.model, k}];
      run = std::max(run, c.run_id);
    }
  }
  RowsByRun shown;
  for (const CaseRecord& c : cases) {
    for (const CellKey& k : keys(c)) {
      auto it = newest_ok.find({c.model, k});
      const int64_t newest = it == newest_ok.end() ? 0 : it->second;
      const bool listed = c.status == CaseStatus::kOk ? c.run_id == newest : c.run_id >= newest;
      if (listed) shown[c.run_id].insert(c.row_id);
    }
  }
  return shown;
}

// A run with its context and the cases of `rows` read whole.
Result<ReportRunInput> ReadRun(Store& store, int64_t run_id, const std::set<int64_t>& rows) {
  ReportRunInput r;
  auto run = store.GetRun(run_id);
  if (!run.ok()) return run.status();
  r.run = std::move(run.value());
  auto context = store.GetContext(run_id);
  if (!context.ok()) return context.status();
  r.context = std::move(context.value());
  auto cases = store.CasesOfRun(run_id);
  if (!cases.ok()) return cases.status();
  for (CaseRecord& rec : cases.value()) {
    if (!rows.count(rec.row_id)) continue;
    ReportCaseInput c;
    c.record = std::move(rec);
    auto ms = store.MeasurementsOfCase(c.record.row_id);
    if (!ms.ok()) return ms.status();
    c.measurements = std::move(ms.value());
    auto reqs = store.RequestsOfCase(c.record.row_id);
    if (!reqs.ok()) return reqs.status();
    c.requests = std::move(reqs.value());
    auto facts = store.FactsOfCase(c.record.row_id);
    if (!facts.ok()) return facts.status();
    c.facts = std::move(facts.value());
    auto samples = store.TelemetryOfCase(c.record.row_id);
    if (!samples.ok()) return samples.status();
    c.samples = std::move(samples.value());
    if (c.record.workload != "inference") {
      auto curve = store.EvalCurveOfCase(c.record.row_id);
      if (!curve.ok()) return curve.status();
      c.eval_curve = std::move(curve.value());
    }
    r.cases.push_back(std::move(c));
  }
  return r;
}

// Measurements as FindMeasurements returns them: (case row, measurement),
// ordered by row. Take(row) moves a row's out; no second copy is made.
class FiguresByRow {
 public:
  explicit FiguresByRow(std::vector<std::pair<int64_t, Measurement>> figures) : figures_(std::move(figures)) {}

  std::vector<Measurement> Take(int64_t row) {
    auto it = std::lower_bound(figures_.begin(), figures_.end(), row,
                               [](const std::pair<int64_t, Measurement>& f, int64_t r) { return f.first < r; });
    std::vector<Measurement> out;
    for (; it != figures_.end() && it->first == row; ++it) out.push_back(std::move(it->second));
    return out;
  }

 private:
  std::vector<std::pair<int64_t, Measurement>> figures_;
};

// Step 3: the ok cases of every run up to history_through that `shown` does
// not hold, with the figure a history chart plots (wall_seconds, or
// tokens_per_second; an inference case without it gets its request samples,
// from which the figure is derived).
// `selected` are the cases step 1 read and `figures` their wall_seconds and
// tokens_per_second: when they are every run's (no run_ids), the history's
// are among them and nothing more is read; otherwise both are read here.
// Each record is moved out of `selected` and popped, so that the two copies
// of the history never coexist whole (a deque frees as it is popped).
Result<std::vector<ReportRunInput>> ReadHistory(Store& store, const ReportOptions& options, const RowsByRun& shown,
                                                std::deque<CaseRecord> selected,
                                                std::vector<std::pair<int64_t, Measurement>> figures) {
  CaseQuery query;
  query.through_run = options.history_through;
  query.model = options.model;
  query.ok_only = true;
  if (!options.run_ids.empty()) {
    auto found = store.FindCases(query);
    if (!found.ok()) return found.status();
    selected.assign(std::make_move_iterator(found->begin()), std::make_move_iterator(found->end()));
    auto read = store.FindMeasurements(query, {metric::kWallSeconds, metric::kTokensPerSecond});
    if (!read.ok()) return read.status();
    figures = std::move(read.value());
  }
  FiguresByRow by_row(std::move(figures));
  std::vector<ReportRunInput> out;
  for (; !selected.empty(); selected.pop_front()) {
    CaseRecord& rec = selected.front();
    if (!query.Selects(rec)) continue;
    auto run = shown.find(rec.run_id);
    if (run != shown.end() && run->second.count(rec.row_id)) continue;  // read whole already
    if (out.empty() || out.back().run.id != rec.run_id) {
      out.emplace_back();
      out.back().run.id = rec.run_id;
      // The cases come by run: room for this run's, at most.
      auto end = std::find_if(selected.begin(), selected.end(),
                              [&rec](const CaseRecord& c) { return c.run_id != rec.run_id; });
      out.back().cases.reserve(static_cast<size_t>(end - selected.begin()));
    }
    ReportCaseInput c;
    c.record = std::move(rec);
    c.measurements = by_row.Take(c.record.row_id);
    const bool has_tps = std::any_of(c.measurements.begin(), c.measurements.end(),
                                     [](const Measurement& m) { return m.name == metric::kTokensPerSecond; });
    if (c.record.workload == "inference" && !has_tps) {
      auto reqs = store.RequestsOfCase(c.record.row_id);
      if (!reqs.ok()) return reqs.status();
      c.requests = std::move(reqs.value());
    }
    out.back().cases.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Result<ReportInput> CollectReportInput(Store& store, const ReportOptions& options) {
  auto runs = store.ListRunHeaders();
  if (!runs.ok()) return runs.status();
  for (int64_t id : options.run_ids) {
    bool found = std::any_of(runs->begin(), runs->end(), [id](const RunRecord& r) { return r.id == id; });
    if (!found) return Status::NotFound(fmt::format("run {} is not in the store", id));
  }
  CaseQuery selected;
  selected.run_ids = options.run_ids;
  selected.model = options.model;
  auto found = store.FindCases(selected);
  if (!found.ok()) return found.status();
  // The history (read from these cases when no run is selected) takes them
  // over through a deque, which frees as ReadHistory pops; without the
  // history they stay in their vector.
  std::deque<CaseRecord> cases;
  if (options.history) {
    cases.assign(std::make_move_iterator(found->begin()), std::make_move_iterator(found->end()));
    found = std::vector<CaseRecord>();
  }
  // One read of the figures: the wall times, and (when the history charts
  // read every run's cases from these) the tokens per second a chart plots.
  const bool history_from_selected = options.history && options.run_ids.empty();
  std::vector<std::string> names = {metric::kWallSeconds};
  if (history_from_selected) names.push_back(metric::kTokensPerSecond);
  auto figures = store.FindMeasurements(selected, names);
  if (!figures.ok()) return figures.status();
  std::map<int64_t, std::vector<Measurement>> lengths;
  for (const auto& [row, m] : figures.value())
    if (m.name == metric::kWallSeconds && !m.length_unit.empty()) lengths[row].push_back(m);
  const RowsByRun shown = options.history ? ShownRows(cases, lengths) : ShownRows(found.value(), lengths);

  ReportInput input;
  for (const auto& [run_id, rows] : shown) {
    auto run = ReadRun(store, run_id, rows);
    if (!run.ok()) return run.status();
    input.runs.push_back(std::move(run.value()));
  }
  // ComputeReport tells an empty store from an empty selection by the runs
  // it is given: a selected run without a case shown is passed bare.
  if (input.runs.empty()) {
    for (const RunRecord& r : *runs) {
      if (options.run_ids.empty() || std::count(options.run_ids.begin(), options.run_ids.end(), r.id)) {
        ReportRunInput bare;
        bare.run = r;
        input.runs.push_back(std::move(bare));
      }
    }
  }
  if (options.history) {
    auto history = ReadHistory(store, options, shown, std::move(cases),
                               history_from_selected ? std::move(figures.value())
                                                     : std::vector<std::pair<int64_t, Measurement>>());
    if (!history.ok()) return history.status();
    input.history_only = std::move(history.value());
  }
  return input;
}

}  // namespace protocol
