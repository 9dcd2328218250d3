#ifndef PROTOCOL_RUNNER_ANALYSIS_REFERENCE_CHECK_H_
#define PROTOCOL_RUNNER_ANALYSIS_REFERENCE_CHECK_H_

// `protocol run --check`: each case's figures against the plan's `reference:`
// bands (plan.h ReferenceBand; docs/regression.md). A case outside its band
// fails the check, saying by how much:
//   "wall time 105.2 min is 13.1 % above the reference 93 min (band −5 % … +10 %)"
// Verdicts are data: CheckRunReferences stores each one in the run's context
// (key "reference_check <case_id> <metric>", value "pass: …" | "fail: …").
//
// The figure checked is the median over the case's ok repeats (latest row of
// each repeat). wall_minutes / wall_seconds use the extrapolated wall time
// when the case has one (report_as: the figure the report shows), else the
// measured one; other metrics use the measured figure.

#include <optional>
#include <string>
#include <vector>

#include "runner/analysis/compare.h"
#include "runner/base/status.h"
#include "runner/plan/plan.h"
#include "runner/store/store.h"

namespace protocol {

struct ReferenceVerdict {
  std::string case_id;
  ReferenceBand band;
  std::optional<double> value;  // the figure, in the band's unit; absent when none
  double deviation = 0;         // (value - reference) / reference
  bool pass = false;
  std::string message;
};

// Pure: one verdict per band of each case of `plan` that has rows in `rows`
// (cases not run are not checked). A band without a figure fails ("no measured
// tokens_per_second to check"); a case with no ok repeat fails with its status.
std::vector<ReferenceVerdict> CheckReferences(const Plan& plan, const std::vector<CompareCase>& rows);

// Reads the run's rows, checks them and stores every verdict in the run
// context. Errors only for store failures.
Result<std::vector<ReferenceVerdict>> CheckRunReferences(Store& store, const Plan& plan,
                                                         int64_t run_id);

// "−5 % … +10 %".
std::string BandText(const ReferenceBand& band);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_ANALYSIS_REFERENCE_CHECK_H_
