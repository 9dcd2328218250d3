#ifndef PROTOCOL_RUNNER_PLAN_PLAN_EMIT_H_
#define PROTOCOL_RUNNER_PLAN_PLAN_EMIT_H_

// The resolved plan as canonical YAML: what every run stores with its sha256
// and what `--resume` compares. Re-parsing it gives the same case specs.
#include <string>

#include "runner/plan/plan.h"

namespace protocol {

// Plan::resolved_text of `plan` (no defaults blocks: every case complete).
std::string ResolvedText(const Plan& plan);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_PLAN_EMIT_H_
