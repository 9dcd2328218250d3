#ifndef PROTOCOL_TESTS_FAKE_STORE_H_
#define PROTOCOL_TESTS_FAKE_STORE_H_

// An in-memory Store for tests that need a store without SQLite (after
// leveldb's memenv). Implements all of store.h with the same observable
// contract as the SQLite store:
//   - ids (runs and case rows) start at 1 and increase; CreateRun ignores
//     run.id, BeginCase ignores record.row_id and stores status "running";
//   - writes naming a run or case row that does not exist fail with kNotFound
//     (the SQLite store fails them on its foreign keys) and change nothing;
//   - GetRun of an unknown id is kNotFound ("run 7 does not exist"); the list
//     readers return empty vectors for unknown ids;
//   - FinishCase sets status/reason/exit_code/finished_at and appends its
//     measurements and remaining samples after those appended before;
//   - InterruptRunningCases changes only the run's rows still "running".
// Extras for tests: a log of every call (`calls()`), a count of mutating calls
// (`writes()`), fault injection (`FailNext`), and direct views of all rows.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/base/text.h"
#include "runner/store/store.h"

namespace protocol {

class FakeStore : public Store {
 public:
  struct CaseRow {
    CaseRecord record;
    std::vector<Measurement> measurements;
    std::vector<StepSample> steps;
    std::vector<RequestSample> requests;
    std::vector<std::pair<std::string, std::string>> facts;
    std::vector<EvalPoint> eval_curve;
    std::vector<TelemetrySample> samples;
  };

  // The next call of `op` (a method name, e.g. "FinishCase") returns `status`
  // and changes nothing. REQUIRES: !status.ok().
  void FailNext(const std::string& op, Status status) { faults_[op] = std::move(status); }

  // "CreateRun", "PutContext 2", "BeginCase 2.1.1.1 r0", "AppendSteps 64",
  // "AppendRequests 3", "FinishCase 2.1.1.1 r0 ok", "InterruptRunningCases 1",
  // "FinishRun ok", "GetRun 1", "CasesOfRun 1", ... in call order.
  const std::vector<std::string>& calls() const { return calls_; }
  // Number of mutating calls (CreateRun ... InterruptRunningCases), failed ones included.
  int writes() const { return writes_; }
  const std::vector<RunRecord>& runs() const { return runs_; }
  const std::vector<CaseRow>& case_rows() const { return cases_; }
  // The row of (case_id, repeat) last begun in `run_id`, or nullptr.
  const CaseRow* FindCase(int64_t run_id, const std::string& case_id, int repeat = 0) const {
    for (auto it = cases_.rbegin(); it != cases_.rend(); ++it)
      if (it->record.run_id == run_id && it->record.case_id == case_id && it->record.repeat == repeat)
        return &*it;
    return nullptr;
  }

