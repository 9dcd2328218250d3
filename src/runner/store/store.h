#ifndef PROTOCOL_RUNNER_STORE_STORE_H_
#define PROTOCOL_RUNNER_STORE_STORE_H_

// The results database (SQLite). The only file that includes <sqlite3.h> is
// store.cc. Schema versioned with PRAGMA user_version and migrated forward on
// open; WAL journal and a busy timeout so two `protocol run` processes can write
// the same file at once; every mutating call is one transaction (BEGIN
// IMMEDIATE), so a runner killed with -9 loses at most the case in flight.
//
// The interface lets tests use a fake; OpenStore(":memory:") gives the real
// thing in memory. Thread-compatibility: one Store per thread.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runner/base/status.h"
#include "runner/store/records.h"

namespace protocol {

// Which cases a FindCases / FindMeasurements call reads; every condition set
// must hold.
struct CaseQuery {
  std::vector<int64_t> run_ids;  // these runs only; empty: every run
  int64_t through_run = 0;       // > 0: runs with id <= through_run only
  std::string model;             // "": every model
  bool ok_only = false;          // true: cases with status ok only

  bool SelectsRun(int64_t run_id) const;       // run_ids and through_run
  bool Selects(const CaseRecord& c) const;     // every condition
};

class Store {
 public:
  virtual ~Store() = default;

  // ---- writing ----
  // Inserts a run; returns its id. `run.id` is ignored.
  virtual Result<int64_t> CreateRun(const RunRecord& run) = 0;
  virtual Status FinishRun(int64_t run_id, const std::string& status,
                           const std::string& finished_at) = 0;
  // Run context: facts about the machine and software (key → value), appended.
  virtual Status PutContext(int64_t run_id,
                            const std::vector<std::pair<std::string, std::string>>& facts) = 0;
  // Stores a case row with status "running" before the case starts; returns row_id.
  // `record.row_id` and `record.status` are ignored.
  virtual Result<int64_t> BeginCase(const CaseRecord& record) = 0;
  // Appends samples while a case runs (callers batch them; one transaction per call).
  virtual Status AppendSteps(int64_t row_id, const std::vector<StepSample>& steps) = 0;
  virtual Status AppendRequests(int64_t row_id, const std::vector<RequestSample>& requests) = 0;
  // Appends hardware samples while a case runs (telemetry.h; batched like steps).
  virtual Status AppendTelemetry(int64_t row_id, const std::vector<TelemetrySample>& samples) = 0;
  // Final status, reason, measurements and remaining samples, in one transaction.
  virtual Status FinishCase(int64_t row_id, const CaseResult& result) = 0;
  // Marks every case of the run still "running" as interrupted with `reason`
  // (used by --resume after a runner died). Returns how many were changed.
  virtual Result<int> InterruptRunningCases(int64_t run_id, const std::string& reason) = 0;

  // ---- reading ----
  virtual Result<std::vector<RunRecord>> ListRuns() = 0;         // by id ascending
  virtual Result<RunRecord> GetRun(int64_t run_id) = 0;          // kNotFound when absent
  virtual Result<std::vector<std::pair<std::string, std::string>>> GetContext(int64_t run_id) = 0;
  virtual Result<std::vector<CaseRecord>> CasesOfRun(int64_t run_id) = 0;  // in row order
  virtual Result<std::vector<Measurement>> MeasurementsOfCase(int64_t row_id) = 0;
  virtual Result<std::vector<StepSample>> StepsOfCase(int64_t row_id) = 0;
  // The held-out loss curve (CaseResult::eval_curve), by step; empty when the
  // case stored none. Default: none (a store without curves).
  virtual Result<std::vector<EvalPoint>> EvalCurveOfCase(int64_t row_id) { return std::vector<EvalPoint>{}; }
  // The hardware samples of a case in stored order (by time within each
  // batch); empty when none were taken.
  // Default: none (a store without samples).
  virtual Result<std::vector<TelemetrySample>> TelemetryOfCase(int64_t row_id) {
    return std::vector<TelemetrySample>{};
  }
  virtual Result<std::vector<RequestSample>> RequestsOfCase(int64_t row_id) = 0;
  virtual Result<std::vector<std::pair<std::string, std::string>>> FactsOfCase(int64_t row_id) = 0;  // stored order

  // ---- reading at scale (reports): one query each in the SQLite store; the
  // defaults here answer from the calls above, so a fake need not override them.
  // Every run by id ascending, without plan_text (the resolved plan, the
  // largest column; GetRun has it).
  virtual Result<std::vector<RunRecord>> ListRunHeaders();
  // The cases `query` selects, ordered by run id then row, with their
  // identity and outcome: row_id, run_id, case_id, repeat, model, workload,
  // system, nodes, network, variant, length_unit, length_count,
  // report_as_unit, report_as_count, status. Other fields may be left empty
  // (the SQLite store does not read them; CasesOfRun has them).
  virtual Result<std::vector<CaseRecord>> FindCases(const CaseQuery& query);
  // The measurements called one of `names` of the cases `query` selects, as
  // (case row id, measurement) by row then stored order; method and source are
  // not read (left empty).
  virtual Result<std::vector<std::pair<int64_t, Measurement>>> FindMeasurements(
      const CaseQuery& query, const std::vector<std::string>& names);
};

// The SQLite store (store.cc, the only file that includes <sqlite3.h>).
// Opens (creating when missing, with parent directories) the database at
// `path`; ":memory:" gives a private in-memory database (tests).
// Fails with kIoError when the file cannot be opened, kCorruption when it is
// not a protocol database or its schema is newer than this binary knows.
Result<std::unique_ptr<Store>> OpenStore(const std::string& path);

// The schema version this binary writes (PRAGMA user_version after migrations).
int StoreSchemaVersion();

// PRAGMA integrity_check on a database file: ok() and true when "ok".
Result<bool> CheckStoreIntegrity(const std::string& path);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_STORE_H_
