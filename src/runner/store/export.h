#ifndef PROTOCOL_RUNNER_STORE_EXPORT_H_
#define PROTOCOL_RUNNER_STORE_EXPORT_H_

// What `protocol list`, `protocol show` and `protocol export` print: views of
// the store, built through the Store interface only (so a fake store works).
// Each returns the whole text, ending in a newline; a store read error is
// returned as is. Nothing is computed here: figures are printed as stored,
// with how they were obtained, and failed cases are shown with their reason.

#include <cstdint>
#include <string>
#include <vector>

#include "runner/base/status.h"
#include "runner/store/store.h"


namespace protocol {

// `protocol list`: one line per run, by id, in aligned columns
//   ID  KIND  PLAN  STARTED  STATUS  CASES  OK  FAILED
// where CASES counts every case row of the run, OK those with status ok and
// FAILED those with status failed or timeout (the rest are skipped,
// interrupted or still running). An empty store gives "no runs stored\n".
// json: an array of {"id", "kind", "plan_name", "plan_title", "started_at",
// "finished_at", "status", "cases", "ok", "failed"}.
Result<std::string> RenderRunList(Store& store, bool json);

// `protocol show RUN_ID`: the run, its context, then each case with its
// identity, status and reason, its measurements (value, unit, provenance with
// method or source, marker) and its sample counts. kNotFound "run 7 does not
// exist" when absent.
// json: the run object of ExportStore's JSON (every field, context, cases
// with measurements, steps and requests).
Result<std::string> RenderRunDetails(Store& store, int64_t run_id, bool json);

// `protocol export --format json|csv [--run SPEC ...]`: the whole store, or
// only the runs whose ids are in `run_ids` (in id order; empty: every run).
// json: {"schema_version": StoreSchemaVersion(), "runs": [{...every RunRecord
//   field, "context": {key: value} (a key stored twice keeps its last value),
//   "cases": [{...every CaseRecord field (exit_code null when absent),
//   "measurements": [...], "steps": [...], "requests": [...]}]}]}.
//   Absent values (a not-provided figure, a step without loss) are null.
// csv (RFC 4180: CRLF line ends, fields with a comma, quote, CR or LF quoted,
//   quotes doubled): a header, then one row per measurement with the columns
//   run_id, kind, plan, case_id, repeat, model, workload, system, backend,
//   nodes, network, variant, length_unit, length_count, report_as_unit,
//   report_as_count, status, name, value, unit, how, method, source, marker.
//   A case without measurements still gets one row, its measurement columns
//   empty, so no case disappears from the export.
// Another format: kInvalidArgument "unknown export format 'xml' (expected json
// or csv)", or "... 'jsn' (did you mean 'json'?)" for a near miss.
Result<std::string> ExportStore(Store& store, const std::string& format,
                                const std::vector<int64_t>& run_ids = {});


}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_EXPORT_H_
