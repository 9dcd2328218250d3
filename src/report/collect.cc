#include "report/collect.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "report/cell_key.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// The case rows a report shows (step 2 of collect.h), by run.
using RowsByRun = std::map<int64_t, std::set<int64_t>>;

// `lengths`: the wall_seconds figures of each case row, whose lengths give
// the cells beyond the case's own (cell_key.h KeysOf).
RowsByRun ShownRows(const std::vector<CaseRecord>& cases,
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
    r.cases.push_back(std::move(c));
  }
  return r;
}

// Step 3: the ok cases of every run up to history_through that `shown` does
// not hold, with the figure a history chart plots (wall_seconds, or
// tokens_per_second; an inference case without it gets its request samples,
// from which the figure is derived).
// `selected` are the cases step 1 read: when they are every run's, the
// history's are among them.
Result<std::vector<ReportRunInput>> ReadHistory(Store& store, const ReportOptions& options, const RowsByRun& shown,
                                                std::vector<CaseRecord> selected) {
  CaseQuery query;
  query.through_run = options.history_through;
  query.model = options.model;
  query.ok_only = true;
  std::vector<CaseRecord> cases;
  if (options.run_ids.empty()) {
    for (CaseRecord& c : selected)
      if (query.Selects(c)) cases.push_back(std::move(c));
  } else {
    auto found = store.FindCases(query);
    if (!found.ok()) return found.status();
    cases = std::move(found.value());
  }
  auto figures = store.FindMeasurements(query, {metric::kWallSeconds, metric::kTokensPerSecond});
  if (!figures.ok()) return figures.status();
  std::map<int64_t, std::vector<Measurement>> by_row;
  for (auto& [row, m] : figures.value()) by_row[row].push_back(std::move(m));
  std::vector<ReportRunInput> out;
  for (CaseRecord& rec : cases) {
    auto run = shown.find(rec.run_id);
    if (run != shown.end() && run->second.count(rec.row_id)) continue;  // read whole already
    if (out.empty() || out.back().run.id != rec.run_id) {
      out.emplace_back();
      out.back().run.id = rec.run_id;
    }
    ReportCaseInput c;
    c.record = std::move(rec);
    auto ms = by_row.find(c.record.row_id);
    if (ms != by_row.end()) c.measurements = std::move(ms->second);
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
  auto cases = store.FindCases(selected);
  if (!cases.ok()) return cases.status();
  auto walls = store.FindMeasurements(selected, {metric::kWallSeconds});
  if (!walls.ok()) return walls.status();
  std::map<int64_t, std::vector<Measurement>> lengths;
  for (auto& [row, m] : walls.value())
    if (!m.length_unit.empty()) lengths[row].push_back(std::move(m));
  const RowsByRun shown = ShownRows(cases.value(), lengths);

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
    auto history = ReadHistory(store, options, shown, std::move(cases.value()));
    if (!history.ok()) return history.status();
    input.history_only = std::move(history.value());
  }
  return input;
}

}  // namespace protocol
