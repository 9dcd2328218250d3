#ifndef PROTOCOL_RUNNER_STORE_RUN_SPEC_H_
#define PROTOCOL_RUNNER_STORE_RUN_SPEC_H_

// How a stored run is named wherever the command line takes one (show,
// export --run, report --run, compare, run --resume):
//   ID            a run id, e.g. 17
//   latest        the newest run of kind "run" (imports are not runs)
//   latest:PLAN   the newest run of kind "run" of the plan named PLAN
// ResolveRunSpec is the one resolver; its errors have one style:
//   kInvalidArgument  "'x' is not a run: write an id, 'latest' or 'latest:PLAN'"
//   kNotFound         "unknown run 'SPEC': <what the database holds>", e.g.
//                     "unknown run '99': the database has runs 1 to 3"
//                     "unknown run 'latest': the database has no runs of a plan yet (run one first: protocol run PLAN)"
//                     "unknown run 'latest:nightly': no run of plan 'nightly' (plans run: quickstart)"
// A store read error is returned as is.

#include <cstdint>
#include <string>

#include "runner/base/status.h"
#include "runner/store/store.h"

namespace protocol {

Result<int64_t> ResolveRunSpec(Store& store, const std::string& spec);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_RUN_SPEC_H_
