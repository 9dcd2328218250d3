#include "report/report_data.h"

// ComputeReport: the selected runs' cases, grouped by model, each model's
// report built by a ModelBuilder (tables/model_builder.h: the tables,
// sentences, appendix and charts), then the runs read and the empty message.

#include <algorithm>
#include <map>
#include <set>

#include "report/tables/cell_key.h"
#include "report/tables/model_builder.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// `e` as the entry of cell `k`: at a length other than the case's own it stands for that length.
CaseEntry EntryAt(const CellKey& k, const CaseRecord& rec, CaseEntry e) {
  if (k.length_unit != rec.length_unit || k.length_count != rec.length_count) {
    e.length_unit = k.length_unit;
    e.length_count = k.length_count;
  }
  return e;
}

}  // namespace

ReportData ComputeReport(const ReportInput& input, const ReportOptions& options) {
  ReportData data;
  data.baseline_system = options.baseline_system;
  data.candidate_system = options.candidate_system;
  data.further_baseline_systems = FurtherBaselines(options);

  std::vector<const ReportRunInput*> runs;
  for (const auto& r : input.runs) {
    if (!options.run_ids.empty() &&
        std::find(options.run_ids.begin(), options.run_ids.end(), r.run.id) == options.run_ids.end()) {
      continue;
    }
    runs.push_back(&r);
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const ReportRunInput* a, const ReportRunInput* b) { return a->run.id < b->run.id; });

  RunIndex index;
  for (const auto* r : runs) index.Add(*r);
  std::map<std::string, ModelBuilder> builders;
  for (const auto* r : runs) {
    for (const auto& c : r->cases) {
      const auto& rec = c.record;
      if (!options.model.empty() && rec.model != options.model) continue;
      auto it = builders.try_emplace(rec.model, rec.model, options, index).first;
      if (rec.status != CaseStatus::kOk) {
        it->second.AddFailure(KeyOf(rec), CaseEntry{&r->run, &c, "", 0});
        continue;
      }
      for (const CellKey& k : KeysOf(rec, c.measurements))
        it->second.AddOk(k, EntryAt(k, rec, CaseEntry{&r->run, &c, "", 0}));
    }
  }
  // History: every run of the input up to history_through, selected or not.
  for (const auto* all : {&input.runs, &input.history_only}) {
    for (const auto& r : *all) {
      if (!options.history || (options.history_through > 0 && r.run.id > options.history_through)) continue;
      for (const auto& c : r.cases) {
        if (c.record.status != CaseStatus::kOk) continue;
        auto it = builders.find(c.record.model);
        if (it == builders.end()) continue;  // a model the selected runs do not report
        for (const CellKey& k : KeysOf(c.record, c.measurements))
          it->second.AddHistory(k, EntryAt(k, c.record, CaseEntry{&r.run, &c, "", 0}));
      }
    }
  }
  std::set<int64_t> shown;
  for (auto& [_, b] : builders) {
    data.models.push_back(b.Build());
    shown.insert(b.RunsShown().begin(), b.RunsShown().end());
  }
  // The runs read: those a figure shown or a failure listed comes from.
  for (const auto* r : runs)
    if (shown.count(r->run.id))
      data.runs.push_back({r->run.id, r->run.kind, r->run.plan_name, r->run.started_at, r->run.status, r->run.source});

  if (data.models.empty()) {
    if (input.runs.empty()) {
      data.empty_message = "The store holds no runs: nothing to report.";
    } else if (runs.empty()) {
      data.empty_message = "None of the selected runs is in the store: nothing to report.";
    } else if (!options.model.empty()) {
      data.empty_message = fmt::format("No case of model '{}' in the selected runs: nothing to report.",
                                       options.model);
    } else {
      data.empty_message = "The selected runs hold no cases: nothing to report.";
    }
  }
  return data;
}

}  // namespace protocol