  // ---- writing ----
  Result<int64_t> CreateRun(const RunRecord& run) override {
    if (Status s = Write("CreateRun"); !s.ok()) return s;
    RunRecord copy = run;
    copy.id = static_cast<int64_t>(runs_.size()) + 1;
    runs_.push_back(copy);
    return copy.id;
  }
  Status FinishRun(int64_t run_id, const std::string& status,
                   const std::string& finished_at) override {
    if (Status s = Write("FinishRun " + status); !s.ok()) return s;
    RunRecord* run = MutableRun(run_id);
    if (run == nullptr) return RunNotFound(run_id);
    run->status = status;
    run->finished_at = finished_at;
    return Status::Ok();
  }
  Status PutContext(int64_t run_id,
                    const std::vector<std::pair<std::string, std::string>>& facts) override {
    if (Status s = Write(fmt::format("PutContext {}", facts.size())); !s.ok()) return s;
    if (MutableRun(run_id) == nullptr) return RunNotFound(run_id);
    auto& list = context_[run_id];
    list.insert(list.end(), facts.begin(), facts.end());
    return Status::Ok();
  }
  Result<int64_t> BeginCase(const CaseRecord& record) override {
    if (Status s = Write(fmt::format("BeginCase {} r{}", record.case_id, record.repeat)); !s.ok())
      return s;
    if (MutableRun(record.run_id) == nullptr) return RunNotFound(record.run_id);
    CaseRow row;
    row.record = record;
    row.record.row_id = static_cast<int64_t>(cases_.size()) + 1;
    row.record.status = CaseStatus::kRunning;
    cases_.push_back(row);
    return row.record.row_id;
  }
  Status AppendSteps(int64_t row_id, const std::vector<StepSample>& steps) override {
    if (Status s = Write(fmt::format("AppendSteps {}", steps.size())); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    if (row == nullptr) return RowNotFound(row_id);
    row->steps.insert(row->steps.end(), steps.begin(), steps.end());
    return Status::Ok();
  }
  Status AppendRequests(int64_t row_id, const std::vector<RequestSample>& requests) override {
    if (Status s = Write(fmt::format("AppendRequests {}", requests.size())); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    if (row == nullptr) return RowNotFound(row_id);
    row->requests.insert(row->requests.end(), requests.begin(), requests.end());
    return Status::Ok();
  }
  Status AppendTelemetry(int64_t row_id, const std::vector<TelemetrySample>& samples) override {
    if (Status s = Write(fmt::format("AppendTelemetry {}", samples.size())); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    if (row == nullptr) return RowNotFound(row_id);
    row->samples.insert(row->samples.end(), samples.begin(), samples.end());
    return Status::Ok();
  }
  Status FinishCase(int64_t row_id, const CaseResult& result) override {
    CaseRow* row = MutableRow(row_id);
    std::string what = row ? fmt::format("FinishCase {} r{} {}", row->record.case_id,
                                         row->record.repeat, CaseStatusName(result.status))
                           : fmt::format("FinishCase {}", row_id);
    if (Status s = Write(what); !s.ok()) return s;
    if (row == nullptr) return RowNotFound(row_id);
    row->record.status = result.status;
    row->record.reason = result.reason;
    row->record.exit_code = result.exit_code;
    row->record.finished_at = result.finished_at;
    row->measurements.insert(row->measurements.end(), result.measurements.begin(),
                             result.measurements.end());
    row->steps.insert(row->steps.end(), result.steps.begin(), result.steps.end());
    row->requests.insert(row->requests.end(), result.requests.begin(), result.requests.end());
    row->facts.insert(row->facts.end(), result.facts.begin(), result.facts.end());
    row->eval_curve.insert(row->eval_curve.end(), result.eval_curve.begin(), result.eval_curve.end());
    row->samples.insert(row->samples.end(), result.samples.begin(), result.samples.end());
    return Status::Ok();
  }
  Result<int> InterruptRunningCases(int64_t run_id, const std::string& reason) override {
    int changed = 0;
    for (const auto& row : cases_)
      if (row.record.run_id == run_id && row.record.status == CaseStatus::kRunning) ++changed;
    if (Status s = Write(fmt::format("InterruptRunningCases {}", changed)); !s.ok()) return s;
    for (auto& row : cases_) {
      if (row.record.run_id == run_id && row.record.status == CaseStatus::kRunning) {
        row.record.status = CaseStatus::kInterrupted;
        row.record.reason = reason;
      }
    }
    return changed;
  }

  // ---- reading ----
  Result<std::vector<RunRecord>> ListRuns() override {
    if (Status s = Read("ListRuns"); !s.ok()) return s;
    return runs_;  // ids are assigned in order
  }
  Result<RunRecord> GetRun(int64_t run_id) override {
    if (Status s = Read(fmt::format("GetRun {}", run_id)); !s.ok()) return s;
    RunRecord* run = MutableRun(run_id);
    if (run == nullptr) return RunNotFound(run_id);
    return *run;
  }
  Result<std::vector<std::pair<std::string, std::string>>> GetContext(int64_t run_id) override {
    if (Status s = Read(fmt::format("GetContext {}", run_id)); !s.ok()) return s;
    auto it = context_.find(run_id);
    if (it == context_.end()) return std::vector<std::pair<std::string, std::string>>{};
    return it->second;
  }
  Result<std::vector<CaseRecord>> CasesOfRun(int64_t run_id) override {
    if (Status s = Read(fmt::format("CasesOfRun {}", run_id)); !s.ok()) return s;
    std::vector<CaseRecord> out;
    for (const auto& row : cases_)
      if (row.record.run_id == run_id) out.push_back(row.record);
    return out;
  }
  Result<std::vector<Measurement>> MeasurementsOfCase(int64_t row_id) override {
    if (Status s = Read(fmt::format("MeasurementsOfCase {}", row_id)); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    return row ? row->measurements : std::vector<Measurement>{};
  }
  Result<std::vector<std::pair<std::string, std::string>>> FactsOfCase(int64_t row_id) override {
    if (Status s = Read(fmt::format("FactsOfCase {}", row_id)); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    return row ? row->facts : std::vector<std::pair<std::string, std::string>>{};
  }
  Result<std::vector<StepSample>> StepsOfCase(int64_t row_id) override {
    if (Status s = Read(fmt::format("StepsOfCase {}", row_id)); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    return row ? row->steps : std::vector<StepSample>{};
  }
  Result<std::vector<EvalPoint>> EvalCurveOfCase(int64_t row_id) override {
    if (Status s = Read(fmt::format("EvalCurveOfCase {}", row_id)); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    return row ? row->eval_curve : std::vector<EvalPoint>{};
  }
  Result<std::vector<TelemetrySample>> TelemetryOfCase(int64_t row_id) override {
    if (Status s = Read(fmt::format("TelemetryOfCase {}", row_id)); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    return row ? row->samples : std::vector<TelemetrySample>{};
  }
  Result<std::vector<RequestSample>> RequestsOfCase(int64_t row_id) override {
    if (Status s = Read(fmt::format("RequestsOfCase {}", row_id)); !s.ok()) return s;
    CaseRow* row = MutableRow(row_id);
    return row ? row->requests : std::vector<RequestSample>{};
  }

 private:
  // Logs the call and returns an injected fault for it, if any. The fault key
  // is the method name (the first word of `call`).
  Status Log(const std::string& call) {
    calls_.push_back(call);
    std::string op = call.substr(0, call.find(' '));
    auto it = faults_.find(op);
    if (it == faults_.end()) return Status::Ok();
    Status s = it->second;
    faults_.erase(it);
    return s;
  }
  Status Write(const std::string& call) {
    ++writes_;
    return Log(call);
  }
  Status Read(const std::string& call) { return Log(call); }

  RunRecord* MutableRun(int64_t id) {
    if (id < 1 || id > static_cast<int64_t>(runs_.size())) return nullptr;
    return &runs_[static_cast<size_t>(id - 1)];
  }
  CaseRow* MutableRow(int64_t id) {
    if (id < 1 || id > static_cast<int64_t>(cases_.size())) return nullptr;
    return &cases_[static_cast<size_t>(id - 1)];
  }
  static Status RunNotFound(int64_t id) { return Status::NotFound(fmt::format("run {} does not exist", id)); }
  static Status RowNotFound(int64_t id) {
    return Status::NotFound(fmt::format("case row {} does not exist", id));
  }

  std::vector<RunRecord> runs_;
  std::map<int64_t, std::vector<std::pair<std::string, std::string>>> context_;
  std::vector<CaseRow> cases_;
  std::map<std::string, Status> faults_;
  std::vector<std::string> calls_;
  int writes_ = 0;
};

}  // namespace protocol

#endif  // PROTOCOL_TESTS_FAKE_STORE_H_
