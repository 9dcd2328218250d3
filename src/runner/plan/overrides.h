#ifndef PROTOCOL_RUNNER_PLAN_OVERRIDES_H_
#define PROTOCOL_RUNNER_PLAN_OVERRIDES_H_

// `--set PATH=VALUE` overrides (plan_parser.h's PlanParseOptions::overrides
// states the path syntax): edits applied to a plan's YAML tree before
// inheritance is resolved.
#include <string>

#include "runner/plan/yaml_tree.h"

namespace protocol {

// Applies one `PATH=VALUE` to `root`. The new value's nodes carry `line`
// (negative: the override's index, so diagnostics point at the override).
// Missing map keys along the path are created. Returns "" on success, else
// the problem without the "--set ..." prefix, e.g. "no stage named 'stage9'".
std::string ApplyOverride(YamlNode& root, const std::string& text, int line);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_OVERRIDES_H_
