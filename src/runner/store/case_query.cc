// CaseQuery, and the defaults of Store's reading calls for reports: built on
// the per-run and per-case calls, so that a fake store answers them too. The
// SQLite store (store.cc) overrides each with one query.

#include <algorithm>

#include "runner/store/store.h"

namespace protocol {

bool CaseQuery::SelectsRun(int64_t run_id) const {
  if (!run_ids.empty() && std::find(run_ids.begin(), run_ids.end(), run_id) == run_ids.end()) return false;
  return through_run <= 0 || run_id <= through_run;
}

bool CaseQuery::Selects(const CaseRecord& c) const {
  if (!SelectsRun(c.run_id)) return false;
  if (!model.empty() && c.model != model) return false;
  return !ok_only || c.status == CaseStatus::kOk;
}

Result<std::vector<RunRecord>> Store::ListRunHeaders() {
  auto runs = ListRuns();
  if (!runs.ok()) return runs.status();
  for (RunRecord& r : *runs) r.plan_text.clear();
  return runs;
}

Result<std::vector<CaseRecord>> Store::FindCases(const CaseQuery& query) {
  auto runs = ListRunHeaders();
  if (!runs.ok()) return runs.status();
  std::vector<CaseRecord> out;
  for (const RunRecord& run : *runs) {
    if (!query.SelectsRun(run.id)) continue;
    auto cases = CasesOfRun(run.id);
    if (!cases.ok()) return cases.status();
    for (CaseRecord& c : *cases)
      if (query.Selects(c)) out.push_back(std::move(c));
  }
  return out;
}

Result<std::vector<std::pair<int64_t, Measurement>>> Store::FindMeasurements(const CaseQuery& query,
                                                                              const std::vector<std::string>& names) {
  auto cases = FindCases(query);
  if (!cases.ok()) return cases.status();
  std::vector<std::pair<int64_t, Measurement>> out;
  for (const CaseRecord& c : *cases) {
    auto ms = MeasurementsOfCase(c.row_id);
    if (!ms.ok()) return ms.status();
    for (Measurement& m : *ms) {
      if (std::find(names.begin(), names.end(), m.name) == names.end()) continue;
      m.method.clear();
      m.source.clear();
      out.emplace_back(c.row_id, std::move(m));
    }
  }
  return out;
}

}  // namespace protocol
