#include "report/collect.h"

#include "runner/text.h"

namespace protocol {

Result<ReportInput> CollectReportInput(Store& store, const ReportOptions& options) {
  std::vector<RunRecord> runs;
  if (options.run_ids.empty()) {
    auto all = store.ListRuns();
    if (!all.ok()) return all.status();
    runs = std::move(all.value());
  } else {
    for (int64_t id : options.run_ids) {
      auto run = store.GetRun(id);
      if (!run.ok()) {
        if (run.status().code() == Status::Code::kNotFound) {
          return Status::NotFound(fmt::format("run {} is not in the store", id));
        }
        return run.status();
      }
      runs.push_back(std::move(run.value()));
    }
  }
  ReportInput input;
  for (auto& run : runs) {
    ReportRunInput r;
    r.run = std::move(run);
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
