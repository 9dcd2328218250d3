#include "report/collect.h"

#include <algorithm>

#include "runner/base/text.h"

namespace protocol {

Result<ReportInput> CollectReportInput(Store& store, const ReportOptions& options) {
  auto all = store.ListRuns();
  if (!all.ok()) return all.status();
  std::vector<RunRecord> runs = std::move(all.value());
  for (int64_t id : options.run_ids) {
    bool found = std::any_of(runs.begin(), runs.end(), [id](const RunRecord& r) { return r.id == id; });
    if (!found) return Status::NotFound(fmt::format("run {} is not in the store", id));
  }
  ReportInput input;
  for (auto& run : runs) {
    ReportRunInput r;
    r.run = std::move(run);
    auto context = store.GetContext(r.run.id);
    if (!context.ok()) return context.status();
    r.context = std::move(context.value());
    auto cases = store.CasesOfRun(r.run.id);
    if (!cases.ok()) return cases.status();
    for (auto& rec : cases.value()) {
      if (!options.model.empty() && rec.model != options.model) continue;
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
    input.runs.push_back(std::move(r));
  }
  return input;
}

}  // namespace protocol
